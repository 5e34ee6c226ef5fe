"""A tar shard composed inside its store (``--compose auto``): its large members copied from
the source by the store itself, never through this machine; whatever the store, one way.

The archive writer writes headers, padding and small members into the sink, and ``place``s
each large member (``TarWriter.place``). The sink gathers written bytes into parts it uploads,
and has the store copy each large member after them. Where the store wants every part but
the last to be big (S3: 5 MiB), the part a large member's header goes in takes as many of
the member's first bytes as it lacks (read from the source), and the store copies the rest.
Each read and copy is conditional on the ETag the source object had when it was looked at:
a source object rewritten meanwhile fails the shard, never mixes it.

The shard's checksum is combined from its parts' (the store computes that of each copied
range, this machine or the store that of each written part): a CRC, which ``verify`` checks
by reading the shard. A store that refuses a request this needs raises ``ComposeRefused``:
the shard is written through the client instead, and so is every later one of the run.

What differs from store to store is one ``Service`` (the requests of one shard's upload) and
its ``Limits``; ``Composer`` and ``ComposingSink`` are the same for all.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from .. import signals
from ..checksums import crc_combine, tagged
from ..errors import Interrupted, SizeChanged, SourceError
from .base import ComposeRefused
from .sinks import guarded

if TYPE_CHECKING:
    from ..model import FileEntry, ShardPlan
    from .base import Upload

LOG = logging.getLogger("ishard")
PARTS_IN_FLIGHT = 4  # parts uploading or copying at once per shard
POLL = 0.5  # seconds between looks at parts under way (a failure is seen within it)
T = TypeVar("T")


@dataclass(frozen=True)
class Part:
    """One part of a composed shard: its number, what completing the upload names it by (S3:
    its ETag; Azure: its block id), its CRC (by ``Limits.checksum``) and size."""

    number: int
    token: str
    crc: int
    size: int


@dataclass(frozen=True)
class Source:
    """A source object as a copy of it is made: its ETag (every copy is conditional on it),
    and the MD5 of its bytes where the store gives one (the sample index keeps it)."""

    etag: str
    md5: str | None


@dataclass(frozen=True)
class Limits:
    """What a store's composing takes: the smallest part but the last (0: any), the largest
    range one copy takes, the most parts, and the composed shard's checksum (the CRC the
    store computes of each part)."""

    min_part: int
    max_copy: int
    max_parts: int
    checksum: str  # one of ``checksums.COMPOSED``


class Service(Protocol):
    """One shard's upload, in one store: the requests composing it."""

    def source(self, name: str, size: int) -> Source:
        """The source's ``name`` now (it must still be ``size`` bytes)."""

    def first_bytes(self, name: str, count: int, source: Source) -> bytes:
        """The first ``count`` bytes of ``name``, if it is still ``source``."""

    def start(self) -> None:
        """Begin the upload (before any part; parts then go from other threads)."""

    def put_part(self, number: int, body: bytes) -> Part:
        """Upload ``body`` as part ``number``."""

    def copy_part(self, number: int, name: str, start: int, end: int, source: Source) -> Part:
        """Have the store copy bytes [start, end) of ``name`` (if still ``source``) as part
        ``number``."""

    def complete(self, parts: list[Part], exclusive: bool) -> str:
        """Publish the shard made of ``parts`` (``exclusive``: only where nothing has its
        name); its ETag."""

    def abort(self) -> None:
        """Drop what was uploaded."""


# what a store answers to a request it does not take: composing is then refused
REFUSING_STATUS = (400, 403, 405, 501)


def looked_up(
    name: str, size: int, where: str, look: Callable[[], Mapping[str, str]]
) -> Mapping[str, str]:
    """The headers of the source object ``name`` (``look``: its HEAD, lower-case names): still
    the listed ``size``, with an ETag every copy of it will be conditional on.

    Raises:
        SourceError: it is gone (from ``where``). SizeChanged: another size now.
        ComposeRefused: the store would not say, or gave no ETag (the client path's reader
            then says what is wrong, if anything is)."""
    try:
        headers = look()
    except OSError as err:
        status = getattr(err, "status", None)
        if status == 404:
            raise source_missing(name, where) from None
        if status in REFUSING_STATUS:
            raise ComposeRefused(f"it refused to tell the source's ETag ({err})") from None
        raise
    check_size(name, size, int(headers.get("content-length", -1)))
    if not headers.get("etag"):
        raise ComposeRefused(f"the source store gave no ETag for {name!r}")
    return headers


def check_size(name: str, listed: int, now: int) -> None:
    """A source object's size as the store tells it now must be the listed one.

    Raises:
        SizeChanged: it is not (the source is changing: run again once it is stable)."""
    if now != listed:
        raise SizeChanged(
            f"file {name!r} changed size while being read: listed {listed} bytes, now "
            f"{now} — run again once the source is stable",
            name,
            listed,
            now,
        )


def source_missing(name: str, where: str) -> SourceError:
    """The error of a listed source object gone when it was to be read or copied."""
    return SourceError(
        f"object {name!r} is missing from {where!r} — it was listed (or named in --src-list) "
        "but cannot be read now"
    )


def source_changed(name: str, shard: str) -> SourceError:
    """The error of a source object rewritten while a shard was composed of it."""
    return SourceError(
        f"source object {name!r} changed while shard {shard.rpartition('/')[2]!r} was "
        "composed from it (its ETag moved) — nothing was published: run again with --resume "
        "once the source is stable"
    )


class Composer:
    """What a run composes with: its store's ``Limits``, a ``Service`` for each shard
    (``service(key, upload)``), the smallest member copied (``min_size``), the size of the
    parts this machine writes, and the first refusal met (then no shard is composed)."""

    def __init__(
        self,
        limits: Limits,
        service: Callable[[str, Upload], Service],
        *,
        min_size: int,
        part_size: int,
        url_of: Callable[[str], str],
    ) -> None:
        self.limits, self._service, self._url_of = limits, service, url_of
        self.min_size, self.part_size = min_size, max(part_size, limits.min_part)
        self.refusal: str | None = None
        self._lock = threading.Lock()

    def placed(self, entry: FileEntry) -> bool:
        """Is this member copied in the store?"""
        return entry.size >= self.min_size

    def refuse(self, reason: str) -> None:
        """Compose no more shards this run (``reason``: why, said once with ``-v``)."""
        with self._lock:
            if self.refusal is None:
                self.refusal = reason
                LOG.info("--compose auto: the shards are written through this machine: %s", reason)

    def sink(self, shard: ShardPlan, key: str, upload: Upload) -> ComposingSink | None:
        """The sink composing ``shard`` under ``key``; None where it is not composed: no member
        is large enough, it would take more parts than the store allows, or it refused."""
        if self.refusal is not None:
            return None
        members = shard.members()
        large = [m.size for m in members if self.placed(m)]
        if not large:
            return None
        small = sum(m.size for m in members if not self.placed(m)) + 1024 * len(members)
        parts = sum(1 + math.ceil(size / self.limits.max_copy) for size in large)
        parts += math.ceil(small / self.part_size) + 1
        if parts > self.limits.max_parts:
            LOG.info(
                "shard %r is written through this machine: composed, it would take %d parts "
                "(the store takes %d)",
                shard.name,
                parts,
                self.limits.max_parts,
            )
            return None
        return ComposingSink(self, self._service(key, upload), self._url_of(key), upload)


class ComposingSink:
    """One shard composed in its store: bytes written here go in parts this machine uploads;
    ``place`` puts a large member's bytes after them, copied in the store. Parts go
    ``PARTS_IN_FLIGHT`` at a time; the object exists only once :meth:`commit` completes the
    upload, under the destination's lease; :meth:`abort` drops it."""

    def __init__(self, composer: Composer, service: Service, url: str, upload: Upload) -> None:
        self._c, self._service, self.url, self._upload = composer, service, url, upload
        self._limits = composer.limits
        self._buf = bytearray()
        self._number = 0
        self._futures: list[Future] = []
        self._pool = _Workers(PARTS_IN_FLIGHT)
        self._started = False
        self.size = 0
        self.etag: str | None = None
        self.checksum: str | None = None
        self.sources: list[str | None] = []  # each placed member's MD5 by its source, in order

    def _refusing(self, call: Callable[..., T], *args: object) -> T:
        """``call(*args)``; a refusal ends composing for the rest of the run too."""
        try:
            return call(*args)
        except ComposeRefused as refused:
            self._c.refuse(refused.reason)
            raise

    # -- what the archive writer calls ------------------------------------------------------
    def placed(self, entry: FileEntry) -> bool:
        """Does this sink place ``entry``'s bytes itself (:meth:`place`)?"""
        return self._c.placed(entry)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data``; a part's worth goes to the store."""
        self._buf += data
        self.size += len(data)
        if len(self._buf) >= self._c.part_size:
            self._send_buffer()

    def place(self, name: str, size: int) -> None:
        """Append the source's file ``name`` (``size`` bytes): the part being written takes
        its first bytes where the store wants a bigger part, and the store copies the rest."""
        source = self._refusing(self._service.source, name, size)
        self.sources.append(source.md5)
        borrow = max(0, self._limits.min_part - len(self._buf))
        if borrow:
            self._buf += self._refusing(self._service.first_bytes, name, borrow, source)
        self._send_buffer()
        rest = size - borrow
        pieces = math.ceil(rest / self._limits.max_copy)
        start = borrow
        for i in range(pieces):
            end = borrow + (rest * (i + 1)) // pieces
            self._submit(self._service.copy_part, name, start, end, source)
            start = end
        self.size += size

    def close(self) -> None:
        """All bytes are written: the last part goes."""
        self._send_buffer()

    # -- parts ------------------------------------------------------------------------------
    def _submit(self, call: Callable[..., Part], *args: object) -> None:
        """Run ``call(number, *args)`` as the next part, once fewer than ``PARTS_IN_FLIGHT``
        are under way (a failed one raises here)."""
        if not self._started:
            self._refusing(self._service.start)
            self._started = True
        while True:
            failed = next((f for f in self._futures if f.done() and f.exception()), None)
            if failed is not None:
                failed.result()
            running = [f for f in self._futures if not f.done()]
            if len(running) < PARTS_IN_FLIGHT:
                break
            _stop_here()
            wait(running, timeout=POLL, return_when=FIRST_EXCEPTION)
        self._number += 1
        self._futures.append(self._pool.submit(self._refusing, call, self._number, *args))

    def _send_buffer(self) -> None:
        if self._buf:
            body, self._buf = bytes(self._buf), bytearray()
            self._submit(self._service.put_part, body)

    def _parts(self) -> list[Part]:
        """Every part, once all are done (the first failure raised)."""
        while True:
            _stop_here()
            done, pending = wait(self._futures, timeout=POLL, return_when=FIRST_EXCEPTION)
            failed = next((f for f in done if f.exception() is not None), None)
            if failed is not None:
                failed.result()
            if not pending:
                return [f.result() for f in self._futures]

    # -- publishing -------------------------------------------------------------------------
    def commit(self) -> None:
        """Complete the upload: only now does the shard exist, only while this run holds the
        destination's lease (and, exclusive, only where no object has its name)."""
        parts = self._parts()
        total, algorithm = 0, self._limits.checksum
        for part in parts:
            total = crc_combine(algorithm, total, part.crc, part.size)
        exclusive = self._upload.exclusive
        self.etag = guarded(
            self._upload.guard,
            self.url,
            lambda: self._refusing(self._service.complete, parts, exclusive),
        )
        self._started = False
        self.checksum = tagged(algorithm, f"{total:0{8 if algorithm == 'crc32c' else 16}x}")
        self._pool.shutdown()

    def abort(self) -> None:
        """Stop: parts not started are dropped, those under way are waited for a while (a copy
        goes on in the store anyway), and the upload is dropped (told, with what to do, if it
        cannot be)."""
        for future in self._futures:
            future.cancel()
        running = [f for f in self._futures if not f.done()]
        if running:  # after a stop signal hardly at all: the signal ends the run, now
            wait(running, timeout=POLL if signals.stopping() else self._upload.cleanup.patience)
        self._pool.shutdown()
        if not self._started:
            return
        self._started = False
        try:
            self._service.abort()
        except OSError as err:
            self._upload.notice(
                f"the unfinished upload of {self.url} could not be aborted ({err}) — once the "
                "store is back, run ishard again with --resume (it aborts such uploads), or set "
                "a lifecycle rule"
            )


def _stop_here() -> None:
    """A stop signal came (Ctrl-C, SIGTERM): the shard stops now, not when its parts end."""
    if signals.stopping():
        raise Interrupted(signals.received(), signals.name())


class _Workers:
    """Threads that upload or copy a shard's parts. Daemon threads: a copy the store is slow
    to answer never holds up the end of a stopped run (the upload is aborted meanwhile)."""

    def __init__(self, count: int) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._count = count
        for _ in range(count):
            threading.Thread(target=self._work, name="ishard-compose", daemon=True).start()

    def submit(self, call: Callable[..., T], *args: object) -> Future:
        """Run ``call(*args)`` on a worker; its future."""
        future: Future = Future()
        self._queue.put((future, call, args))
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, call, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call(*args))
            except BaseException as err:  # noqa: BLE001 - handed to whoever waits on it
                future.set_exception(err)

    def shutdown(self) -> None:
        """The workers end once what they run is done (parts not started are cancelled)."""
        for _ in range(self._count):
            self._queue.put(None)
