"""Megatron-Energon's metadata of a dataset (``--index energon``), made from its sample index
with no shard read again — what ``energon prepare`` writes after reading every byte: a
``<shard>.tar.idx`` beside each tar (where each sample starts, then where the last ends, as
little-endian 64-bit numbers) and ``.nv-meta/`` with ``.info.json`` (the shards and their
sample counts), ``split.yaml`` (the split parts ``--energon-split`` says), ``dataset.yaml`` (a
``CrudeWebdataset``, to replace with a sample type), ``index.sqlite`` (each sample's shard,
offset and size, and each member's, by key) and ``index.uuid``.

A sample is Energon's: consecutive members of a tar whose names agree up to the first dot of
their base name (``split_name_re`` there), members named ``__…__`` and names without a dot
left out — as its reader groups them, which is how WebDataset groups them too."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import DataError, IshardError, WriteError
from ..formats.indexes import (
    ENERGON_DATASET,
    ENERGON_INFO,
    ENERGON_SPLIT,
    ENERGON_SQLITE,
    ENERGON_UUID,
    split_parts,
    tar_index_name,
)
from ..planning.engine.connection import sql_text
from ..store import Location
from ..store.sinks import put_local_file

ENERGON_VERSION = "7.4.1"  # the release whose files these are


@dataclass(frozen=True)
class EnergonDataset:
    """What Energon's files are made for: the dataset's shards in the manifest's order, and
    the recorded ``--energon-split``."""

    shards: Sequence[str]
    split: str = "train"


NAME = r"^((?:.*/|)[^.]+)[.]([^/]*)$"  # Energon's split_name_re: the sample key, the part
META = r"^__[^/]*__($|/)"  # Energon's skip_meta_re, matched at the start
BATCH = 65_536  # rows fetched from the engine at a time
BLOCK = 512

# Energon's tables and indexes, as its SqliteIndexWriter makes them
TABLES = (
    (
        "CREATE TABLE IF NOT EXISTS samples (\n"
        "    tar_file_id INTEGER NOT NULL,\n"
        "    sample_key TEXT NOT NULL UNIQUE,\n"
        "    sample_index INTEGER NOT NULL,\n"
        "    byte_offset INTEGER,\n"
        "    byte_size INTEGER\n"
        ")"
    ),
    (
        "CREATE TABLE IF NOT EXISTS sample_parts (\n"
        "    tar_file_id INTEGER,\n"
        "    sample_index INTEGER,\n"
        "    part_name TEXT,\n"
        "    content_byte_offset INTEGER,\n"
        "    content_byte_size INTEGER\n"
        ")"
    ),
)
SQL_INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_samples_by_tar_and_idx ON samples(tar_file_id, sample_index)",
    (
        "CREATE INDEX IF NOT EXISTS idx_sample_parts_seq ON sample_parts(tar_file_id, sample_index, "
        "content_byte_offset)"
    ),
    (
        "CREATE INDEX IF NOT EXISTS idx_sample_parts_full ON sample_parts(tar_file_id, sample_index, "
        "part_name, content_byte_offset, content_byte_size)"
    ),
)


def energon_files(con: Any, index: str, dataset: EnergonDataset, folder: str) -> list[str]:
    """Write Energon's files for the ``.tar`` shards of ``dataset`` (in the manifest's order)
    into ``folder``, from the sample index ``index`` (a Parquet file on this machine) through
    the column engine ``con``; their names, relative to DST (``<shard>.tar.idx``,
    ``.nv-meta/…``), each written under the same name in ``folder``.

    Raises:
        DataError: two samples have one Energon key, which its index cannot hold.
        UsageError: a split by folders of a shard in none.
    """
    tars = [s for s in dataset.shards if s.endswith(".tar")]
    parts = split_parts(tars, dataset.split)
    con.execute(f"SET threads = {os.cpu_count() or 1}")  # what it makes does not hang on them
    _members(con, index, tars)
    written = [*_tar_indexes(con, tars, folder), *_sqlite(con, folder)]
    counts = dict(
        con.execute("SELECT shard, count(*) FROM energon_samples GROUP BY shard").fetchall()
    )
    files = {
        ENERGON_INFO: orjson.dumps(
            {
                "energon_version": ENERGON_VERSION,
                "shard_counts": {s: counts.get(s, 0) for s in tars},
            },
            option=orjson.OPT_INDENT_2,
        ),
        ENERGON_SPLIT: orjson.dumps(  # JSON is YAML: Energon reads it as it reads its own
            {"split_parts": parts, "exclude": []},
            option=orjson.OPT_INDENT_2,
        ),
        ENERGON_DATASET: b"__module__: megatron.energon\n__class__: CrudeWebdataset\n",
        ENERGON_UUID: str(_dataset_uuid(con)).encode(),
    }
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as out:
            out.write(data)
        written.append(name)
    for table in ("energon_members", "energon_samples", "energon_tars", "energon_given"):
        con.execute(f"DROP TABLE {table}")
    con.execute("SET threads = 1")  # as the sample index's engine goes on
    return written


def _members(con: Any, index: str, tars: Sequence[str]) -> None:
    """The index's members of the tars as Energon sees them (``energon_members``: each one's
    sample key, part and sample number in its tar) and its samples (``energon_samples``: key,
    offset and size, the last ending where the tar's last member ends)."""
    source = f"read_parquet({sql_text(index)})"
    con.execute("CREATE OR REPLACE TEMP TABLE energon_given (shard VARCHAR, id INTEGER)")
    con.executemany("INSERT INTO energon_given VALUES (?, ?)", [(s, i) for i, s in enumerate(tars)])
    con.execute(  # where each tar's last member ends, kept or not: where Energon's reader stops
        "CREATE OR REPLACE TEMP TABLE energon_tars AS "
        "SELECT g.shard, g.id, coalesce(e.tar_end, 0) AS tar_end FROM energon_given g LEFT JOIN ("
        f"  SELECT shard, max(data_offset + (size + {BLOCK - 1}) // {BLOCK} * {BLOCK}) AS tar_end"
        f"  FROM {source} GROUP BY shard) e ON g.shard = e.shard"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE energon_members AS "
        "WITH kept AS ("
        f"  SELECT t.id, i.shard, i.header_offset, i.data_offset, i.size, "
        f"    regexp_extract(i.member, '{NAME}', 1) AS key, "
        f"    regexp_extract(i.member, '{NAME}', 2) AS part "
        f"  FROM {source} i JOIN energon_tars t ON i.shard = t.shard "
        f"  WHERE regexp_matches(i.member, '{NAME}') AND NOT regexp_matches(i.member, '{META}')"
        "), marked AS ("
        "  SELECT *, CASE WHEN key IS DISTINCT FROM "
        "    lag(key) OVER (PARTITION BY id ORDER BY header_offset) THEN 1 ELSE 0 END AS first "
        "  FROM kept"
        ") SELECT *, sum(first) OVER (PARTITION BY id ORDER BY header_offset "
        "  ROWS UNBOUNDED PRECEDING) - 1 AS sample FROM marked"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE energon_samples AS "
        "WITH starts AS ("
        "  SELECT id, shard, sample, any_value(key) AS key, min(header_offset) AS start "
        "  FROM energon_members GROUP BY id, shard, sample"
        ") SELECT s.id, s.shard, s.sample, s.key, s.start, "
        "  coalesce(lead(s.start) OVER (PARTITION BY s.id ORDER BY s.sample), t.tar_end) "
        "  - s.start AS size "
        "FROM starts s JOIN energon_tars t ON s.id = t.id"
    )


def _tar_indexes(con: Any, tars: Sequence[str], folder: str) -> list[str]:
    """Each tar's ``.tar.idx``: its samples' starts, then where its last member ends."""
    import numpy as np

    found = con.execute("SELECT id, start FROM energon_samples ORDER BY id, sample").fetchnumpy()
    ids, starts = np.asarray(found["id"]), np.asarray(found["start"], dtype="<u8")
    ends = dict(con.execute("SELECT id, tar_end FROM energon_tars").fetchall())
    bounds = np.searchsorted(ids, np.arange(len(tars) + 1))
    names = []
    for number, shard in enumerate(tars):
        mine = starts[bounds[number] : bounds[number + 1]]
        name = tar_index_name(shard)
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(mine.tobytes() + np.array([ends[number]], dtype="<u8").tobytes())
        names.append(name)
    return names


def _sqlite(con: Any, folder: str) -> list[str]:
    """``.nv-meta/index.sqlite``: Energon's tables, filled from the engine a few shards at a
    time (no journal: the file is this run's own until it is put in DST whole)."""
    path = os.path.join(folder, ENERGON_SQLITE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        for table in TABLES:
            db.execute(table)
        runs = _runs(con)
        _copy(
            con,
            db,
            runs,
            "SELECT id, key, sample, start, size FROM energon_samples WHERE id >= ? AND id < ? "
            "ORDER BY id, sample",
            "INSERT INTO samples (tar_file_id, sample_key, sample_index, byte_offset, byte_size) "
            "VALUES (?, ?, ?, ?, ?)",
        )
        _copy(
            con,
            db,
            runs,
            "SELECT id, sample, part, data_offset, size FROM energon_members "
            "WHERE id >= ? AND id < ? ORDER BY id, header_offset",
            "INSERT INTO sample_parts (tar_file_id, sample_index, part_name, content_byte_offset, "
            "content_byte_size) VALUES (?, ?, ?, ?, ?)",
        )
        for index in SQL_INDEXES:
            db.execute(index)
        db.commit()
    finally:
        db.close()
    return [ENERGON_SQLITE]


def _runs(con: Any) -> list[tuple[int, int]]:
    """The tars' numbers cut into runs ``[first, end)`` of about ``BATCH`` members (one tar's
    at least): what ``_copy`` fetches at a time."""
    counts = con.execute("SELECT id, count(*) FROM energon_members GROUP BY id ORDER BY id")
    runs: list[tuple[int, int]] = []
    first, held = None, 0
    for shard, rows in counts.fetchall():
        first = shard if first is None else first
        held += rows
        if held >= BATCH:
            runs.append((first, shard + 1))
            first, held = None, 0
    if first is not None:
        runs.append((first, shard + 1))
    return runs


def _copy(
    con: Any, db: sqlite3.Connection, runs: list[tuple[int, int]], select: str, insert: str
) -> None:
    """The rows of ``select`` (of the tars ``?`` to ``?``) into ``db`` by ``insert``, a run of
    tars at a time, fetched as columns."""
    for first, end in runs:
        columns = con.execute(select, [first, end]).fetchnumpy().values()
        try:
            db.executemany(insert, zip(*(c.tolist() for c in columns)))
        except sqlite3.IntegrityError:
            raise _twice(con) from None


def _twice(con: Any) -> DataError:
    key, first, second = con.execute(
        "SELECT key, min(shard), max(shard) FROM energon_samples GROUP BY key "
        "HAVING count(*) > 1 ORDER BY key LIMIT 1"
    ).fetchall()[0]
    return DataError(
        f"two samples have the Energon key {key!r} (in {first!r} and {second!r}), which "
        "Energon's index cannot hold — give every sample its own key (--member-names sample "
        "names members by the sample key), or leave out --index energon"
    )


def _dataset_uuid(con: Any) -> uuid.UUID:
    """The dataset's ``index.uuid``: a UUID of what the index holds, so the same dataset gets
    the same one (Energon draws a new one when its index changed)."""
    ((count, summed),) = con.execute(
        "SELECT count(*), sum(hash(shard, key, start, size)::HUGEINT) FROM energon_samples"
    ).fetchall()
    digest = hashlib.sha256(f"{count} {summed}".encode()).digest()
    return uuid.UUID(bytes=digest[:16], version=4)


class EnergonFiles:
    """Energon's files of a dataset, made in a folder of their own (``make``, before the
    sample index is published: a dataset Energon cannot index fails before anything is
    put) and put in DST after it (``put``, the ``.tar.idx`` files first); the folder removed
    by ``close``."""

    def __init__(self, con: Any, index: str, dataset: EnergonDataset, folder: str) -> None:
        self._work = tempfile.mkdtemp(prefix="energon-", dir=folder)
        try:
            self._names = energon_files(con, index, dataset, self._work)
        except BaseException:
            self.close()
            raise

    def put(self, dest: Location, **upload: Any) -> None:
        """Each file in DST under its name, atomically, as the sample index is put."""
        for name in self._names:
            try:
                put_local_file(dest, name, os.path.join(self._work, name), **upload)
            except OSError as err:
                if isinstance(err, IshardError):
                    raise
                raise WriteError(
                    f"cannot write Energon's {name!r} in {dest.url!r}: {err.strerror or err} — "
                    "fix the destination, then run again with --resume"
                ) from None

    def close(self) -> None:
        shutil.rmtree(self._work, ignore_errors=True)
