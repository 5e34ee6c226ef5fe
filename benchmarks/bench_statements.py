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
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

P = 2_147_483_647  # position-weighted sums are taken modulo this prime (no overflow)
CHUNK = 1 << 21  # ints read out at a time, as ishard's engine does (INTS_FETCHED)
EXAMPLES = 3  # first samples kept per reader finding (naming.EXAMPLES)
# names.SKIP_REASON's unsafe names, as a regular expression
UNSAFE = r"^[/\\]|^[A-Za-z]:|[\x00-\x1f\x7f]|(^|[/\\])\.\.([/\\]|$)"
LOOK = 0.05  # seconds between two reads of the RSS
ENGINES = ("duckdb", "polars", "datafusion")
STATEMENTS = ("read", "checks", "sort", "clashes", "group", "layout", "read-out")


def rss_mib() -> float:
    """This process's RSS now, MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


class Statements:
    """Each statement's seconds and peak RSS, and the answers that must agree."""

    def __init__(self, cap: float | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.rss: dict[str, float] = {}
        self.answers: dict[str, object] = {}
        self.cap = cap  # MiB: past it, the process says where it was and ends

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Time the block, and take its most RSS (read every ``LOOK`` seconds by a thread:
        resetting the kernel's peak would take it from GNU time's figure too)."""
        done, most = threading.Event(), [rss_mib()]

        def look() -> None:
            while not done.wait(LOOK):
                most[0] = max(most[0], rss_mib())
                if self.cap is not None and most[0] > self.cap:
                    self.seconds[name] = time.perf_counter() - started
                    self.rss[name] = most[0]
                    self.printed(over=name)
                    os._exit(0)

        watcher = threading.Thread(target=look, daemon=True)
        watcher.start()
        started = time.perf_counter()
        try:
            yield
        except Exception as error:  # noqa: BLE001 - an engine that fails (out of memory): a finding
            self.printed(failed=f"{name}: {str(error).splitlines()[-1][:300]}")
            os._exit(0)
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            done.set()
            watcher.join()
            self.rss[name] = max(self.rss.get(name, 0.0), most[0], rss_mib())

    def printed(self, over: str | None = None, failed: str | None = None) -> None:
        found = {"seconds": self.seconds, "rss": self.rss, "answers": self.answers}
        found |= {"over": over, "failed": failed}
        print(json.dumps(found, default=int), flush=True)  # DataFusion sums: Decimal


def weighted(chunks: Iterator) -> tuple[int, int, int]:
    """Count, sum and position-weighted sum (mod P) of an int column read in numpy chunks."""
    import numpy as np

    count = total = mixed = 0
    for chunk in chunks:
        values = np.asarray(chunk, dtype=np.int64)
        rank = np.arange(count + 1, count + len(values) + 1, dtype=np.int64)
        mixed = (mixed + int(((rank * values) % P).sum())) % P
        count, total = count + len(values), total + int(values.sum())
    return count, total, mixed


def names_digest(batches: Iterator) -> str:
    """blake2b of the names in order (Arrow batches of one text column), a line each."""
    digest = hashlib.blake2b(digest_size=16)
    for batch in batches:
        digest.update("".join(f"{n}\n" for n in batch.column(0).to_pylist()).encode())
    return digest.hexdigest()


# ---- DuckDB: ishard's own statements -------------------------------------------------------


class Timing:
    """A DuckDB connection whose statements ``_layout`` (the layout sort) are timed apart."""

    def __init__(self, con, statements: Statements) -> None:
        self._con, self._statements = con, statements

    def execute(self, query: str, *args):
        if query.startswith("CREATE TEMP TABLE laid"):
            with self._statements.timed("layout"):
                return self._con.execute(query, *args)
        return self._con.execute(query, *args)

    def __getattr__(self, name: str):
        return getattr(self._con, name)


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
            f"FROM ({selects.source(con, local)})"
        )
    keep, skip = columns._kept_sql("", False)
    with out.timed("checks"):
        odd, left_out, skipped = columns._checked_rows(con, keep, skip, Tally())
    read = con.execute("SELECT count(*) FROM raw").fetchone()[0]
    with out.timed("sort"):
        columns._sorted_files(
            con, keep if left_out else None, skip if skipped else None, odd, watch
        )
        listed = con.execute("SELECT count(*) FROM files").fetchone()[0]
    out.answers["sort"] = [read - listed, *con.execute(_SORTED_SUMS).fetchone()]
    with out.timed("clashes"):
        clashes = find_clashes(con, None, listed)
    out.answers["clashes"] = sorted(clashes.files) if clashes is not None else None
    key = next(p.key for p in PATTERNS if p.name == "base_file_name")
    with out.timed("group"):
        found = columns._group(con, key, listed, True)
    out.answers["group"] = [found[0], found[1], found[2], *con.execute(_RUNS_SUMS).fetchone()]
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


_SORTED_SUMS = (  # the listing's order: its sizes and name lengths weighted by position
    f"SELECT count(*), sum(size), sum(((rowid + 1) * size) % {P}) % {P}, "
    f"sum(((rowid + 1) * strlen(name)) % {P}) % {P} FROM files"
)
_RUNS_SUMS = (  # the samples' order: where each run starts in by_key, its key's length
    f"SELECT count(*), sum(((rowid + 1) * pos) % {P}) % {P}, "
    f"sum(((rowid + 1) * strlen(key)) % {P}) % {P} FROM runs"
)


FINDINGS = {"dotted": 1, "dropped": 2, "split": 4}  # handover.FINDING_BITS


def reader_findings(hits: str, keys_of: Callable[[list[int]], dict[int, str]]) -> dict[str, list]:
    """For each finding, how many samples have it and the keys (``keys_of`` their first files)
    of the first ``EXAMPLES``: the rows of ``hits`` (a Parquet file of ``run``, each hit's
    sample by its first file, and ``code``, its finding bits) in sample key order."""
    import numpy as np

    count = dict.fromkeys(FINDINGS, 0)
    last = dict.fromkeys(FINDINGS, -1)
    least = {kind: np.empty(0, dtype=np.int64) for kind in FINDINGS}
    for batch in batches(hits, "run", "code"):
        run = batch.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
        code = batch.column(1).to_numpy(zero_copy_only=False)
        for kind, bit in FINDINGS.items():
            runs = run[(code & bit) != 0]
            if len(runs):  # each sample counted at its first row with the finding
                first = np.flatnonzero(np.diff(runs, prepend=last[kind]) != 0)
                count[kind] += len(first)
                last[kind] = int(runs[-1])
                least[kind] = np.unique(np.concatenate([least[kind], runs[first]]))[:EXAMPLES]
    keys = keys_of(sorted({int(f) for kind in least for f in least[kind]}))
    return {
        kind: [count[kind], [keys[int(f)] for f in least[kind]]] for kind in FINDINGS if count[kind]
    }


def batches(path: str, *columns: str):
    """A Parquet file's columns, ``CHUNK`` rows at a time (Arrow record batches)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).iter_batches(batch_size=CHUNK, columns=list(columns))


def spooled_columns(folder: str, laid: str, runs: str, files: str) -> list[tuple[str, str]]:
    """The columns Python takes, written to files ``CHUNK`` ints at a time, as ishard's engine
    hands them over: the files by sample (``laid``'s ``f``), where each sample's files start
    (from ``runs``' ``files``, and where the last ends), each sample's bytes (``runs``'
    ``bytes``), each file's size (``files``' ``size``); 4-byte ints where the values fit."""
    import numpy as np
    import pyarrow.parquet as pq

    spooled = []
    for source, column in ((laid, "f"), (runs, "files"), (runs, "bytes"), (files, "size")):
        meta = pq.ParquetFile(source).metadata
        at = meta.schema.names.index(column)
        stats = [meta.row_group(g).column(at).statistics for g in range(meta.num_row_groups)]
        fits = all(-(1 << 31) <= s.min and s.max < 1 << 31 for s in stats)
        kind = "int32" if fits and column != "files" and column != "bytes" else "int64"
        path, before = os.path.join(folder, f"{column}.{kind}"), 0
        with open(path, "wb") as out:
            for batch in batches(source, column):
                values = batch.column(0).to_numpy(zero_copy_only=False).astype(kind)
                if column == "files":  # lengths → starts
                    ends = np.cumsum(values, dtype=np.int64) + before
                    values, before = ends - values, int(ends[-1]) if len(ends) else before
                values.tofile(out)
            if column == "files":
                np.array([before], dtype=np.int64).tofile(out)
        spooled.append((path, kind))
    return spooled


def spooled(path: str, kind: str):
    """A column ``spooled_columns`` wrote, ``CHUNK`` values at a time."""
    import numpy as np

    values = np.memmap(path, dtype=kind, mode="r")
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


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
