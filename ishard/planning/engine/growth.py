"""A growing dataset's plan: the planned samples compared with what the destination's sample
index says it holds (``--append``, ``--update``), in the column engine — the samples to
write, and the shards whose samples changed or went.

A sample is held when the index has its key with exactly its files: the same source names
(whose member names follow from them and the key, under the dataset's options), with the
same sizes and mtimes (whole seconds: rsync's quick
check; a file rewritten within the same second at the same size is not seen)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ...errors import DataError
from ...model import EXAMPLES_KEPT, Growth
from ...names import quoted, shown
from ...rules import Rule
from ...sizes import counted
from ..namecolumn import Names
from ..table import SampleTable, int_view
from . import MEMORY_LIMIT
from .connection import connect, sql_text

# the sample index's columns, in order, with their SQL types
INDEX_COLUMNS = (
    ("key", "VARCHAR"),
    ("shard", "VARCHAR"),
    ("member", "VARCHAR"),
    ("source", "VARCHAR"),
    ("size", "BIGINT"),
    ("mtime", "BIGINT"),
    ("header_offset", "BIGINT"),  # where the member's header starts: in the shard, or in
    ("data_offset", "BIGINT"),  # the tar stream inside a compressed one; then its bytes
    ("frame_offset", "BIGINT"),  # a seekable shard's frames holding the member's sample:
    ("frame_size", "BIGINT"),  # where they start in the shard and how many bytes they take
    ("xxh3_64", "UBIGINT"),  # the member's bytes' xxh3-64, taken as they were written
    ("source_md5", "VARCHAR"),  # copied in the store (--compose): its MD5 by the source
)
NAMES_AT_ONCE = 1 << 20  # names (or keys) put into the engine in one blob
SAMPLES_LOADED = 1 << 20  # samples whose files are put into the engine at a time


@dataclass(frozen=True)
class Held:
    """What a growing destination holds: its sample index (a Parquet file on this machine),
    the shards its manifest lists with the samples and files it says each holds (the index
    must agree), the next unused name of each shard template, and what this run may do:
    ``append`` (new samples only) or ``update`` (changed and removed samples too, but no
    more than ``max_remove`` percent of the samples removed)."""

    index: str
    shards: tuple[str, ...]
    numbering: tuple[int, ...]
    mode: str
    counts: tuple[tuple[int, int], ...] = ()  # per listed shard: (samples, files)
    max_remove: int = 100


@contextmanager
def private_engine(
    tmp_dir: str | None, memory_limit: int = MEMORY_LIMIT, threads: int | None = None
) -> Iterator[tuple[Any, str]]:
    """A column engine of its own with a private folder in ``tmp_dir`` (its spills and any
    file made with it): the connection and the folder, both gone at the end."""
    folder = tempfile.mkdtemp(prefix="ishard-", dir=tmp_dir)
    con = None
    try:
        con = connect(folder, memory_limit, threads)
        yield con, folder
    finally:
        if con is not None:
            con.close()
        shutil.rmtree(folder, ignore_errors=True)


def create_index_table(con: Any, name: str) -> None:
    """An empty table of the index's columns."""
    con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in INDEX_COLUMNS)})")


def insert_rows(con: Any, table: str, columns: Mapping[str, Any]) -> None:
    """Add rows (``columns``: numpy arrays by column name) to ``table``; names that are not
    UTF-8 (a local file's undecodable bytes) kept with ``\\xNN`` escapes, as the manifest
    shows them."""
    import duckdb

    names = ", ".join(columns)
    try:
        try:
            con.register("batch", dict(columns))
            con.execute(f"INSERT INTO {table} BY NAME SELECT {names} FROM batch")
        except duckdb.InvalidInputException:  # a surrogate escape in a name
            import numpy as np

            escaped = {
                k: np.array([v if v is None else shown(v) for v in c], dtype=object)
                if c.dtype == object
                else c
                for k, c in columns.items()
            }
            con.register("batch", escaped)
            con.execute(f"INSERT INTO {table} BY NAME SELECT {names} FROM batch")
    finally:
        con.unregister("batch")


def shard_table(con: Any, name: str, shards: Sequence[str]) -> None:
    """A temporary table ``name`` of one column, ``shard``: these shard names."""
    con.execute(f"CREATE TEMP TABLE {name} (shard VARCHAR)")
    if shards:
        import numpy as np

        insert_rows(con, name, {"shard": np.array(list(shards), dtype=object)})


def compare(
    tables: Sequence[SampleTable],
    held: Held,
    tmp_dir: str | None,
    memory_limit: int,
) -> tuple[list[list[int]], Growth]:
    """Which samples of ``tables`` (the planned groups) to write, per table in listing order,
    and what the comparison found.

    ``append``: the samples the index does not hold; a sample held with other files, or one
    held and no longer planned, is a ``DataError`` that counts and names them. ``update``:
    those samples, the changed ones, and every held sample of a shard that holds a changed
    or removed one (that shard is rewritten: ``Growth.replaced``).
    """
    import numpy as np

    with private_engine(tmp_dir, memory_limit) as (con, _folder):
        _load_planned(con, tables)
        shard_table(con, "listed_shards", held.shards)
        check_index_rows(con, held)
        con.execute(
            f"CREATE TEMP TABLE held AS SELECT * FROM read_parquet({sql_text(held.index)}) "
            "WHERE shard IN (SELECT shard FROM listed_shards)"
        )
        con.execute(_VERDICTS)
        counts = dict(
            con.execute("SELECT verdict, count(*) FROM verdicts GROUP BY verdict").fetchall()
        )
        held_count = int(con.execute("SELECT count(DISTINCT key) FROM held").fetchone()[0])
        changed, removed = counts.get("changed", 0), counts.get("removed", 0)
        if held.mode == "append" and (changed or removed):
            raise DataError(_refusal(con, changed, removed))
        check_removal(removed, held_count, held.max_remove)
        replaced = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT shard FROM verdicts WHERE verdict IN ('changed', 'removed') "
                "ORDER BY shard"
            ).fetchall()
        ]
        shard_table(con, "replaced", replaced)
        wanted = con.execute(
            "SELECT grp, sample FROM verdicts WHERE grp IS NOT NULL AND (verdict <> 'held' "
            "OR shard IN (SELECT shard FROM replaced)) ORDER BY grp, sample"
        ).fetchnumpy()
        kept_in_replaced = int(
            con.execute(
                "SELECT count(*) FROM verdicts WHERE verdict = 'held' "
                "AND shard IN (SELECT shard FROM replaced)"
            ).fetchone()[0]
        )
    groups, samples = wanted["grp"], wanted["sample"]
    chosen = [samples[groups == g].astype(np.int64).tolist() for g in range(len(tables))]
    growth = Growth(
        mode=held.mode,
        held=held_count,
        added=counts.get("new", 0),
        changed=changed,
        removed=removed,
        moved=kept_in_replaced,
        replaced=tuple(replaced),
        listed=len(held.shards),
    )
    return chosen, growth


def _load_planned(con: Any, tables: Sequence[SampleTable]) -> None:
    """The planned samples as tables: ``files`` (file, and its two hashes, ``FILE_HASHES``)
    of the listing, ``members`` (grp, sample, file) and ``keys`` (grp, sample, key); the
    listing's names and the samples' keys go in as blobs of names that the engine splits
    (no Python string a name), the rest as int columns."""
    import numpy as np

    files = tables[0].files  # every group's samples are of one listing
    con.execute("CREATE TEMP TABLE files (file BIGINT, h0 UBIGINT, h1 UBIGINT)")
    con.execute("CREATE TEMP TABLE keys (grp INTEGER, sample BIGINT, key VARCHAR)")
    con.execute("CREATE TEMP TABLE members (grp INTEGER, sample BIGINT, file BIGINT)")
    sizes, mtimes = int_view(files.sizes), int_view(files.mtimes)
    for first, text in _blobs(files.names):
        stop = first + text.count("\n") + 1
        con.register(
            "attributes",
            {
                "file": np.arange(first, stop, dtype=np.int64),
                "size": np.asarray(sizes[first:stop], dtype=np.int64),
                "mtime": np.asarray(mtimes[first:stop], dtype=np.int64),
            },
        )
        con.execute(
            f"INSERT INTO files SELECT file, {', '.join(FILE_HASHES)} FROM "
            f"({_SPLIT.format(name='source')}) JOIN attributes USING (file)",
            [first, text],
        )
        con.unregister("attributes")
    for grp, table in enumerate(tables):
        for first, text in _blobs(table.keys):
            con.execute(
                f"INSERT INTO keys SELECT {grp}, file, key FROM ({_SPLIT.format(name='key')})",
                [first, text],
            )
        starts, members = int_view(table.starts), int_view(table.members)
        for s0 in range(0, len(table), SAMPLES_LOADED):  # a window of samples at a time
            s1 = min(s0 + SAMPLES_LOADED, len(table))
            runs = np.asarray(starts[s0 : s1 + 1], dtype=np.int64)
            rows = np.asarray(members[int(runs[0]) : int(runs[-1])], dtype=np.int64)
            con.register(
                "batch",
                {
                    "grp": np.full(len(rows), grp, np.int32),
                    "sample": np.repeat(np.arange(s0, s1, dtype=np.int64), np.diff(runs)),
                    "file": rows,
                },
            )
            con.execute("INSERT INTO members SELECT grp, sample, file FROM batch")
            con.unregister("batch")


# the rows of a blob of names split: ``file`` (its row, from the first parameter on) and
# ``{name}``, from the second parameter, the blob
_SPLIT = (
    "SELECT ? + i - 1 AS file, n AS {name} FROM (SELECT generate_subscripts(l, 1) AS i, "
    "unnest(l) AS n FROM (SELECT string_split(?, chr(10)) AS l))"
)


def _blobs(names: Names) -> Iterator[tuple[int, str]]:
    """``names`` a blob of ``NAMES_AT_ONCE`` at a time, joined by newlines, with the row of
    its first; names that are not UTF-8 with ``\\xNN`` escapes, as the manifest shows them."""
    for first in range(0, len(names), NAMES_AT_ONCE):
        raw = names.joined(first, min(first + NAMES_AT_ONCE, len(names)))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = "\n".join(shown(n) for n in raw.decode("utf-8", "surrogateescape").split("\n"))
        yield first, text


FILE_HASHES = (  # each file's name, size and mtime, hashed twice
    "hash(source, size, mtime)",
    "hash(mtime, size, source, 7)",
)
# A sample's files in two 64-bit sums over them (the order of its files does not matter),
# and how many there are: two samples with the same key, the same count and both sums hold
# the same files, but for a chance of about 2^-100 per changed sample.
SAMPLE_FILES = ", ".join(f"sum({h}) AS h{i}" for i, h in enumerate(FILE_HASHES))
SAMPLE_FILES += ", count(*) AS n"


def verdict(planned: frozenset | None, held: frozenset | None) -> str:
    """A sample's verdict from its files (``(source, size, mtime)`` each) as planned and as
    held (None: not there): 'new' (planned, not held), 'removed' (held, not planned),
    'changed' (both, with other files: one added, gone, or of another size or mtime) or
    'held'."""
    if held is None:
        return "new"
    if planned is None:
        return "removed"
    return "held" if planned == held else "changed"


# In SQL over a key's rows as planned and as held (``{planned}``, ``{held}``: its ``key``,
# NULL where it is not there, and its files' ``SAMPLE_FILES``)
VERDICT = Rule(
    "a sample's growth verdict",
    verdict,
    "CASE WHEN {held}.key IS NULL THEN 'new' WHEN {planned}.key IS NULL THEN 'removed' "
    "WHEN {planned}.h0 <> {held}.h0 OR {planned}.h1 <> {held}.h1 OR {planned}.n <> {held}.n "
    "THEN 'changed' ELSE 'held' END",
)
# Each key's verdict, with its group and sample where planned, and its shard where held.
_VERDICTS = f"""
CREATE TEMP TABLE verdicts AS
WITH planned_samples AS (
    SELECT grp, sample, sum(h0) AS h0, sum(h1) AS h1, count(*) AS n
    FROM members JOIN files USING (file) GROUP BY grp, sample
),
p AS (SELECT * FROM planned_samples JOIN keys USING (grp, sample)),
h AS (SELECT key, min(shard) AS shard, {SAMPLE_FILES} FROM held GROUP BY key)
SELECT coalesce(p.key, h.key) AS key, p.grp, p.sample, h.shard,
       {VERDICT.over(planned="p", held="h")} AS verdict
FROM p FULL OUTER JOIN h ON p.key = h.key
"""


def check_new_names(names: Sequence[str], held: Held) -> None:
    """A growing dataset's new shards are named on from the manifest's numbering: none may be
    a name the manifest lists (a numbering behind its shards would write over one).

    Raises:
        DataError: naming the numbering and the shard it would write over.
    """
    listed = set(held.shards)
    taken = next((n for n in names if n in listed), None)
    if taken is None:
        return
    raise DataError(
        f"manifest.json's ishard.numbering is {list(held.numbering)}, which names this run's "
        f"new shard {quoted(taken)}, but manifest.json lists a shard of that name already — "
        "run ishard verify on the destination, or re-shard it with --overwrite"
    )


def check_removal(removed: int, held: int, max_remove: int) -> None:
    """An ``--update`` removes at most ``max_remove`` percent of the dataset's samples (those
    that go; changed ones are written again): more is refused, as an empty or half-mounted
    source would ask (rsync's ``--max-delete``)."""
    if removed * 100 <= held * max_remove:
        return
    share = removed * 100 / held
    needed = -(-removed * 100 // held)  # the least whole percent that allows it
    raise DataError(
        f"--update would remove {removed:,} of the dataset's {held:,} samples ({share:.3g} %), "
        f"more than --max-remove {max_remove} % — check the source is complete, or give "
        f"--max-remove {needed} / all"
    )


def check_index_rows(con: Any, held: Held) -> None:
    """The sample index's rows held against the manifest before growth acts on them: every
    row's shard one the manifest lists, each listed shard with the samples (keys) and files
    (rows) the manifest says, no sample in two shards — two aggregate queries.

    Raises:
        DataError: naming ``samples.parquet``, what it says and what the manifest says.
    """
    import numpy as np

    source = f"read_parquet({sql_text(held.index)})"
    counts = np.array(held.counts or [(0, 0)] * len(held.shards), dtype=np.int64).reshape(-1, 2)
    con.register(
        "said",
        {
            "shard": np.array(list(held.shards), dtype=object),
            "samples": counts[:, 0],
            "files": counts[:, 1],
        },
    )
    try:
        found = con.execute(
            "SELECT coalesce(f.shard, s.shard), f.files IS NULL, s.files IS NULL, "
            "coalesce(f.samples, 0), coalesce(f.files, 0), s.samples, s.files "
            "FROM (SELECT shard, count(DISTINCT key) AS samples, count(*) AS files "
            f"FROM {source} GROUP BY shard) f FULL OUTER JOIN said s ON f.shard = s.shard "
            "WHERE f.files IS NULL OR s.files IS NULL OR f.samples <> s.samples "
            "OR f.files <> s.files ORDER BY 3 DESC, 2, 1 LIMIT 1"
        ).fetchall()
    finally:
        con.unregister("said")
    fix = "run ishard verify on the destination, or re-shard it with --overwrite"
    if found:
        shard, no_rows, unlisted, samples, files, said_samples, said_files = found[0]
        if unlisted:
            named = f"shard {quoted(shown(shard))}" if isinstance(shard, str) else "no shard"
            raise DataError(
                f"samples.parquet has rows of {named}, which manifest.json does not list — {fix}"
            )
        held_says = "no rows" if no_rows else f"{counted(samples, 'sample')} in {files} rows"
        raise DataError(
            f"samples.parquet has {held_says} of shard {quoted(shard)}, where manifest.json "
            f"says {counted(said_samples, 'sample')}, {counted(said_files, 'file')} — {fix}"
        )
    keys = int(con.execute(f"SELECT count(DISTINCT key) FROM {source}").fetchone()[0])
    total = int(counts[:, 0].sum())
    if keys != total:
        raise DataError(
            f"samples.parquet holds {counted(keys, 'sample')} (distinct keys), where "
            f"manifest.json's shards hold {total} — {fix}"
        )


def _refusal(con: Any, changed: int, removed: int) -> str:
    """The line ``--append`` refuses changed or removed samples with."""
    parts = []
    for verdict, count, what in (
        ("changed", changed, "changed in the source (a file added, changed or removed)"),
        ("removed", removed, "no longer in the source"),
    ):
        if not count:
            continue
        keys = [
            r[0]
            for r in con.execute(
                "SELECT key FROM verdicts WHERE verdict = ? ORDER BY key LIMIT ?",
                [verdict, EXAMPLES_KEPT],
            ).fetchall()
        ]
        parts.append(
            f"{counted(count, 'sample')} the destination holds {what}, e.g. "
            + ", ".join(quoted(k) for k in keys)
        )
    return (
        "; ".join(parts) + " — --append only adds samples: use --update to rewrite the shards "
        "that hold them, or leave the source as it was"
    )
