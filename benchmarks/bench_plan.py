#!/usr/bin/env python3
"""Planning at scale: a dry run over a synthetic inventory, by format and by shape of names.

Inventories are generated once, deterministically, into ``--data``:

- shapes: ``imagenet`` (an image under ``train/`` and an annotation under ``ann/`` per sample,
  written unsorted), ``sorted`` (the same names, sorted), ``dir-per-sample`` (each sample's
  two files in a folder of its own), ``deep`` (five folder levels);
- formats: CSV with a header, its Parquet copy, JSON Lines, each of the two text forms
  gzip'ed, and an AWS S3 Inventory report of the same objects as AWS writes one
  (``s3-csv``: ``manifest.json`` and headerless gzip'ed CSV data files of at most
  ``REPORT_ROWS`` rows, keys URL-encoded; ``s3-parquet``: Parquet data files) — all read by
  the column engine, each planning the same shards.

Each is timed as ``ishard shard SRC --src-list INV --dry-run=summary`` (wall time and peak RSS by
GNU time), next to GNU ``sort`` of the CSV (``LC_ALL=C``): the ratio says how far planning is
from "reading and ordering this many names".

    python benchmarks/bench_plan.py                                 # 1M, every shape and format
    python benchmarks/bench_plan.py --objects 10000000 --shapes imagenet
    python benchmarks/bench_plan.py --objects 100000000 --shapes dir-per-sample --formats csv

Only the formats asked for are written (and the CSV, always). "temp MiB" is the most the
column engine's spill folder (``--tmp-dir``) held, looked at every second; "told MiB" what
ishard's summary says it spilled (``planning spilled up to …``; it looks every 0.1 s).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from benchlib import timed

from ishard.sizes import parse_size

SHAPES = ("imagenet", "sorted", "dir-per-sample", "deep")
FORMATS = ("csv", "parquet", "csv.gz", "jsonl", "jsonl.gz", "s3-csv", "s3-parquet")
REPORT_ROWS = 5_000_000  # rows per data file of an S3 Inventory report (AWS: a few GB each)
AWS_TIME = "2023-11-14T22:13:20.000Z"  # 1700000000, as a report writes it


def rows(shape: str, objects: int, seed: int = 1234) -> Iterator[tuple[str, int]]:
    """(name, size) of ``objects`` files: two per sample."""
    rng = random.Random(seed)
    samples = objects // 2
    if shape in ("imagenet", "sorted"):
        names = (
            f"{part}/n{i // 1300:08d}/n{i // 1300:08d}_{i}.{ext}"
            for part, ext in (("train", "JPEG"), ("ann", "xml"))
            for i in range(samples)
        )  # streamed: 100M names are never held
        if shape == "sorted":
            names = iter(sorted(names))
        for name in names:
            yield (
                name,
                rng.randint(20_000, 200_000) if name.endswith("JPEG") else rng.randint(400, 2000),
            )
        return
    for i in range(samples):
        if shape == "dir-per-sample":
            folder = f"samples/{i:09d}"
        else:
            folder = f"l{i % 7}/m{i % 11}/n{i % 13}/o{i % 17}/p{i % 19}"
        yield f"{folder}/s{i:09d}.jpg", rng.randint(20_000, 200_000)
        yield f"{folder}/s{i:09d}.json", rng.randint(400, 2000)


def generate(data: Path, shape: str, objects: int, formats: list[str]) -> dict[str, Path]:
    """The inventory of ``shape`` as CSV and in each of ``formats``, each written unless there."""
    base = data / f"{shape}-{objects}"
    paths = {fmt: base.with_suffix(f".{fmt}") for fmt in FORMATS}
    for fmt in ("s3-csv", "s3-parquet"):  # a report: its manifest names its data files
        paths[fmt] = (
            base.with_suffix(f".{fmt}") / "src" / "cfg" / "2023-11-14T00-00Z" / "manifest.json"
        )
    for fmt in ("csv", *formats):  # the CSV first: GNU sort's input, and the others' source
        if paths[fmt].exists():
            continue
        part = paths[fmt].with_suffix(".part")
        if fmt == "csv":
            with open(part, "w", buffering=1 << 22) as out:
                out.write("name,size,mtime\n")
                out.writelines(f"{name},{size},1700000000\n" for name, size in rows(shape, objects))
        elif fmt == "jsonl":
            with open(part, "w", buffering=1 << 22) as out:
                out.writelines(
                    json.dumps({"name": name, "size": size, "mtime": 1700000000}) + "\n"
                    for name, size in rows(shape, objects)
                )
        elif fmt in ("csv.gz", "jsonl.gz"):
            plain = paths[fmt.removesuffix(".gz")]
            if not plain.exists():
                generate(data, shape, objects, [fmt.removesuffix(".gz")])
            with open(plain, "rb") as src, gzip.open(part, "wb", compresslevel=1) as out:
                shutil.copyfileobj(src, out, 1 << 20)
        elif fmt.startswith("s3-"):
            write_report(paths[fmt], fmt, paths["csv"], rows(shape, objects))
            continue
        else:
            import duckdb  # the Parquet copy: DuckDB writes it (ishard only reads Parquet)

            duckdb.execute(
                f"COPY (SELECT * FROM read_csv('{paths['csv']}', header = true)) TO "
                f"'{part}' (FORMAT parquet)"
            )
        part.rename(paths[fmt])
    return paths


def write_report(
    manifest: Path, fmt: str, csv_path: Path, listed: Iterator[tuple[str, int]]
) -> None:
    """An AWS S3 Inventory report of ``listed`` (the rows of ``csv_path``) in AWS's layout:
    ``manifest.json`` in a dated folder beside ``data/`` (CSV: headerless, every field quoted,
    keys URL-encoded, gzip'ed; Parquet: ``key``, ``size``, ``last_modified_date`` as a
    timestamp, written by DuckDB from the CSV), ``REPORT_ROWS`` rows a data file. Written
    under a temporary name, renamed when whole."""
    from urllib.parse import quote_plus

    import duckdb

    root = manifest.parent.parent.parent.parent
    part = root.with_suffix(".part")
    shutil.rmtree(part, ignore_errors=True)
    config = part / "src" / "cfg"
    (config / "data").mkdir(parents=True)
    names = []
    if fmt == "s3-csv":
        batch: list[tuple[str, int]] = []
        for row in itertools.chain(listed, [None]):
            if row is not None:
                batch.append(row)
            if batch and (row is None or len(batch) == REPORT_ROWS):
                names.append(f"data/{len(names):04d}-6f1a4c2e.csv.gz")
                with gzip.open(config / names[-1], "wt", compresslevel=6, newline="") as out:
                    out.writelines(
                        f'"src","{quote_plus(key, safe="/")}","{size}","{AWS_TIME}"\n'
                        for key, size in batch
                    )
                batch.clear()
    else:
        with duckdb.connect() as con:
            total = con.execute(f"SELECT count(*) FROM read_csv('{csv_path}')").fetchone()[0]
            for first in range(0, max(total, 1), REPORT_ROWS):
                names.append(f"data/{len(names):04d}-6f1a4c2e.parquet")
                con.execute(
                    "COPY (SELECT 'src' AS bucket, name AS key, CAST(size AS BIGINT) AS size, "
                    "TIMESTAMP '2023-11-14 22:13:20' AS last_modified_date FROM read_csv("
                    f"'{csv_path}', header = true) LIMIT {REPORT_ROWS} OFFSET {first}) TO "
                    f"'{config / names[-1]}' (FORMAT parquet)"
                )
    schema = (
        "Bucket, Key, Size, LastModifiedDate"
        if fmt == "s3-csv"
        else "message s3.inventory { required binary bucket (STRING); required binary key "
        "(STRING); optional int64 size; optional int64 last_modified_date "
        "(TIMESTAMP(MILLIS,true));}"
    )
    files = [{"key": f"src/cfg/{n}", "size": (config / n).stat().st_size} for n in names]
    (config / "2023-11-14T00-00Z").mkdir()
    (config / "2023-11-14T00-00Z" / "manifest.json").write_text(
        json.dumps(
            {
                "sourceBucket": "src",
                "fileFormat": "CSV" if fmt == "s3-csv" else "Parquet",
                "fileSchema": schema,
                "files": files,
            }
        )
    )
    part.rename(root)


def folder_mib(folder: Path) -> float:
    """MiB of the files under ``folder`` now."""
    total = 0
    for top, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_size
    return total / (1 << 20)


class Peak(threading.Thread):
    """The most ``folder`` held, looked at every second while a run lasts."""

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.most, self.done = folder, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            self.most = max(self.most, folder_mib(self.folder))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--formats", nargs="*", default=list(FORMATS), choices=FORMATS)
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "ishard-bench-plan"
    )
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    source = args.data / "source"  # the folder the inventory describes (a dry run reads nothing)
    source.mkdir(exist_ok=True)
    spill = args.data / "spill"  # --tmp-dir: where the column engine spills, measured
    spill.mkdir(exist_ok=True)
    print(
        f"{'objects':>12} {'shape':>15} {'format':>8} {'ishard s':>9} {'peak MiB':>9} "
        f"{'temp MiB':>9} {'told MiB':>9} {'shards':>7} {'sort s':>7} {'× sort':>7}"
    )
    for n in args.objects:
        for shape in args.shapes:
            paths = generate(args.data, shape, n, args.formats)
            sort_s, _, _ = timed(
                ["sort", "-t,", "-k1,1", "-o", os.devnull, str(paths["csv"])],
                env={**os.environ, "LC_ALL": "C"},
            )
            answers = set()
            for fmt in args.formats:
                peak = Peak(spill)
                peak.start()
                seconds, rss, out = timed(
                    [
                        sys.executable,
                        "-m",
                        "ishard",
                        "shard",
                        str(source),
                        "--src-list",
                        str(paths[fmt]),
                        "--dry-run=summary",
                        "--shard-size",
                        "512MiB",
                        "--member-names",
                        "original",
                        "--tmp-dir",
                        str(spill),
                    ]
                )
                peak.done.set()
                peak.join()
                told = [x for x in out.splitlines() if x.startswith("planning spilled")]
                spilled = parse_size(told[0].split("up to ")[1].split()[0]) if told else 0
                answers.add(out.replace(told[0] + "\n", "") if told else out)
                shards = out.count(".tar  ")
                print(
                    f"{n:>12,} {shape:>15} {fmt:>8} {seconds:>9.1f} {rss:>9.0f} "
                    f"{peak.most:>9.0f} {spilled / (1 << 20):>9.0f} {shards:>7} {sort_s:>7.2f} "
                    f"{seconds / sort_s:>7.1f}",
                    flush=True,
                )
            if len(answers) != 1:
                sys.exit(f"the formats planned differently for {shape} {n}")


if __name__ == "__main__":
    main()
