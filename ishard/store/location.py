"""A source or destination as the user gave it: its store, and the key prefix the URL names."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import IshardError, UsageError
from . import registry
from .base import Store
from .urls import check_endpoint, redacted

if TYPE_CHECKING:
    from .retry import Retrier


@dataclass(frozen=True)
class Location:
    """A resolved source or destination.

    ``store`` holds the bytes; ``root`` is its directory, bucket or URL path; ``prefix`` is the
    key prefix the URL names inside a bucket (``s3://bkt/data/`` → ``data/``), empty elsewhere.
    Source names are relative to the root (a bucket's prefix stays part of them, as in Go
    ishard); output names are relative to the URL (:meth:`key`).
    """

    url: str
    store: Store
    prefix: str = ""

    @property
    def root(self) -> str:
        """The store's root: a local directory, a bucket, an fsspec path."""
        return self.store.root

    def key(self, name: str) -> str:
        """The store key of an output file ``name`` under this destination."""
        base = self.prefix.strip("/")
        return f"{base}/{name}" if base else name

    def child(self, name: str) -> str:
        """Where an output file ``name`` goes, as a user would write it (path or URL)."""
        return self.store.url_of(self.key(name))

    def read_file(
        self, name: str, retrier: Retrier | None = None, role: str = "destination"
    ) -> bytes | None:
        """The small output file ``name`` (the manifest, a run record) whole; None if missing
        (locally also a link or a non-file under its name, which is never followed); a
        failure is worded as the store's for ``role``."""
        run = retrier.run if retrier is not None else (lambda call: call())
        try:
            return run(lambda: self.store.get(self.key(name)))[0]
        except FileNotFoundError:
            return None
        except IshardError:
            raise
        except Exception as err:  # noqa: BLE001 - a store's error, translated once
            raise self.error(err, role) from None

    @contextmanager
    def translated(self, role: str) -> Iterator[None]:
        """Any failure inside becomes the one-line error a user sees (``Store.error``, which
        leaves an ``IshardError`` as it is)."""
        try:
            yield
        except Exception as err:  # noqa: BLE001 - a store's error, translated once
            raise self.error(err, role) from None

    def error(self, err: BaseException, role: str):
        """``err`` as the one-line error a user sees (``Store.error`` naming this URL)."""
        return self.store.error(err, role, self.url)

    @staticmethod
    def local_path(url: str) -> str | None:
        """The path of this machine ``url`` names (a path as it is, a ``file://`` URL's path),
        or None where a store holds it: what every module outside ``store/`` asks of a path or
        URL before it opens one itself."""
        scheme, rest = split_url(url)
        return rest if scheme is None else None


def split_url(url: str) -> tuple[str | None, str]:
    """``("s3", "bucket/key")`` for a URL, ``(None, path)`` for a local path."""
    if "://" not in url:
        return None, url
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    served = registry.serving(scheme)
    return (None, rest) if served is not None and served.path is not None else (scheme, rest)


def _bucket_kind(scheme: str) -> str | None:
    """The kind of bucket (``s3``, ``gs``, ``az``) a URL scheme names; None: no bucket's."""
    served = registry.serving(scheme)
    return served.kind_of(scheme) if served is not None and served.bucket is not None else None


def parse_storage_options(items: tuple[str, ...] | list[str] | dict | None) -> dict:
    """``KEY=VALUE`` strings into store options; ``a.b=c`` nests, true/false/ints typed.

    Raises:
        UsageError: an item without ``=``.
    """
    if not items:
        return {}
    if isinstance(items, dict):
        return dict(items)
    out: dict = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(
                f"--storage-option {item!r} is not KEY=VALUE — write e.g. anon=true or "
                "region=us-east-1"
            )
        typed: object = value
        if value.lower() in ("true", "false"):
            typed = value.lower() == "true"
        elif value.isascii() and value.lstrip("-").isdigit():
            typed = int(value)
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = typed
    return out


def _refuse_credentials(url: str, scheme: str, rest: str, role: str) -> None:
    """A URL with credentials before an ``@`` is refused, shown without them: a bucket name
    has no ``@``, and credentials in a URL would be printed wherever the URL is (a bare user
    name of another filesystem, ``sftp://me@host``, is no secret and is kept)."""
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    kind = _bucket_kind(scheme)
    if not at or (kind is None and ":" not in userinfo):
        return
    known = registry.kind(kind or "")
    fix = known.credentials if known else "--storage-option (the filesystem's own settings)"
    raise UsageError(
        f"{role} {redacted(url)!r} holds credentials before its '@' — ishard takes none "
        f"from a URL (it would show them): give them as {fix}, and the URL without them"
    )


def resolve(
    url: str,
    *,
    endpoint_url: str | None = None,
    storage_options: dict | None = None,
    role: str = "source",
) -> Location:
    """Turn a path or URL into a Location with its store ready to use.

    Each scheme goes to the backend that serves it (``registry.serving``): S3, GCS and Azure
    to obstore, and ``ais://bucket/prefix`` too, AIStore through its S3 API at
    ``$AIS_ENDPOINT/s3`` (or ``--endpoint-url``), unless a backend claims ``ais``; the storage
    option ``backend=fsspec`` sends a bucket through fsspec (s3fs, gcsfs, adlfs) instead; any
    other scheme is fsspec's.

    Raises:
        UsageError: an unknown scheme, a missing backend (with the install hint), no endpoint
            for ``ais://``, a bad storage option.
    """
    scheme, rest = split_url(url)
    if scheme is None:
        return Location(url, _opener(registry.opening("path").path)(rest))
    _refuse_credentials(url, scheme, rest, role)
    if endpoint_url:
        check_endpoint(endpoint_url, "--endpoint-url")
    options = dict(storage_options or {})
    backend = options.pop("backend", None)
    if backend is not None and backend not in [b.name for b in registry.backends() if b.bucket]:
        raise UsageError(
            f"--storage-option backend={backend!r} is not a backend — use "
            "backend=obstore (the default for s3://, gs://, az://) or backend=fsspec"
        )
    kind = _bucket_kind(scheme)
    if kind is None:
        other = _opener(registry.opening("other").other)
        return Location(url, other(url, scheme, endpoint_url, options, role))
    reaches = registry.serving(scheme)
    if reaches is not None and scheme in reaches.endpoints:  # ais:// → AIStore's S3 gateway
        endpoint_url = reaches.endpoints[scheme](url, endpoint_url, role)
    # a trailing '/' stays: s3://b/data/ lists data/… only, not data-old/… as well
    bucket, _, prefix = rest.lstrip("/").partition("/")
    if not bucket:
        raise UsageError(f"{role} {url!r} names no bucket — write {scheme}://BUCKET[/PREFIX]")
    served = registry.backend(backend) if backend is not None else registry.serving(scheme)
    assert served is not None  # the scheme names a bucket: a backend claims it
    store = _opener(served.bucket)(url, kind, bucket, endpoint_url, options, role)
    return Location(url, store, prefix)


def _opener(opens: Callable[..., Store] | None) -> Callable[..., Store]:
    """A backend's way of opening a store, which the registry found it has."""
    assert opens is not None
    return opens


def open_store(url: str, **reach: Any) -> Store:
    """The store behind ``url`` (its root: the directory, the bucket, the URL path); ``reach``:
    the keywords :func:`resolve` takes (``endpoint_url``, ``storage_options``, ``role``)."""
    return resolve(url, **reach).store


def open_url(url: str, **reach: Any):
    """A binary stream of the one object (or file) ``url`` names, through its store; ``reach``:
    the keywords :func:`resolve` takes."""
    where = resolve(url, **reach)
    return where.store.open_read(where.prefix)
