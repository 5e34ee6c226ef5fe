#!/usr/bin/env python3
"""``--index energon`` against ``energon prepare`` (megatron-energon 7.4.1), on the same shards.

Part 1 makes a tree of ``--samples`` samples (a 16-byte ``.cls`` and a ``.txt`` of 64–448
bytes each, in 100 folders; made once under the temp dir and reused), shards it with ishard
(``--samples-per-shard 10000``, no index), then times, alternating and rotating their order
each round (``--rounds``): ``energon prepare DST --non-interactive --split-ratio 1,0,0
--sample-type CrudeWebdataset`` (the reference, run by ``--energon-python``, on a copy without
Energon's files) and what ``--index energon`` adds to a run — Energon's files made from the
sample index (``ishard.run.energon.energon_files``) — in a child process; the median of each
and their ratio. The two outputs' ``.tar.idx`` bytes are compared once.

Part 2 times the whole run, ``ishard shard TREE DST --samples-per-shard 10000 --overwrite``,
with and without ``--index energon`` (alternating rounds, page cache warm): what the index
adds to a local ``.tar`` run.

Part 3 builds a synthetic sample index of ``--members`` members (``bench_index.py
--build-index``: two members a sample, 500 samples a shard, ``--member-names original``, so
each member is an Energon sample of its own) and makes Energon's files of it in a child whose
peak RSS GNU time reports: the seconds and the memory for a 10,000,000-sample index.

    python benchmarks/bench_energon.py --energon-python /path/to/venv/bin/python
    python benchmarks/bench_energon.py --small --energon-python …   # smoke: 20,000 samples
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import machine_line, timed

ISHARD = [sys.executable, "-m", "ishard"]
HERE = Path(__file__).resolve().parent
MAKE_FILES = """
import json, os, sys
from ishard.planning.engine import MEMORY_LIMIT
from ishard.planning.engine.growth import private_engine
from ishard.run.energon import EnergonDataset, energon_files
dst, out = sys.argv[1], sys.argv[2]
shards = [e["url"] for e in json.load(open(os.path.join(dst, "manifest.json")))["shardlist"]]
os.makedirs(out, exist_ok=True)
with private_engine(out, MEMORY_LIMIT) as (con, _):  # the sample index's engine, as in a run
    energon_files(con, os.path.join(dst, "samples.parquet"), EnergonDataset(shards), out)
"""


def make_tree(root: Path, samples: int) -> None:
    marker = root.with_suffix(".made")
    if marker.exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    for s in range(samples):
        folder = root / f"c{s % 100:03d}"
        if s < 100:
            folder.mkdir(parents=True)
        key = f"s{s:08d}"
        (folder / f"{key}.cls").write_bytes(b"%016d" % (s % 1000))
        (folder / f"{key}.txt").write_bytes(b"x" * (64 + (s * 7919) % 385))
    marker.write_text(str(samples))


def without_energon(src: Path, dst: Path) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.tar.idx", ".nv-meta"))


def part_prepare(args: argparse.Namespace, tree: Path, work: Path) -> None:
    dst = work / "shards"
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(
        [*ISHARD, "shard", str(tree), str(dst), "--samples-per-shard", "10000", "--no-progress"],
        check=True,
        capture_output=True,
    )
    energon = [args.energon_python, "-c", "from megatron.energon.cli.main import main; main()"]
    prepare = ["prepare", "--non-interactive", "--split-ratio", "1,0,0"]
    times: dict[str, list[float]] = {"energon prepare": [], "ishard energon_files": []}
    rss: dict[str, float] = {}
    for round_ in range(args.rounds):
        order = list(times) if round_ % 2 == 0 else list(reversed(times))
        for tool in order:
            target = work / "target"
            if tool == "energon prepare":
                without_energon(dst, target)
                argv = [*energon, *prepare, str(target), "--sample-type", "CrudeWebdataset"]
            else:
                shutil.rmtree(target, ignore_errors=True)
                argv = [sys.executable, "-c", MAKE_FILES, str(dst), str(target)]
            took, peak, _ = timed(argv)
            times[tool].append(took)
            rss[tool] = max(rss.get(tool, 0.0), peak)
            if round_ == 0:
                shutil.rmtree(work / f"first-{tool[:6]}", ignore_errors=True)
                shutil.copytree(target, work / f"first-{tool[:6]}")
    first_energon, first_ishard = work / "first-energo", work / "first-ishard"
    same = all(
        (first_energon / p.name).read_bytes() == p.read_bytes()
        for p in first_ishard.glob("*.tar.idx")
    )
    print(f"part 1: {args.samples:,} samples in {len(list(dst.glob('*.tar')))} shards")
    for tool, seconds in times.items():
        print(f"  {tool:22s} median {statistics.median(seconds):7.2f} s  peak {rss[tool]:6.0f} MiB")
    ratio = statistics.median(times["energon prepare"]) / statistics.median(
        times["ishard energon_files"]
    )
    print(f"  energon prepare / ishard: {ratio:.1f}x; .tar.idx byte-identical: {same}")


def part_overhead(args: argparse.Namespace, tree: Path, work: Path) -> None:
    base = [*ISHARD, "shard", str(tree), str(work / "run"), "--samples-per-shard", "10000"]
    base += ["--overwrite", "--no-progress"]
    variants = {"--index none": [], "--index energon": ["--index", "energon"]}
    times: dict[str, list[float]] = {v: [] for v in variants}
    for round_ in range(args.rounds + 1):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
        for name in order:
            shutil.rmtree(work / "run", ignore_errors=True)
            subprocess.run(["sync"], check=False)
            took, _, _ = timed([*base, *variants[name]])
            if round_:  # the first round warms the page cache
                times[name].append(took)
    plain, energon = (statistics.median(times[v]) for v in variants)
    print(f"part 2: a local .tar run of {args.samples:,} samples")
    print(f"  --index none    median {plain:.2f} s; --index energon median {energon:.2f} s")
    print(f"  --index energon adds {100 * (energon - plain) / plain:+.1f} %")


def part_big(args: argparse.Namespace, work: Path) -> None:
    dest = work / "big"
    shutil.rmtree(dest, ignore_errors=True)
    build = [sys.executable, str(HERE / "bench_index.py"), "--build-index", str(dest)]
    subprocess.run([*build, str(args.members), "7"], check=True, capture_output=True)
    took, peak, _ = timed([sys.executable, "-c", MAKE_FILES, str(dest), str(work / "big-energon")])
    index = json.loads((dest / "manifest.json").read_bytes())["ishard"]["samples_index"]
    sqlite = (work / "big-energon" / ".nv-meta" / "index.sqlite").stat().st_size
    print(f"part 3: Energon's files of a {index['rows']:,}-member index (each its own sample)")
    print(f"  {took:.1f} s, peak RSS {peak:.0f} MiB; index.sqlite {sqlite / 2**20:.0f} MiB")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.rmtree(work / "big-energon", ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--energon-python", default=sys.executable, help="a Python with energon")
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--members", type=int, default=10_000_000, help="part 3's index size")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--small", action="store_true", help="20,000 samples, 200,000 members")
    ap.add_argument("--skip", default="", help="parts to skip, e.g. 2,3")
    args = ap.parse_args()
    if args.small:
        args.samples, args.members = 20_000, 200_000
    print(machine_line())
    tree = Path(tempfile.gettempdir()) / f"bench-energon-{args.samples}"
    work = Path(tempfile.gettempdir()) / "bench-energon-work"
    work.mkdir(exist_ok=True)
    make_tree(tree, args.samples)
    skip = set(args.skip.split(","))
    if "1" not in skip:
        part_prepare(args, tree, work)
    if "2" not in skip:
        part_overhead(args, tree, work)
    if "3" not in skip:
        part_big(args, work)


if __name__ == "__main__":
    main()
