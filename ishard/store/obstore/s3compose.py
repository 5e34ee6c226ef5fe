"""Composing in S3 (``store/compose.py``): a multipart upload whose parts this machine uploads
or the store copies (``UploadPartCopy`` of a byte range, conditional on the source's ETag).

Every part but the last holds 5 MiB or more. The store gives the CRC-32C of each copied range
(the upload is created with ``x-amz-checksum-algorithm: CRC32C``); a store that gives none, or
refuses a range copy, refuses composition.
"""

from __future__ import annotations

import base64
import urllib.parse
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from ...checksums import crc_of, plain_md5
from ..base import ComposeRefused
from ..compose import (
    REFUSING_STATUS,
    Composer,
    Limits,
    Part,
    Source,
    looked_up,
    source_changed,
    source_missing,
)
from ..sinks import name_taken
from .s3requests import NS, RequestError, S3Client

if TYPE_CHECKING:
    from ..base import Upload
    from ..location import Location

LIMITS = Limits(min_part=5 << 20, max_copy=5 << 30, max_parts=10_000, checksum="crc32c")
COPY_TIMEOUT = 600.0  # seconds a copy of up to 5 GiB may go without a byte of answer


def _crc_header(value: int) -> str:
    return base64.b64encode(value.to_bytes(4, "big")).decode()


def _crc_value(text: str | None) -> int | None:
    if not text:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    return int.from_bytes(raw, "big") if len(raw) == 4 else None


def _text(root, name: str) -> str | None:
    return root.findtext(f"{NS}{name}") or root.findtext(name)


def s3_composer(source: Location, dest: Location, *, min_size: int, part_size: int) -> Composer:
    """The run's composer between two buckets of one S3 service."""
    src = S3Client(source.store.settings["signing"], source.store.root)  # type: ignore[attr-defined]
    dst = S3Client(dest.store.settings["signing"], dest.store.root)  # type: ignore[attr-defined]
    return Composer(
        LIMITS,
        lambda key, upload: S3Upload(src, dst, key, upload),
        min_size=min_size,
        part_size=part_size,
        url_of=dest.store.url_of,  # type: ignore[attr-defined]
    )


class S3Upload:
    """One shard's multipart upload (``compose.Service``), created at its first part."""

    def __init__(self, src: S3Client, dst: S3Client, key: str, upload: Upload) -> None:
        self._src, self._dst, self._key, self._upload = src, dst, key, upload
        self._retrier = upload.retrier
        self._id: str | None = None

    # -- the source -------------------------------------------------------------------------
    def source(self, name: str, size: int) -> Source:
        """``name``'s ETag now (a listed name is its key in the bucket), and the MD5 of its
        bytes where the ETag is one (uploaded whole, not encrypted with KMS or a key of the
        customer's)."""
        headers = looked_up(
            name,
            size,
            f"s3://{self._src.bucket}",
            lambda: self._retrier.run(lambda: self._src.request("HEAD", name, {})).headers,
        )
        etag = headers["etag"]
        sealed = headers.get("x-amz-server-side-encryption", "").startswith("aws:kms") or (
            "x-amz-server-side-encryption-customer-algorithm" in headers
        )
        return Source(etag, None if sealed else plain_md5(etag))

    def first_bytes(self, name: str, count: int, source: Source) -> bytes:
        headers = {"range": f"bytes=0-{count - 1}", "if-match": source.etag}
        try:
            data = self._retrier.run(
                lambda: self._src.request("GET", name, {}, headers=headers).body
            )
        except RequestError as err:
            if err.status == 412:
                raise source_changed(name, self._key) from None
            raise
        if len(data) != count:
            raise ComposeRefused(
                f"the source store answered a range of {name!r} with {len(data)} bytes"
            )
        return data

    # -- parts ------------------------------------------------------------------------------
    def start(self) -> None:
        """Create the multipart upload, with CRC-32C."""
        self._upload_id()

    def _upload_id(self) -> str:
        if self._id is None:
            headers = {"x-amz-checksum-algorithm": "CRC32C"}
            try:
                root = self._retrier.run(
                    lambda: self._dst.request(
                        "POST", self._key, {"uploads": ""}, headers=headers
                    ).xml()
                )
            except RequestError as err:
                if err.status in REFUSING_STATUS:
                    raise ComposeRefused(
                        f"it refused a multipart upload with CRC-32C ({err})"
                    ) from None
                raise
            upload_id = _text(root, "UploadId")
            if not upload_id:
                raise ComposeRefused("it answered CreateMultipartUpload without an upload id")
            self._id = upload_id
        return self._id

    def put_part(self, number: int, body: bytes) -> Part:
        value = crc_of("crc32c", body)
        headers = {"x-amz-checksum-crc32c": _crc_header(value)}
        query = {"partNumber": str(number), "uploadId": self._upload_id()}
        answer = self._retrier.run(
            lambda: self._dst.request("PUT", self._key, query, headers=headers, body=body)
        )
        given = _crc_value(answer.headers.get("x-amz-checksum-crc32c"))
        if given is not None and given != value:
            raise OSError(f"the store took part {number} with another CRC-32C than was sent")
        return Part(number, answer.headers.get("etag", ""), value, len(body))

    def copy_part(self, number: int, name: str, start: int, end: int, source: Source) -> Part:
        headers = {
            "x-amz-copy-source": urllib.parse.quote(f"/{self._src.bucket}/{name}", safe="/"),
            "x-amz-copy-source-range": f"bytes={start}-{end - 1}",
            "x-amz-copy-source-if-match": source.etag,
        }
        query = {"partNumber": str(number), "uploadId": self._upload_id()}
        try:
            root = self._retrier.run(
                lambda: self._dst.request(
                    "PUT", self._key, query, headers=headers, timeout=COPY_TIMEOUT
                ).xml()
            )
        except RequestError as err:
            if err.status == 412:
                raise source_changed(name, self._key) from None
            if err.status == 404 and err.code == "NoSuchKey":
                raise source_missing(name, f"s3://{self._src.bucket}") from None
            if err.status in REFUSING_STATUS:
                raise ComposeRefused(
                    f"it refused to copy a byte range (UploadPartCopy: {err})"
                ) from None
            raise
        crc = _crc_value(_text(root, "ChecksumCRC32C"))
        if crc is None:
            raise ComposeRefused(
                "it computed no CRC-32C of a copied range, so the shard could not be checked"
            )
        return Part(number, _text(root, "ETag") or "", crc, end - start)

    # -- publishing -------------------------------------------------------------------------
    def complete(self, parts: list[Part], exclusive: bool) -> str:
        """Complete the upload (``exclusive``: asked just before whether the name is free, a
        multipart upload taking no condition on every store)."""
        if exclusive and self._retrier.run(self._there):
            raise name_taken(self._dst_url())
        body = (
            "<CompleteMultipartUpload>"
            + "".join(
                f"<Part><PartNumber>{p.number}</PartNumber><ETag>{escape(p.token)}</ETag>"
                f"<ChecksumCRC32C>{_crc_header(p.crc)}</ChecksumCRC32C></Part>"
                for p in parts
            )
            + "</CompleteMultipartUpload>"
        ).encode()
        query = {"uploadId": self._upload_id()}
        root = self._retrier.run(
            lambda: self._dst.request(
                "POST", self._key, query, body=body, timeout=COPY_TIMEOUT
            ).xml()
        )
        self._id = None
        return _text(root, "ETag") or ""

    def _dst_url(self) -> str:
        return f"s3://{self._dst.bucket}/{self._key}"

    def _there(self) -> bool:
        try:
            self._dst.request("HEAD", self._key, {})
        except RequestError as err:
            if err.status == 404:
                return False
            raise
        return True

    def abort(self) -> None:
        """Abort the upload (retried patiently); one already gone is fine."""
        upload_id, self._id = self._id, None
        if upload_id is None:
            return
        query = {"uploadId": upload_id}
        try:
            self._upload.cleanup.run(lambda: self._dst.request("DELETE", self._key, query))
        except RequestError as err:
            if err.status != 404:
                raise
