"""Where data lives: local directories and fsspec URLs (s3, gs, az, memory, ais via S3)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .errors import IshardError, SourceError, UsageError, WriteError

if TYPE_CHECKING:  # fsspec costs a tenth of a second to import: only when a URL needs it
    import fsspec

BUCKET_PROTOCOLS = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "ais")
SUPPORTED_SCHEMES = (*BUCKET_PROTOCOLS, "memory", "file")  # what ishard documents and tests
EXTRAS = {"gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure"}
S3_DEFAULTS = {
    # Above 1, s3fs (since 2026, fsspec/s3fs#1007) sends a HEAD before every whole-object
    # read, to split big objects into concurrent ranges. ishard splits big objects itself
    # (readers.CHUNK), so the HEAD only doubled the requests: 2.5x slower on small objects.
    # Older s3fs takes the argument too. ishard makes no other call that it affects (s3fs's
    # own concurrent put_file/get_file; the manifest is one small PUT).
    "max_concurrency": 1,
    "config_kwargs": {
        # A fixed User-Agent: botocore otherwise rebuilds its long one twice for every
        # request, a tenth of a small GET's client CPU.
        "user_agent": f"ishard/{__version__}",
        "max_pool_connections": 128,
        "connect_timeout": 10,
        "read_timeout": 60,
        "retries": {"max_attempts": 2, "mode": "standard"},
    }
}


# aiobotocore session arguments that s3fs would pass on from its own keyword arguments.
SESSION_ARGS = ("profile", "session_vars", "event_hooks", "include_builtin_handlers")


def parse_s3_timestamp(text: str) -> datetime:
    """An S3 timestamp — ISO 8601 in listings (``2026-11-23T08:00:00.000Z``), RFC 1123 in
    headers (``Mon, 23 Nov 2026 08:00:00 GMT``) — as an aware datetime.

    botocore parses every timestamp with dateutil (about 0.1 ms each: a fifth of a small GET's
    client CPU, and of a listing's); the standard library reads S3's two forms in a tenth of
    that. Any other form goes to botocore's own parser.
    """
    try:
        if text.endswith("Z"):
            return datetime.fromisoformat(text[:-1]).replace(tzinfo=timezone.utc)
        return parsedate_to_datetime(text)
    except (ValueError, TypeError):
        from botocore.utils import parse_timestamp

        return parse_timestamp(text)


def _s3_session(options: dict):
    """The aiobotocore session for one S3 filesystem, its responses parsed with
    ``parse_s3_timestamp`` (botocore's documented ``set_parser_defaults`` hook)."""
    from aiobotocore.session import AioSession

    session = AioSession(**{k: options.pop(k) for k in SESSION_ARGS if k in options})
    session.get_component("response_parser_factory").set_parser_defaults(
        timestamp_parser=parse_s3_timestamp
    )
    return session


@dataclass(frozen=True)
class Location:
    """A resolved source or destination.

    ``fs`` is None for a local directory (``root`` is then its path). For a bucket store,
    ``root`` is the bucket and ``prefix`` the key prefix from the URL; for other filesystems
    ``root`` is the URL's path and ``prefix`` is empty.
    """

    url: str
    fs: fsspec.AbstractFileSystem | None
    root: str
    prefix: str = ""

    @property
    def is_local(self) -> bool:
        """A plain local directory (the fast path)."""
        return self.fs is None

    @property
    def is_s3(self) -> bool:
        """An S3 (or S3-compatible) bucket."""
        return self.fs is not None and "s3" in _protocols(self.fs)

    def path(self, name: str) -> str:
        """Where member ``name`` lives (a local path or the filesystem's path)."""
        if self.fs is None:
            return os.path.join(self.root, name)
        return f"{self.root}/{name}" if self.root else name

    def child(self, name: str) -> str:
        """Where an output file ``name`` goes under this destination."""
        if self.fs is None:
            return os.path.join(self.root, name)
        base = "/".join(p for p in (self.root, self.prefix.strip("/")) if p)
        return f"{base}/{name}"


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


def split_url(url: str) -> tuple[str | None, str]:
    """``("s3", "bucket/key")`` for a URL, ``(None, path)`` for a local path."""
    if "://" not in url:
        return None, url
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    return (None, rest) if scheme in ("file", "local") else (scheme, rest)


def parse_storage_options(items: tuple[str, ...] | list[str] | dict | None) -> dict:
    """``KEY=VALUE`` strings into fsspec keyword arguments; ``a.b=c`` nests, true/false/ints typed.

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
                "client_kwargs.region_name=us-east-1"
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


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(
            out.get(key), dict
        ) else value
    return out


def resolve(url: str, *, endpoint_url: str | None = None, storage_options: dict | None = None,
            role: str = "source") -> Location:
    """Turn a path or URL into a Location with a filesystem ready to use.

    ``ais://bucket/prefix`` is AIStore through its S3 API at ``$AIS_ENDPOINT/s3`` (or
    ``--endpoint-url``).

    Raises:
        UsageError: an unknown scheme, a missing backend (with the install hint), no endpoint
            for ``ais://``.
    """
    scheme, rest = split_url(url)
    if scheme is None:
        return Location(url, None, rest)
    if scheme not in SUPPORTED_SCHEMES:
        raise UsageError(
            f"{role} {url!r}: unsupported storage scheme {scheme + '://'!r} — use a local path, "
            "s3://, gs://, az:// or ais://"
        )
    options = dict(storage_options or {})
    protocol = scheme
    if scheme == "ais":
        endpoint = endpoint_url or os.environ.get("AIS_ENDPOINT")
        if not endpoint:
            raise UsageError(
                f"{role} {url!r} is an AIStore bucket but no endpoint is known — set "
                "AIS_ENDPOINT=http://HOST:PORT or pass --endpoint-url http://HOST:PORT/s3"
            )
        endpoint_url = endpoint_url or endpoint.rstrip("/") + "/s3"
        protocol = "s3"
    if protocol in ("s3", "s3a"):
        options = _merge(S3_DEFAULTS, options)
        if "session" not in options:  # a caller's own session is used as it is
            options["session"] = _s3_session(options)
        if endpoint_url:
            options["endpoint_url"] = endpoint_url
    elif endpoint_url:
        options.setdefault("endpoint_url", endpoint_url)
    try:
        import fsspec

        fs = fsspec.filesystem(protocol, **options)
    except ValueError as err:
        if "Protocol not known" in str(err) or "not known" in str(err):
            raise UsageError(
                f"{role} {url!r}: unknown storage scheme {scheme + '://'!r} — use a local path, "
                "s3://, gs://, az://, ais:// or another fsspec protocol"
            ) from None
        raise UsageError(f"{role} {url!r}: {err}") from None
    except ImportError:
        extra = EXTRAS.get(protocol)
        hint = f"pip install 'ishard[{extra}]'" if extra else f"install the fsspec backend for {scheme}"
        raise UsageError(f"{role} {url!r} needs a storage backend that is not installed — {hint}") from None
    except TypeError as err:
        raise UsageError(f"{role} {url!r}: bad --storage-option for {scheme}: {err}") from None
    if scheme not in BUCKET_PROTOCOLS:
        return Location(url, fs, fs._strip_protocol(url).rstrip("/"))
    # a trailing '/' stays: s3://b/data/ lists data/… only, not data-old/… as well
    bucket, _, prefix = rest.lstrip("/").partition("/")
    if not bucket:
        raise UsageError(f"{role} {url!r} names no bucket — write {scheme}://BUCKET[/PREFIX]")
    return Location(url, fs, bucket, prefix)


def local_root(location: Location) -> Path:
    """The directory of a local location."""
    return Path(location.root)


def storage_error(err: BaseException, location: Location, role: str) -> IshardError:
    """A one-line error for a failure talking to a store (credentials never appear).

    A missing bucket is a bad invocation (exit 2); denied access and unreachable endpoints
    are runtime failures (exit 1).
    """
    where = location.url
    if isinstance(err, FileNotFoundError):
        return UsageError(
            f"{role} {where!r} does not exist (no such bucket or path) — create it first or fix the URL"
        )
    if isinstance(err, PermissionError):
        return (SourceError if role == "source" else WriteError)(
            f"access to {role} {where!r} was denied — check the credentials (AWS_ACCESS_KEY_ID / "
            "AWS_PROFILE or --storage-option) and the bucket's permissions"
        )
    name = type(err).__name__
    if name in ("NoCredentialsError", "PartialCredentialsError"):
        return (SourceError if role == "source" else WriteError)(
            f"no credentials found for {role} {where!r} — set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or --storage-option key=… secret=…"
        )
    text = str(err).splitlines()[0] if str(err) else name
    return (SourceError if role == "source" else WriteError)(
        f"cannot reach {role} {where!r}: {text} — check the endpoint and the network, then run again"
    )


def run_on_loop(loop, func, *args, **kwargs):
    """``func(*args, **kwargs)`` (a coroutine function) run on an fsspec filesystem's ``loop``
    from this thread: ``fsspec.asyn.sync``, imported when a store is in use."""
    import fsspec.asyn

    return fsspec.asyn.sync(loop, func, *args, **kwargs)
