"""Read member bytes from the source: local files directly, object stores with a prefetch window."""

from __future__ import annotations

import asyncio
import functools
import io
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, wait
from typing import BinaryIO

from .errors import IshardError, SourceError
from .model import FileEntry
from .retry import Retrier
from .storage import Location, storage_error

CHUNK = 8 << 20  # objects larger than this are fetched as ranges of this size
BATCH = 8  # requests handed to the event loop at once, and awaited at once by a writer


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
        room = r.max_requests - len(self._inflight)
        if self._next is None or (room < r.batch and self._inflight):
            return  # requests go out a batch at a time: one hand-over to the event loop each
        batch: list[tuple[FileEntry, int, int]] = []
        while self._next is not None and len(batch) < room and (
            self._bytes < r.budget or not (self._inflight or batch)
        ):
            batch.append(self._next)
            self._bytes += self._next[2] - self._next[1]
            self._next = next(self._todo, None)
        if not batch:  # the byte budget is spent
            return
        for (entry, start, end), future in zip(batch, r.submit_many(batch)):
            self._inflight.append((entry, future, end - start))

    def next_chunk(self) -> bytes:
        self._fill()
        entry, future, nbytes = self._inflight[0]
        if not future.done():
            # Sleep until a batch has arrived, not each object: every wake-up of this thread
            # takes the interpreter lock away from the thread that runs the requests.
            wait([self._inflight[min(len(self._inflight), self._reader.batch) - 1][1]])
        self._inflight.popleft()
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
        self._reader.cancel([future for _, future, _ in self._inflight])
        self._inflight.clear()


def _settle(tasks: dict, future: Future, task: asyncio.Task) -> None:
    """Pass a finished task's outcome to the future a writer waits on."""
    tasks.pop(future, None)
    if task.cancelled():
        future.set_exception(CancelledError())  # a running future cannot be cancelled
    elif task.exception() is not None:
        future.set_exception(task.exception())
    else:
        future.set_result(task.result())


def _ranges(size: int) -> list[tuple[int, int]]:
    if size <= CHUNK:
        return [(-1, size)]  # whole object: a size change shows up as a length mismatch
    return [(s, min(size, s + CHUNK)) for s in range(0, size, CHUNK)]


class RemoteReader:
    """Fetches objects through fsspec, many requests in flight, memory bounded by ``budget``."""

    def __init__(self, location: Location, retrier: Retrier, *, budget: int, max_requests: int):
        self.location, self.retrier = location, retrier
        self.budget, self.max_requests = budget, max_requests
        self.batch = max(1, min(BATCH, max_requests // 4))
        fs = location.fs
        self._loop = getattr(fs, "loop", None) if getattr(fs, "async_impl", False) else None
        self._pool = None if self._loop else ThreadPoolExecutor(max_requests, "ishard-read")
        self._tasks: dict[Future, asyncio.Task] = {}  # requests under way; event loop only

    def _fetch(self, entry: FileEntry, start: int, end: int):
        """``entry``'s bytes [start, end) (start -1: the whole object), retried; a coroutine
        for an async store."""
        fs, path = self.location.fs, self.location.path(entry.name)
        kwargs = {} if start < 0 else {"start": start, "end": end}
        if self._loop is not None:
            return self.retrier.run_async(lambda: fs._cat_file(path, **kwargs))
        return self.retrier.run(lambda: fs.cat_file(path, **kwargs))

    def submit_many(self, requests: list[tuple[FileEntry, int, int]]) -> list[Future]:
        """Start fetching each ``(entry, start, end)``; an async store's event loop is handed
        them all at once."""
        if self._loop is None:
            return [self._pool.submit(self._fetch, *request) for request in requests]
        futures = [Future() for _ in requests]
        self._loop.call_soon_threadsafe(self._start, requests, futures)
        return futures

    def _start(self, requests: list[tuple[FileEntry, int, int]], futures: list[Future]) -> None:
        """In the event loop: a task per request, its outcome passed to its future."""
        for request, future in zip(requests, futures):
            if future.set_running_or_notify_cancel():
                task = self._loop.create_task(self._fetch(*request))
                self._tasks[future] = task
                task.add_done_callback(functools.partial(_settle, self._tasks, future))

    def cancel(self, futures: list[Future]) -> None:
        """Stop fetching for these futures (requests under way are cancelled too)."""
        for future in futures:
            future.cancel()  # one not started yet never starts
        if self._loop is not None and futures:
            self._loop.call_soon_threadsafe(self._cancel_tasks, futures)

    def _cancel_tasks(self, futures: list[Future]) -> None:
        for future in futures:  # in the event loop, after every _start handed over before
            task = self._tasks.get(future)
            if task is not None:
                task.cancel()

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
