#!/usr/bin/env python3
"""What ``--duplicates report`` costs a dry run over an inventory with checksums.

From a Parquet inventory ``bench_plan.py`` wrote (name, size, mtime), this script writes once
a copy with an ``etag`` column: the md5 of each name, but every ``--every``-th file takes
the ETag and size of the file before it (an exact duplicate). Then it times
``ishard shard SRC --src-list COPY --dry-run=summary --json`` with ``--duplicates report``
and with ``--duplicates off`` (the same inventory, the column not read), each in a process
of its own under GNU time, in alternating rounds, and checks the duplicates found.

    python benchmarks/bench_plan.py --objects 10000000 --shapes imagenet --formats parquet
    python benchmarks/bench_duplicates.py /tmp/ishard-bench-plan/imagenet-10000000.parquet
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from benchlib import machine_line, timed


def with_etags(inventory: Path, every: int) -> Path:
    """The inventory's copy with an ``etag`` column (written once, beside it)."""
    out = inventory.with_name(f"{inventory.stem}-etag{every}.parquet")
    if out.exists():
        return out
    import duckdb

    with duckdb.connect() as con:
        con.execute(
            f"COPY (SELECT name, CASE WHEN n % {every} = 0 THEN lag(size) OVER w ELSE size END "
            f"AS size, mtime, CASE WHEN n % {every} = 0 THEN lag(md5(name)) OVER w ELSE "
            f"md5(name) END AS etag FROM (SELECT *, row_number() OVER () AS n FROM "
            f"read_parquet('{inventory}')) WINDOW w AS (ORDER BY n)) TO '{out}' (FORMAT parquet)"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("inventory", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--tmp-dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    copy = with_etags(args.inventory, args.every)
    print(machine_line())
    command = [sys.executable, "-m", "ishard", "shard", str(args.inventory.parent / "source"),
               "--src-list", str(copy), "--dry-run=summary", "--json", "--shard-size", "512MiB",
               "--member-names", "original", "--tmp-dir", args.tmp_dir]  # fmt: skip
    times: dict[str, list[float]] = {"off": [], "report": []}
    peaks: dict[str, list[float]] = {"off": [], "report": []}
    for _ in range(args.rounds):
        for mode in ("off", "report"):
            seconds, rss, out = timed([*command, "--duplicates", mode])
            times[mode].append(seconds)
            peaks[mode].append(rss)
            found = json.loads(out).get("duplicates")
            if mode == "report":
                assert found is not None and found["copies"] > 0, found
                print(f"report: {found['copies']:,} copies in {found['groups']:,} groups")
            print(f"{mode:>6}: {seconds:7.1f} s  {rss:6.0f} MiB")
    off, report = statistics.median(times["off"]), statistics.median(times["report"])
    print(
        f"median: off {off:.1f} s ({max(peaks['off']):.0f} MiB), report {report:.1f} s "
        f"({max(peaks['report']):.0f} MiB): +{100 * (report / off - 1):.1f} % (target <= 10 %)"
    )


if __name__ == "__main__":
    main()
