"""Read member bytes from the source: local files directly, object stores with a prefetch window."""

from __future__ import annotations

import functools
import io
import os
import stat
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, BinaryIO, cast

from ..errors import IshardError, SizeChanged, SourceError
from ..model import FileEntry
from .retry import Retrier

if TYPE_CHECKING:  # asyncio is imported when a store is in use
    import asyncio

    from .location import Location

CHUNK = 8 << 20  # objects larger than this are fetched as ranges of this size
BATCH = 8  # requests handed to the event loop at once, and awaited at once by a writer


def unreadable(name: str, err: OSError) -> SourceError:
    """The line for a source file that could not be read (``err`` says why)."""
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
            raise unreadable(self.name, err) from None


class LocalReader:
    """Opens local files one after another under one path rule, whatever named them (a walk,
    an inventory) and whatever changed since: regular files only, opened without blocking
    (``O_NONBLOCK``: a FIFO cannot hang the run) and checked with ``fstat`` against the
    listing; no symbolic link is followed, in any part of the name, unless ``follow_symlinks``
    — and then never to outside the source.

    Without ``follow_symlinks`` a name is opened one component at a time with ``O_NOFOLLOW``
    from the source's own descriptor (directory descriptors cached per shard), which costs less
    than opening the whole path; with it, the opened file's real path must lie in the source.
    """

    def __init__(self, location: Location, follow_symlinks: bool = False) -> None:
        self._location = location
        self._follow = follow_symlinks

    def read(self, entries: Iterable[FileEntry]) -> Iterator[tuple[FileEntry, BinaryIO]]:
        """Each entry with its file open (closed when the next one is asked for).

        Raises:
            SourceError: a file cannot be opened, or breaks the path rule (a link, not a
                regular file, another size than listed).
        """
        opener = _Resolver(self._location.root) if self._follow else _Walker(self._location.root)
        fstat, regular = os.fstat, stat.S_IFREG
        try:
            for entry in entries:
                fd = opener.open(entry.name)
                try:
                    st = fstat(fd)
                    if st.st_mode & 0o170000 != regular or st.st_size != entry.size:
                        _refuse(st, entry)
                    yield entry, cast(BinaryIO, LocalFile(fd, entry.name))
                finally:
                    os.close(fd)
        finally:
            opener.close()

    def close(self) -> None:
        """Nothing to release."""


FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = FILE_FLAGS | getattr(os, "O_DIRECTORY", 0)
DIRS_KEPT = 256  # directory descriptors a shard's reader keeps open at most
STABLE = "run again once the source is stable"
RULE_FIX = (
    "remove it from the source (or from --src-list); --follow-symlinks follows links "
    "that stay inside the source"
)


def _link_error(name: str, link: str, outside: bool = False) -> SourceError:
    if outside:
        return SourceError(
            f"source file {name!r} leads outside the source through a symbolic "
            "link, which ishard never follows — remove it from the source (or "
            "from --src-list)"
        )
    where = (
        "is a symbolic link" if link == name else f"is reached through the symbolic link {link!r}"
    )
    return SourceError(
        f"source file {name!r} {where}, which ishard does not follow unless "
        f"--follow-symlinks — {RULE_FIX}"
    )


def _kind(mode: int) -> str:
    for test, what in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def local_stats(
    root: str, names: Iterable[str], follow_symlinks: bool = False
) -> list[os.stat_result]:
    """Each named file's status (a list of names alone, ``--src-list``), each file opened as
    ``LocalReader`` opens it — no link followed unless ``follow_symlinks``, and then never to
    outside the source; a FIFO never waited on — and refused as it refuses one.

    Raises:
        SourceError: a file cannot be opened, is no regular file, or breaks the path rule.
    """
    opener = _Resolver(root) if follow_symlinks else _Walker(root)
    found: list[os.stat_result] = []
    try:
        for name in names:
            fd = opener.open(name)
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            if not stat.S_ISREG(st.st_mode):
                _refuse(st, FileEntry(name, st.st_size))
            found.append(st)
    finally:
        opener.close()
    return found


def _refuse(st: os.stat_result, entry: FileEntry) -> None:
    """Raise why an open file is not the regular file of the listed size it must be."""
    if not stat.S_ISREG(st.st_mode):
        raise SourceError(
            f"cannot read {entry.name!r} from the source: it is {_kind(st.st_mode)}, "
            "not a regular file — remove it from the source (or from --src-list)"
        )
    if st.st_size != entry.size:
        how = "shrank" if st.st_size < entry.size else "grew"
        raise SizeChanged(
            f"file {entry.name!r} {how} after it was listed: listed {entry.size} "
            f"bytes, now {st.st_size} — {STABLE}",
            entry.name,
            entry.size,
            st.st_size,
        )


def _parts(name: str) -> list[str]:
    return [p for p in name.split("/") if p and p != "."]


class _Walker:
    """Opens names below a root one component at a time, never through a symbolic link."""

    def __init__(self, root: str) -> None:
        self._root_path = root
        self._root = -1
        self._dirs: dict[str, int] = {}

    def open(self, name: str) -> int:
        head, _, base = name.rpartition("/")
        parent = self._dirs.get(head) if head else self._root
        if parent is not None and parent >= 0 and base and base != ".":
            try:
                return os.open(base, FILE_FLAGS, dir_fd=parent)
            except OSError as err:
                raise self._why(parent, base, name, name, err) from None
        return self._open_slowly(name)

    def _open_slowly(self, name: str) -> int:
        """``open`` for a first name in its directory (or an odd one: ``a//b``, ``./a``)."""
        if self._root < 0:
            try:
                self._root = os.open(self._root_path, DIR_FLAGS & ~os.O_NOFOLLOW)
            except OSError as err:
                raise unreadable(name, err) from None
        parts = _parts(name) or ["."]
        head = name.rpartition("/")[0]
        parent = self._dir(head, parts[:-1], name) if len(parts) > 1 else self._root
        try:
            return os.open(parts[-1], FILE_FLAGS, dir_fd=parent)
        except OSError as err:
            raise self._why(parent, parts[-1], name, name, err) from None

    def _dir(self, head: str, parts: list[str], name: str) -> int:
        fd = self._dirs.get(head)
        if fd is not None:
            return fd
        if len(self._dirs) >= DIRS_KEPT:
            self._close_dirs()
        fd, done = self._root, []
        try:
            for part in parts:
                done.append(part)
                try:
                    nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
                except OSError as err:
                    raise self._why(fd, part, "/".join(done), name, err) from None
                if fd != self._root:
                    os.close(fd)
                fd = nxt
        except BaseException:
            if fd != self._root:
                os.close(fd)
            raise
        self._dirs[head] = fd
        return fd

    @staticmethod
    def _why(parent: int, part: str, path: str, name: str, err: OSError) -> SourceError:
        """The error for a component that would not open: a link, or the OS's reason."""
        try:
            st = os.stat(part, dir_fd=parent, follow_symlinks=False)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            return _link_error(name, path)
        if st is not None and path != name and not stat.S_ISDIR(st.st_mode):
            err = OSError(err.errno, f"{path!r} is not a directory")
        return unreadable(name, err)

    def _close_dirs(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def close(self) -> None:
        self._close_dirs()
        if self._root >= 0:
            os.close(self._root)
            self._root = -1


class _Resolver:
    """With --follow-symlinks: opens the whole path (links followed), then requires the file's
    real path to lie inside the source's real path."""

    def __init__(self, root: str) -> None:
        self._root = os.path.join(root, "")
        self._real = os.path.join(os.path.realpath(root), "")
        self._proc = os.path.isdir("/proc/self/fd")

    def open(self, name: str) -> int:
        path = self._root + name
        if not self._proc and not self._inside(os.path.realpath(path)):
            raise _link_error(name, name, outside=True)
        try:
            fd = os.open(path, FILE_FLAGS & ~os.O_NOFOLLOW)
        except OSError as err:
            raise unreadable(name, err) from None
        if self._proc:
            try:
                real = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                real = os.path.realpath(path)
            if not self._inside(real):
                os.close(fd)
                raise _link_error(name, name, outside=True)
        return fd

    def _inside(self, real: str) -> bool:
        return real.startswith(self._real)

    def close(self) -> None:
        """Nothing kept open."""


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
        while (
            self._next is not None
            and len(batch) < room
            and (self._bytes < r.budget or not (self._inflight or batch))
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
        except Exception as err:  # noqa: BLE001 - a store's error, translated once
            raise self._reader.location.error(err, "source") from None
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
    """Fetches objects from a store, many requests in flight, memory bounded by ``budget``."""

    def __init__(self, location: Location, retrier: Retrier, *, budget: int, max_requests: int):
        self.location, self.retrier = location, retrier
        self.budget, self.max_requests = budget, max_requests
        self.batch = max(1, min(BATCH, max_requests // 4))
        self.store = location.store
        self._loop = self.store.loop
        self._pool = None if self._loop else ThreadPoolExecutor(max_requests, "ishard-read")
        self._tasks: dict[Future, asyncio.Task] = {}  # requests under way; event loop only

    def _fetch(self, entry: FileEntry, start: int, end: int):
        """``entry``'s bytes [start, end) (start -1: the whole object), retried; a coroutine
        for an async store."""
        store, key = self.store, entry.name
        if self._loop is not None:
            return self.retrier.run_async(lambda: store.read_async(key, start, end))
        return self.retrier.run(lambda: store.read(key, start, end))

    def submit_many(self, requests: list[tuple[FileEntry, int, int]]) -> list[Future]:
        """Start fetching each ``(entry, start, end)``; an async store's event loop is handed
        them all at once."""
        if self._loop is None:
            assert self._pool is not None  # made whenever there is no loop
            return [self._pool.submit(self._fetch, *request) for request in requests]
        futures: list[Future] = [Future() for _ in requests]
        self._loop.call_soon_threadsafe(self._start, requests, futures)
        return futures

    def _start(self, requests: list[tuple[FileEntry, int, int]], futures: list[Future]) -> None:
        """In the event loop: a task per request, its outcome passed to its future."""
        loop = self._loop
        assert loop is not None  # called on it
        for request, future in zip(requests, futures):
            if future.set_running_or_notify_cancel():
                task = loop.create_task(self._fetch(*request))
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
                yield entry, cast(BinaryIO, _Chunks(window, len(_ranges(entry.size))))
        finally:
            window.cancel()

    def close(self) -> None:
        """Stop the worker threads (for stores without an async client)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


Reader = LocalReader | RemoteReader  # what open_reader returns: ``read(entries)``, ``close()``


def open_reader(
    location: Location, retrier: Retrier, *, jobs: int, budget: int, follow_symlinks: bool = False
) -> Reader:
    """The reader for a source: the store's own (direct files locally), else a prefetching
    reader."""
    return location.store.reader(
        location, retrier, jobs=jobs, budget=budget, follow_symlinks=follow_symlinks
    )


def prefetching_reader(
    location: Location, retrier: Retrier, *, jobs: int, budget: int
) -> RemoteReader:
    """A reader that keeps many requests in flight, memory bounded by ``budget`` over ``jobs``
    writers."""
    return RemoteReader(
        location,
        retrier,
        budget=max(CHUNK, budget // max(1, jobs)),
        max_requests=max(8, 256 // max(1, jobs)),
    )
