"""S3 requests obstore does not make, signed here with AWS Signature Version 4 (as the AWS
documentation defines it) with the credentials the store was given: listing and aborting a
killed run's multipart uploads (``s3uploads``), and a shard composed inside the store
(``s3compose``: create, upload and copy parts, complete)."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import threading
import urllib.parse
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_EMPTY = hashlib.sha256(b"").hexdigest()
TIMEOUT = 30.0  # seconds a request may go without an answer (a copy part's is longer)


class RequestError(OSError):
    """A store's answer other than success (S3's here, Azure's in ``azcompose``); ``status``
    is its HTTP status, ``code`` the store's error code (the retry layer reads ``response``)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}".strip())
        self.status, self.code = status, code
        self.response = {"ResponseMetadata": {"HTTPStatusCode": status}, "Error": {"Code": code}}


def _quote(text: str, safe: str = "") -> str:
    return urllib.parse.quote(text, safe="-_.~" + safe)


def sign(
    method: str,
    host: str,
    path: str,
    query: dict[str, str],
    *,
    region: str,
    access_key: str,
    secret_key: str,
    token: str | None = None,
    now: datetime | None = None,
    headers: dict[str, str] | None = None,
    payload: str = _EMPTY,
) -> dict[str, str]:
    """The headers that sign an S3 request: ``headers`` (lower-case names, all signed) and the
    SHA-256 of its body (``payload``, hex; an empty body's by default)."""
    now = now or datetime.now(timezone.utc)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    signed = {**(headers or {}), "host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    if token:
        signed["x-amz-security-token"] = token
    names = sorted(signed)
    canonical = "\n".join(
        [
            method,
            _quote(path, "/"),
            "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items())),
            "".join(f"{n}:{signed[n].strip()}\n" for n in names),
            ";".join(names),
            payload,
        ]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{secret_key}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return signed


class Connections:
    """One kept HTTP(S) connection a thread to ``host``: ``get`` it (its timeout set for the
    request), ``drop`` it after a failure (its state is unknown)."""

    def __init__(self, scheme: str, host: str) -> None:
        self._kind = (
            http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        )
        self._host = host
        self._local = threading.local()

    def get(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._kind(self._host, timeout=timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class Answer:
    """A successful answer: its headers (lower-case names) and body."""

    __slots__ = ("body", "headers")

    def __init__(self, headers: dict[str, str], body: bytes) -> None:
        self.headers, self.body = headers, body

    def xml(self) -> ET.Element:
        """The body as an XML document."""
        return ET.fromstring(self.body)


class S3Client:
    """Path-style requests to an endpoint, or virtual-hosted ones to AWS itself, each thread
    on a connection of its own kept between requests."""

    def __init__(self, signing: dict, bucket: str) -> None:
        endpoint, region = signing.get("endpoint"), signing["region"]
        self.region, self.bucket = region, bucket
        creds: dict[str, str | None] = {
            "access_key": signing.get("access_key"),
            "secret_key": signing.get("secret_key"),
            "token": signing.get("token"),
        }
        provider = signing.get("provider")
        self._provider = provider if not creds["access_key"] else None
        self._expires: datetime | None = None
        self._creds_lock = threading.Lock()
        self.creds = creds
        if self._provider is not None:
            self._refresh()
        if endpoint:
            parts = urllib.parse.urlsplit(endpoint)
            self.scheme, self.host = parts.scheme, parts.netloc
            self.base = parts.path.rstrip("/") + "/" + bucket
        else:
            self.scheme, self.host = "https", f"{bucket}.s3.{region}.amazonaws.com"
            self.base = ""
        self._connections = Connections(self.scheme, self.host)

    def _refresh(self) -> None:
        """Credentials from the provider (boto3's chain), again a few minutes before those
        held expire: a long run outlives a session's."""
        assert self._provider is not None  # called only with one
        got = self._provider()
        self.creds = {
            "access_key": got["access_key_id"],
            "secret_key": got["secret_access_key"],
            "token": got.get("token"),
        }
        expires = got.get("expires_at")
        self._expires = expires if isinstance(expires, datetime) else None

    def _current(self) -> dict[str, str | None]:
        if self._expires is not None:
            with self._creds_lock:
                if self._expires - datetime.now(timezone.utc) < timedelta(minutes=5):
                    self._refresh()
        return self.creds

    @property
    def usable(self) -> bool:
        """Are there credentials to sign with?"""
        return bool(self.creds["access_key"] and self.creds["secret_key"])

    def path_of(self, key: str) -> str:
        """The request path of ``key`` (of the bucket itself for ``""``)."""
        return f"{self.base}/{key}" if key else (self.base or "/")

    def close(self) -> None:
        """Close this thread's connection."""
        self._connections.drop()

    def request(
        self,
        method: str,
        key: str,
        query: dict[str, str],
        *,
        headers: dict[str, str] | None = None,
        body: bytes | bytearray | memoryview = b"",
        timeout: float = TIMEOUT,
    ) -> Answer:
        """Send one request; its answer, or ``RequestError`` for any status from 300 up (an
        error document inside a 200, as S3 may send for a copy, too)."""
        path = self.path_of(key)
        payload = hashlib.sha256(body).hexdigest() if len(body) else _EMPTY
        creds = self._current()
        signed = sign(
            method,
            self.host,
            path,
            query,
            region=self.region,
            access_key=creds["access_key"] or "",
            secret_key=creds["secret_key"] or "",
            token=creds["token"],
            headers=headers,
            payload=payload,
        )
        target = _quote(path, "/") + (
            "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
            if query
            else ""
        )
        conn = self._connections.get(timeout)
        try:
            conn.request(
                method, target, body=bytes(body) if body else None,
                headers={k: v for k, v in signed.items() if k != "host"},
            )  # fmt: skip
            answer = conn.getresponse()
            data = answer.read()
        except BaseException:
            self.close()  # a connection in an unknown state is not used again
            raise
        got = {k.lower(): v for k, v in answer.getheaders()}
        if answer.status >= 300 or data.lstrip().startswith(b"<?xml") and b"<Error>" in data[:512]:
            code = message = ""
            try:
                root = ET.fromstring(data)
                code = root.findtext("Code") or ""
                message = root.findtext("Message") or ""
            except ET.ParseError:
                pass
            status = answer.status if answer.status >= 300 else 500
            raise RequestError(status, code or answer.reason, message)
        return Answer(got, data)
