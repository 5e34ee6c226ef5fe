#!/usr/bin/env python3
"""Hash speed on one core for each ``--checksum`` algorithm, as ishard feeds it: 1 MiB updates
over a buffer that stays in the CPU caches' reach of main memory (256 MiB), best of 5.

    python benchmarks/bench_checksums.py
"""

from __future__ import annotations

import os
import time

from ishard.checksums import ALGORITHMS, hasher

SIZE = 256 << 20
STEP = 1 << 20


def main() -> None:
    data = memoryview(os.urandom(SIZE))
    print(f"{'algorithm':>10} {'MiB/s':>8} {'s per GiB':>10}")
    for algorithm in ALGORITHMS:
        best = float("inf")
        for _ in range(5):
            state = hasher(algorithm)
            started = time.perf_counter()
            for offset in range(0, SIZE, STEP):
                state.update(data[offset : offset + STEP])
            state.hexdigest()
            best = min(best, time.perf_counter() - started)
        rate = SIZE / best / (1 << 20)
        print(f"{algorithm:>10} {rate:>8,.0f} {1024 / rate:>10.3f}")


if __name__ == "__main__":
    main()
