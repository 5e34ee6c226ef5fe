"""The sample index, ``DST/samples.parquet``: one row per member of every shard — its sample's
key, its shard, its name in the archive, the source file it came from with that file's size
and mtime, where its header and data start, and for a seekable shard the byte range of its
sample's frames — written from the plan and what the writers reported (no second pass over
the bytes), before the manifest that names it (with its row count, size and checksum).

What ``--append`` and ``--update`` compare a source with, and what any Parquet reader (DuckDB,
pyarrow, polars) can ask which shard holds a sample."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..checksums import digest_of, hasher, split
from ..errors import DataError, IshardError, WriteError
from ..model import ShardResult
from ..planning.growth import (
    INDEX_COLUMNS,
    create_index_table,
    insert_rows,
    private_engine,
    shard_table,
)
from ..planning.table import ShardList
from ..store import Location
from ..store.retry import Retrier
from ..store.sinks import Guard, put_local_file

INDEX_NAME = "samples.parquet"
BATCH_ROWS = 1 << 18  # members put into the engine at a time
COPY_CHUNK = 1 << 20  # bytes of the finished file copied to the destination at a time
INDEX_CHECKSUM = "xxh128"


def load_engine() -> None:
    """Load the column engine the index is written with (about 0.1 s), while the shards are
    written, rather than after them."""
    import duckdb  # noqa: F401
    import numpy  # noqa: F401


def plan_rows(shards: ShardList, results: Sequence[ShardResult]) -> Iterator[dict[str, Any]]:
    """The index rows of every planned shard, in plan order, a batch of about
    ``BATCH_ROWS`` members at a time (a shard is never split); ``results`` are the shards
    as written (or kept), with the offsets their writers reported."""
    import numpy as np

    pending: list[dict[str, Any]] = []
    held = 0
    for index in range(len(shards)):
        table, samples = shards.part(index)
        columns = table.member_columns(samples, shards.rename)
        count = len(columns["key"])
        columns["shard"] = np.full(count, shards.names[index], dtype=object)
        columns.update(_layout_columns(results[index], columns["key"]))
        pending.append(columns)
        held += count
        if held >= BATCH_ROWS:
            yield _joined(pending)
            pending, held = [], 0
    if pending:
        yield _joined(pending)


def _layout_columns(result: ShardResult, keys: Any) -> dict[str, Any]:
    """A shard's offset columns from its writer's report (``ShardResult.offsets``, ``frames``):
    each member's header and data offsets; each member's sample's frames, whose starts are
    reported a sample at a time (samples are runs of one key), the next start ending them."""
    import numpy as np

    count = len(keys)
    if result.offsets is None or len(result.offsets) != 16 * count:
        raise WriteError(
            f"the writer of shard {result.name!r} reported no offsets for its "
            f"{count} members — run again with --resume"
        )
    pairs = np.frombuffer(result.offsets, dtype="<i8").reshape(count, 2)
    columns: dict[str, Any] = {"header_offset": pairs[:, 0], "data_offset": pairs[:, 1]}
    if result.frames is None:
        nothing = np.full(count, None, dtype=object)
        return {**columns, "frame_offset": nothing, "frame_size": nothing}
    starts = np.frombuffer(result.frames, dtype="<i8")
    first = np.ones(count, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    sample = np.cumsum(first) - 1  # each member's sample, by position in the shard
    samples = int(sample[-1]) + 1 if count else 0
    if len(starts) != samples + 1:
        raise WriteError(f"the writer of shard {result.name!r} reported frames of other samples")
    columns["frame_offset"] = starts[sample]
    columns["frame_size"] = starts[sample + 1] - starts[sample]
    return columns


def _joined(parts: list[dict[str, Any]]) -> dict[str, Any]:
    import numpy as np

    return {c: np.concatenate([p[c] for p in parts]) for c, _ in INDEX_COLUMNS}


def write_index(
    dest: Location,
    rows: Iterable[Mapping[str, Any]],
    *,
    earlier: str | None = None,
    dropped: Iterable[str] = (),
    tmp_dir: str | None,
    memory_limit: int,
    retrier: Retrier,
    cleanup: Retrier,
    part_size: int,
    guard: Guard | None = None,
) -> dict:
    """Write ``DST/samples.parquet``: the rows of ``earlier`` (an index file on this machine,
    a growing dataset's), but those of the shards ``dropped``, then ``rows``; return the
    manifest's record of it (name, rows, bytes, checksum)."""
    with private_engine(tmp_dir, memory_limit) as (con, folder):
        create_index_table(con, "samples")
        if earlier is not None:
            shard_table(con, "dropped", list(dropped))
            con.execute(  # by name: an index written before offsets were kept has none
                "INSERT INTO samples BY NAME SELECT * FROM read_parquet(?) "
                "WHERE shard NOT IN (SELECT shard FROM dropped)",
                [earlier],
            )
        for batch in rows:
            insert_rows(con, "samples", batch)
        (count,) = con.execute("SELECT count(*) FROM samples").fetchone()
        path = os.path.join(folder, INDEX_NAME)
        con.execute("SET threads = 1")  # row groups compressed in parallel vary in bytes
        con.execute(
            f"COPY samples TO '{path}' (FORMAT parquet, COMPRESSION zstd, PARQUET_VERSION V2, "
            "ROW_GROUP_SIZE 122880)"
        )
        con.execute("DROP TABLE samples")
        size = os.path.getsize(path)
        with open(path, "rb") as written:
            checksum = digest_of(written, INDEX_CHECKSUM)
        try:
            put_local_file(
                dest,
                INDEX_NAME,
                path,
                retrier=retrier,
                cleanup=cleanup,
                part_size=part_size,
                guard=guard,
            )
        except OSError as err:
            if isinstance(err, IshardError):
                raise
            raise WriteError(
                f"cannot write the sample index {INDEX_NAME!r} in {dest.url!r}: "
                f"{err.strerror or err} — fix the destination, then run again with --resume"
            ) from None
    return {"name": INDEX_NAME, "rows": int(count), "bytes": size, "checksum": checksum}


def recorded_offsets(path: str, shards: Sequence[str]) -> dict[str, tuple[bytes, bytes | None]]:
    """The offsets of ``shards`` as their writers reported them (``ShardResult.offsets``,
    ``frames``), from the index file at ``path``; a shard it has no offsets for is left out."""
    import duckdb
    import numpy as np

    found: dict[str, tuple[bytes, bytes | None]] = {}
    with private_engine(None, 256 << 20) as (con, _):
        shard_table(con, "wanted", list(shards))
        try:
            rows = con.execute(
                "SELECT shard, list(header_offset ORDER BY header_offset), "
                "list(data_offset ORDER BY header_offset), "
                "list(DISTINCT frame_offset ORDER BY frame_offset) "
                "FILTER (WHERE frame_offset IS NOT NULL), "
                "max(frame_offset + frame_size), count(*) - count(data_offset) "
                "FROM read_parquet(?) WHERE shard IN (SELECT shard FROM wanted) GROUP BY shard",
                [path],
            ).fetchall()
        except duckdb.BinderException:  # an index written before offsets were kept
            return found
    for shard, headers, data, frames, end, unknown in rows:
        if unknown:
            continue
        pairs = np.empty((len(headers), 2), dtype="<i8")
        pairs[:, 0], pairs[:, 1] = headers, data
        starts = None if end is None else np.array([*frames, end], dtype="<i8").tobytes()
        found[shard] = (pairs.tobytes(), starts)
    return found


def fetch_index(dest: Location, record: Mapping, folder: str, name: str = INDEX_NAME) -> str:
    """Copy the sample index a manifest names (``record``) from ``DST/name`` into ``folder``,
    checked against the record's size and checksum; its path.

    Raises:
        DataError: it is missing, or not that index.
    """
    path = os.path.join(folder, "held.parquet")
    algorithm, expected = split(record["checksum"])
    digest = hasher(algorithm)
    size = 0
    try:
        with dest.store.open_read(dest.key(name)) as src, open(path, "wb") as out:
            while chunk := src.read(COPY_CHUNK):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
    except FileNotFoundError:
        raise DataError(
            f"{dest.child(name)!r} is missing, but the manifest names a sample index — run "
            "ishard verify on the destination"
        ) from None
    except IshardError:
        raise
    except Exception as err:  # noqa: BLE001 - a store's error, translated once
        raise dest.error(err, "destination") from None
    if size != record["bytes"] or digest.hexdigest() != expected:
        raise DataError(
            f"{dest.child(name)!r} is not the sample index the manifest names (another size "
            "or checksum) — run ishard verify on the destination"
        )
    return path
