"""Every other URL (``memory://``, ``hf://``, ``http(s)://``, …) and, on request, buckets through fsspec."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO

from ..errors import IshardError, UsageError
from .base import Guard, Mode, ObjectInfo, Unconditional, Upload, store_stamp
from .registry import Backend, register
from .remote import RemoteStore
from .retry import http_status, refused_request, run_with
from .sinks import TEMP_SUFFIX, Hashing, guarded, name_taken

if TYPE_CHECKING:
    from .retry import Retrier

FSSPEC_EXTRAS = {"s3": "s3", "gs": "gcs", "az": "azure"}  # pip extras for backend=fsspec


def _mtime(info: dict) -> int:
    for key in ("LastModified", "mtime", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp())
        try:
            return int(float(value))
        except (TypeError, ValueError):
            continue
    return 0


class FsspecStore(RemoteStore):
    """A store on an fsspec filesystem; keys are paths under ``root``."""

    def __init__(self, url: str, fs: Any, root: str, scheme: str) -> None:
        super().__init__(url, root)
        self.fs, self.scheme = fs, scheme
        self.bucket = scheme in ("s3", "gs", "az")  # ``backend=fsspec``: the root is a bucket
        if getattr(fs, "async_impl", False):
            self.loop = fs.loop

    @classmethod
    def open(
        cls, url: str, scheme: str, endpoint_url: str | None, options: dict, role: str
    ) -> FsspecStore:
        """The store for a non-bucket URL (its path is the root)."""
        if endpoint_url:
            options.setdefault("endpoint_url", endpoint_url)
        fs, path = _filesystem(url, scheme, None, options, role)
        return cls(url, fs, path.rstrip("/"), scheme)

    @classmethod
    def open_bucket(
        cls, url: str, kind: str, bucket: str, endpoint_url: str | None, options: dict, role: str
    ) -> FsspecStore:
        """A bucket through s3fs, gcsfs or adlfs (``--storage-option backend=fsspec``)."""
        if endpoint_url:
            options.setdefault("endpoint_url", endpoint_url)
        protocol = {"s3": "s3", "gs": "gcs", "az": "abfs"}[kind]
        if kind == "s3":  # ishard retries; botocore's own retries stay few
            options = {
                "max_concurrency": 1,
                **options,
                "config_kwargs": {
                    "retries": {"max_attempts": 2, "mode": "standard"},
                    "max_pool_connections": 128,
                    **options.get("config_kwargs", {}),
                },
            }
        return cls(url, _filesystem(url, kind, protocol, options, role)[0], bucket, kind)

    def _path(self, key: str) -> str:
        if not key:
            return self.root
        return f"{self.root}/{key}" if self.root else key

    # -- listing ----------------------------------------------------------------------------
    def pages(self, prefix: str, retrier: Retrier) -> Iterator[list[ObjectInfo]]:
        """One page: every file under the prefix's folder whose key starts with ``prefix``."""
        run, fs, cut = retrier.run, self.fs, len(self.root) + 1 if self.root else 0
        if not run(lambda: fs.exists(self.root or "/")):
            raise FileNotFoundError(self.root)
        start = (
            self._path(prefix.rpartition("/")[0])
            if prefix.rpartition("/")[0]
            else (self.root or "/")
        )
        found = run(lambda: fs.find(start, detail=True))
        page = []
        for info in found.values():
            if info.get("type", "file") != "file":
                continue
            key = info["name"][cut:] if self.root else info["name"].lstrip("/")
            if key.startswith(prefix):
                page.append(
                    ObjectInfo(
                        key,
                        int(info["size"]),
                        _mtime(info),
                        info.get("ETag") or info.get("etag"),
                        store_stamp(info),
                    )
                )
        page.sort(key=lambda o: o.key.encode("utf-8", "surrogateescape"))
        yield page

    def has_objects(self, prefix: str) -> bool:
        fs, path = self.fs, self._path(prefix.rstrip("/")) if prefix else self.root
        if not fs.exists(path):
            if self.bucket and not fs.exists(self.root):
                raise FileNotFoundError(self.root)  # a missing bucket; folders come and go
            return False
        if prefix.endswith("/") and not fs.isdir(path):
            return False  # a file of that name holds no objects under it
        return bool(fs.ls(path, detail=False))

    # -- reading ----------------------------------------------------------------------------
    def read(self, key: str, start: int = -1, end: int = -1) -> bytes:
        kwargs = {} if start < 0 else {"start": start, "end": end}
        return self.fs.cat_file(self._path(key), **kwargs)

    async def read_async(self, key: str, start: int = -1, end: int = -1) -> bytes:
        kwargs = {} if start < 0 else {"start": start, "end": end}
        return await self.fs._cat_file(self._path(key), **kwargs)

    def open_read(self, key: str) -> BinaryIO:
        return self.fs.open(self._path(key), "rb", block_size=8 << 20)

    def stat(self, key: str) -> ObjectInfo:
        info = self.fs.info(self._path(key))
        return ObjectInfo(
            key, int(info["size"]), _mtime(info), info.get("ETag") or info.get("etag")
        )

    # -- small files ------------------------------------------------------------------------
    def get(self, key: str) -> tuple[bytes, str | None]:
        return self.fs.cat_file(self._path(key)), None

    def put(self, key: str, data: bytes, *, mode: Mode = "overwrite") -> str | None:
        if mode != "overwrite":
            raise Unconditional(f"{self.scheme}:// takes no conditional writes")
        self.fs.pipe_file(self._path(key), data)
        return None

    def delete(self, keys: Iterable[str], retrier: Retrier | None = None) -> None:
        for key in keys:
            run_with(retrier, partial(self._delete_one, self._path(key)))
        self.fs.invalidate_cache(self.root)

    def _delete_one(self, path: str) -> None:
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def find(self, prefix: str, retrier: Retrier | None = None) -> list[str]:
        cut = len(self.root) + 1 if self.root else 0
        try:
            found = run_with(retrier, partial(self.fs.find, self._path(prefix.rstrip("/"))))
        except FileNotFoundError:
            return []
        return [p[cut:] for p in found]

    # -- shards -----------------------------------------------------------------------------
    def sink(self, key: str, upload: Upload):
        return FsspecSink(self, key, upload.guard, upload.exclusive)

    # -- errors -----------------------------------------------------------------------------
    def classify(self, err: BaseException) -> str:
        status = http_status(err)
        if isinstance(err, FileNotFoundError) or status == 404:
            return "missing"
        if isinstance(err, PermissionError) or status in (401, 403):
            return "denied"
        if type(err).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
            return "credentials"
        return "invalid" if refused_request(status) else "unreachable"


def _filesystem(url: str, scheme: str, protocol: str | None, options: dict, role: str):
    """The filesystem for ``protocol`` (None: the one ``url`` names, with what the URL says
    of host and port) and the path ``url`` names on it."""
    try:
        import fsspec.core  # type: ignore[import-untyped]

        if protocol is None:
            return fsspec.core.url_to_fs(url, **options)
        return fsspec.filesystem(protocol, **options), ""
    except UsageError:
        raise
    except ValueError as err:
        if "not known" in str(err):
            raise UsageError(
                f"{role} {url!r}: unsupported storage scheme {scheme + '://'!r} — use a local "
                "path, s3://, gs://, az://, ais:// or another fsspec protocol"
            ) from None
        raise UsageError(f"{role} {url!r}: {err}") from None
    except ImportError:
        extra = FSSPEC_EXTRAS.get(scheme)
        hint = (
            f"pip install 'ishard[{extra}]'"
            if extra
            else f"install the fsspec backend for {scheme}://"
        )
        raise UsageError(
            f"{role} {url!r} needs a storage backend that is not installed — {hint}"
        ) from None
    except TypeError as err:
        raise UsageError(f"{role} {url!r}: bad --storage-option for {scheme}: {err}") from None
    except OSError as err:
        text = str(err).strip() or type(err).__name__
        raise UsageError(
            f"{role} {url!r} cannot be reached: {text} — check the URL and the network"
        ) from None


class FsspecSink(Hashing):
    """A shard written through an fsspec filesystem under a hidden temp name beside its own,
    moved to its name on commit; removed again on failure."""

    def __init__(
        self, store: FsspecStore, key: str, guard: Guard | None = None, exclusive: bool = False
    ) -> None:
        super().__init__()
        self._exclusive = exclusive  # published only where its name is free (looked up)
        folder, _, base = key.rpartition("/")
        temp = (
            f"{folder}/.{base}.{os.getpid()}{TEMP_SUFFIX}"
            if folder
            else f".{base}.{os.getpid()}{TEMP_SUFFIX}"
        )
        self._store, self._guard = store, guard
        self._path, self._temp = store._path(key), store._path(temp)
        self.url, self.etag = store.url_of(key), None
        self._file = store.fs.open(self._temp, "wb")

    def write(self, data: bytes) -> None:
        """Append ``data``."""
        self._count(data)
        self._file.write(data)

    def close(self) -> None:
        """All bytes are written."""

    def commit(self) -> None:
        """Finish the file (while this run holds the destination's lease)."""

        def publish() -> None:
            self._file.close()
            if self._exclusive and self._store.fs.exists(self._path):
                raise name_taken(self.url)
            self._store.fs.mv(self._temp, self._path)

        try:
            guarded(self._guard, self.url, publish)
        except IshardError:
            raise
        except Exception as err:  # noqa: BLE001 - a store's error, translated once
            raise self._store.error(err, "destination") from None

    def abort(self) -> None:
        """Drop the partial file."""
        discard = getattr(self._file, "discard", None)
        try:
            if discard is not None:
                discard()
            else:
                self._file.close()
            if self._store.fs.exists(self._temp):
                self._store.fs.rm(self._temp)
        except Exception:  # noqa: BLE001, S110 - best effort: the manifest never lists a failed shard
            pass  # best effort: the manifest never lists a failed shard


register(
    Backend(
        "fsspec",
        bucket=FsspecStore.open_bucket,
        other=FsspecStore.open,
        permanent=("NoCredentialsError", "PartialCredentialsError", "ParamValidationError"),
        extras=FSSPEC_EXTRAS,
    )
)
