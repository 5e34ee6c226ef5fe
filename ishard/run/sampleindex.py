"""The sample index, ``DST/samples.parquet``: one row per member of every shard — its sample's
key, its shard, its name in the archive, the source file it came from with that file's size
and mtime, where its header and data start, and for a seekable shard the byte range of its
sample's frames — written from the plan and what the writers reported (no second pass over
the bytes), before the manifest that names it (with its row count, size and checksum).

What ``--append`` and ``--update`` compare a source with, and what any Parquet reader (DuckDB,
pyarrow, polars) can ask which shard holds a sample."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..checksums import digest_of, hasher, split, tagged
from ..errors import DataError, IshardError, WriteError
from ..model import ShardResult, packed_sums
from ..planning.engine.connection import sql_text
from ..planning.engine.growth import (
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

if TYPE_CHECKING:
    from .energon import EnergonDataset

INDEX_NAME = "samples.parquet"
BATCH_ROWS = 1 << 18  # members put into the engine at a time
COPY_CHUNK = 1 << 20  # bytes of the finished file copied to the destination at a time
INDEX_CHECKSUM = "xxh128"
# Parquet format 2 (delta-encoded offsets and names), zstd at level 1 and no dictionaries: in
# about 60 % of level 3's time with them, 9 % larger at 10M rows (docs/performance.md)
PARQUET_OPTIONS = (
    "FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, PARQUET_VERSION V2, "
    "ROW_GROUP_SIZE 122880, DICTIONARY_SIZE_LIMIT 1"
)


PLAN_COLUMNS = ("key", "shard", "member", "source", "size", "mtime")  # the plan's part of a row
# the writers' part: offsets, frames, each member's checksum
# a member the store copied (``--compose``): the MD5 of its bytes as its source store gave it
# (null for any other member, or where the store gave none): no hash here saw its bytes
COPIED_COLUMN = "source_md5"
LAYOUT_COLUMNS = (
    "header_offset", "data_offset", "frame_offset", "frame_size", "xxh3_64", COPIED_COLUMN
)  # fmt: skip


def plan_rows(shards: ShardList) -> Iterator[dict[str, Any]]:
    """The plan's part of the index rows of every shard (``PLAN_COLUMNS``), in plan order, a
    batch of about ``BATCH_ROWS`` members at a time (a shard is never split)."""
    import numpy as np

    def each_shard() -> Iterator[dict[str, Any]]:
        for index in range(len(shards)):
            table, samples = shards.part(index)
            columns = table.member_columns(samples, shards.rename)
            count = len(columns["key"])
            columns["shard"] = np.full(count, shards.names[index], dtype=object)
            yield columns

    return _batched(each_shard(), PLAN_COLUMNS)


def layout_rows(results: Sequence[ShardResult], counts: Sequence[int]) -> Iterator[dict[str, Any]]:
    """The writers' part of the index rows (``LAYOUT_COLUMNS``) of every shard, in plan order:
    what each reported in ``ShardResult.offsets`` and ``frames`` (``counts``: each shard's
    members), a batch of about ``BATCH_ROWS`` members at a time; without the frame columns
    when no shard has frames (they are then null)."""
    seekable = any(r.frames is not None for r in results)
    return _batched(
        (_layout_columns(r, count, seekable) for r, count in zip(results, counts)),
        LAYOUT_COLUMNS if seekable else (*LAYOUT_COLUMNS[:2], *LAYOUT_COLUMNS[-2:]),
    )


def _batched(parts: Iterable[dict[str, Any]], names: Sequence[str]) -> Iterator[dict[str, Any]]:
    """Columns ``names`` of ``parts`` (a shard's each) joined into batches of about
    ``BATCH_ROWS`` rows, whole parts each."""
    pending: list[dict[str, Any]] = []
    held = 0
    for part in parts:
        pending.append(part)
        held += len(part[names[0]])
        if held >= BATCH_ROWS:
            yield _joined(pending, names)
            pending, held = [], 0
    if pending:
        yield _joined(pending, names)


def _layout_columns(result: ShardResult, count: int, seekable: bool) -> dict[str, Any]:
    """A shard's offset columns from its writer's report: each member's header and data
    offsets, its checksum (the source's MD5 of one the store copied), and (``seekable``) the
    frames of its sample, null where it reported none."""
    import numpy as np

    if result.offsets is None or len(result.offsets) != 16 * count:
        raise WriteError(
            f"the writer of shard {result.name!r} reported no offsets for its "
            f"{count} members — run again with --resume"
        )
    pairs = np.frombuffer(result.offsets, dtype="<i8").reshape(count, 2)
    columns: dict[str, Any] = {
        "header_offset": pairs[:, 0],
        "data_offset": pairs[:, 1],
        "xxh3_64": _sums_column(result, count),
    }
    md5s = np.full(count, None, dtype=object)
    for index, md5 in result.copied:
        md5s[index] = md5
    columns[COPIED_COLUMN] = md5s
    if not seekable:
        return columns
    if result.frames is None:
        nothing = np.full(count, None, dtype=object)
        return {**columns, "frame_offset": nothing, "frame_size": nothing}
    if len(result.frames) != 16 * count:
        raise WriteError(f"the writer of shard {result.name!r} reported frames of other members")
    frames = np.frombuffer(result.frames, dtype="<i8").reshape(count, 2)
    return {**columns, "frame_offset": frames[:, 0], "frame_size": frames[:, 1]}


def _sums_column(result: ShardResult, count: int) -> Any:
    """A shard's members' checksums as its writer reported them; null where it reported none
    (a shard kept from a run before they were taken)."""
    import numpy as np

    if result.sums is None:
        return np.full(count, None, dtype=object)
    if len(result.sums) != 8 * count:
        raise WriteError(f"the writer of shard {result.name!r} reported checksums of other members")
    sums = np.frombuffer(result.sums, dtype="<u8")
    if not result.copied:
        return sums
    out = sums.astype(object)
    for index, _ in result.copied:  # its bytes passed by no hash: the source's MD5 stands
        out[index] = None
    return out


def _joined(parts: list[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    import numpy as np

    return {c: np.concatenate([p[c] for p in parts]) for c in names}


class IndexWriter:
    """A run's sample index: the plan's part of every row put into a column engine of its own
    while the shards are written (``prepare``, a batch a step, so the run can stop between
    them), the writers' offsets set beside them and the file published after (``write``).
    Closed with the run (``close``)."""

    def __init__(self, shards: ShardList, tmp_dir: str | None, memory_limit: int) -> None:
        self._shards = shards
        self._engine = contextlib.ExitStack()
        self._opened: tuple[Any, str] | None = None
        self._args = (tmp_dir, memory_limit)
        self._ready = False

    def _open(self) -> tuple[Any, str]:
        if self._opened is None:
            # one thread: the writers have the cores while the plan's rows go in, and the
            # file is written by one (row groups compressed in parallel vary in bytes)
            self._opened = self._engine.enter_context(private_engine(*self._args, threads=1))
        return self._opened

    def prepare(self) -> Iterator[None]:
        """Put the plan's rows into the engine, yielding after each batch."""
        con, _ = self._open()
        self._ready = False
        con.execute("DROP TABLE IF EXISTS planned")
        columns = ", ".join(f"{c} {t}" for c, t in INDEX_COLUMNS if c in PLAN_COLUMNS)
        con.execute(f"CREATE TABLE planned ({columns})")
        yield
        for batch in plan_rows(self._shards):
            insert_rows(con, "planned", batch)
            yield
        self._ready = True

    def write(
        self,
        dest: Location,
        results: Sequence[ShardResult],
        *,
        earlier: str | None,
        dropped: Iterable[str],
        energon: EnergonDataset | None = None,
        **publish: Any,
    ) -> dict:
        """Write ``DST/samples.parquet``: a growing dataset's rows from
        ``earlier`` but those of the shards ``dropped``, then the plan's beside the offsets
        in ``results`` (the plan's shards, written or kept); the manifest's record of it.
        With ``energon`` (the dataset's shards in the manifest's order and its split),
        Energon's files made of it are published after it (``energon.EnergonFiles``)."""
        if not self._ready:  # not done while the shards were written (or stopped halfway)
            for _ in self.prepare():
                pass
        con, folder = self._open()
        columns = ", ".join(f"{c} {t}" for c, t in INDEX_COLUMNS if c in LAYOUT_COLUMNS)
        con.execute(f"CREATE OR REPLACE TABLE layout ({columns})")
        for batch in layout_rows(results, self._shards.file_counts):
            insert_rows(con, "layout", batch)
        joined = "(SELECT * FROM planned POSITIONAL JOIN layout)"
        if earlier is None:  # the file straight from the two tables
            count = sum(self._shards.file_counts)
            return publish_index(
                con, folder, dest, joined, count, ("planned", "layout"), energon=energon, **publish
            )
        create_index_table(con, "samples")
        _insert_earlier(con, earlier, dropped)
        con.execute(f"INSERT INTO samples SELECT * FROM {joined}")
        con.execute("DROP TABLE planned")
        con.execute("DROP TABLE layout")
        return publish_index(
            con, folder, dest, "samples", None, ("samples",), energon=energon, **publish
        )

    def close(self) -> None:
        """Close the engine and remove its folder."""
        self._engine.close()


def _insert_earlier(con: Any, earlier: str | None, dropped: Iterable[str]) -> None:
    """A growing dataset's index rows (``earlier``, a file on this machine) but those of the
    shards ``dropped``, into ``samples``."""
    if earlier is None:
        return
    shard_table(con, "dropped", list(dropped))
    con.execute(  # by name: an index written before offsets were kept has none
        "INSERT INTO samples BY NAME SELECT * FROM read_parquet(?) "
        "WHERE shard NOT IN (SELECT shard FROM dropped)",
        [earlier],
    )


def publish_index(
    con: Any,
    folder: str,
    dest: Location,
    rows: str,
    count: int | None,
    tables: Sequence[str],
    *,
    energon: EnergonDataset | None = None,
    retrier: Retrier,
    cleanup: Retrier,
    part_size: int,
    guard: Guard | None = None,
) -> dict:
    """Write ``rows`` (a table, or a query in parentheses, of ``count`` rows: None to count
    them) to Parquet in ``folder``, drop the ``tables`` it was made of, then put the file in
    ``DST/samples.parquet``; its record for the manifest."""
    if count is None:
        (count,) = con.execute(f"SELECT count(*) FROM {rows}").fetchall()[0]
    path = os.path.join(folder, INDEX_NAME)
    con.execute("SET threads = 1")  # row groups compressed in parallel vary in bytes
    con.execute(f"COPY {rows} TO {sql_text(path)} ({PARQUET_OPTIONS})")
    for table in tables:  # their memory is not held while the file is sent
        con.execute(f"DROP TABLE {table}")
    made = None
    if energon is not None:  # made before anything is put: a refusal leaves DST as it was
        from .energon import EnergonFiles

        made = EnergonFiles(con, path, energon, folder)
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
    if made is not None:
        with contextlib.closing(made):
            made.put(dest, retrier=retrier, cleanup=cleanup, part_size=part_size, guard=guard)
    os.remove(path)
    return {"name": INDEX_NAME, "rows": int(count), "bytes": size, "checksum": checksum}


# offsets, frames, sums, copied (``ShardResult``)
Recorded = tuple[bytes, bytes | None, bytes | None, tuple[tuple[int, str | None], ...]]


def recorded_offsets(path: str, shards: Sequence[str]) -> dict[str, Recorded]:
    """The offsets of ``shards`` as their writers reported them (``ShardResult.offsets``,
    ``frames``, ``sums``), from the index file at ``path``; a shard it has no offsets for is
    left out (an index without checksums gives none)."""
    import duckdb

    found: dict[str, Recorded] = {}
    with private_engine(None, 256 << 20) as (con, _):
        shard_table(con, "wanted", list(shards))
        names = {
            r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
        }
        sums = "xxh3_64" if "xxh3_64" in names else "NULL::UBIGINT"
        composed = COPIED_COLUMN in names  # a member with no xxh3-64 there: copied in a store
        etags = COPIED_COLUMN if composed else "NULL::VARCHAR"
        try:
            rows = con.execute(
                "SELECT shard, list(header_offset ORDER BY header_offset), "
                "list(data_offset ORDER BY header_offset), "
                "list(frame_offset ORDER BY header_offset), "
                f"list(frame_size ORDER BY header_offset), list({sums} ORDER BY header_offset), "
                f"list({etags} ORDER BY header_offset), count(*) - count(data_offset) "
                "FROM read_parquet(?) WHERE shard IN (SELECT shard FROM wanted) GROUP BY shard",
                [path],
            ).fetchall()
        except duckdb.BinderException:  # an index written before offsets were kept
            return found
    for shard, headers, data, frame_offsets, frame_sizes, checksums, sources, unknown in rows:
        if unknown:
            continue
        frames = None
        if all(f is not None for f in frame_offsets):
            frames = _pairs(frame_offsets, frame_sizes)
        copied = (
            tuple((i, m) for i, (c, m) in enumerate(zip(checksums, sources)) if c is None)
            if composed
            else ()
        )
        known = composed or all(c is not None for c in checksums)
        packed = packed_sums([c or 0 for c in checksums]) if known else None
        found[shard] = (_pairs(headers, data), frames, packed, copied)
    return found


def _pairs(first: Sequence[int], second: Sequence[int]) -> bytes:
    import numpy as np

    pairs = np.empty((len(first), 2), dtype="<i8")
    pairs[:, 0], pairs[:, 1] = first, second
    return pairs.tobytes()


def fetch_index(dest: Location, record: Mapping, folder: str, name: str = INDEX_NAME) -> str:
    """Copy the sample index a manifest names (``record``) from ``DST/name`` into ``folder``,
    checked against the record's size and checksum; its path.

    Raises:
        DataError: it is missing, or not that index.
    """
    path = os.path.join(folder, "held.parquet")
    algorithm = split(record["checksum"])[0]
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
        raise dest.error(err, "dataset") from None
    check_index(dest, record, name, size, tagged(algorithm, digest.hexdigest()))
    return path


def check_index(dest: Location, record: Mapping, name: str, size: int, checksum: str) -> None:
    """Is the index file ``name`` (of ``size`` bytes, ``checksum`` as ``algorithm:hex``) the
    one the manifest's ``record`` names?

    Raises:
        DataError: another size or checksum.
    """
    if size != record["bytes"] or checksum != record["checksum"]:
        raise DataError(
            f"{dest.child(name)!r} is not the sample index the manifest names (another size "
            "or checksum) — run ishard verify on the destination"
        )
