#!/usr/bin/env python3
"""Planning at scale: dry run over a synthetic S3-style inventory of 1M and 10M objects.

Generates (once, deterministically) a CSV inventory with a header, ImageNet-like names (an
image under ``train/`` and an annotation under ``ann/`` per sample, written in an order that is
not sorted), then times ``ishard shard SRC --src-list INV --dry-run=summary`` and its peak RSS
(GNU time), next to GNU ``sort`` of the same file as a reference for "reading and ordering this
many names".

    python benchmarks/bench_plan.py                 # 1M and 10M objects
    python benchmarks/bench_plan.py --objects 200000  # a quick run
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def generate(path: Path, objects: int, seed: int = 1234) -> None:
    """Write ``objects`` inventory lines (half images, half annotations) unless present."""
    marker = path.with_suffix(".done")
    if marker.exists() and marker.read_text() == f"{objects} {seed}":
        return
    rng = random.Random(seed)
    samples = objects // 2
    with open(path, "w", buffering=1 << 20) as f:
        f.write("name,size,mtime\n")
        for part in ("train", "ann"):
            for i in range(samples):
                wnid = i // 1300
                if part == "train":
                    f.write(f"train/n{wnid:08d}/n{wnid:08d}_{i}.JPEG,{rng.randint(20_000, 200_000)},1700000000\n")
                else:
                    f.write(f"ann/n{wnid:08d}/n{wnid:08d}_{i}.xml,{rng.randint(400, 2000)},1700000000\n")
    marker.write_text(f"{objects} {seed}")


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """(seconds, peak RSS MiB, stdout) of ``cmd`` run under GNU time."""
    gnu_time = shutil.which("time") or "/usr/bin/time"
    out = tempfile.NamedTemporaryFile(delete=False)
    out.close()
    started = time.perf_counter()
    proc = subprocess.run([gnu_time, "-f", "%M", "-o", out.name, *cmd], capture_output=True,
                          text=True, env=env)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    rss = int(Path(out.name).read_text().split()[-1]) / 1024
    os.unlink(out.name)
    return seconds, rss, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "ishard-bench-plan")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    print(f"{'objects':>12} {'ishard s':>9} {'ishard MiB':>11} {'shards':>7} {'sort s':>7} {'sort MiB':>9}")
    for n in args.objects:
        inv = args.data / f"inventory-{n}.csv"
        generate(inv, n)
        s_sec, s_rss, _ = timed(["sort", "-t,", "-k1,1", "-o", os.devnull, str(inv)],
                                env={**os.environ, "LC_ALL": "C"})
        i_sec, i_rss, out = timed([sys.executable, "-m", "ishard", "shard", "dataset",
                                   "--src-list", str(inv), "--dry-run=summary",
                                   "--shard-size", "512MiB", "--member-names", "original"])
        shards = out.count(".tar  ")
        print(f"{n:>12,} {i_sec:>9.1f} {i_rss:>11.0f} {shards:>7} {s_sec:>7.1f} {s_rss:>9.0f}",
              flush=True)


if __name__ == "__main__":
    main()
