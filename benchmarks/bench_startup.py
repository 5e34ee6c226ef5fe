"""Start-up cost of the ``ishard`` command, against the bare interpreter's start in the same run.

Every CLI call pays it, and so does every test that runs the command. Rounds alternate
(reference, ``ishard --version``, ``ishard --help``, a dry run of the bundled fixture) so drift hits all three
alike; the medians and their ratios to the reference are printed.

    python benchmarks/bench_startup.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = {
    "python -c pass (reference)": [sys.executable, "-c", "pass"],
    "ishard --version": [sys.executable, "-m", "ishard", "--version"],
    "ishard --help": [sys.executable, "-m", "ishard", "--help"],
    "ishard shard fixtures/imagenet --dry-run=summary": [
        sys.executable,
        "-m",
        "ishard",
        "shard",
        str(ROOT / "fixtures" / "imagenet"),
        "--dry-run=summary",
    ],
}


def timed(argv: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    for argv in RUNS.values():  # warm the page cache and the bytecode
        timed(argv)
    seconds: dict[str, list[float]] = {name: [] for name in RUNS}
    for _ in range(args.rounds):
        for name, argv in RUNS.items():
            seconds[name].append(timed(argv))
    reference = statistics.median(seconds["python -c pass (reference)"])
    for name, values in seconds.items():
        median = statistics.median(values)
        print(
            f"{name:52s} median {median:.3f} s  ({median / reference:.1f}x the reference, "
            f"{args.rounds} rounds)"
        )


if __name__ == "__main__":
    main()
