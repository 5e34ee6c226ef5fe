"""S3, GCS, Azure and AIStore (through its S3 API) on obstore, Rust's ``object_store``."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, cast

from ...errors import IshardError, SourceError, UsageError
from ..base import (
    Capabilities,
    Mode,
    ObjectInfo,
    Refused,
    Store,
    Unconditional,
    Upload,
    store_stamp,
)
from ..failures import Reached, out_of_memory, storage_error
from ..registry import Backend, backend, register
from ..remote import RemoteStore
from ..retry import run_with
from .credentials import NoCredentials, store_config
from .errors import (
    PERMANENT,
    Reason,
    Unlistable,
    answer,
    classify,
    parsed,
    scrubbed,
    status_of,
)
from .settings import KINDS, ais_endpoint

if TYPE_CHECKING:
    import asyncio

    from ..location import Location
    from ..retry import Retrier

BUCKET_SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs", "az": "az", "abfs": "az",
                  "abfss": "az"}  # fmt: skip
PAGE = 1000  # keys per listing request (S3's most)
T = TypeVar("T")
LISTERS = 16  # folders listed at once when a listing is split by folder
BULK = 1000  # keys per bulk delete request (S3's most)


def _stamp(meta: Any) -> int:
    return store_stamp({"ETag": meta.get("e_tag"), "LastModified": meta.get("last_modified")})


def _info(meta: Any) -> ObjectInfo:
    modified = meta.get("last_modified")
    mtime = int(modified.timestamp()) if isinstance(modified, datetime) else 0
    return ObjectInfo(meta["path"], int(meta["size"]), mtime, meta.get("e_tag"), _stamp(meta))


def _bytewise(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


class ObstoreStore(RemoteStore):
    """A bucket (or Azure container) through obstore. Its own retries are off: ishard's
    ``Retrier`` is the one retry layer. Reads run on an event loop of the store's own, in a
    daemon thread; listings of big folders are split by sub-folder and run in parallel."""

    capabilities = Capabilities(conditional=True)
    key_bytes = 1024  # S3's, GCS's and Azure's limit (a longer key fails only when written)

    def __init__(
        self,
        scheme: str,
        bucket: str,
        *,
        url: str,
        endpoint_url: str | None = None,
        storage_options: dict | None = None,
        role: str = "source",
    ) -> None:
        super().__init__(url, bucket)
        self.scheme = scheme
        # as given: a listing obstore cannot parse is listed again through fsspec with them
        self._given = (endpoint_url, dict(storage_options or {}), role)
        try:
            self.settings = store_config(
                scheme, bucket, url, endpoint_url, dict(storage_options or {})
            )
        except NoCredentials as err:
            raise storage_error("credentials", err, url, role, Reached(scheme)) from None
        self.client = _client(scheme, bucket, url, self.settings, retries=0)
        # a multipart upload's parts: a stream cannot be replayed from ishard's side, so the
        # part requests are retried by obstore itself
        self.upload_client = _client(scheme, bucket, url, self.settings, retries=4)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()

    @classmethod
    def open_bucket(
        cls, url: str, kind: str, bucket: str, endpoint_url: str | None, options: dict, role: str
    ) -> ObstoreStore:
        """The store of a bucket (or Azure container) of kind ``s3``, ``gs`` or ``az``."""
        return cls(
            kind, bucket, url=url, endpoint_url=endpoint_url, storage_options=options, role=role
        )

    def url_of(self, key: str) -> str:
        return f"{self.scheme}://{self.root}/{key}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:  # type: ignore[override]
        """The event loop the store's reads run on (started on first use)."""
        with self._loop_lock:
            if self._loop is None:
                import asyncio

                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="ishard-store", daemon=True).start()
                self._loop = loop
            return self._loop

    # -- listing ----------------------------------------------------------------------------
    def pages(self, prefix: str, retrier: Retrier) -> Iterator[list[ObjectInfo]]:
        """Pages in bytewise order. A folder (``""`` or ``…/``) with sub-folders is listed one
        sub-folder per request stream, ``LISTERS`` at once, merged back in order; any other
        prefix is a listing of its folder from the prefix on.

        A key obstore cannot parse (a control character) fails the listing; the rest of it
        is then listed through fsspec's client for the scheme, which reads such keys (the
        listing stage leaves them out and reports them, as it does a local file's name).

        Raises:
            SourceError: such a key, and no fsspec client installed (one line naming the key
                and the install hint).
        """
        last: bytes | None = None
        try:
            for page in self._listing(prefix, retrier):
                last = _bytewise(page[-1].key)
                yield page
        except Unlistable as err:
            lister = self._fsspec_lister()
            if lister is None:
                raise SourceError(err.message(self.url_of(prefix), self.scheme)) from None
            for page in lister.pages(prefix, retrier):
                rest = [i for i in page if last is None or _bytewise(i.key) > last]
                if rest:
                    yield rest

    def _fsspec_lister(self) -> Store | None:
        """The bucket through fsspec (s3fs, gcsfs, adlfs), or None when it is not installed."""
        endpoint_url, options, role = self._given
        fsspec = backend("fsspec").bucket
        if fsspec is None:
            return None
        try:
            return fsspec(self.url, self.scheme, self.root, endpoint_url, dict(options), role)
        except UsageError:
            return None

    def _listing(self, prefix: str, retrier: Retrier) -> Iterator[list[ObjectInfo]]:
        import obstore

        if prefix and not prefix.endswith("/"):
            yield from self._pages(prefix.rpartition("/")[0], prefix, retrier)
            return
        top = retrier.run(parsed(lambda: obstore.list_with_delimiter(self.client, prefix or None)))
        folders = [f.rstrip("/") + "/" for f in top["common_prefixes"]]
        if not folders:
            yield from self._pages(prefix.rstrip("/"), prefix, retrier)
            return
        items: list[tuple[bytes, object]] = [(_bytewise(f), f) for f in folders]
        items += [(_bytewise(m["path"]), _info(m)) for m in top["objects"]]
        items.sort(key=lambda item: item[0])
        with ThreadPoolExecutor(LISTERS, "ishard-list") as pool:
            work = iter(items)
            window: list = []

            def refill() -> None:
                while len(window) < LISTERS * 2:
                    item = next(work, None)
                    if item is None:
                        return
                    _, what = item
                    window.append(
                        pool.submit(self._folder, what, retrier) if isinstance(what, str) else what
                    )

            refill()
            while window:
                head = window.pop(0)
                page = head.result() if not isinstance(head, ObjectInfo) else [head]
                refill()
                if page:
                    yield page

    def _folder(self, folder: str, retrier: Retrier) -> list[ObjectInfo]:
        return [info for page in self._pages(folder.rstrip("/"), folder, retrier) for info in page]

    def _pages(self, folder: str, prefix: str, retrier: Retrier) -> Iterator[list[ObjectInfo]]:
        """Objects of ``folder`` whose keys start with ``prefix``, a page per request, each
        retried on its own: the next page is asked for from the last key seen."""
        import obstore

        after: str | None = _just_below(prefix) if prefix and not prefix.endswith("/") else None

        @parsed
        def page(offset: str | None) -> list:
            stream = obstore.list(self.client, folder or None, offset=offset, chunk_size=PAGE)
            return list(next(iter(stream), []))

        if self.scheme == "az":  # Azure lists from a marker, not from a key: one stream

            @parsed
            def whole() -> list[list]:
                return [list(p) for p in obstore.list(self.client, folder or None, chunk_size=PAGE)]

            for metas in retrier.run(whole):
                keep = self._objects(
                    [i for i in map(_info, metas) if i.key.startswith(prefix)], retrier
                )
                if keep:
                    yield keep
            return
        while True:
            metas = retrier.run(partial(page, after))
            infos = [_info(m) for m in metas]
            keep = self._objects([i for i in infos if i.key.startswith(prefix)], retrier)
            if keep:
                yield keep
            if len(infos) < PAGE or (
                prefix and infos[-1].key > prefix and not infos[-1].key.startswith(prefix)
            ):
                return  # the last page, or past the prefix: the rest sorts after it
            after = infos[-1].key

    def _objects(self, infos: list[ObjectInfo], retrier: Retrier) -> list[ObjectInfo]:
        """``infos`` without folder markers: obstore lists a key ``dir/`` as ``dir``, which
        then does not exist; so an empty object is kept only if it is there by its name."""
        import obstore

        def there(key: str) -> bool:
            try:
                retrier.run(lambda: obstore.head(self.client, key))
            except FileNotFoundError:
                return False
            return True

        return [i for i in infos if i.size or there(i.key)]

    def has_objects(self, prefix: str) -> bool:
        import obstore

        stream = obstore.list(self.client, prefix.rstrip("/") or None, chunk_size=1)
        return bool(next(iter(stream), []))

    # -- reading ----------------------------------------------------------------------------
    def read(self, key: str, start: int = -1, end: int = -1) -> bytes:
        import obstore

        if start < 0:
            return obstore.get(self.client, key).bytes().to_bytes()
        return obstore.get_range(self.client, key, start=start, end=end).to_bytes()

    async def read_async(self, key: str, start: int = -1, end: int = -1) -> bytes:
        import obstore

        if start < 0:
            result = await obstore.get_async(self.client, key)
            return (await result.bytes_async()).to_bytes()
        return (await obstore.get_range_async(self.client, key, start=start, end=end)).to_bytes()

    def open_read(self, key: str) -> BinaryIO:
        import obstore

        return cast(BinaryIO, _Readable(obstore.open_reader(self.client, key, buffer_size=8 << 20)))

    def stat(self, key: str) -> ObjectInfo:
        import obstore

        return _info(obstore.head(self.client, key))

    # -- small files ------------------------------------------------------------------------
    def get(self, key: str) -> tuple[bytes, str | None]:
        import obstore

        result = obstore.get(self.client, key)
        return result.bytes().to_bytes(), self._tag(result.meta)

    def put(self, key: str, data: bytes, *, mode: Mode = "overwrite") -> str | None:
        import obstore
        from obstore.exceptions import AlreadyExistsError, NotSupportedError, PreconditionError

        how: Any = (
            mode
            if isinstance(mode, str)
            else {"version" if self.scheme == "gs" else "e_tag": mode[1]}
        )
        try:
            return self._tag(obstore.put(self.client, key, data, mode=how, use_multipart=False))
        except (AlreadyExistsError, PreconditionError) as err:
            raise Refused(str(err).partition(":")[0]) from None
        except NotSupportedError as err:
            raise Unconditional(str(err).splitlines()[0]) from None
        except FileNotFoundError:
            if mode == "overwrite" or mode == "create":
                raise
            raise Refused("the object is gone") from None

    def _tag(self, meta: Any) -> str | None:
        """What a conditional put matches: the ETag, or on GCS the object's generation
        (object_store takes only a generation there)."""
        return meta.get("version") if self.scheme == "gs" else meta.get("e_tag")

    def delete(self, keys: Iterable[str], retrier: Retrier | None = None) -> None:
        keys = list(keys)
        for start in range(0, len(keys), BULK):
            run_with(retrier, partial(self._delete_batch, keys[start : start + BULK]))

    def _delete_batch(self, batch: list[str]) -> None:
        import obstore

        try:
            obstore.delete(self.client, batch)
        except FileNotFoundError:  # Azure refuses a batch with a missing key: one by one
            for key in batch:
                try:
                    obstore.delete(self.client, key)
                except FileNotFoundError:
                    pass

    def find(self, prefix: str, retrier: Retrier | None = None) -> list[str]:
        folder = prefix.rstrip("/") + "/" if prefix else ""
        pages = self._pages(folder.rstrip("/"), folder, retrier or _once())
        return [info.key for page in pages for info in page]

    # -- shards -----------------------------------------------------------------------------
    def sink(self, key: str, upload: Upload):
        from .sink import ObstoreSink

        return ObstoreSink(self, key, upload)

    def abort_uploads(self, keys: Iterable[str], retrier: Retrier) -> int:
        """S3 only (Azure drops uncommitted blocks by itself after a week; GCS's XML multipart
        uploads are not used by obstore for GCS): a killed run's open multipart uploads of
        these keys, aborted (``s3uploads``)."""
        if self.scheme != "s3":
            return 0
        from .s3uploads import abort_open_uploads

        return abort_open_uploads(self.settings, self.root, set(keys), retrier)

    def composer(self, source: Location, dest: Location, *, min_size: int, part_size: int):
        """A ``Composer`` where SRC is in this S3 service too (one endpoint, region and set
        of credentials) or this Azure account; else why not (None for a SRC that is no
        bucket)."""
        src = source.store
        if not isinstance(src, ObstoreStore):
            return None  # a local SRC, or one through fsspec: no copy in a store was to be had
        if src.scheme != self.scheme:
            return (
                f"SRC and DST are in different kinds of store ({src.scheme}:// to {self.scheme}://)"
            )
        if self.scheme == "az":
            from .azcompose import azure_composer

            return azure_composer(source, dest, min_size=min_size, part_size=part_size)
        if self.scheme != "s3":
            return "GCS composes whole objects only, not byte ranges of them: not done there"
        mine, theirs = self.settings.get("signing") or {}, src.settings.get("signing") or {}
        same = ("endpoint", "region", "access_key", "secret_key", "token", "provider")
        if any(mine.get(k) != theirs.get(k) for k in same):
            return "SRC and DST are reached through other endpoints or credentials"
        if not (mine.get("access_key") or mine.get("provider")):
            return "no credentials ishard can sign S3 requests with (unsigned access)"
        from .s3compose import s3_composer

        return s3_composer(source, dest, min_size=min_size, part_size=part_size)

    # -- errors -----------------------------------------------------------------------------
    def classify(self, err: BaseException) -> str:
        return classify(err)

    def error(self, err: BaseException, role: str, where: str | None = None):
        """As :meth:`Store.error`, with obstore's long report cut to its reason, the store's
        own error code and message, where the requests went, and no secret."""
        if isinstance(err, IshardError):
            return err
        if isinstance(err, MemoryError):
            return out_of_memory(where or self.url, role)
        code, message = answer(str(err))
        reached = Reached(
            self.scheme,
            self.settings.get("endpoint"),
            self.settings.get("token"),
            f"{code}: {message}" if code and message else code or None,
        )
        out = storage_error(self.classify(err), Reason(err), where or self.url, role, reached)
        return scrubbed(out, self.settings["config"])


def _once():
    from ..retry import Retrier

    return Retrier(0)


def _just_below(prefix: str) -> str | None:
    """A key every key starting with ``prefix`` sorts after (a listing's start): the prefix
    less its last character, less a trailing ``/`` (no key object_store takes ends in one)."""
    return prefix[:-1].rstrip("/") or None


class _Readable:
    """obstore's reader as the binary stream tarfile, zipfile and hashing expect (``bytes``
    from ``read``; a context manager)."""

    def __init__(self, reader) -> None:
        self._reader = reader

    def read(self, size: int = -1) -> bytes:
        data = self._reader.read() if size is None or size < 0 else self._reader.read(size)
        return data.to_bytes()

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._reader.seek(offset, whence)

    def tell(self) -> int:
        return self._reader.tell()

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    @property
    def size(self) -> int:
        return self._reader.size

    def close(self) -> None:
        self._reader.close()

    @property
    def closed(self) -> bool:
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _client(scheme: str, bucket: str, url: str, settings: dict, retries: int):
    from obstore.exceptions import BaseError
    from obstore.store import AzureStore, GCSStore, S3Store

    kind = {"s3": S3Store, "gs": GCSStore, "az": AzureStore}[scheme]
    try:
        return kind(
            bucket,
            config=settings["config"],
            client_options=settings["client"],
            retry_config={"max_retries": retries},
            credential_provider=settings.get("provider"),
        )
    except (BaseError, ValueError, TypeError) as err:
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(
            f"{url!r}: the store cannot be set up: {text} — check "
            "--storage-option and --endpoint-url"
        ) from None


register(
    Backend(
        "obstore",
        schemes=BUCKET_SCHEMES,
        fallbacks={"ais": "s3"},  # AIStore through its S3 gateway, until a backend of its own
        bucket=ObstoreStore.open_bucket,
        endpoints={"ais": ais_endpoint},
        kinds=KINDS,
        permanent=PERMANENT,
        status=status_of,
    )
)
