"""The column engine's connection: DuckDB under a memory limit, spilling past it to a private
folder that a thread watches, and the columns planning does not read left waiting in it
until one is."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

from ...errors import DataError
from ..handover import Handover, LaterReaderKeys, ReaderKeys, ReaderKeysLost
from ..intcolumn import SpooledInts
from ..namecolumn import LaterNames, Names
from ..rowrules import IDENTITY
from ..table import FileTable
from . import LEAST_MEMORY_LIMIT

FETCHED = 1 << 18  # names (or keys) fetched from the engine at a time
INTS_FETCHED = 1 << 21  # ints of a column fetched at a time (8 or 16 MB)
FETCH_MEMORY = 64 << 20  # the engine's memory limit while Python fetches the listing
LOG = logging.getLogger("ishard")
SPILL_LOOK = 0.1  # seconds between two looks at the size of the engine's spill folder


class Source(NamedTuple):
    """An inventory's SELECT of each row's name, size, mtime (all text) and ``ident`` (its
    checksum or ETag, as ``IDENTITY`` takes it; NULL where it has none), and the column that
    ``ident`` came from (``identity``; None: no such column)."""

    sql: str
    identity: str | None = None


def identity_sql(column: str | None, field: str | None = None) -> str:
    """The SQL of ``ident`` from ``field`` (a column's SQL; ``column`` itself, quoted, when
    None): NULL when there is no such ``column``."""
    if column is None:
        return "NULL"
    return IDENTITY.over(value=field or f'"{column}"')


def sql_hash(*texts: str) -> str:
    """SQL: a 64-bit hash of the text expressions ``texts``, each also hashed reversed —
    DuckDB's string hash alone gives structured names the same hash (100 million ImageNet-like
    names: 400 pairs, such as ``…n00015740_20462824.jpeg`` and ``…n00015760_20489124.jpeg``;
    with the reversed texts, none)."""
    return f"hash({', '.join(texts)}, {', '.join(f'reverse({t})' for t in texts)})"


def sql_text(value: str) -> str:
    """``value`` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


class Fallback(Exception):
    """The engine does not take this inventory as it is: read it row by row."""


def connect(spill: str, memory_limit: int, threads: int | None = None):
    """A DuckDB connection of its own, holding up to ``memory_limit`` bytes and spilling the
    rest to ``spill`` (a private folder), insertion order kept; ``threads`` (default: one a
    core, up to 8)."""
    import duckdb

    con = duckdb.connect(
        config={
            "threads": threads or max(1, min(os.cpu_count() or 1, 8)),
            "memory_limit": f"{max(memory_limit, LEAST_MEMORY_LIMIT) >> 20}MiB",
            "temp_directory": spill,
            "preserve_insertion_order": True,
        }
    )
    con.execute("SET enable_progress_bar = false")
    return con


class SpillWatch:
    """The most bytes a spill folder held (``most``): looked at every ``SPILL_LOOK`` seconds
    from a thread of its own while the block runs, after the listing's sort, and at its end."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.most = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ishard-spill", daemon=True)

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.look()

    def _watch(self) -> None:
        while not self._done.wait(SPILL_LOOK):
            self.look()

    def look(self) -> None:
        """Look now (also where the engine must have spilled: a test's sure figure)."""
        held = 0
        try:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    try:
                        held += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue  # removed while looked at
        except OSError:
            return
        self.most = max(self.most, held)


def fetching(con) -> None:
    """The engine's memory limit lowered to ``FETCH_MEMORY``: what is left is read out of it
    a window at a time, and what its sorts held goes (it is on disk)."""
    con.execute(f"SET memory_limit = '{FETCH_MEMORY >> 20}MiB'")


def close(con, spill: str) -> None:
    """Close the engine and remove its spill folder (again: nothing happens)."""
    con.close()
    shutil.rmtree(spill, ignore_errors=True)


def hint_failed(what: str, error: Exception) -> None:
    """Log that the engine could not help a naming check (the check then does it all)."""
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    LOG.info("the column engine could not %s (%s); the planner checks every name", what, reason)


class Waiting:
    """What planning over an engine-read inventory does not read, left in the engine: the
    listing's names and mtimes (its ``files`` table), the samples' keys (``runs``). All are
    fetched the first time one is read (``FETCHED`` names at a time: never ten million
    ``str`` objects at once; the names and keys into files with no name beside the spill
    folder's contents, ``Names.spooled``), then the engine is closed; never read (a dry run),
    it closes when nothing refers to them any more, or at exit."""

    def __init__(self, con, spill: str, keys: bool, readers: str | None = None) -> None:
        self._con, self._spill, self._keys = con, spill, keys
        self._lock = threading.Lock()
        self._columns: dict[str, Any] | None = None
        self._readers_sql = readers  # the reader keys' SELECT, when the key check wants them
        self._readers: weakref.ref[LaterReaderKeys] | None = None
        weakref.finalize(self, close, con, spill)

    def later_readers(self) -> LaterReaderKeys:
        """The reader keys, cut from the engine as the key check asks for them."""
        later = LaterReaderKeys(self._reader_span, self._readers_fetched)
        self._readers = weakref.ref(later)
        return later

    def _reader_span(self, lo: int, hi: int) -> ReaderKeys:
        with self._lock:
            return self._readers_where(f"WHERE rowid >= {lo} AND rowid < {hi}")

    def _readers_fetched(self) -> ReaderKeys:
        with self._lock:
            return self._readers_where("")

    def _readers_where(self, where: str) -> ReaderKeys:
        import duckdb

        if self._readers_sql is None or self._columns is not None:  # the engine closed
            raise ReaderKeysLost
        try:
            out = self._con.execute(self._readers_sql.format(where=where)).fetchnumpy()
        except duckdb.Error as error:  # out of memory or disk: the key check reads the names
            hint_failed("cut the reader keys", error)
            raise ReaderKeysLost from None
        return ReaderKeys(out["key"], out["flags"].astype("int8", copy=False))

    def column(self, name: str) -> Any:
        """``names``, ``mtimes`` or ``keys``, fetched (all three) if they were not yet."""
        with self._lock:
            if self._columns is None:
                self._columns = self._fetch()
        return self._columns[name]

    def picked(self, name: str, rows: list[int]) -> list[str]:
        """Values ``rows`` (some) of ``names`` or ``keys``, in that order, without fetching
        the rest (from the fetched columns, when they were)."""
        import duckdb

        with self._lock:
            if self._columns is not None:
                return self._columns[name].take(rows)
            column, table = {"names": ("name", "files"), "keys": ("key", "runs")}[name]
            try:
                found = dict(
                    self._con.execute(
                        f"SELECT rowid, {column} FROM {table} WHERE rowid IN "
                        f"({', '.join(map(str, map(int, rows)))})"
                    ).fetchall()
                )
            except duckdb.Error as error:
                raise _unreadable(error, self._spill) from None
        return [found[r] for r in rows]

    def _fetch(self) -> dict[str, Any]:
        import duckdb

        con = self._con
        try:
            columns: dict[str, Any] = {"names": names_fetched(con, "name", "files", self._spill)}
            if self._keys:
                columns["keys"] = names_fetched(con, "key", "runs", self._spill)
            columns["mtimes"] = int_fetched(con, "mtime", self._spill)
            later = self._readers() if self._readers is not None else None
            if later is not None:  # the key check still to come: all of them, the engine closing
                with suppress(ReaderKeysLost):  # else the key check reads the names
                    later.loaded(self._readers_where(""))
            return columns
        except duckdb.Error as error:
            raise _unreadable(error, self._spill) from None
        except OSError as error:  # the temporary folder's disk full, say
            raise no_room(self._spill, error) from None
        finally:
            close(con, self._spill)


def no_room(spill: str, error: OSError) -> DataError:
    """The listing's columns (names, sizes, the samples') could not be written beside the
    spill folder ``spill``: its disk full, say."""
    return DataError(
        f"the listing could not be written to a temporary file in "
        f"{os.path.dirname(spill)!r} ({error.strerror or error}) — give --tmp-dir a folder on "
        "a disk with room for it (about a byte a character of the names, and 30 a file)"
    )


@contextmanager
def spooling(spill: str) -> Iterator[None]:
    """Columns written to files with no name in the spill folder ``spill``: a failure to
    write them is ``no_room``."""
    try:
        yield
    except OSError as error:
        raise no_room(spill, error) from None


def _unreadable(error: Exception, spill: str) -> DataError:
    """The engine failed to give back what waits in it: its spill folder gone under it, say."""
    return DataError(
        f"the listing's names could not be read back from the column engine ({error})"
        f" — check the temporary folder {spill!r} (--tmp-dir)"
    )


def leave_waiting(
    con, spill: str, sizes: Any, found: Handover, readers: str | None = None
) -> FileTable:
    """The listing of ``sizes`` whose names and mtimes, and its samples' keys (when ``found``
    has samples), wait in the engine ``con``, whose spill folder is ``spill``; and the files'
    reader keys (``readers``: their SELECT over ``files {where}``), when the key check wants
    them. ``found`` (the keys and reader keys waiting too) is the table's handover."""
    grouping = found.grouping
    waiting = Waiting(con, spill, grouping is not None, readers)
    if readers is not None:
        found = replace(found, readers=waiting.later_readers())
    names = LaterNames(
        len(sizes), lambda: waiting.column("names"), partial(waiting.picked, "names")
    )
    if grouping is not None:
        count = len(grouping.starts) - 1
        keys = LaterNames(count, lambda: waiting.column("keys"), partial(waiting.picked, "keys"))
        found = replace(found, grouping=grouping._replace(keys=keys))
    return FileTable.waiting(names, sizes, lambda: waiting.column("mtimes"), found)


def names_fetched(con, column: str, table: str, folder: str) -> Names:
    """A text column of an engine table, in its order, as ``Names`` whose bytes wait in a
    nameless file in ``folder`` (``Names.spooled``): a run reads them a shard at a time."""
    count = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    return Names.spooled(
        (fetched(con, column, table, start) for start in range(0, count, FETCHED)), folder
    )


def int_fetched(con, column: str, folder: str, table: str = "files", bounds: Any = None):
    """An int column of ``table`` in its order, spooled to a file with no name in ``folder``
    (``intcolumn.SpooledInts``: a window at a time, none of it held), of 4-byte ints when its
    values fit (``bounds``: its least and most value, when known), else 8-byte."""
    least, most = (
        bounds or con.execute(f"SELECT min({column}), max({column}) FROM {table}").fetchone()
    )
    fits = least is None or (-(1 << 31) <= least and most < 1 << 31)
    count = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    with spooling(folder):
        return SpooledInts.written(
            ints_of(con, column, table, count, fits), "i" if fits else "q", folder
        )


def ints_of(con, column: str, table: str, count: int, narrow: bool, first: int = 0):
    """The int ``column`` of ``table``'s rows ``first`` to ``count``, ``INTS_FETCHED`` rows at a
    time (numpy arrays of 4-byte ints when ``narrow``, else 8-byte)."""
    kind = "INTEGER" if narrow else "BIGINT"
    for start in range(first, count, INTS_FETCHED):
        yield con.execute(
            f"SELECT CAST({column} AS {kind}) AS v FROM {table} "
            f"WHERE rowid >= {start} AND rowid < {min(start + INTS_FETCHED, count)}"
        ).fetchnumpy()["v"]


def fetched(con, column: str, table: str, start: int) -> list[str]:
    """``FETCHED`` values of a text column from row ``start`` on."""
    return (
        con.execute(
            f"SELECT {column} FROM {table} WHERE rowid >= {start} AND rowid < {start + FETCHED}"
        )
        .fetchnumpy()[column]
        .tolist()
    )
