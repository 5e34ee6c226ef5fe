"""Read member bytes from the source: local files directly, object stores with a prefetch window."""

from __future__ import annotations

import asyncio
import io
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO

from .errors import IshardError, SourceError
from .model import FileEntry
from .retry import Retrier
from .storage import Location, storage_error

CHUNK = 8 << 20  # objects larger than this are fetched as ranges of this size


def _unreadable(name: str, err: OSError) -> SourceError:
    return SourceError(
        f"cannot read {name!r} from the source: {err.strerror or err} — "
        "check that it exists and is readable"
    )


class LocalFile:
    """An open local file as a bare descriptor: ``fileno()`` for writers that read into their
    own buffer or copy in the kernel, ``read()`` for the others. Cheaper than a file object."""

    __slots__ = ("fd", "name")

    def __init__(self, fd: int, name: str) -> None:
        self.fd, self.name = fd, name

    def fileno(self) -> int:
        return self.fd

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all the rest for -1)."""
        try:
            if n is not None and n >= 0:
                return os.read(self.fd, n)
            parts = []
            while part := os.read(self.fd, CHUNK):
                parts.append(part)
            return b"".join(parts)
        except OSError as err:
            raise _unreadable(self.name, err) from None


class LocalReader:
    """Opens local files one after another."""

    def __init__(self, location: Location) -> None:
        self._location = location

    def read(self, entries: Iterable[FileEntry]) -> Iterator[tuple[FileEntry, BinaryIO]]:
        """Each entry with its file open (closed when the next one is asked for)."""
        root = os.path.join(self._location.root, "")  # names join with one string concat
        for entry in entries:
            try:
                fd = os.open(root + entry.name, os.O_RDONLY)
            except OSError as err:
                raise _unreadable(entry.name, err) from None
            try:
                yield entry, LocalFile(fd, entry.name)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Nothing to release."""


class _Chunks(io.RawIOBase):
    """One member's bytes as a stream, pulled chunk by chunk from the prefetch window."""

    def __init__(self, window: _Window, count: int) -> None:
        self._window, self._left, self._buf = window, count, b""

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        while not self._buf and self._left:
            self._buf = self._window.next_chunk()
            self._left -= 1
        if n is None or n < 0:
            n = len(self._buf)
        data, self._buf = self._buf[:n], self._buf[n:]
        return data


class _Window:
    """Requests for one shard's members, issued ahead in order within byte and count limits."""

    def __init__(self, reader: RemoteReader, entries: Iterable[FileEntry]) -> None:
        self._reader = reader
        self._todo = ((e, s, t) for e in entries for s, t in _ranges(e.size))
        self._next: tuple | None = next(self._todo, None)
        self._inflight: deque[tuple[FileEntry, Future, int]] = deque()
        self._bytes = 0

    def _fill(self) -> None:
        r = self._reader
        while self._next is not None and len(self._inflight) < r.max_requests and (
            self._bytes < r.budget or not self._inflight
        ):
            entry, start, end = self._next
            self._inflight.append((entry, r.submit(entry, start, end), end - start))
            self._bytes += end - start
            self._next = next(self._todo, None)

    def next_chunk(self) -> bytes:
        self._fill()
        entry, future, nbytes = self._inflight.popleft()
        try:
            data = future.result()
        except IshardError:
            raise
        except FileNotFoundError:
            raise SourceError(
                f"object {entry.name!r} is missing from {self._reader.location.url!r} — it was "
                "listed (or named in --src-list) but cannot be read now"
            ) from None
        except Exception as err:
            raise storage_error(err, self._reader.location, "source") from None
        self._bytes -= nbytes
        self._fill()
        return data

    def cancel(self) -> None:
        for _, future, _ in self._inflight:
            future.cancel()
        self._inflight.clear()


def _ranges(size: int) -> list[tuple[int, int]]:
    if size <= CHUNK:
        return [(-1, size)]  # whole object: a size change shows up as a length mismatch
    return [(s, min(size, s + CHUNK)) for s in range(0, size, CHUNK)]


class RemoteReader:
    """Fetches objects through fsspec, many requests in flight, memory bounded by ``budget``."""

    def __init__(self, location: Location, retrier: Retrier, *, budget: int, max_requests: int):
        self.location, self.retrier = location, retrier
        self.budget, self.max_requests = budget, max_requests
        fs = location.fs
        self._loop = getattr(fs, "loop", None) if getattr(fs, "async_impl", False) else None
        self._pool = None if self._loop else ThreadPoolExecutor(max_requests, "ishard-read")

    def submit(self, entry: FileEntry, start: int, end: int) -> Future:
        """Start fetching ``entry``'s bytes [start, end) (start -1: the whole object)."""
        fs, path = self.location.fs, self.location.path(entry.name)
        kwargs = {} if start < 0 else {"start": start, "end": end}
        if self._loop is not None:
            coro = self.retrier.run_async(lambda: fs._cat_file(path, **kwargs))
            return asyncio.run_coroutine_threadsafe(coro, self._loop)
        return self._pool.submit(self.retrier.run, lambda: fs.cat_file(path, **kwargs))

    def read(self, entries: Iterable[FileEntry]) -> Iterator[tuple[FileEntry, BinaryIO]]:
        """Each entry with a stream of its bytes, fetched ahead of the writer."""
        entries = list(entries)
        window = _Window(self, entries)
        try:
            for entry in entries:
                yield entry, _Chunks(window, len(_ranges(entry.size)))
        finally:
            window.cancel()

    def close(self) -> None:
        """Stop the worker threads (for stores without an async client)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


Reader = LocalReader | RemoteReader  # what open_reader returns: ``read(entries)``, ``close()``


def open_reader(location: Location, retrier: Retrier, *, jobs: int, budget: int) -> Reader:
    """The reader for a source: direct files locally, a prefetching reader for stores."""
    if location.is_local:
        return LocalReader(location)
    return RemoteReader(
        location, retrier, budget=max(CHUNK, budget // max(1, jobs)),
        max_requests=max(8, 256 // max(1, jobs)),
    )
