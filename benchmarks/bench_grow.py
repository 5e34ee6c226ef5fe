#!/usr/bin/env python3
"""A dataset that grows: ``--append`` of 1 % new samples to a dataset of 1,000,000 samples,
against what it cannot do without — a fresh run over only the new files plus a dry run (the
listing and plan) of the whole source; and ``--update`` of 1 % of the samples changed at
random, against a full re-shard.

The data is made once in ``--data`` (hard links between the trees: nothing is copied): the
base tree (``--samples`` samples of two small files each, 500 to a folder), the dataset
sharded from it, the source with 1 % new samples spread among the old folders, a tree of only
those, and a source with 1 % of the samples changed (their ``.json`` rewritten). Each round
starts from a hard-linked copy of the dataset (``--append`` and ``--update`` never write
through an old shard: they write new files and rename), alternating the runs; medians and
the ratio are printed, with each run's peak memory (GNU time).

    python benchmarks/bench_grow.py                          # 1,000,000 samples, 3 rounds
    python benchmarks/bench_grow.py --samples 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_tree import make_tree
from benchlib import machine_line

ISHARD = [sys.executable, "-m", "ishard"]
SHARD = ("--shard-size", "100", "--no-progress", "-q")  # 100 samples a shard


def run(*args: object, tag: str) -> tuple[float, int]:
    """Run ``ishard ARGS``; wall seconds and peak RSS in MiB (GNU time)."""
    command = ["/usr/bin/time", "-f", "%M", *ISHARD, *map(str, args)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{tag} failed: {done.stderr}")
    return took, int(done.stderr.strip().splitlines()[-1]) // 1024


def linked_copy(tree: Path, to: Path) -> None:
    shutil.rmtree(to, ignore_errors=True)
    subprocess.run(["cp", "-al", str(tree), str(to)], check=True)


def with_new_samples(base: Path, src: Path, only: Path, count: int, seed: int) -> None:
    """``src``: ``base`` plus ``count`` new samples (a .jpg and a .json) among the old
    folders; ``only``: the new files alone, under the same names."""
    linked_copy(base, src)
    shutil.rmtree(only, ignore_errors=True)
    rng = random.Random(seed)
    folders = sorted(p.name for p in base.iterdir() if p.is_dir())
    for i in range(count):
        folder = rng.choice(folders)
        for ext in ("jpg", "json"):
            name = f"{folder}/n{i:08d}.{ext}"
            for root in (src, only):
                (root / folder).mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(b"new" * (5 + i % 7))
                os.utime(root / name, (1_800_000_000, 1_800_000_000))


def with_changed_samples(base: Path, src: Path, count: int, seed: int) -> None:
    """``src``: ``base`` with the ``.json`` of ``count`` samples at random rewritten (a new
    file under the name: the base tree's is a hard link, left as it is)."""
    linked_copy(base, src)
    rng = random.Random(seed)
    jsons = sorted(str(p.relative_to(base)) for p in base.rglob("*.json"))
    for name in rng.sample(jsons, count):
        (src / name).unlink()
        (src / name).write_bytes(b'{"label": "fixed"}')


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "ishard-bench-grow"
    )
    args = parser.parse_args()
    data, grown = args.data, args.samples // 100
    base = data / f"base-{args.samples}"
    base.mkdir(parents=True, exist_ok=True)
    make_tree(base, 2 * args.samples)
    dataset = data / f"dataset-{args.samples}"
    print(machine_line())
    if not (dataset / "manifest.json").exists():
        took, rss = run("shard", base, dataset, *SHARD, "--overwrite", tag="the dataset")
        print(f"dataset: {args.samples:,} samples sharded in {took:.1f} s, {rss} MiB")
    src, only = data / "src-new", data / "only-new"
    with_new_samples(base, src, only, grown, seed=1)
    changed = data / "src-changed"
    with_changed_samples(base, changed, grown, seed=2)
    shards = {p.name: p.stat().st_ino for p in dataset.glob("*.tar")}
    total = sum(p.stat().st_size for p in dataset.glob("*.tar"))
    times: dict[str, list[float]] = {
        "append": [],
        "fresh (new only)": [],
        "dry run (SRC)": [],
        "update": [],
        "re-shard": [],
    }
    memory: dict[str, int] = {}

    def timed(name: str, *ishard_args: object) -> None:
        took, rss = run(*ishard_args, tag=name)
        times[name].append(took)
        memory[name] = max(memory.get(name, 0), rss)

    work = data / "work"
    for _ in range(args.rounds):
        linked_copy(dataset, work)
        timed("append", "shard", src, work, *SHARD, "--append")
        kept = {n: (work / n).stat().st_ino for n in shards}
        assert kept == shards, "an old shard was rewritten"
        timed("fresh (new only)", "shard", only, data / "fresh", *SHARD, "--overwrite")
        timed("dry run (SRC)", "shard", src, "--dry-run=summary", *SHARD)
        linked_copy(dataset, work)
        timed("update", "shard", changed, work, *SHARD, "--update")
        timed("re-shard", "shard", changed, data / "full", *SHARD, "--overwrite")
    listed = json.loads((work / "manifest.json").read_bytes())["shardlist"]
    rewritten = [e for e in listed if e["url"] not in shards]
    replaced = len(shards) - (len(listed) - len(rewritten))
    for name, values in times.items():
        print(
            f"{name:>18}: "
            + ", ".join(f"{v:.2f} s" for v in values)
            + f"  (median {statistics.median(values):.2f} s, peak {memory[name]} MiB)"
        )
    median = {name: statistics.median(values) for name, values in times.items()}
    reference = median["fresh (new only)"] + median["dry run (SRC)"]
    print(
        f"append ÷ (fresh over the new files + dry run of SRC): "
        f"{median['append'] / reference:.2f}× (target ≤ 1.2×); old shards rewritten: 0 of "
        f"{len(shards):,} (same inodes)"
    )
    print(
        f"update, {grown:,} of {args.samples:,} samples changed at random: {replaced:,} of "
        f"{len(shards):,} shards replaced, {sum(e['filesize'] for e in rewritten):,} bytes "
        f"written of {total:,} a full re-shard writes "
        f"({sum(e['filesize'] for e in rewritten) / total:.1%}); "
        f"update ÷ re-shard time: {median['update'] / median['re-shard']:.2f}×"
    )


if __name__ == "__main__":
    main()
