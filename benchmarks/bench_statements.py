#!/usr/bin/env python3
"""Planning's heaviest statements, as the column engine states them, in DuckDB, in Polars'
streaming engine and in DataFusion: which engine would make which pass cheaper.

The inventory is a Parquet one of ``bench_plan.py`` (``imagenet`` shape: every sample's two
files in two trees, so samples lie apart). Each engine, in a process of its own, does the
work of ``ishard shard SRC --src-list INV --dry-run=summary --member-names original`` from
the inventory to the columns handed to Python, statement by statement:

- ``read``, ``checks``, ``sort``: the inventory read (size and mtime as text, as the engine
  reads them), every row checked (a bad name or size, an mtime that is not whole seconds,
  rows under the prefix, unsafe and hidden names counted with their first examples), the
  listing sorted bytewise by name (then inventory order), repeated names counted and dropped;
- ``clashes``: the extraction-name clash hints (each member name folded and hashed; the
  folders the names need; the hashes sorted and compared with the row before: files that
  share a folded name or name a folder, path parts over 255 bytes);
- ``group``: the files sorted by sample key (``base_file_name``) and position, carrying each
  file's WebDataset reader key (folder and stem hashed) and flags; the key check's findings
  (reader hits); each key's run of files, in order of first appearance, with its file count;
- ``layout``: the files laid out run after run (sorted by their sample's first file);
- ``read-out``: the columns Python takes (the files by sample, where each sample's files start,
  each sample's bytes, each file's size) written as 4- or 8-byte ints to files, 2M at a time.

DuckDB runs ishard's own functions (``planning/engine/columns.py``, ``clashes.py``) with the
connection ishard makes (2 threads here, its 512 MiB memory limit, a temporary folder), each
statement timed as it runs. Polars (``statements_polars.py``, its streaming engine) and
DataFusion (``statements_datafusion.py``: 2 partitions, a 512 MiB spilling memory pool) state
the same statements, each pass from and to Parquet files in the temporary folder (DuckDB's
temp tables); they read the inventory where DuckDB reads its copy ``raw``, and sum each
sample's bytes while they find the runs (DuckDB: while it reads them out). The children print
what they found — counts, the reader findings, position-weighted sums of each output column
(its order) and a digest of the sorted names — and the script stops if the engines disagree.
Peak RSS: per statement (``VmRSS`` read every 50 ms by a thread) and the whole process (GNU
time). Rounds alternate between the engines. ``--rss-cap`` stops a process past that many MiB
(it names the statement), so a run at 100M cannot take the machine's memory.

Run with this project's environment, Polars and DataFusion from another (ishard depends on
neither)::

    python3 -m venv VENV && VENV/bin/pip install duckdb==2.0.1 polars datafusion pyarrow numpy
    flock LOCK python benchmarks/bench_statements.py INV.parquet --rounds 3 \\
        --other-python VENV/bin/python --tmp-dir SPILL
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from statements_common import (
    CHUNK,
    ENGINES,
    RUNS_SUMS,
    SORTED_SUMS,
    STATEMENTS,
    Statements,
    Timing,
    names_digest,
    weighted,
)


def duckdb_child(inventory: str, tmp: str, cap: float | None) -> None:
    """ishard's own functions over ``inventory``, spilling to a folder of ``tmp``."""
    from ishard.model import Tally
    from ishard.planning.engine import MEMORY_LIMIT, columns, connection, selects
    from ishard.planning.engine.clashes import find_clashes
    from ishard.planning.keys import PATTERNS

    out = Statements(cap)
    spill = tempfile.mkdtemp(prefix="duckdb-", dir=tmp)
    con = Timing(connection.connect(spill, MEMORY_LIMIT, threads=2), out)
    watch = connection.SpillWatch(spill)
    with out.timed("read"):
        local = selects.Inventory("parquet", (inventory,))
        con.execute(
            "CREATE TEMP TABLE raw AS SELECT coalesce(name, '') AS name, size, mtime "
            f"FROM ({selects.source(con, local).sql})"
        )
    keep, skip = columns._kept_sql("", False)
    with out.timed("checks"):
        odd, left_out, skipped = columns._checked_rows(con, keep, skip, Tally())
    read = con.execute("SELECT count(*) FROM raw").fetchone()[0]
    with out.timed("sort"):
        columns._sorted_files(
            con, (keep if left_out else None, skip if skipped else None), odd, watch
        )
        listed = con.execute("SELECT count(*) FROM files").fetchone()[0]
    out.answers["sort"] = [read - listed, *con.execute(SORTED_SUMS).fetchone()]
    with out.timed("clashes"):
        clashes = find_clashes(con, None, listed)
    out.answers["clashes"] = sorted(clashes.files) if clashes is not None else None
    key = next(p.key for p in PATTERNS if p.name == "base_file_name")
    with out.timed("group"):
        found = columns._group(con, key, listed, True)
    out.answers["group"] = [found[0], found[1], found[2], *con.execute(RUNS_SUMS).fetchone()]
    with out.timed("read-out"):  # the layout sort in it is timed apart (Timing)
        grouping = columns._grouping(con, key, listed, found, spill)
        _, least, most = con.execute(
            "SELECT coalesce(sum(size), 0), min(size), max(size) FROM files"
        ).fetchone()
        sizes = connection.int_fetched(con, "size", spill, bounds=(least, most))
    out.seconds["read-out"] -= out.seconds["layout"]
    columns_read = (grouping.members, grouping.starts, grouping.sizes, sizes)
    out.answers["read-out"] = [weighted(w for _, w in c.windows(CHUNK)) for c in columns_read]
    con.execute("SET memory_limit = '512MiB'")
    out.answers["names"] = names_digest(
        con.execute("SELECT name FROM files").to_arrow_reader(CHUNK)
    )
    out.printed()
    connection.close(con, spill)


# ---- the rounds ------------------------------------------------------------------------------


def child(engine: str) -> Callable[[str, str, float | None], None]:
    """The statements in ``engine`` (each module imports its engine)."""
    if engine == "polars":
        import statements_polars

        return statements_polars.child
    if engine == "datafusion":
        import statements_datafusion

        return statements_datafusion.child
    return duckdb_child


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("inventory", help="a Parquet inventory of bench_plan.py (imagenet shape)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument(
        "--other-python", default=sys.executable, help="a Python with polars and datafusion"
    )
    parser.add_argument("--tmp-dir", default=tempfile.gettempdir())
    parser.add_argument(
        "--rss-cap", type=float, help="MiB: a process past it stops, naming the statement"
    )
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)(args.inventory, args.tmp_dir, args.rss_cap)
        return
    from benchlib import machine_line, timed

    engines = args.engines.split(",")
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root, "POLARS_MAX_THREADS": "2"}
    found: dict[str, list[dict]] = {e: [] for e in engines}
    for _ in range(args.rounds):
        for engine in engines:
            python = sys.executable if engine == "duckdb" else args.other_python
            cmd = [python, __file__, args.inventory, "--child", engine, "--tmp-dir", args.tmp_dir]
            cmd += ["--rss-cap", str(args.rss_cap)] if args.rss_cap else []
            seconds, rss, stdout = timed(cmd, env)
            found[engine].append({**json.loads(stdout), "wall": seconds, "peak": rss})
            over, failed = found[engine][-1]["over"], found[engine][-1]["failed"]
            told = f" (stopped in {over}: past {args.rss_cap:,.0f} MiB)" if over else ""
            told += f" (failed in {failed})" if failed else ""
            print(f"{engine}: {seconds:.1f} s, {rss:,.0f} MiB{told}", file=sys.stderr, flush=True)
    whole = [r for runs in found.values() for r in runs if not r["over"] and not r["failed"]]
    answers = {json.dumps(r["answers"], sort_keys=True) for r in whole}
    if len(answers) != 1:
        sys.exit("the engines disagree:\n" + "\n".join(sorted(answers)))
    print(f"{args.inventory}: {machine_line()}; the engines agree: {answers.pop()[:200]}…")
    _report(found)


def _report(found: dict[str, list[dict]]) -> None:
    print("statement | " + " | ".join(f"{e} s (rounds) | {e} peak MiB" for e in found))
    for statement in (*STATEMENTS, "all"):
        cells = []
        for runs in found.values():
            times = [
                sum(r["seconds"].values()) if statement == "all" else r["seconds"].get(statement)
                for r in runs
            ]
            peak = max(
                (r["peak"] if statement == "all" else r["rss"].get(statement, 0)) for r in runs
            )
            shown = ", ".join(
                ("—" if t is None else f"{t:.1f}") + _stopped(r, statement)
                for t, r in zip(times, runs)
            )
            if not peak:
                cells.append(f"{shown} | —")
                continue
            cells.append(f"{shown} | {peak:,.0f}")
        print(f"{statement} | " + " | ".join(cells))


def _stopped(found: dict, statement: str) -> str:
    """What stopped the run in ``statement``, if anything did."""
    if found["over"] == statement:
        return " (over the cap)"
    return " (failed)" if (found["failed"] or "").startswith(f"{statement}:") else ""


if __name__ == "__main__":
    main()
