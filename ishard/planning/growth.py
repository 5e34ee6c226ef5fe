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

from ..errors import DataError
from ..model import EXAMPLES_KEPT, Growth
from ..names import quoted, shown
from ..sizes import counted
from .engine import MEMORY_LIMIT, connect, sql_text
from .table import SampleTable

# the sample index's columns, in order, with their SQL types
INDEX_COLUMNS = (
    ("key", "VARCHAR"),
    ("shard", "VARCHAR"),
    ("member", "VARCHAR"),
    ("source", "VARCHAR"),
    ("size", "BIGINT"),
    ("mtime", "BIGINT"),
)
SAMPLES_AT_ONCE = 1 << 17  # samples put into the engine at a time


@dataclass(frozen=True)
class Held:
    """What a growing destination holds: its sample index (a Parquet file on this machine),
    the shards its manifest lists (rows of any other shard are not the dataset's), the next
    unused name of each shard template, and what this run may do: ``append`` (new samples
    only) or ``update`` (changed and removed samples too)."""

    index: str
    shards: tuple[str, ...]
    numbering: tuple[int, ...]
    mode: str


@contextmanager
def private_engine(
    tmp_dir: str | None, memory_limit: int = MEMORY_LIMIT
) -> Iterator[tuple[Any, str]]:
    """A column engine of its own with a private folder in ``tmp_dir`` (its spills and any
    file made with it): the connection and the folder, both gone at the end."""
    folder = tempfile.mkdtemp(prefix="ishard-", dir=tmp_dir)
    con = None
    try:
        con = connect(folder, memory_limit)
        yield con, folder
    finally:
        if con is not None:
            con.close()
        shutil.rmtree(folder, ignore_errors=True)


def create_index_table(con: Any, name: str, extra: Sequence[tuple[str, str]] = ()) -> None:
    """An empty table of the index's columns (``extra`` ones first)."""
    columns = [*extra, *INDEX_COLUMNS]
    con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in columns)})")


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
                k: np.array([shown(v) for v in c], dtype=object) if c.dtype == object else c
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
        create_index_table(con, "planned", (("grp", "INTEGER"), ("sample", "BIGINT")))
        for grp, table in enumerate(tables):
            for first in range(0, len(table), SAMPLES_AT_ONCE):
                at = range(first, min(first + SAMPLES_AT_ONCE, len(table)))
                columns = table.member_columns(at)  # a member's name follows from key, source
                del columns["key"], columns["member"]  # the key: from the sample's own
                keys = np.array(table.keys.take(at), dtype=object)
                starts: Any = np.asarray(table.starts[first : at.stop + 1], dtype=np.int64)
                each = starts[1:] - starts[:-1]
                rows = {
                    "grp": np.full(len(columns["size"]), grp, np.int32),
                    "sample": np.repeat(np.arange(first, at.stop, dtype=np.int64), each),
                    "key": np.repeat(keys, each),
                    **columns,
                }
                insert_rows(con, "planned", rows)
        shard_table(con, "listed_shards", held.shards)
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
    )
    return chosen, growth


# Each key's verdict: 'new' (planned, not held), 'removed' (held, not planned), 'changed'
# (both, but some file differs or is on one side only) or 'held'; with its group and sample
# where planned, and its shard where held.
_VERDICTS = """
CREATE TEMP TABLE verdicts AS
WITH files AS (
    SELECT coalesce(p.key, h.key) AS key,
           p.key IS NULL OR h.key IS NULL OR p.size <> h.size OR p.mtime <> h.mtime
               AS differs
    FROM planned p FULL OUTER JOIN held h ON p.key = h.key AND p.source = h.source
),
keyed AS (SELECT key, bool_or(differs) AS differs FROM files GROUP BY key),
planned_keys AS (SELECT DISTINCT grp, sample, key FROM planned),
held_keys AS (SELECT key, min(shard) AS shard FROM held GROUP BY key)
SELECT coalesce(p.key, h.key) AS key, p.grp, p.sample, h.shard,
       CASE WHEN h.key IS NULL THEN 'new'
            WHEN p.key IS NULL THEN 'removed'
            WHEN k.differs THEN 'changed'
            ELSE 'held' END AS verdict
FROM planned_keys p FULL OUTER JOIN held_keys h ON p.key = h.key
JOIN keyed k ON k.key = coalesce(p.key, h.key)
"""


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
