"""A shard streamed into a bucket through obstore: parts upload while it is written, and the
object appears only on commit, under the destination's lease."""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import Future, TimeoutError
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import IshardError
from ..sinks import Hashing, guarded, name_taken

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Iterable

    from ..base import Upload
    from ..retry import Retrier

MIN_PART = 5 << 20  # S3's smallest part (but the last)
MAX_PARTS = 10_000
PARTS_IN_FLIGHT = 2  # parts uploading at once per shard (obstore holds one more, filling)
PIECE = 1 << 20  # bytes handed to the upload at a time, once it has started
PIECES_QUEUED = 4  # per shard: part_size * (PARTS_IN_FLIGHT + 1) + 5 MiB of memory at most
POLL = 0.5  # seconds between looks at a stalled upload (Ctrl-C acts between them)


class Bucket(Protocol):
    """What an upload needs of its store (``obstore.ObstoreStore``)."""

    client: Any
    upload_client: Any

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def url_of(self, key: str) -> str: ...

    def error(self, err: BaseException, role: str, where: str | None = None) -> IshardError: ...

    def exists(self, key: str) -> bool: ...

    def abort_uploads(self, keys: Iterable[str], retrier: Retrier) -> int: ...


class _Failed(Exception):
    """Handed to the upload's byte stream to stop it: obstore then aborts the upload."""


class ObstoreSink(Hashing):
    """A shard streamed to an obstore bucket.

    A shard smaller than one part is one PUT at commit (retried by ishard). A bigger one is a
    multipart upload fed a MiB at a time from this thread to the store's event loop (at most
    ``PIECES_QUEUED`` pieces queued, ``PARTS_IN_FLIGHT`` parts uploading); obstore completes
    it when its byte stream ends, which happens only in :meth:`commit`, and aborts it when the
    stream fails (:meth:`abort`). Its part requests are retried by obstore itself (the store's
    ``upload_client``): a stream cannot be replayed from ishard's side without holding the
    whole shard.
    """

    def __init__(self, store: Bucket, key: str, upload: Upload) -> None:
        super().__init__()
        self._store, self._key, self._guard = store, key, upload.guard
        self._exclusive = upload.exclusive  # published only where its name is free
        self._retrier, self._cleanup, self._notice = upload.retrier, upload.cleanup, upload.notice
        self.url, self.etag = store.url_of(key), None
        self._part = max(
            upload.part_size, MIN_PART, math.ceil(upload.expected * 1.1 / (MAX_PARTS - 100))
        )
        self._buf = bytearray()
        self._queue: Any = None
        self._upload: Future | None = None

    # -- the upload on the store's loop ------------------------------------------------------
    def _start(self) -> None:
        import asyncio

        import obstore

        loop = self._store.loop

        async def make_queue():
            return asyncio.Queue(PIECES_QUEUED)

        self._queue = queue = asyncio.run_coroutine_threadsafe(make_queue(), loop).result()

        async def stream():
            while (part := await queue.get()) is not None:
                if isinstance(part, BaseException):
                    raise part
                yield part

        async def upload():  # obstore's coroutines belong to the loop they are made on
            return await obstore.put_async(
                self._store.upload_client,
                self._key,
                stream(),
                chunk_size=self._part,
                max_concurrency=PARTS_IN_FLIGHT,
            )

        self._upload = asyncio.run_coroutine_threadsafe(upload(), loop)

    def _hand_over(self, item) -> None:
        """Queue ``item`` for the upload, waiting while the queue is full; an upload that has
        failed meanwhile raises its error."""
        import asyncio

        put = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._store.loop)
        while True:
            try:
                put.result(POLL)
                return
            except TimeoutError:
                if self._upload is not None and self._upload.done():
                    put.cancel()
                    self._result()  # raises the upload's error
                    return

    def _result(self, timeout: float | None = None) -> dict:
        assert self._upload is not None
        while True:
            try:
                return self._upload.result(POLL if timeout is None else timeout)
            except TimeoutError:
                if timeout is not None:
                    raise
            except IshardError:
                raise
            except Exception as err:  # noqa: BLE001 - a store's error, translated once
                raise self._store.error(err, "destination", self.url) from None

    # -- the sink ---------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Append ``data``. Once a part's worth has come the upload starts, and from then on
        bytes go to it a MiB at a time (obstore gathers them into parts)."""
        self._count(data)
        self._buf += data
        if self._upload is None:
            if len(self._buf) < self._part:
                return
            self._start()
        if len(self._buf) >= PIECE:
            self._hand_over(bytes(self._buf))
            self._buf.clear()

    def close(self) -> None:
        """All bytes are written: the last part goes to the upload (a small shard waits for
        commit)."""
        if self._upload is not None and self._buf:
            self._hand_over(bytes(self._buf))
            self._buf.clear()

    def commit(self) -> None:
        """Complete the upload (or PUT a small shard): only now does the object exist, and only
        while this run holds the destination's lease; an exclusive one only where no object
        has its name (asked just before: a multipart upload takes no condition)."""
        if self._exclusive:
            with self._store_errors():
                taken = self._retrier.run(lambda: self._store.exists(self._key))
            if taken:
                raise name_taken(self.url)
        if self._upload is None:
            import obstore

            body, client = bytes(self._buf), self._store.client
            with self._store_errors():
                out = guarded(
                    self._guard,
                    self.url,
                    lambda: self._retrier.run(
                        lambda: obstore.put(client, self._key, body, use_multipart=False)
                    ),
                )
        else:

            def complete() -> dict:
                self._hand_over(None)
                return self._result()

            out = guarded(self._guard, self.url, complete)
            self._upload = None
        self.etag = out.get("e_tag")

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        """A failure inside as the one-line error a user sees (``ObstoreStore.error``)."""
        try:
            yield
        except Exception as err:  # noqa: BLE001 - a store's errors, translated once
            raise self._store.error(err, "destination", self.url) from None

    def abort(self) -> None:
        """Stop the upload: obstore aborts it; then, where the store can list open uploads,
        any left for this key (obstore's abort failed, the store was away) is aborted here,
        retrying patiently — neither a partial object nor an open upload may remain (if one
        does, it is told, with what to do)."""
        if self._upload is None:
            return
        import asyncio

        upload, self._upload = self._upload, None
        asyncio.run_coroutine_threadsafe(self._queue.put(_Failed("aborted")), self._store.loop)
        try:
            upload.result(max(POLL, self._cleanup.patience))
        except TimeoutError:
            upload.cancel()  # obstore's own retries stop: no request of it follows the check
        except Exception:  # noqa: BLE001, S110 - the upload's end, whatever it was: checked below
            pass
        # Checked whenever the upload was started, whether or not it took bytes: obstore opens
        # it before it asks for any, and a CreateMultipartUpload whose answer was lost (the
        # store died after creating it) fails here but has opened an upload there.
        try:
            self._store.abort_uploads([self._key], self._retrier)
        except Exception as err:  # noqa: BLE001 - any failure to abort: retried patiently below
            self._notice(
                f"could not abort the unfinished upload of {self.url} yet "
                f"({type(err).__name__}); retrying for up to "
                f"{self._cleanup.patience:.0f}s"
            )
            try:
                self._store.abort_uploads([self._key], self._cleanup)
            except Exception:  # noqa: BLE001 - any failure: told, with what to do
                self._notice(
                    f"the unfinished upload of {self.url} could not be aborted — once the "
                    "store is back, run ishard again with --resume (it aborts such uploads), "
                    "or set a lifecycle rule"
                )
