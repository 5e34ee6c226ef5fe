#!/usr/bin/env python3
"""Planning's heaviest statements, as the column engine states them, in DuckDB and in Polars'
streaming engine: which engine would make which pass cheaper.

The inventory is a Parquet one of ``bench_plan.py`` (``imagenet`` shape: every sample's two
files in two trees, so samples lie apart). Each engine, in a process of its own, does the
work of ``ishard shard SRC --src-list INV --dry-run=summary --member-names original`` from
the inventory to the columns handed to Python, statement by statement:

- ``read``, ``checks``, ``sort``: the inventory read (size and mtime as text, as the engine
  reads them), every row checked (a bad name or size, an mtime that is not whole seconds,
  rows under the prefix, unsafe and hidden names counted with their first examples), the
  listing sorted bytewise by name (then inventory order), repeated names counted and dropped;
- ``clashes``: the extraction-name clash hints (each member name folded, hashed with its
  reverse; the folders the names need; the hashes sorted and compared with the row before:
  files that share a folded name or name a folder, path parts over 255 bytes);
- ``group``: the files sorted by sample key (``base_file_name``) and position, carrying each
  file's WebDataset reader key (folder and stem hashed) and flags; the key check's findings
  (reader hits); each key's run of files, in order of first appearance, with its file count;
- ``layout``: the files laid out run after run (sorted by their sample's first file);
- ``read-out``: the columns Python takes (the files by sample, where each sample's files start,
  each sample's bytes, each file's size) written as 4- or 8-byte ints to files, 2M at a time.

DuckDB runs ishard's own functions (``planning/engine/columns.py``, ``clashes.py``) with the
connection ishard makes (2 threads here, its 512 MiB memory limit, a temporary folder), each
statement timed as it runs. Polars states the same statements in its lazy API, run by its
streaming engine, each pass from and to Parquet files in the temporary folder (DuckDB's temp
tables); it reads the inventory where DuckDB reads its copy ``raw``, and sums each sample's
bytes while it finds the runs (DuckDB: while it reads them out). The children print what
they found — counts, the reader findings, position-weighted sums of each output column (its
order) and a digest of the sorted names — and the script stops if the engines disagree.
Peak RSS: per statement (``VmRSS`` read every 50 ms by a thread) and the whole process
(GNU time). Rounds alternate between the engines.

Run with this project's environment, Polars from another (ishard does not depend on it)::

    python3 -m venv VENV && VENV/bin/pip install duckdb==2.0.1 polars pyarrow numpy
    flock LOCK python benchmarks/bench_statements.py INV.parquet --rounds 2 \\
        --other-python VENV/bin/python --tmp-dir SPILL
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
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

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.rss: dict[str, float] = {}
        self.answers: dict[str, object] = {}

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Time the block, and take its most RSS (read every ``LOOK`` seconds by a thread:
        resetting the kernel's peak would take it from GNU time's figure too)."""
        done, most = threading.Event(), [rss_mib()]

        def look() -> None:
            while not done.wait(LOOK):
                most[0] = max(most[0], rss_mib())

        watcher = threading.Thread(target=look, daemon=True)
        watcher.start()
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            done.set()
            watcher.join()
            self.rss[name] = max(self.rss.get(name, 0.0), most[0], rss_mib())

    def printed(self) -> None:
        print(json.dumps({"seconds": self.seconds, "rss": self.rss, "answers": self.answers}))


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


def duckdb_child(inventory: str, tmp: str) -> None:
    from ishard.model import Tally
    from ishard.planning.engine import MEMORY_LIMIT, columns, connection, selects
    from ishard.planning.engine.clashes import find_clashes
    from ishard.planning.keys import PATTERNS

    out = Statements()
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


# ---- Polars: the same statements, streaming ----------------------------------------------


def polars_child(inventory: str, tmp: str) -> None:
    import polars as pl

    out = Statements()
    folder = tempfile.mkdtemp(prefix="polars-", dir=tmp)
    at = {name: os.path.join(folder, f"{name}.parquet") for name in ("files", "by_key", "runs")}
    bytewise = pl.Series(["b", "B", "é", "e", "_", "Z", "~", "a/b", "a.b"])
    if bytewise.sort().to_list() != sorted(bytewise.to_list(), key=str.encode):
        sys.exit("polars does not sort text bytewise")
    source = pl.scan_parquet(inventory).select(
        pl.col("name").fill_null(""),
        pl.col("size").cast(pl.String),
        pl.col("mtime").cast(pl.String),
    )
    with out.timed("checks"):
        _polars_checks(pl, source.with_row_index("rn"))
    with out.timed("sort"):
        listed, repeated = _polars_sort(pl, source, at["files"])
    files = (
        pl.scan_parquet(at["files"]).with_row_index("f").with_columns(pl.col("f").cast(pl.Int64))
    )
    out.answers["sort"] = [repeated, *_polars_sorted_sums(pl, files)]
    with out.timed("clashes"):
        out.answers["clashes"] = _polars_clashes(pl, files, folder)
    with out.timed("group"):
        findings = _polars_group(pl, files, listed, at)
    out.answers["group"] = [False, *findings, *_polars_runs_sums(pl, at["runs"])]
    with out.timed("layout"):
        laid = os.path.join(folder, "laid.parquet")
        _polars_layout(pl, at["by_key"], laid)
    with out.timed("read-out"):
        spooled = _polars_read_out(pl, folder, laid, at["runs"], at["files"], listed)
    out.answers["read-out"] = [weighted(_spooled(path, kind)) for path, kind in spooled]
    out.answers["names"] = names_digest(_batches(at["files"], "name"))
    out.printed()
    shutil.rmtree(folder, ignore_errors=True)


def _polars_checks(pl, rows) -> None:
    """One pass: the rows ishard's engine refuses, odd mtimes, rows left out, skipped rows."""
    name, size, mtime = pl.col("name"), pl.col("size"), pl.col("mtime")
    bad = (name.str.len_chars() > 131072) | ~(
        size.is_not_null()
        & size.str.contains(r"^[0-9]{1,19}$")
        & ~((size.str.len_bytes() == 19) & (size > "9223372036854775807"))
    )
    whole = mtime.is_null() | (mtime == "") | mtime.str.contains(r"^[0-9]{1,15}$")
    keep = name.str.starts_with("") & ~((name == "") | name.str.ends_with("/"))
    why = (
        pl.when((name == "") | name.str.contains(UNSAFE))
        .then(pl.lit("unsafe"))
        .when(name.str.starts_with(".") | name.str.contains("/.", literal=True))
        .then(pl.lit("hidden"))
    )
    skip = pl.when(~keep).then(None).otherwise(why).alias("skip")
    reasons = []
    for reason in ("unsafe", "hidden"):
        hit = pl.col("skip") == reason
        reasons += [
            hit.sum().alias(f"{reason}s"),
            name.filter(hit).bottom_k_by(pl.col("rn").filter(hit), 5).implode().alias(reason),
            pl.col("rn").filter(hit).min().alias(f"{reason}_first"),
        ]
    found = (
        rows.with_columns(skip)
        .select(
            bad.sum().alias("bad"),
            (~whole).sum().alias("odd"),
            (~keep).sum().alias("out"),
            *reasons,
        )
        .collect(engine="streaming")
    )
    if found["bad"][0] or found["odd"][0] or found["out"][0] or found["unsafes"][0]:
        sys.exit(f"this benchmark takes a clean inventory: {found.row(0)}")


def _polars_sort(pl, source, path: str) -> tuple[int, int]:
    """The listing sorted bytewise (stable: inventory order among equal names), each name once."""
    mtime = pl.col("mtime")
    source.select(
        "name",
        pl.col("size").cast(pl.Int64),
        pl.when(mtime.is_null() | (mtime == ""))
        .then(0)
        .otherwise(mtime.cast(pl.Int64))
        .alias("mtime"),
    ).sort("name", maintain_order=True).sink_parquet(path, engine="streaming")
    again = pl.col("name") == pl.col("name").shift(1)
    repeated = pl.scan_parquet(path).select(again.sum()).collect(engine="streaming").item()
    if repeated:
        first = pl.scan_parquet(path).filter(pl.col("name").ne_missing(pl.col("name").shift(1)))
        first.sink_parquet(path + ".once", engine="streaming")
        os.replace(path + ".once", path)
    listed = pl.scan_parquet(path).select(pl.len()).collect().item()
    return listed, repeated


def _polars_sorted_sums(pl, files) -> list[int]:
    rank = pl.col("f") + 1
    return list(
        files.select(
            pl.len(),
            pl.col("size").sum(),
            (((rank * pl.col("size")) % P).sum() % P).alias("by_size"),
            (((rank * pl.col("name").str.len_bytes().cast(pl.Int64)) % P).sum() % P).alias(
                "by_name"
            ),
        )
        .collect(engine="streaming")
        .row(0)
    )


def _hashed(pl, *texts):
    """A 64-bit hash of the texts: Polars' own (DuckDB's hashes the reversed texts too, as its
    hash of a text alone gives ImageNet-like names one value; Polars' ``str.reverse`` would
    cost 13 s a pass over 10M names)."""
    return pl.struct(*(t.alias(f"t{i}") for i, t in enumerate(texts))).hash()


def _plain(text):
    """extraction.FOLD's ``where``: folded by lower case alone."""
    return (
        (text.str.len_bytes() == text.str.len_chars())
        & ~text.str.contains("//", literal=True)
        & ~text.str.contains("./", literal=True)
        & ~text.str.ends_with("/")
        & ~text.str.ends_with("/.")
    )


def _base(name):
    """A name's basename (DuckDB's parse_filename): after its last '/'."""
    return name.str.split("/").list.last()


def _folder(name, base):
    """A name's folder (DuckDB's parse_dirpath): before its last '/', '' for none (a regex
    that says so, ``^(.*)/[^/]*$``, costs Polars 26 s over 10M names)."""
    return name.str.strip_suffix(base).str.strip_suffix("/")


def _polars_clashes(pl, files, folder: str) -> list[int]:
    """Files whose folded names another file shares or a folder needs, or with a long part."""
    m = pl.col("name")
    if files.select((~_plain(m)).sum()).collect(engine="streaming").item():
        sys.exit("names that fold past lower case: ishard folds them in Python")
    hashes = os.path.join(folder, "hashes.parquet")
    files.select("f", _hashed(pl, m.str.to_lowercase()).alias("h")).sink_parquet(
        hashes, engine="streaming"
    )
    d = pl.col("d")
    parents = files.select(_folder(m, _base(m)).alias("d")).filter(d.ne_missing(d.shift(1)))
    folders = parents.filter((d != "") & _plain(d)).select(d.str.to_lowercase())
    if parents.filter((d != "") & ~_plain(d)).select(pl.len()).collect(engine="streaming").item():
        sys.exit("folders that fold past lower case: ishard folds them in Python")
    parts = pl.col("parts")
    directories = (
        folders.with_columns(d.str.split("/").alias("parts"))
        .with_columns(pl.int_ranges(1, parts.list.len() + 1).alias("i"))
        .explode("i")
        .select(_hashed(pl, parts.list.head(pl.col("i")).list.join("/")).alias("h"))
    )
    h, file = pl.col("h"), pl.col("file")
    repeated = (
        pl.concat(
            [
                pl.scan_parquet(hashes).select("h", pl.lit(True).alias("file")),
                directories.select("h", pl.lit(False).alias("file")),
            ]
        )
        .sort("h", "file")  # folders first
        .with_columns(h.shift(1).alias("before"), file.shift(1).alias("twice"))
        .filter(file & (h == pl.col("before")))
        .select("h", "twice")
        .collect(engine="streaming")
    )
    if not repeated["twice"].all():
        sys.exit("files that name a folder: ishard then looks below them")
    suspects = pl.scan_parquet(hashes).join(repeated.lazy(), on="h", how="semi").select("f")
    long = files.filter(
        (m.str.len_bytes() > 255)
        & (m.str.split("/").list.eval(pl.element().str.len_bytes()).list.max() > 255)
    ).select("f")
    found = pl.concat([suspects, long]).unique().sort("f").collect(engine="streaming")
    return found["f"].to_list()


def _polars_group(pl, files, listed: int, at: dict[str, str]) -> list:
    """The files sorted by sample key with their reader keys and flags, the key check's
    findings, and each key's run (``runs``, by first file: key, start, files, bytes)."""
    name, f, k = pl.col("name"), pl.col("f"), pl.col("key")
    base = _base(name)
    key = base.str.replace(r"\.[^.]*$", "")  # the base_file_name key
    every = max(1, listed // (2048 * 32))  # columns._in_a_row's look at 32 runs of files
    low = (
        files.filter((f // 2048) % every == 0)
        .select(key.alias("key"))
        .select((k < k.shift(1)).sum())
    )
    if not low.collect(engine="streaming").item():
        sys.exit("samples in a row: this benchmark takes samples apart (the imagenet shape)")
    dot = (base.str.find(".", literal=True) + 1).fill_null(0)  # SQL's instr
    stem = pl.when(dot == 0).then(base).otherwise(base.str.slice(0, dot - 1))
    flags = ((dot > 1) & base.str.slice(dot).str.contains(".", literal=True)).cast(pl.Int8) + 2 * (
        dot <= 1
    ).cast(pl.Int8)
    files.select(
        "f",
        key.alias("key"),
        "size",
        _hashed(pl, _folder(name, base), stem).alias("rk"),
        flags.alias("flags"),
    ).sort("key", "f").sink_parquet(at["by_key"], engine="streaming")
    new = k.ne_missing(k.shift(1))
    hits = os.path.join(os.path.dirname(at["by_key"]), "hits.parquet")
    rk = pl.col("rk")
    pl.scan_parquet(at["by_key"]).select(
        pl.when(new).then(f).forward_fill().alias("run"),
        (pl.col("flags") + 4 * (~new & (rk != rk.shift(1))).cast(pl.Int8)).alias("code"),
    ).filter(pl.col("code") != 0).sink_parquet(hits, engine="streaming")
    findings = _findings(pl, hits, at["by_key"])
    total = files.select(pl.col("size").sum()).collect(engine="streaming").item()
    pos, csum = pl.col("pos"), pl.col("csum")
    pl.scan_parquet(at["by_key"]).with_row_index("pos").with_columns(
        pos.cast(pl.Int64), (pl.col("size").cum_sum() - pl.col("size")).alias("csum")
    ).filter(new).select(
        "key",
        "pos",
        "f",
        (pos.shift(-1, fill_value=listed) - pos).alias("files"),
        (csum.shift(-1, fill_value=total) - csum).alias("bytes"),
    ).sort("f").sink_parquet(at["runs"], engine="streaming")
    folders = pl.scan_parquet(at["runs"]).select(k.str.contains("/", literal=True).sum())
    return [folders.collect(engine="streaming").item(), findings]


FINDINGS = {"dotted": 1, "dropped": 2, "split": 4}  # handover.FINDING_BITS


def _findings(pl, hits: str, by_key: str) -> dict[str, list]:
    """For each finding, how many samples have it and the keys of the first ``EXAMPLES``."""
    import numpy as np

    count = dict.fromkeys(FINDINGS, 0)
    last = dict.fromkeys(FINDINGS, -1)
    least = {kind: np.empty(0, dtype=np.int64) for kind in FINDINGS}
    for batch in _batches(hits, "run", "code"):
        run = batch.column(0).to_numpy().astype(np.int64)
        code = batch.column(1).to_numpy()
        for kind, bit in FINDINGS.items():
            runs = run[(code & bit) != 0]
            if len(runs):  # each sample counted at its first row with the finding
                first = np.flatnonzero(np.diff(runs, prepend=last[kind]) != 0)
                count[kind] += len(first)
                last[kind] = int(runs[-1])
                least[kind] = np.unique(np.concatenate([least[kind], runs[first]]))[:EXAMPLES]
    wanted = sorted({int(f) for kind in least for f in least[kind]})
    keys = dict(
        pl.scan_parquet(by_key)
        .filter(pl.col("f").is_in(wanted))
        .select("f", "key")
        .collect()
        .rows()
    )
    return {
        kind: [count[kind], [keys[int(f)] for f in least[kind]]] for kind in FINDINGS if count[kind]
    }


def _polars_runs_sums(pl, runs: str) -> list[int]:
    rank = pl.col("i").cast(pl.Int64) + 1
    return list(
        pl.scan_parquet(runs)
        .with_row_index("i")
        .select(
            pl.len(),
            (((rank * pl.col("pos")) % P).sum() % P).alias("by_pos"),
            (((rank * pl.col("key").str.len_bytes().cast(pl.Int64)) % P).sum() % P).alias("by_key"),
        )
        .collect(engine="streaming")
        .row(0)
    )


def _polars_layout(pl, by_key: str, laid: str) -> None:
    """The files laid out run after run: sorted by their sample's first file, then their own."""
    k, f = pl.col("key"), pl.col("f")
    first = pl.when(k.ne_missing(k.shift(1))).then(f).forward_fill().alias("first")
    pl.scan_parquet(by_key).select("f", "size", first).sort("first", "f").select(
        "f", "size"
    ).sink_parquet(laid, engine="streaming")


def _polars_read_out(pl, folder: str, laid: str, runs: str, files: str, count: int):
    """The columns Python takes, written to files ``CHUNK`` ints at a time: the files by sample,
    where each sample's files start, each sample's bytes, each file's size."""
    import numpy as np

    narrow = "int32" if count < 1 << 31 else "int64"
    least, most = (
        pl.scan_parquet(files)
        .select(pl.col("size").min().alias("least"), pl.col("size").max().alias("most"))
        .collect(engine="streaming")
        .row(0)
    )
    fits = "int32" if -(1 << 31) <= least and most < 1 << 31 else "int64"
    spooled = []
    for source, column, kind in (
        (laid, "f", narrow),
        (runs, "files", "int64"),
        (runs, "bytes", "int64"),
        (files, "size", fits),
    ):
        path = os.path.join(folder, f"{column}.{kind}")
        before = 0
        with open(path, "wb") as out:
            for batch in _batches(source, column):
                values = batch.column(0).to_numpy().astype(kind)
                if column == "files":  # lengths → starts (and the end, after the last)
                    ends = np.cumsum(values, dtype=np.int64) + before
                    values, before = ends - values, int(ends[-1]) if len(ends) else before
                values.tofile(out)
            if column == "files":
                np.array([before], dtype=np.int64).tofile(out)
        spooled.append((path, kind))
    return spooled


def _batches(path: str, *columns: str):
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).iter_batches(batch_size=CHUNK, columns=list(columns))


def _spooled(path: str, kind: str):
    import numpy as np

    values = np.memmap(path, dtype=kind, mode="r")
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


# ---- the rounds ------------------------------------------------------------------------------

CHILDREN: dict[str, Callable[[str, str], None]] = {"duckdb": duckdb_child, "polars": polars_child}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("inventory", help="a Parquet inventory of bench_plan.py (imagenet shape)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--engines", default="duckdb,polars")
    parser.add_argument("--other-python", default=sys.executable, help="a Python with polars")
    parser.add_argument("--tmp-dir", default=tempfile.gettempdir())
    parser.add_argument("--child", choices=CHILDREN, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        CHILDREN[args.child](args.inventory, args.tmp_dir)
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
            seconds, rss, stdout = timed(cmd, env)
            found[engine].append({**json.loads(stdout), "wall": seconds, "peak": rss})
            print(f"{engine}: {seconds:.1f} s, {rss:,.0f} MiB", file=sys.stderr, flush=True)
    answers = {json.dumps(r["answers"], sort_keys=True) for runs in found.values() for r in runs}
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
            shown = ", ".join("—" if t is None else f"{t:.1f}" for t in times)
            cells.append(f"{shown} | {peak:,.0f}")
        print(f"{statement} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
