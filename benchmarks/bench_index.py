#!/usr/bin/env python3
"""The sample index (``DST/samples.parquet``): what writing it costs a run, how big and how
memory-hungry a 10,000,000-member one is, and how fast ``ishard find`` answers from it.

Part 1 shards bench_local.py's ImageNet-like tree (the same generator, parameters and default
location under the temp dir: made once, reused after) with and without ``--no-sample-index``
(the reference), with bench_local's options (``--shard-size 512MiB --overwrite --no-progress
--member-names original``; ``--member-names sample`` for ishard's default), page cache
warmed, the output removed and ``sync``ed before every run, alternating the two and rotating
their order each round; it prints the medians, the ratio, and from a few more runs of the
same command with the index's last step (``IndexWriter.write``) timed inside the process: what it adds once the shards are written.

Part 2 builds a 10,000,000-member index without any files behind it: batches of synthetic
columns (ImageNet-like names, two members a sample, 1,000 members a shard, offsets as a tar
lays them out: a 512-byte header, then the data padded to 512) written by ``write_index``
(the index's engine and its publishing, ``IndexWriter.write``'s last step) in a child process whose peak RSS GNU time reports
(beside a child that only makes the same batches: the generator's own share). It writes the
manifest those 10,000 shards would have, through ``ishard.run.manifest.manifest_bytes``,
naming the index, and compares the index's size with the metadata a tar dataset carries
anyway (a 512-byte header a member, plus that manifest). Then it times ``ishard.find`` for
1,000 random keys in this process (warm cache, rounds, median) and the command
``ishard find DST --keys-from FILE`` (start-up included), next to ``ishard --version``.

    python benchmarks/bench_index.py                       # both parts, full size (a few minutes)
    python benchmarks/bench_index.py --small               # smoke: 2,000-file tree, 100,000 members
    python benchmarks/bench_index.py --skip-big            # part 1 only
    python benchmarks/bench_index.py --skip-shard          # part 2 only
    python benchmarks/bench_index.py --members 10000000 --rounds 5 --find-keys 1000
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from bench_local import (
    Tool,
    check_ishard_output,
    clear,
    ensure_data,
    gnu_time,
    other_cpu_seconds,
    print_table,
    run_once,
    scan,
    startup_seconds,
    target,
    tell_other_cpu,
    tree_location,
)
from benchlib import GIB, MIB, machine_line

ISHARD = [sys.executable, "-m", "ishard"]
MEMBERS_PER_SHARD = 1_000  # part 2: two members a sample, so 500 samples a shard
CLASSES = 1_000  # part 2: ImageNet's class count
BLOCK = 512

# Runs ishard's command line with the index's two steps timed: IndexWriter.prepare (the plan's
# rows put into the engine, loading it first, while the shards are written: the CPU seconds of
# the run's thread in its steps) and IndexWriter.write (what is left once the shards are
# written). Lines "prepare CPU" and "write WALL" go to the file named by $BENCH_INDEX_TIMES.
# Only for the extra runs.
TIMED_WRITE_INDEX = """\
import os, sys, time
from ishard.run.sampleindex import IndexWriter
inner_write, inner_prepare = IndexWriter.write, IndexWriter.prepare
def tell(line):
    with open(os.environ["BENCH_INDEX_TIMES"], "a") as f:
        f.write(line + "\\n")
def write(*args, **kwargs):
    began = time.perf_counter()
    try:
        return inner_write(*args, **kwargs)
    finally:
        tell(f"write {time.perf_counter() - began}")
def prepare(self):
    cpu, steps = 0.0, inner_prepare(self)
    try:
        while True:
            began = time.thread_time()
            try:
                next(steps)
            except StopIteration:
                return
            finally:
                cpu += time.thread_time() - began
            yield
    finally:
        tell(f"prepare {cpu}")
IndexWriter.write, IndexWriter.prepare = write, prepare
from ishard.cli import main
main(sys.argv[1:])
"""


# ---------------------------------------------------------------------------------------------
# Part 1: the index's share of a run


def part_shard(args: argparse.Namespace) -> None:
    p, data = tree_location(args)
    marker = data.with_name(data.name + ".bench.json")
    work = data.with_name(data.name + "-bench-index")
    print(f"\n== part 1: the index's share of a run ==\ndata: {data}")
    ensure_data(data, marker, p)
    started = time.perf_counter()
    sizes = scan(data, read=True)
    total = sum(sizes.values())
    print(
        f"data: {len(sizes):,} files, {total:,} bytes ({total / GIB:.2f} GiB); page cache "
        f"warmed in {time.perf_counter() - started:.1f} s"
    )
    work.mkdir(parents=True, exist_ok=True)
    log = work / "stderr.log"
    shards = work / "shards"
    common = [
        "shard",
        str(data),
        str(shards),
        "--ext",
        ".tar",
        "--shard-size",
        args.shard_size,
        "--overwrite",
        "--no-progress",
        "--member-names",  # as bench_local.py: source paths, as tar -cf keeps them
        args.member_names,
    ]

    def check(indexed: bool):
        def run() -> str:
            if args.member_names == "original":
                summary = check_ishard_output(shards, sizes)
            else:  # members are <key>.<ext>: count them and their bytes
                got = []
                for path in sorted(shards.glob("*.tar")):
                    with tarfile.open(path) as tf:
                        got += [m.size for m in tf]
                if sorted(got) != sorted(sizes.values()):
                    raise SystemExit(f"bench_index: shards hold {len(got)} members, not the tree")
                summary = f"{len(got):,} members, {sum(got):,} payload bytes, sizes match"
            index = shards / "samples.parquet"
            manifest = json.loads((shards / "manifest.json").read_text())
            record = manifest["ishard"].get("samples_index")
            if indexed:
                if not index.exists() or record is None or record["rows"] != len(sizes):
                    raise SystemExit(f"bench_index: no index of {len(sizes)} rows: {record}")
                summary += f"; samples.parquet: {record['rows']:,} rows, {record['bytes']:,} B"
            elif index.exists() or record is not None:
                raise SystemExit("bench_index: --no-sample-index wrote an index")
            return summary

        return run

    without = Tool(
        "ishard --no-sample-index (ref)",
        ISHARD + common + ["--no-sample-index"],
        shards,
        check(False),
    )
    with_index = Tool("ishard (sample index, default)", ISHARD + common, shards, check(True))
    tools = [without, with_index]
    timer = gnu_time()
    print("peak RSS: " + ("GNU time (%M)" if timer else "wait4 ru_maxrss (an upper bound)"))
    print(f"ishard start-up (ishard --version): {startup_seconds(ISHARD + ['--version']):.3f} s")
    index_bytes = 0
    for t in tools:  # untimed: warms the programs' files, checks the output
        run_once(t, log, timer)
        print(f"check: {t.label}: {t.check()}")
        if t is with_index:
            index_bytes = (shards / "samples.parquet").stat().st_size
            manifest_bytes = (shards / "manifest.json").stat().st_size
    print(f"timing: {args.rounds} rounds, order rotated each round, medians reported")
    other_before, wall_before = other_cpu_seconds(), time.perf_counter()
    for r in range(args.rounds):
        for t in tools[r % 2 :] + tools[: r % 2]:
            t.runs.append(run_once(t, log, timer))
    tell_other_cpu(other_before, wall_before)

    # The index's own time, from inside the process (not the timed runs: an extra wrapper).
    inside: list[tuple[float, float, float]] = []
    times_file = work / "write_index.times"
    for _ in range(args.inner_runs):
        clear(shards)
        times_file.unlink(missing_ok=True)
        began = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", TIMED_WRITE_INDEX, *common[:]],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "BENCH_INDEX_TIMES": str(times_file)},
        )
        told = dict(line.split() for line in times_file.read_text().splitlines())
        run = time.perf_counter() - began
        inside.append((float(told["prepare"]), float(told["write"]), run))
    clear(shards)

    print(f"\n{len(sizes):,} files, {total / MIB:,.0f} MiB, shard size {args.shard_size}\n")
    print_table(tools, len(sizes), total, without, "no index")
    ratio = with_index.median / without.median
    print(
        f"\nindex: {index_bytes:,} bytes for {len(sizes):,} members "
        f"({index_bytes / len(sizes):.1f} B a member; tar headers {BLOCK * len(sizes):,} B, "
        f"manifest {manifest_bytes:,} B)"
    )
    spent = [w for _, w, _ in inside]
    print(
        f"inside the process ({args.inner_runs} runs): IndexWriter.prepare, beside the "
        "writers, "
        + ", ".join(f"{p:.3f}" for p, _, _ in inside)
        + " CPU s; IndexWriter.write, after them, "
        + ", ".join(f"{w:.3f} s of {run:.2f} s" for _, w, run in inside)
        + f"; median {statistics.median(spent):.3f} s = "
        f"{statistics.median(spent) / without.median:.1%} of the no-index run's median"
    )
    print(
        f"median with index - without: {with_index.median - without.median:+.3f} s "
        f"({ratio - 1:+.1%})"
    )
    print(target("ishard with index / --no-sample-index (medians)", ratio, 1.05))


# ---------------------------------------------------------------------------------------------
# Part 2: a 10,000,000-member index


def wnid_names(seed: int) -> list[str]:
    rng = random.Random(seed)
    names: set[str] = set()
    while len(names) < CLASSES:
        names.add(f"n{rng.randrange(10**7, 10**8):08d}")
    return sorted(names)


class Layout:
    """Where each synthetic sample is: sample s of class c = s // per_class is
    ``<wnid>_<i>`` (i in name order, as a plan sorts them), in shard s // samples_a_shard.
    Members: ``Annotations/<wnid>/<key>.xml`` then ``Data/train/<wnid>/<key>.JPEG``."""

    def __init__(self, members: int, seed: int) -> None:
        self.samples = members // 2
        self.per_shard = MEMBERS_PER_SHARD // 2
        self.shards = -(-self.samples // self.per_shard)
        self.per_class = -(-self.samples // CLASSES)
        self.wnids = wnid_names(seed)
        self.order = sorted(range(1, self.per_class + 1), key=str)  # name order of <wnid>_<i>

    def key(self, s: int) -> str:
        return f"{self.wnids[s // self.per_class]}_{self.order[s % self.per_class]}"

    def shard(self, s: int) -> str:
        return f"shard-{s // self.per_shard:06d}.tar"


def batches(layout: Layout, seed: int, shards_a_batch: int, stats: list | None = None):
    """The index's rows as ``write_index`` takes them: dicts of numpy columns, whole shards
    a batch (``shards_a_batch`` of them), deterministic for ``seed``. ``stats`` collects
    (name, samples, files, payload, filesize) of each shard, for its manifest."""
    import numpy as np

    mtime0 = 1_600_000_000
    for first in range(0, layout.shards, shards_a_batch):
        rng = np.random.default_rng([seed, first])
        s_lo = first * layout.per_shard
        s_hi = min(layout.samples, (first + shards_a_batch) * layout.per_shard)
        n = s_hi - s_lo
        xml = rng.integers(500, 2049, n)
        jpeg = np.clip(rng.lognormal(np.log(110 << 10) - 0.18, 0.6, n), 4 << 10, 4 << 20)
        size = np.empty(2 * n, dtype=np.int64)
        size[0::2], size[1::2] = xml, jpeg.astype(np.int64)
        block = BLOCK + (size + BLOCK - 1) // BLOCK * BLOCK  # header + padded data
        sample = np.arange(s_lo, s_hi).repeat(2)
        shard_no = sample // layout.per_shard
        end = np.cumsum(block)
        start = end - block
        shard_start = np.searchsorted(shard_no, shard_no, side="left")  # first row of its shard
        header = start - start[shard_start]
        keys = np.array([layout.key(s) for s in range(s_lo, s_hi)], dtype=object)
        members = np.empty(2 * n, dtype=object)
        members[0::2] = [f"Annotations/{k[:9]}/{k}.xml" for k in keys]
        members[1::2] = [f"Data/train/{k[:9]}/{k}.JPEG" for k in keys]
        names = np.array([f"shard-{i:06d}.tar" for i in range(first, first + shards_a_batch)])
        nothing = np.full(2 * n, None, dtype=object)
        if stats is not None:
            bounds = np.flatnonzero(np.r_[True, shard_no[1:] != shard_no[:-1], True])
            for a, b in itertools.pairwise(bounds):
                stats.append(
                    (
                        str(names[shard_no[a] - first]),
                        int(b - a) // 2,
                        int(b - a),
                        int(size[a:b].sum()),
                        int(header[b - 1] + block[b - 1]) + 2 * BLOCK,  # end-of-archive
                    )
                )
        yield {
            "key": keys.repeat(2),
            "shard": names[shard_no - first].astype(object),
            "member": members,
            "source": members,  # --member-names original: the member is the source path
            "size": size,
            "mtime": mtime0 + rng.integers(0, 30 * 86_400, 2 * n),  # a month of mtimes
            "header_offset": header,
            "data_offset": header + BLOCK,
            "frame_offset": nothing,
            "frame_size": nothing,
        }


# What ``ishard.options`` records for a default .tar run with --member-names original (as a
# real run writes it), for the synthetic manifest.
OPTIONS = {
    "prefix": "",
    "shard_size": MEMBERS_PER_SHARD // 2,
    "samples_per_shard": None,
    "sample_key_pattern": "base_file_name",
    "sample_exts": [],
    "missing_extension_action": "ignore",
    "collapse": False,
    "ekm": None,
    "ext": ".tar",
    "shard_template": "shard-%06d",
    "sort": None,
    "include_hidden": False,
    "follow_symlinks": False,
    "compress_level": None,
    "zip_compression": "stored",
    "src_list": None,
    "checksum": "xxh128",
    "gzip_library": "auto",
    "num_shards": None,
    "shards_multiple_of": None,
    "member_names": "original",
    "index": "none",
    "sample_index": True,
}


def write_index(dest, rows, *, tmp_dir: str, memory_limit: int, **publish) -> dict:
    """Write ``DST/samples.parquet`` from ``rows`` (batches of every column) as a run publishes
    its index (``sampleindex._publish``); the manifest's record of it."""
    from ishard.planning.growth import create_index_table, insert_rows, private_engine
    from ishard.run.sampleindex import _publish  # the run's own last step, timed alone

    with private_engine(tmp_dir, memory_limit) as (con, folder):
        create_index_table(con, "samples")
        for batch in rows:
            insert_rows(con, "samples", batch)
        return _publish(con, folder, dest, "samples", None, ("samples",), **publish)


def build_index(dest: Path, members: int, seed: int, only_generate: bool) -> None:
    """The child of part 2: write the index (or only make its batches) and the manifest;
    prints one JSON line of what it took."""
    from ishard.model import Plan, ShardResult
    from ishard.planning.engine import MEMORY_LIMIT
    from ishard.run.manifest import MANIFEST_NAME, manifest_bytes, manifest_document
    from ishard.run.sampleindex import BATCH_ROWS
    from ishard.store import resolve
    from ishard.store.retry import Retrier

    layout = Layout(members, seed)
    stats: list[tuple] = []
    made = 0.0

    def timed_batches():
        nonlocal made
        it = batches(layout, seed, BATCH_ROWS // MEMBERS_PER_SHARD, stats)
        while True:
            began = time.perf_counter()
            batch = next(it, None)
            made += time.perf_counter() - began
            if batch is None:
                return
            yield batch

    began = time.perf_counter()
    if only_generate:
        rows = sum(len(b["key"]) for b in timed_batches())
        record = {"rows": rows}
    else:
        dest.mkdir(parents=True, exist_ok=True)
        record = write_index(
            resolve(str(dest), role="destination"),
            timed_batches(),
            tmp_dir=str(dest.parent),
            memory_limit=MEMORY_LIMIT,  # --memory-limit's default
            retrier=Retrier(),
            cleanup=Retrier(),
            part_size=16 * MIB,
        )
    took = time.perf_counter() - began
    manifest = 0
    if not only_generate:
        results = [
            ShardResult(
                name=name,
                filesize=filesize,
                checksum="xxh128:" + hashlib.blake2b(name.encode(), digest_size=16).hexdigest(),
                samples=samples,
                files=files,
                payload=payload,
            )
            for name, samples, files, payload, filesize in stats
        ]
        plan = Plan(
            source="imagenet-synthetic",  # no tree behind it
            shards=(),
            options=OPTIONS,
            numbering=(len(results),),
        )
        fingerprint = hashlib.sha256(b"plan").hexdigest()
        doc = manifest_bytes(manifest_document(plan, results, fingerprint, index=record))
        (dest / MANIFEST_NAME).write_bytes(doc)
        manifest = len(doc)
    print(
        json.dumps(
            {
                "seconds": took,
                "generating": made,
                "record": record,
                "manifest_bytes": manifest,
                "shards": len(stats),
                "archive_bytes": sum(s[4] for s in stats),
                "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
        )
    )


def child(mode: str, dest: Path, members: int, seed: int, timer: str | None) -> tuple[dict, float]:
    """Run ``build_index`` in a fresh process; its report and peak RSS in MiB."""
    argv = [sys.executable, os.path.abspath(__file__), mode, str(dest), str(members), str(seed)]
    rss_file = dest.parent / "child.rss"
    if timer:
        argv = [timer, "-f", "%M", "-o", str(rss_file), *argv]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_index: {mode} failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    rss = int(rss_file.read_text().split()[-1]) / 1024 if timer else report["maxrss_kib"] / 1024
    return report, rss


def part_big(args: argparse.Namespace) -> None:
    import ishard

    members = args.members
    work = Path(tempfile.gettempdir()) / "ishard-bench" / f"index-{members}"
    dst = work / "dst"
    print(f"\n== part 2: a {members:,}-member index ==\nwork: {work}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    timer = gnu_time()
    print("peak RSS: " + ("GNU time (%M)" if timer else "ru_maxrss of the child"))
    gen, gen_rss = child("--generate-only", dst, members, args.seed, timer)
    print(
        f"making the batches alone (reference): {gen['seconds']:.1f} s, {gen['record']['rows']:,} "
        f"rows, peak RSS {gen_rss:.0f} MiB"
    )
    built, rss = child("--build-index", dst, members, args.seed, timer)
    record = built["record"]
    index_bytes = record["bytes"]
    print(
        f"write_index: {built['seconds']:.1f} s ({built['generating']:.1f} s of it making the "
        f"batches), {record['rows']:,} rows, peak RSS {rss:.0f} MiB "
        f"({rss - gen_rss:+.0f} MiB over making the batches alone; --memory-limit default "
        f"512 MiB)"
    )
    headers = BLOCK * record["rows"]
    manifest = built["manifest_bytes"]
    metadata = headers + manifest
    print(
        f"index: {index_bytes:,} bytes ({index_bytes / MIB:.1f} MiB, "
        f"{index_bytes / record['rows']:.2f} B a member)\n"
        f"metadata a tar dataset carries anyway: tar headers {headers:,} B "
        f"({BLOCK} B x {record['rows']:,}) + manifest.json of {built['shards']:,} shards "
        f"{manifest:,} B = {metadata:,} B; the archives would be {built['archive_bytes'] / GIB:,.0f} "
        f"GiB"
    )
    print(target("index / (tar headers + manifest)", index_bytes / metadata, 0.10))
    print(
        f"index / archive bytes: {index_bytes / built['archive_bytes']:.5%}; "
        f"index / manifest alone: {index_bytes / manifest:.1f}x"
    )

    # ishard.find: 1,000 random keys.
    layout = Layout(members, args.seed)
    rng = random.Random(args.seed + 1)
    picked = rng.sample(range(layout.samples), args.find_keys)
    keys = [layout.key(s) for s in picked]
    keys_file = work / "keys.txt"
    keys_file.write_text("".join(k + "\n" for k in keys))
    found, missing = ishard.find(str(dst), keys)  # untimed: warms the cache, and checks
    problems = []
    if missing or len(found) != len(keys):
        problems.append(f"{len(found)} found, {len(missing)} missing of {len(keys)}")
    for f, s in zip(found, picked):
        names = [m.member for m in f.members]
        k = layout.key(s)
        wanted = [f"Annotations/{k[:9]}/{k}.xml", f"Data/train/{k[:9]}/{k}.JPEG"]
        if f.key != k or f.shard != layout.shard(s) or names != wanted:
            problems.append(f"{k}: {f.shard} {names}")
            break
        xml, jpeg = f.members
        if (f.start, xml.data_offset, jpeg.header_offset) != (
            xml.header_offset,
            xml.header_offset + BLOCK,
            xml.data_offset + -(-xml.size // BLOCK) * BLOCK,
        ) or f.end != jpeg.data_offset + -(-jpeg.size // BLOCK) * BLOCK:
            problems.append(f"{k}: offsets {f}")
            break
    if problems:
        raise SystemExit("bench_index: ishard.find answered wrong: " + "; ".join(problems))
    print(f"check: ishard.find found all {len(keys):,} keys, names, shards and offsets right")
    api, cli, version = [], [], []
    command = ISHARD + ["find", str(dst), "--keys-from", str(keys_file)]
    for _ in range(args.rounds):
        began = time.perf_counter()
        ishard.find(str(dst), keys)
        api.append(time.perf_counter() - began)
        began = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        cli.append(time.perf_counter() - began)
        began = time.perf_counter()
        subprocess.run(ISHARD + ["--version"], check=True, stdout=subprocess.DEVNULL)
        version.append(time.perf_counter() - began)
    med_api, med_cli, med_version = map(statistics.median, (api, cli, version))
    print(
        f"ishard.find, {len(keys):,} random keys, in-process: "
        + ", ".join(f"{t:.3f}" for t in api)
        + f" s (median {med_api:.3f} s)"
    )
    print(
        f"ishard find DST --keys-from FILE ({len(keys):,} keys): "
        + ", ".join(f"{t:.3f}" for t in cli)
        + f" s (median {med_cli:.3f} s; ishard --version: median {med_version:.3f} s)"
    )
    print(target("ishard.find of 1,000 keys, median s", med_api, 1.0))
    print(target("ishard find --keys-from (with start-up), median s", med_cli, 1.0))
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        ishard.find(str(dst), keys)
        profiler.disable()
        pstats.Stats(profiler).strip_dirs().sort_stats("cumulative").print_stats(15)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"index left at {dst}")


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] in ("--build-index", "--generate-only"):
        mode, dest, members, seed = sys.argv[1:]
        build_index(Path(dest), int(members), int(seed), mode == "--generate-only")
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=None, help="the tree (bench_local.py's default)")
    ap.add_argument("--files", type=int, default=85_000)
    ap.add_argument("--total-gib", type=float, default=2.0)
    ap.add_argument("--wnids", type=int, default=100)
    ap.add_argument("--jpeg-kib", type=int, default=110)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--shard-size", default="512MiB")
    ap.add_argument(
        "--member-names",
        default="original",
        choices=("original", "sample"),
        help="part 1 (default original, as bench_local.py; sample: ishard's default)",
    )
    ap.add_argument("--small", action="store_true", help="2,000-file tree, 100,000 members")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    ap.add_argument("--inner-runs", type=int, default=3, help="runs with write_index timed")
    ap.add_argument("--members", type=int, default=10_000_000, help="part 2's index size")
    ap.add_argument("--find-keys", type=int, default=1_000)
    ap.add_argument("--skip-shard", action="store_true", help="skip part 1")
    ap.add_argument("--skip-big", action="store_true", help="skip part 2")
    ap.add_argument("--profile", action="store_true", help="profile one ishard.find call")
    ap.add_argument("--keep", action="store_true", help="keep part 2's index")
    args = ap.parse_args()
    if args.small:
        args.members = min(args.members, 100_000)
    print(machine_line())
    if not args.skip_shard:
        part_shard(args)
    if not args.skip_big:
        part_big(args)


if __name__ == "__main__":
    main()
