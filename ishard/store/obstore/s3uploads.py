"""A killed run's open S3 multipart uploads, listed and aborted.

obstore aborts the uploads of the runs it sees fail, but a run killed outright (``kill -9``,
a lost machine) leaves its upload open, holding storage, and obstore can neither list open
uploads nor abort one it did not start. These two S3 requests (``ListMultipartUploads``,
``AbortMultipartUpload``) are therefore sent here, signed with AWS Signature Version 4 (as
the AWS documentation defines it) with the credentials the store was given.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import urllib.parse
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..retry import Retrier

_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
_EMPTY = hashlib.sha256(b"").hexdigest()
TIMEOUT = 30.0


class S3RequestError(OSError):
    """An S3 answer other than success; ``status`` is its HTTP status (the retry layer looks)."""

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
) -> dict[str, str]:
    """The headers that sign an S3 request without a body (Signature Version 4)."""
    now = now or datetime.now(timezone.utc)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {"host": host, "x-amz-content-sha256": _EMPTY, "x-amz-date": stamp}
    if token:
        headers["x-amz-security-token"] = token
    names = sorted(headers)
    canonical = "\n".join(
        [
            method,
            _quote(path, "/"),
            "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items())),
            "".join(f"{n}:{headers[n].strip()}\n" for n in names),
            ";".join(names),
            _EMPTY,
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
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return headers


class _Client:
    """Path-style requests to an endpoint, or virtual-hosted ones to AWS itself."""

    def __init__(self, signing: dict, bucket: str) -> None:
        endpoint, region = signing.get("endpoint"), signing["region"]
        self.region, self.bucket = region, bucket
        creds: dict[str, str | None] = {
            "access_key": signing.get("access_key"),
            "secret_key": signing.get("secret_key"),
            "token": signing.get("token"),
        }
        provider = signing.get("provider")
        if not creds["access_key"] and provider is not None:
            got = provider()
            creds = {
                "access_key": got["access_key_id"],
                "secret_key": got["secret_access_key"],
                "token": got.get("token"),
            }
        self.creds = creds
        if endpoint:
            parts = urllib.parse.urlsplit(endpoint)
            self.scheme, self.host = parts.scheme, parts.netloc
            self.base = parts.path.rstrip("/") + "/" + bucket
        else:
            self.scheme, self.host = "https", f"{bucket}.s3.{region}.amazonaws.com"
            self.base = ""

    @property
    def usable(self) -> bool:
        return bool(self.creds["access_key"] and self.creds["secret_key"])

    def request(self, method: str, key: str, query: dict[str, str]) -> bytes:
        path = f"{self.base}/{key}" if key else (self.base or "/")
        headers = sign(
            method,
            self.host,
            path,
            query,
            region=self.region,
            access_key=self.creds["access_key"] or "",
            secret_key=self.creds["secret_key"] or "",
            token=self.creds["token"],
        )
        kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = kind(self.host, timeout=TIMEOUT)
        try:
            target = _quote(path, "/") + (
                "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
                if query
                else ""
            )
            conn.request(method, target, headers={k: v for k, v in headers.items() if k != "host"})
            answer = conn.getresponse()
            body = answer.read()
        finally:
            conn.close()
        if answer.status >= 300:
            code = message = ""
            try:
                root = ET.fromstring(body)
                code = root.findtext("Code") or ""
                message = root.findtext("Message") or ""
            except ET.ParseError:
                pass
            raise S3RequestError(answer.status, code or answer.reason, message)
        return body


def abort_open_uploads(settings: dict, bucket: str, keys: set[str], retrier: Retrier) -> int:
    """Abort every open multipart upload of these keys in ``bucket``; return how many. Without
    credentials that can sign (a store left to obstore's own credential chain), nothing can be
    asked and 0 is returned."""
    signing = settings.get("signing")
    if not keys or not signing:
        return 0
    client = _Client(signing, bucket)
    if not client.usable:
        return 0
    prefix = _common_prefix(keys)
    aborted = 0
    marker: dict[str, str] = {}
    while True:
        query = {"uploads": "", "prefix": prefix, **marker}
        body = retrier.run(partial(client.request, "GET", "", query))
        root = ET.fromstring(body)
        for upload in root.iter(f"{_NS}Upload"):
            key, upload_id = upload.findtext(f"{_NS}Key"), upload.findtext(f"{_NS}UploadId")
            if key in keys and upload_id:
                retrier.run(partial(client.request, "DELETE", key, {"uploadId": upload_id}))
                aborted += 1
        if root.findtext(f"{_NS}IsTruncated") != "true":
            return aborted
        marker = {
            "key-marker": root.findtext(f"{_NS}NextKeyMarker") or "",
            "upload-id-marker": root.findtext(f"{_NS}NextUploadIdMarker") or "",
        }


def _common_prefix(keys: set[str]) -> str:
    first, last = min(keys), max(keys)
    size = 0
    while size < min(len(first), len(last)) and first[size] == last[size]:
        size += 1
    return first[:size]
