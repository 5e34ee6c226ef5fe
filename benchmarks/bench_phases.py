#!/usr/bin/env python3
"""Where a long dry run's time and memory go: ``ishard ARGS`` run in this process while a thread
reads its RSS (``/proc/self/status``) every 0.2 s and, every ``--every`` seconds, the line of
ishard the main thread is running; then a table of phases (a run of looks at one line, by
where it started) and the most RSS seen.

    python benchmarks/bench_phases.py -- shard SRC --src-list INV --dry-run=summary \\
        --shard-size 512MiB --member-names original --tmp-dir SPILL
    python benchmarks/bench_phases.py --read-the-plan INV 512MiB SPILL

``--read-the-plan`` times what a real run reads of its plan instead (as
``bench_run_plan.py``'s ``READ_THE_PLAN``: the plan, its fingerprint, the listing record and
every shard's members, a shard at a time), printing when each part ends.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import traceback

LOOK = 0.2  # seconds between two reads of the RSS


def rss_mib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


class Sampler:
    """The most RSS, and the ishard line the main thread ran at each look."""

    def __init__(self, every: float) -> None:
        self.every, self.peak, self.looks = every, 0, []
        self.start, self.main = time.monotonic(), threading.get_ident()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        last = 0.0
        while True:
            self.peak = max(self.peak, rss_mib())
            now = time.monotonic() - self.start
            if now - last >= self.every:
                last = now
                frame = sys._current_frames().get(self.main)
                where = [
                    f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}"
                    for f in traceback.extract_stack(frame)
                    if f"{os.sep}ishard{os.sep}" in f.filename
                ]
                self.looks.append((now, rss_mib(), where[-1] if where else "-"))
            time.sleep(LOOK)

    def mark(self, what: str) -> None:
        print(f"{time.monotonic() - self.start:8.1f} s  {what}", file=sys.stderr, flush=True)

    def report(self) -> None:
        print("from s | to s | seconds | most RSS MiB | ishard line")
        phases: list[list] = []
        for at, rss, where in self.looks:
            if phases and phases[-1][2] == where:
                phases[-1][1], phases[-1][3] = at, max(phases[-1][3], rss)
            else:
                phases.append([at, at, where, rss])
        for i, (begin, _, where, rss) in enumerate(phases):
            end = phases[i + 1][0] if i + 1 < len(phases) else time.monotonic() - self.start
            print(f"{begin:.1f} | {end:.1f} | {end - begin:.1f} | {rss:,} | {where}")
        print(f"wall {time.monotonic() - self.start:.1f} s, most RSS {self.peak:,} MiB")


def read_the_plan(sampler: Sampler, inventory: str, size: str, tmp_dir: str) -> None:
    from ishard.options.record import make_options
    from ishard.options.settings import located, plan_settings
    from ishard.options.table import EXECUTION_ONLY
    from ishard.planning.planner import make_plan
    from ishard.planning.record import plan_record
    from ishard.run.state import fingerprint

    with tempfile.TemporaryDirectory() as src:
        opts = make_options(src_list=inventory, shard_size=size, tmp_dir=tmp_dir)
        plan = make_plan(located(src, opts, "source"), plan_settings(opts))
        sampler.mark("planned")
        fingerprint(plan)
        sampler.mark("fingerprint")
        plan_record(plan, EXECUTION_ONLY)
        sampler.mark("listing record")
        members = 0
        for shard in plan.shards:  # as the writers read it, a shard at a time
            members += len(shard.members())
        sampler.mark(f"every shard's members ({members:,})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=5.0, help="seconds between two looks")
    parser.add_argument("--read-the-plan", nargs=3, metavar=("INV", "SIZE", "TMP_DIR"))
    parser.add_argument("args", nargs="*", help="ishard's arguments (after --)")
    args = parser.parse_args()
    sampler = Sampler(args.every)
    if args.read_the_plan:
        read_the_plan(sampler, *args.read_the_plan)
    else:
        from ishard.cli import main as ishard_main

        try:
            ishard_main(args.args)
        except SystemExit as done:
            if done.code not in (0, None):
                raise
    sampler.report()


if __name__ == "__main__":
    main()
