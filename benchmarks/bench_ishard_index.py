#!/usr/bin/env python3
"""``ishard index`` over shards another tool wrote, against ``energon prepare`` (megatron-energon
7.4.1) on the same shards; and how a store's tar headers are best read.

Part 1 writes ``--samples`` samples (a 16-byte ``.cls`` and a ``.txt`` of 64–448 bytes each)
with WebDataset's own ``ShardWriter``, 10,000 a shard (made once under the temp dir and
reused), then times, alternating and rotating their order each round (``--rounds``), on a
fresh copy of the shards each time: ``energon prepare DST --non-interactive --split-ratio
1,0,0 --sample-type CrudeWebdataset`` (the reference, run by ``--energon-python``) and
``ishard index DST --index energon`` (its member headers read, the sample index, Energon's
files and the manifest written); the median of each, their ratio and each one's peak RSS.
The two outputs' ``.tar.idx`` bytes are compared once.

Part 2 starts a private SeaweedFS S3 server on 127.0.0.1 (``tests/support/s3server.py``),
uploads a shard of small members (5,000 samples of 10 kB and 1 B) and one of large ones (60
samples of 4 MB and 1 B), and reads each one's headers, best of three, two ways: one streamed
read of the shard (``tarfile`` reading forward) and ranged reads of the blocks holding the
headers (``RangedFile``: the block doubled while reads follow on, 64 KiB after a skip).

    python benchmarks/bench_ishard_index.py --energon-python /path/to/venv/bin/python
    python benchmarks/bench_ishard_index.py --small --skip 2   # smoke: 20,000 samples
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchlib import machine_line, timed

ISHARD = [sys.executable, "-m", "ishard"]
HERE = Path(__file__).resolve().parent
ISHARDS_FILES = ("manifest.json", "samples.parquet")


def write_shards(folder: Path, samples: int) -> None:
    """WebDataset's ``ShardWriter`` output of ``samples`` samples (made once)."""
    marker = folder.with_suffix(".made")
    if marker.exists():
        return
    import webdataset as wds

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with wds.ShardWriter(str(folder / "part-%06d.tar"), maxcount=10_000, verbose=0) as sink:
        for s in range(samples):
            sink.write(
                {
                    "__key__": f"c{s % 100:03d}/s{s:08d}",
                    "cls": b"%016d" % (s % 1000),
                    "txt": b"x" * (64 + (s * 7919) % 385),
                }
            )
    marker.write_text(str(samples))


def fresh_copy(src: Path, dst: Path) -> None:
    """The shards alone (no index of anyone's), in a new folder, flushed to disk."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    for shard in src.glob("*.tar"):
        shutil.copyfile(shard, dst / shard.name)
    os.sync()


def part_prepare(args: argparse.Namespace, shards: Path, work: Path) -> None:
    energon = [args.energon_python, "-c", "from megatron.energon.cli.main import main; main()"]
    prepare = ["prepare", "--non-interactive", "--split-ratio", "1,0,0"]
    commands = {
        "energon prepare": lambda d: [
            *energon,
            *prepare,
            str(d),
            "--sample-type",
            "CrudeWebdataset",
        ],
        "ishard index": lambda d: [*ISHARD, "index", str(d), "--index", "energon", "--no-progress"],
    }
    times: dict[str, list[float]] = {tool: [] for tool in commands}
    rss: dict[str, float] = {}
    for round_ in range(args.rounds):
        order = list(commands) if round_ % 2 == 0 else list(reversed(commands))
        for tool in order:
            target = work / f"target-{tool.split()[0]}"
            fresh_copy(shards, target)
            took, peak, _ = timed(commands[tool](target))
            times[tool].append(took)
            rss[tool] = max(rss.get(tool, 0.0), peak)
    ours, theirs = work / "target-ishard", work / "target-energon"
    same = all(
        (theirs / p.name).read_bytes() == p.read_bytes() for p in sorted(ours.glob("*.tar.idx"))
    )
    count = len(list(shards.glob("*.tar")))
    print(f"part 1: {args.samples:,} samples (2 members each) in {count} WebDataset shards")
    for tool, seconds in times.items():
        print(f"  {tool:16s} median {statistics.median(seconds):7.2f} s  peak {rss[tool]:6.0f} MiB")
    ratio = statistics.median(times["energon prepare"]) / statistics.median(times["ishard index"])
    print(f"  energon prepare / ishard index: {ratio:.1f}x; .tar.idx byte-identical: {same}")


def tar_of(samples: int, size: int) -> bytes:
    out = io.BytesIO()
    body = os.urandom(size)
    with tarfile.open(fileobj=out, mode="w") as tar:
        for s in range(samples):
            for ext, data in (("jpg", body), ("cls", b"1")):
                member = tarfile.TarInfo(f"s{s:06d}.{ext}")
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    return out.getvalue()


def part_store(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE.parent / "tests" / "support"))
    from s3server import S3Server

    from ishard.formats.tarread import headers
    from ishard.store import resolve
    from ishard.store.ranged import RangedFile

    shapes = {
        "small members (10 kB)": tar_of(5000, 10_000),
        "large members (4 MB)": tar_of(60, 4_000_000),
    }
    with S3Server() as server:
        server.start()
        bucket = server.make_bucket("bench")
        client = server.client()
        for number, data in enumerate(shapes.values()):
            client.put_object(Bucket=bucket, Key=f"s{number}.tar", Body=data)
        os.environ.update(
            AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=server.secret_key
        )
        dest = resolve(f"s3://{bucket}/", endpoint_url=server.endpoint_url, role="dataset")
        store = dest.store
        print("part 2: a tar's headers read from SeaweedFS on 127.0.0.1 (best of 3)")
        for number, (shape, data) in enumerate(shapes.items()):
            key = dest.key(f"s{number}.tar")
            ways = {
                "one streamed read": lambda key=key: headers(store.open_read(key), False),
                "ranged reads": lambda key=key, size=len(data): headers(
                    RangedFile(lambda a, b: store.read(key, a, b), size), True
                ),
            }
            line = []
            for way, read in ways.items():
                best = float("inf")
                for _ in range(3):
                    started = time.perf_counter()
                    read()
                    best = min(best, time.perf_counter() - started)
                line.append(f"{way} {best * 1000:7.1f} ms")
            print(f"  {shape:22s} {len(data) >> 20:4d} MiB: " + "; ".join(line))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--energon-python", default=sys.executable, help="a Python with energon")
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--small", action="store_true", help="20,000 samples")
    ap.add_argument("--skip", default="", help="parts to skip, e.g. 2")
    args = ap.parse_args()
    if args.small:
        args.samples = 20_000
    print(machine_line())
    skip = set(args.skip.split(","))
    if "1" not in skip:
        shards = Path(tempfile.gettempdir()) / f"bench-ishard-index-{args.samples}"
        work = Path(tempfile.gettempdir()) / "bench-ishard-index-work"
        write_shards(shards, args.samples)
        part_prepare(args, shards, work)
        shutil.rmtree(work, ignore_errors=True)
    if "2" not in skip:
        part_store(args)


if __name__ == "__main__":
    main()
