#!/usr/bin/env python3
"""What a real run reads of its plan, against the dry run that only plans it.

A real run over an inventory plans as the dry run does, then reads every planned member's
name, size and mtime: for its fingerprint (``runstate.fingerprint``), its record of the
listing (``planrecord.plan_record``) and, shard by shard, for the writers. This script times
that reading — everything but the archives' bytes, so no source files are needed — against
``--dry-run=summary`` over the same inventory, each in a process of its own under GNU time,
in alternating rounds:

    python benchmarks/bench_run_plan.py INVENTORY [--rounds 2] [-- extra ishard options]

e.g. an inventory ``benchmarks/bench_plan.py`` writes:

    python benchmarks/bench_run_plan.py /tmp/ishard-bench-plan/dir-per-sample-10000000.csv

Prints per round the wall time and peak RSS of both, and what the run's reading adds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile

READ_THE_PLAN = """
import sys, time
from ishard.options.record import make_options
from ishard.options.settings import located, plan_settings
from ishard.options.table import EXECUTION_ONLY
from ishard.planning.planner import make_plan
from ishard.planning.record import plan_record
from ishard.run.state import fingerprint
from ishard.store import resolve

src, inventory, size = sys.argv[1:4]
opts = make_options(src_list=inventory, shard_size=size)
plan = make_plan(located(src, opts, "source"), plan_settings(opts))
fingerprint(plan)
plan_record(plan, EXECUTION_ONLY)
members = 0
for shard in plan.shards:  # as the writers read it, a shard at a time
    members += sum(len(f.name) + f.mtime * 0 for f in shard.members())
print(len(plan.shards), members)
"""


def timed(cmd: list[str]) -> tuple[float, float]:
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(
            ["/usr/bin/time", "-o", out.name, "-f", "%e %M", *cmd],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        seconds, kib = out.read().split()[-2:]
    return float(seconds), int(kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inventory")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shard-size", default="512MiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as src:
        dry = [sys.executable, "-m", "ishard", "shard", src, "--src-list", args.inventory,
               "--dry-run=summary", "--shard-size", args.shard_size]  # fmt: skip
        run = [sys.executable, "-c", READ_THE_PLAN, src, args.inventory, args.shard_size]
        print("round | dry run s | dry run MiB | run's plan read s | MiB | added s | added MiB")
        for r in range(args.rounds):
            d_s, d_mib = timed(dry)
            r_s, r_mib = timed(run)
            print(f"{r + 1} | {d_s:.1f} | {d_mib:,.0f} | {r_s:.1f} | {r_mib:,.0f} | "
                  f"{r_s - d_s:+.1f} | {r_mib - d_mib:+,.0f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
