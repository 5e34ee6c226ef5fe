"""The shards ``ishard index`` reads, and their sample index rows read from their member
headers: a plain tar's headers alone (locally through its descriptor, in a store through
ranged reads that fetch only the blocks holding headers), a compressed tar read forward once.

The rows are put into the column engine in shard order, a shard at a time, while later shards
are read (at most twice as many shards held as are read at once)."""

from __future__ import annotations

import collections
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..errors import DataError, UsageError
from ..formats import extensions
from ..formats.reading import FormatDamage, Headers
from ..formats.registry import find_format, read_as
from ..names import shown, sort_key, wds_split
from ..planning.engine.growth import insert_rows
from ..progress import Progress
from ..store import Location, resolve
from ..store.lockrecord import STATE_DIR
from ..store.ranged import RangedFile
from ..store.retry import Retrier
from .manifest import member_key_function

KeyOf = Callable[[str], str]
SKIPPED_FOLDERS = (STATE_DIR, ".nv-meta")  # run records, Energon's metadata: never shards


def listed_shards(dest: Location) -> list[str]:
    """The archives under DST (its subfolders too, hidden names left out), by name.

    Raises:
        UsageError: none, or one whose format has no headers to read (a ``.zip``).
    """
    cut = len(dest.key(""))
    with dest.translated("dataset"):
        names = [k[cut:] for k in dest.store.find(dest.key(""))]
    shards = sorted(
        (
            n
            for n in names
            if n.endswith(extensions())
            and not any(part.startswith(".") for part in n.split("/"))
            and n.split("/", 1)[0] not in SKIPPED_FOLDERS
        ),
        key=sort_key,
    )
    if not shards:
        raise UsageError(
            f"{dest.url!r} holds no shards ({', '.join(headed_extensions())}) — give the folder "
            "or prefix that holds them, or name them after DST"
        )
    return checked_names(shards)


def headed_extensions() -> tuple[str, ...]:
    """The extensions of the formats whose member headers ``ishard index`` reads."""
    return tuple(e for e in extensions() if read_as(e).container.headers is not None)


def checked_names(names: Iterable[str]) -> list[str]:
    """``names`` (shards relative to DST), each one a format with headers to read.

    Raises:
        UsageError: a name outside DST, or of a format whose headers are not read.
    """
    out = []
    for name in names:
        if name.startswith("/") or ".." in name.split("/") or "://" in name or not name:
            raise UsageError(
                f"{shown(name)!r} is not a shard inside DST — name shards by their path "
                "relative to DST"
            )
        fmt = find_format(name)
        if fmt is None or fmt.container.headers is None:
            raise UsageError(
                f"{shown(name)!r} is not a shard ishard index reads — it reads "
                f"{', '.join(headed_extensions())}"
            )
        out.append(name)
    if len(set(out)) != len(out):
        twice = next(n for n, c in collections.Counter(out).items() if c > 1)
        raise UsageError(f"{shown(twice)!r} is named twice — name each shard once")
    return out


@dataclass(frozen=True)
class Scanned:
    """One shard's members as its headers describe them, each one's sample key, and the
    shard's size in bytes."""

    name: str
    headers: Headers
    size: int
    keys: list[str]


def webdataset_key(name: str) -> str:
    """A member's sample key as WebDataset groups members: its name up to the basename's
    first dot."""
    return wds_split(name)[0]


def key_rule(options: Mapping | None) -> KeyOf:
    """The sample key of a member: by the key rule ``options`` (ishard's record) says, else
    WebDataset's."""
    return member_key_function(options) if options is not None else webdataset_key


def _damaged(dest: Location, name: str, err: BaseException) -> DataError:
    return DataError(
        f"{dest.child(name)!r} cannot be read as a {read_as(name).container.name} shard "
        f"({str(err) or type(err).__name__}) — repair or remove it, then run ishard index again"
    )


def scan_shard(
    dest: Location, name: str, options: Mapping | None, retrier: Retrier | None = None
) -> Scanned:
    """The members of shard ``name`` of DST, read from their headers, keyed by the rule of
    ``options`` (``key_rule``); each store request retried by ``retrier``.

    Raises:
        DataError: the shard is missing, or damaged (named, with what is wrong).
    """
    fmt = read_as(name)
    key = dest.key(name)
    read_headers = fmt.container.headers
    assert read_headers is not None
    damage: tuple[type[BaseException], ...] = (
        *fmt.container.damage,
        *fmt.damage,
        FormatDamage,
        EOFError,
    )
    try:
        with dest.translated("dataset"):
            try:
                found, size = _scan(dest, fmt, key, read_headers, retrier or Retrier(0))
            except damage as err:
                raise _damaged(dest, name, err) from None
    except FileNotFoundError:
        raise DataError(
            f"{dest.child(name)!r} is missing — name the shards DST holds, or restore it"
        ) from None
    key_of = key_rule(options)
    return Scanned(name, found, size, [key_of(m) for m in found.member])


def _scan(dest: Location, fmt, key: str, read_headers, retrier: Retrier) -> tuple[Headers, int]:
    store = dest.store
    fd = store.descriptor(key)  # a local file, opened without following a link
    if fd is not None:
        with os.fdopen(fd, "rb", buffering=0) as raw:
            return _read(fmt, raw, read_headers), os.fstat(raw.fileno()).st_size
    size = retrier.run(lambda: store.stat(key)).size
    if fmt.read is None:  # the shard's bytes are the tar's: seek over member data
        ranged = RangedFile(
            lambda start, end: retrier.run(lambda: store.read(key, start, end)), size
        )
        return read_headers(ranged, True), size  # type: ignore[arg-type]
    with dest.store.open_read(key) as stream:
        return _read(fmt, stream, read_headers), size


def _read(fmt, stream: BinaryIO, read_headers: Callable[[BinaryIO, bool], Headers]) -> Headers:
    if fmt.read is None:
        return read_headers(stream, True)
    return read_headers(fmt.opened(stream), False)


_WORKER_DEST: dict[str, Location] = {}  # a worker process's DST, resolved once


def _scan_in_worker(url: str, name: str, options: Mapping | None) -> Scanned:
    dest = _WORKER_DEST.get(url)
    if dest is None:
        dest = _WORKER_DEST[url] = resolve(url, role="dataset")
    return scan_shard(dest, name, options)


def scanned(
    dest: Location,
    names: Sequence[str],
    options: Mapping | None,
    workers: int,
    progress: Progress,
    retrier: Retrier,
    done: Mapping[int, Scanned],
) -> Iterator[Scanned]:
    """Every shard of ``names`` scanned, in their order, ``workers`` at once (at most twice
    as many held): local shards in worker processes (reading headers is Python's work, one
    core each), a store's on threads (they wait on the network); those ``done`` (by
    position: an earlier run's records) as they are."""
    with _pool(dest, workers) as pool:

        def submit(name: str, options: Mapping | None) -> Future[Scanned]:
            if isinstance(pool, ProcessPoolExecutor):
                return pool.submit(_scan_in_worker, dest.url, name, options)
            return pool.submit(scan_shard, dest, name, options, retrier)

        waiting: collections.deque[Future[Scanned] | Scanned] = collections.deque()
        todo = iter(enumerate(names))

        def more() -> None:
            for number, name in todo:
                waiting.append(done[number] if number in done else submit(name, options))
                return

        while len(waiting) < 2 * workers and len(waiting) < len(names):
            more()
        while waiting:
            head = waiting.popleft()
            shard = head if isinstance(head, Scanned) else head.result()
            progress.verified(shard.size)
            progress.shard_verified(shard.name)
            yield shard
            more()


def _pool(dest: Location, workers: int) -> Executor:
    if workers > 1 and Location.local_path(dest.url) is not None:
        return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    return ThreadPoolExecutor(max_workers=workers)


def put_rows(con: Any, table: str, shard: Scanned) -> None:
    """The sample index rows of one scanned shard into ``table`` (made if new)."""
    import numpy as np

    found = shard.headers
    count = len(found)
    if not count:
        return
    members = np.array(found.member, dtype=object)
    columns = {
        "key": np.array(shard.keys, dtype=object),
        "shard": np.full(count, shard.name, dtype=object),
        "member": members,
        "size": np.array(found.size, dtype=np.int64),
        "mtime": np.array(found.mtime, dtype=np.int64),
        "header_offset": np.array(found.header_offset, dtype=np.int64),
        "data_offset": np.array(found.data_offset, dtype=np.int64),
    }
    insert_rows(con, table, columns)
