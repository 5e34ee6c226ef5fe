"""The storage contract every place bytes live implements: list, read, write, small files, errors."""

from __future__ import annotations

import errno
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Literal, Protocol

from ..errors import IshardError, SourceError
from .failures import Reached, out_of_memory, storage_error

if TYPE_CHECKING:
    import asyncio

    from ..model import Tally
    from .retry import Retrier


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One listed or looked-up object: its key (relative to the store's root), size, whole-second
    mtime, ETag (None where the store has none) and ``stamp``, 8 bytes that change when the
    object is rewritten even at the same size within the same second, as a signed 64-bit
    integer (``store_stamp``; resume checks it)."""

    key: str
    size: int
    mtime: int = 0
    etag: str | None = None
    stamp: int = 0


COPY_CHUNK = 1 << 20  # bytes of a local file written to a store at a time


def store_stamp(info: dict) -> int:
    """An object's identity beyond its size, in 64 bits: its ETag and modification time as the
    store lists them (0 when it lists neither)."""
    etag = next((info[k] for k in ("ETag", "etag") if k in info), None)
    modified = next(
        (info[k] for k in ("LastModified", "last_modified", "updated", "mtime") if k in info), None
    )
    if etag is None and modified is None:
        return 0
    text = f"{etag}\x00{modified}".encode("utf-8", "surrogateescape")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little", signed=True)


class Listing(Protocol):
    """What a source's files are listed into (planning's ``FileTable``): one file at a time,
    or a run of files as columns."""

    def add(
        self, name: str, size: int, mtime: int, stamp: int = 0, etag: str | None = None
    ) -> None: ...

    def extend(
        self, names: list[str], sizes: list[int], mtimes: list[int], stamps: list[int]
    ) -> None: ...


@dataclass(frozen=True)
class SourceListing:
    """How a source is listed, whatever its store: the names wanted (those starting with
    ``prefix``; names starting with ``.`` only with ``include_hidden``; a local tree's links
    followed only with ``follow_symlinks``), where what is left out is counted (``tally``),
    who hears of each file listed (``on_file``, or None), what retries a store's requests
    (``retrier``) and whether a store's ETags are listed too (``etags``)."""

    prefix: str
    include_hidden: bool
    tally: Tally
    on_file: Callable[..., None] | None
    retrier: Retrier
    follow_symlinks: bool = False
    etags: bool = False


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store can do, asked by name: no caller infers it from a store's type or scheme."""

    #: forked writer processes may open it themselves (a run may write with processes)
    forkable: bool = False
    #: conditional writes (``put(mode=…)``) may be tried
    conditional: bool = False
    #: its requests wait on a network, so many at once help: more shard writers and verify
    #: threads than CPUs
    many_at_once: bool = True
    #: a request may fail for a while and succeed when tried again (a network between): a
    #: failed read is retried, and its error is the store's to translate, not a file's own
    transient_errors: bool = True
    #: its names are files or real folders: whether a name is a folder is known at no cost
    folders: bool = False


class Refused(Exception):
    """A conditional write whose condition did not hold (the object exists, or its ETag moved)."""


class NotRegular(OSError):
    """A name that holds something other than a regular file (a link, a FIFO, a directory),
    which is never read: ``strerror`` says what it is (``a FIFO``), ``filename`` names it."""

    @classmethod
    def named(cls, what: str, name: str | None) -> NotRegular:
        """``what`` (``a FIFO``) found under ``name`` (None: the store's root)."""
        return cls(errno.EINVAL, what, name) if name else cls(errno.EINVAL, what)


class Unconditional(Exception):
    """The store does not take the condition asked for (it would ignore or reject it)."""


Mode = Literal["overwrite", "create"] | tuple[Literal["match"], str]


class Guard(Protocol):
    """The destination's lease, as a sink sees it: confirmed before publishing, checked after."""

    def confirm(self) -> float: ...

    def committed(self, confirmed: float, what: str) -> None: ...


class WorkerCheck(Protocol):
    """What a Dask worker checks before it commits a shard: bound to the worker's own location
    of DST, then a ``Guard`` (a lease's ``LeaseCheck``)."""

    def bind(self, dest) -> Guard: ...


class ComposeRefused(Exception):
    """The store refused a request composing a shard needs (``reason`` says which): the shard
    is written through the client instead, and so is every later one of the run."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Composer(Protocol):
    """Shards composed inside a store (``--compose``): which members it copies, the sink that
    composes a shard (None: that shard goes through the client), and the first refusal met."""

    refusal: str | None

    def placed(self, entry) -> bool: ...

    def sink(self, shard, key: str, upload: Upload): ...


class Lock(Protocol):
    """A run's hold on its destination (``Store.lock``), released at the end. A lock that can
    be lost while the run lasts (a lease on a store) is its own ``guard``, confirmed before
    each publication; one that cannot (a local ``flock``) has none."""

    @property
    def guard(self) -> Guard | None: ...

    def for_workers(self) -> WorkerCheck | None:
        """What a Dask worker checks before it commits a shard (None: nothing to check)."""

    def release(self) -> None: ...


@dataclass(frozen=True)
class Upload:
    """How a shard is written to a store: ``retrier`` for its requests, ``cleanup`` (patient)
    for aborting it, ``part_size`` and ``expected`` bytes for a multipart upload, ``notice`` to
    tell a user what is being waited for, ``guard`` the destination's lease (None: none);
    ``exclusive``: the name must be free when the shard is published (a growing dataset's
    new shard), never written over."""

    retrier: Retrier
    cleanup: Retrier
    part_size: int
    expected: int
    notice: Callable[[str], None]
    guard: Guard | None = None
    exclusive: bool = False


class Sink(Protocol):
    """One shard being written: bytes in, then ``close``; it appears under its name only on
    ``commit``; ``abort`` leaves nothing behind (no partial object, no open upload)."""

    url: str
    etag: str | None
    size: int

    @property
    def checksum(self) -> str | None: ...

    def use_checksum(self, algorithm: str) -> None: ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


@contextmanager
def publishing(sink: Sink) -> Iterator[Sink]:
    """The block writes into ``sink``; then it is closed and committed (it appears under its
    name), or aborted when anything failed, Ctrl-C too (it leaves nothing behind)."""
    try:
        yield sink
        sink.close()
        sink.commit()
    except BaseException:
        sink.abort()
        raise


class Store(ABC):
    """Where bytes live: one root (a local directory, a bucket, an fsspec URL path).

    Keys are ``/``-separated and relative to the root. Every method may raise the store's own
    exceptions; :meth:`error` turns any of them into the one-line ``IshardError`` a user sees
    (the only place that does). Missing objects raise ``FileNotFoundError``.
    """

    #: ``s3``, ``gs``, ``az``, ``memory``, … or ``file`` for a local directory
    scheme: str = "file"
    #: what it can do (callers ask these, never its type or scheme)
    capabilities: Capabilities = Capabilities()

    def __init__(self, url: str, root: str) -> None:
        self.url, self.root = url, root

    # -- addresses --------------------------------------------------------------------------
    def url_of(self, key: str) -> str:
        """The URL (or local path) a user would give for ``key``."""
        return f"{self.scheme}://{self.root}/{key}" if self.root else f"{self.scheme}://{key}"

    def make_root(self) -> bool:
        """Create the root where a store has folders (a local destination); return whether it
        was made (a bucket must exist already)."""
        return False

    def remove_root_if_empty(self) -> None:
        """Undo :meth:`make_root` when nothing was written."""

    #: the most bytes a key may have (S3, GCS and Azure: 1024); None: no limit known
    key_bytes: int | None = None

    def name_bytes(self) -> int | None:
        """The most bytes a shard's file name may have here, with room for the temporary
        name it is written under first; None: no limit known."""
        return None

    def check_destination(self, url: str) -> None:
        """Refuse a destination this store cannot write into as it is (e.g. a file where a
        directory belongs, a linked run state)."""
        self.check_folder(url, "give a directory")

    def check_folder(self, url: str, fix: str) -> None:
        """Refuse a root that is a file where a folder belongs (``fix`` says what to give)."""

    def root_exists(self) -> bool:
        """Does the root (bucket, directory) exist?"""
        try:
            self.has_objects("")
        except FileNotFoundError:
            return False
        except Exception as err:  # a client's own error for a missing bucket (a 404 listing)
            if self.classify(err) == "missing":
                return False
            raise
        return True

    def within(self, prefix: str, other: Store, other_prefix: str) -> bool:
        """Does ``prefix`` here lie inside ``other_prefix`` of ``other`` (the same place)?"""
        return (
            type(other) is type(self)
            and other.url_of("") == self.url_of("")
            and prefix.strip("/").startswith(other_prefix.strip("/"))
        )

    # -- listing ----------------------------------------------------------------------------
    @abstractmethod
    def pages(self, prefix: str, retrier: Retrier) -> Iterator[list[ObjectInfo]]:
        """Every object whose key starts with ``prefix``, once, page by page, in the store's
        listing order (bytewise on S3, GCS and Azure; folder by folder on some S3-compatible
        servers: callers sort); each request retried by ``retrier``.

        Raises:
            FileNotFoundError: the root (bucket, directory) does not exist.
        """

    @abstractmethod
    def list_source(self, location, entries: Listing, listing: SourceListing) -> None:
        """List the files of a source on this store into ``entries`` as ``listing`` asks, under
        the store's rules (what is left out is counted in its ``tally``); the caller sorts
        them."""

    @abstractmethod
    def has_objects(self, prefix: str) -> bool:
        """Is any object's key under ``prefix`` (a ``/``-ended folder, or ``""`` for all)?

        Raises:
            FileNotFoundError: the root (bucket) does not exist.
        """

    def is_folder(self, key: str) -> bool:
        """Does ``key`` name a folder (a prefix with objects under it) rather than an object?"""
        try:
            return self.has_objects(key.rstrip("/") + "/") if key else True
        except (OSError, ValueError):
            return False

    def exists(self, key: str) -> bool:
        """Is ``key`` an object, or a folder holding objects?"""
        try:
            self.stat(key)
            return True
        except FileNotFoundError:
            return self.has_objects(key.rstrip("/") + "/")

    # -- reading ----------------------------------------------------------------------------
    def descriptor(self, key: str) -> int | None:
        """A descriptor of the local file ``key`` opened for reading (no link followed), for a
        reader that takes a path (``/proc/self/fd/N``); None where objects are not files."""
        return None

    #: an event loop (in its own thread) that runs :meth:`read_async`; None: use threads
    loop: asyncio.AbstractEventLoop | None = None

    @abstractmethod
    def read(self, key: str, start: int = -1, end: int = -1) -> bytes:
        """The object's bytes, or bytes [start, end) of it (start -1: all of it)."""

    async def read_async(self, key: str, start: int = -1, end: int = -1) -> bytes:
        """:meth:`read` as a coroutine on :attr:`loop` (a store with an async client reads
        natively; by default :meth:`read` runs in the loop's thread pool)."""
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, self.read, key, start, end)

    @abstractmethod
    def reader(
        self, location, retrier: Retrier, *, jobs: int, budget: int, follow_symlinks: bool = False
    ):
        """The reader of a source on this store (``readers.Reader``), at most ``jobs`` reads at
        once and memory bounded by ``budget`` where it reads ahead."""

    @abstractmethod
    def open_read(self, key: str) -> BinaryIO:
        """A buffered stream of the object (verify, ``ishard ls``, re-hashing)."""

    @abstractmethod
    def stat(self, key: str) -> ObjectInfo:
        """The object's size, ETag and stamp (``FileNotFoundError`` if missing)."""

    #: objects a list of names alone asks about at once (:meth:`sizes`)
    stats_at_once = 32

    def sizes(
        self, keys: Sequence[str], retrier: Retrier, follow_symlinks: bool = False
    ) -> list[ObjectInfo]:
        """Each object's size and mtime, in order (a list of names alone, ``--src-list``):
        a request per object (:meth:`stat`), ``stats_at_once`` under way at once.

        Raises:
            SourceError: an object is missing.
        """
        from concurrent.futures import ThreadPoolExecutor

        def one(key: str) -> ObjectInfo:
            try:
                return retrier.run(lambda: self.stat(key))
            except FileNotFoundError:
                raise SourceError(
                    f"object {key!r} is named in --src-list but is not in the source "
                    f"{self.url!r} — remove it from the list, or fix the name"
                ) from None

        with ThreadPoolExecutor(min(self.stats_at_once, len(keys) or 1), "ishard-stat") as pool:
            return list(pool.map(one, keys))

    # -- small files (manifest, run state, lock) --------------------------------------------
    @abstractmethod
    def get(self, key: str) -> tuple[bytes, str | None]:
        """A small object whole, with its version tag — its ETag, or its generation on GCS:
        what ``put(mode=("match", tag))`` matches (``FileNotFoundError`` if missing)."""

    @abstractmethod
    def put(self, key: str, data: bytes, *, mode: Mode = "overwrite") -> str | None:
        """Write a small object whole and atomically (readers see the old or the new bytes);
        return its version tag (as :meth:`get`). ``mode`` ``"create"``: only if absent;
        ``("match", tag)``: only if its version tag is still ``tag``.

        Raises:
            Refused: the condition did not hold.
            Unconditional: the store does not take conditions (see ``capabilities``).
        """

    @abstractmethod
    def delete(self, keys: Iterable[str], retrier: Retrier | None = None) -> None:
        """Remove these objects (missing ones are no error), in as few requests as the store
        allows, each retried on its own by ``retrier`` (None: tried once); never a folder."""

    def delete_tree(self, prefix: str, retrier: Retrier | None = None) -> None:
        """Remove everything under the folder ``prefix`` (each request retried by
        ``retrier``: a throttled page or batch is asked for again, not the whole)."""
        self.delete(self.find(prefix, retrier), retrier)

    @abstractmethod
    def find(self, prefix: str, retrier: Retrier | None = None) -> list[str]:
        """The keys under the folder ``prefix`` (recursively), each request retried by
        ``retrier`` (None: tried once)."""

    def put_from(self, key: str, path: str, upload: Upload) -> None:
        """Write the file ``path`` of this machine under ``key`` whole and atomically, a chunk
        at a time (a run's record too big to hold in memory): through a sink, committed once
        complete."""
        sink = self.sink(key, upload)
        sink.use_checksum("none")
        with publishing(sink), open(path, "rb") as source:
            while chunk := source.read(COPY_CHUNK):
                sink.write(chunk)

    # -- shards -----------------------------------------------------------------------------
    @abstractmethod
    def sink(self, key: str, upload: Upload) -> Sink:
        """A writer for one shard, published under ``key`` only on ``commit`` (while ``guard``
        confirms the lease)."""

    def composer(self, source, dest, *, min_size: int, part_size: int) -> Composer | str | None:
        """What composes shards inside this store from ``source``'s members (``--compose``):
        a ``Composer``; or why it cannot, where a user could expect it (a sentence: both are
        buckets); or None (a local file, another kind of store: nothing to say)."""
        return None

    def remove_temp_files(self, keys: list[str]) -> int:
        """Remove temp files a killed run left beside these shard keys; how many (stores
        write no temp files: an object appears whole or not at all)."""
        return 0

    @abstractmethod
    def lock(self, location, retrier: Retrier) -> Lock:
        """Take the destination for this run."""

    @abstractmethod
    def check_unlocked(self, location, retrier: Retrier) -> None:
        """Refuse, as :meth:`lock` would, a destination a live run holds; read only, nothing
        taken or written (a dry run's look)."""

    def abort_uploads(self, keys: Iterable[str], retrier: Retrier) -> int:
        """Abort unfinished uploads a killed run left for these keys; return how many."""
        return 0

    # -- errors -----------------------------------------------------------------------------
    @abstractmethod
    def classify(self, err: BaseException) -> str:
        """What ``err`` means: ``missing``, ``denied``, ``rejected`` (the credentials were
        refused), ``credentials`` (none found), ``refused`` (a condition that did not hold),
        ``invalid`` (any other 4xx answer but 408 and 429: the store refused the request as
        made, a name it does not take, say), ``unsupported`` or ``unreachable``."""

    def error(self, err: BaseException, role: str, where: str | None = None) -> IshardError:
        """The one-line error a user sees for ``err`` met while using this store as ``role``
        (credentials never appear). A missing bucket or path is a bad invocation (exit 2);
        denied access and unreachable endpoints are runtime failures (exit 1). An
        ``IshardError`` is already one: it is returned as it is."""
        if isinstance(err, IshardError):
            return err
        if isinstance(err, MemoryError):
            return out_of_memory(where or self.url, role)
        return storage_error(self.classify(err), err, where or self.url, role, Reached(self.scheme))
