#!/usr/bin/env python3
"""Planning a real tree: a dry run over a local folder of many small files, next to
``find`` + ``sort`` of the same folder (what "list it and order the names" costs).

The tree is made once, deterministically, in ``--data``: ``--files`` small files, two per
sample (an image and an annotation), 1,000 to a folder. Both commands run once to warm the
page cache, then in alternating rounds; the table gives each round's wall time and the
ratio of the medians.

    python benchmarks/bench_tree.py                      # 1,000,000 files, 3 rounds
    python benchmarks/bench_tree.py --files 100000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import machine_line


def make_tree(root: Path, files: int) -> None:
    """``files`` files of 10-40 bytes, two per sample, 1,000 per folder (skipped if made)."""
    done = root / ".done"
    if done.exists() and done.read_text() == str(files):
        return
    for i in range(files // 2):
        folder = root / f"d{i // 500:05d}"
        if i % 500 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        for ext in ("jpg", "json"):
            fd = os.open(folder / f"s{i:08d}.{ext}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.write(fd, b"x" * (10 + i % 31))
            os.close(fd)
    done.write_text(str(files))


def timed(command: str) -> float:
    start = time.perf_counter()
    subprocess.run(command, shell=True, check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "LC_ALL": "C"})  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "ishard-bench-tree"
    )
    args = parser.parse_args()
    tree = args.data / f"tree-{args.files}"
    tree.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    make_tree(tree, args.files)
    print(machine_line())
    from ishard.store.local import scan

    reader = "native (_scan.c)" if scan.native is not None else "Python (os.scandir)"
    print(f"directory reader: {reader}")
    print(
        f"tree: {args.files:,} files in {tree} (made or found in "
        f"{time.perf_counter() - started:.0f} s)"
    )
    commands = {
        "find+sort": f"find {tree} -type f -not -name '.*' -printf '%P %s\\n' | sort",
        "ishard": f"{sys.executable} -m ishard shard {tree} --dry-run=summary "
        "--shard-size 512MiB --no-progress",
    }
    for command in commands.values():  # warm the page cache and the dentry cache
        timed(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, command in commands.items():
            times[name].append(timed(command))
    for name, values in times.items():
        print(
            f"{name:>10}: "
            + ", ".join(f"{v:.2f} s" for v in values)
            + f"  (median {statistics.median(values):.2f} s)"
        )
    ratio = statistics.median(times["ishard"]) / statistics.median(times["find+sort"])
    print(f"ishard ÷ find+sort: {ratio:.2f}× (target ≤ 2×)")


if __name__ == "__main__":
    main()
