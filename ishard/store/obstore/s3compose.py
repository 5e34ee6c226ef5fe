"""A tar shard composed inside S3 (``--compose auto``): its large members copied from the
source by the store itself (``UploadPartCopy`` with a byte range), never through this machine.

Every part of a multipart upload but the last must hold 5 MiB or more, and a member's header
must come right before its bytes: so the headers, padding and small members go in parts this
machine writes, and a large member's header goes in such a part together with as many of the
member's first bytes as that part lacks of 5 MiB (read from the source); the rest of the
member is copied in the store. Each copy is conditional on the ETag the source had when its
first bytes were read: a source object rewritten meanwhile fails the shard, never mixes it.

The shard's checksum is its CRC-32C, combined from its parts' (``crc32c_combine``): the store
computes it of each copied range, this machine of each part it writes; ``verify`` reads the
shard and checks it. A store that copies no range, or computes no CRC-32C of what it copies,
refuses composition (``ComposeRefused``): the shard is written through the client instead.
"""

from __future__ import annotations

import base64
import logging
import math
import threading
import urllib.parse
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from ...checksums import COMPOSED, crc32c_combine, hasher, plain_md5, tagged
from ...errors import SizeChanged, SourceError
from ..base import ComposeRefused
from ..sinks import guarded, name_taken
from .s3requests import NS, S3Client, S3RequestError

if TYPE_CHECKING:
    from ...model import FileEntry, ShardPlan
    from ..base import Upload
    from ..location import Location

LOG = logging.getLogger("ishard")
MIN_PART = 5 << 20  # S3's smallest part (but the last)
MAX_PART = 5 << 30  # S3's largest part, copied or written
MAX_PARTS = 10_000
PARTS_IN_FLIGHT = 4  # parts uploading or copying at once per shard
COPY_TIMEOUT = 600.0  # seconds a copy of up to 5 GiB may go without a byte of answer
POLL = 0.5  # seconds between looks at parts under way (a failure is seen within it)
# what a store answers to a request it does not take: composition is then refused
REFUSING_STATUS = (400, 403, 405, 501)


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


@dataclass(frozen=True)
class _Part:
    number: int
    etag: str
    crc: int
    size: int


class S3Composer:
    """What a run composes with: S3 clients of SRC's and DST's buckets (one service, one set
    of credentials), the smallest member copied (``min_size``), the size of the parts this
    machine writes, and the first refusal met (then every shard goes through the client)."""

    def __init__(self, source: Location, dest: Location, *, min_size: int, part_size: int) -> None:
        self.source, self.dest = source, dest
        self.src = S3Client(source.store.settings["signing"], source.store.root)  # type: ignore[attr-defined]
        self.dst = S3Client(dest.store.settings["signing"], dest.store.root)  # type: ignore[attr-defined]
        self.min_size, self.part_size = min_size, part_size
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
        is large enough, it would take more parts than S3 allows, or the store refused."""
        if self.refusal is not None:
            return None
        members = shard.members()
        large = [m.size for m in members if self.placed(m)]
        if not large:
            return None
        small = sum(m.size for m in members if not self.placed(m)) + 1024 * len(members)
        parts = sum(1 + math.ceil(size / MAX_PART) for size in large)
        parts += math.ceil(small / self.part_size) + 1
        if parts > MAX_PARTS:
            LOG.info(
                "shard %r is written through this machine: composed, it would take %d parts "
                "(S3 takes %d)",
                shard.name,
                parts,
                MAX_PARTS,
            )
            return None
        return ComposingSink(self, key, upload)


class ComposingSink:
    """One shard composed in S3 (see the module): bytes written here go in parts this machine
    uploads; ``place`` puts a large member's bytes after them, copied in the store. Parts go
    ``PARTS_IN_FLIGHT`` at a time; the object exists only once :meth:`commit` completes the
    upload, under the destination's lease; :meth:`abort` aborts it."""

    def __init__(self, composer: S3Composer, key: str, upload: Upload) -> None:
        self._c, self._key, self._upload = composer, key, upload
        self.url = composer.dest.store.url_of(key)  # type: ignore[attr-defined]
        self._buf = bytearray()
        self._number = 0
        self._upload_id: str | None = None
        self._futures: list[Future] = []
        self._pool = ThreadPoolExecutor(PARTS_IN_FLIGHT, thread_name_prefix="ishard-compose")
        self.size = 0
        self.etag: str | None = None
        self.checksum: str | None = None
        self.sources: list[str | None] = []  # each placed member's MD5 by its source, in order

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
        its first bytes, up to 5 MiB, and the store copies the rest."""
        key = name  # a listed name is its key in the bucket (as the reader reads it)
        etag, md5 = self._source_etag(name, key, size)
        self.sources.append(md5)
        borrow = max(0, MIN_PART - len(self._buf))
        if borrow:
            self._buf += self._first_bytes(name, key, borrow, etag)
        self._send_buffer()
        rest = size - borrow
        pieces = math.ceil(rest / MAX_PART)
        start = borrow
        for i in range(pieces):
            end = borrow + (rest * (i + 1)) // pieces
            self._submit(self._copy_part, key, start, end, etag, name)
            start = end
        self.size += size

    def close(self) -> None:
        """All bytes are written: the last part goes."""
        self._send_buffer()

    def _refused(self, reason: str) -> ComposeRefused:
        """The store refused composing: no later shard of the run is composed either."""
        self._c.refuse(reason)
        return ComposeRefused(reason)

    # -- the source -------------------------------------------------------------------------
    def _source_etag(self, name: str, key: str, size: int) -> tuple[str, str | None]:
        """The source object's ETag now (its size must still be the listed one), and the MD5
        of its bytes where the ETag is one (uploaded whole, not encrypted with KMS or a key
        of the customer's)."""
        try:
            answer = self._upload.retrier.run(lambda: self._c.src.request("HEAD", key, {}))
        except S3RequestError as err:
            if err.status == 404:
                raise SourceError(
                    f"object {name!r} is missing from {self._c.source.url!r} — it was listed "
                    "(or named in --src-list) but cannot be read now"
                ) from None
            raise
        length = int(answer.headers.get("content-length", -1))
        if length != size:
            raise SizeChanged(
                f"file {name!r} changed size while being read: listed {size} bytes, now "
                f"{length} — run again once the source is stable",
                name,
                size,
                length,
            )
        etag = answer.headers.get("etag")
        if not etag:
            raise self._refused(
                f"the source store gave no ETag for {name!r}, so no copy can be safe"
            )
        sealed = answer.headers.get("x-amz-server-side-encryption", "").startswith("aws:kms") or (
            "x-amz-server-side-encryption-customer-algorithm" in answer.headers
        )
        return etag, None if sealed else plain_md5(etag)

    def _first_bytes(self, name: str, key: str, count: int, etag: str) -> bytes:
        headers = {"range": f"bytes=0-{count - 1}", "if-match": etag}
        try:
            data = self._upload.retrier.run(
                lambda: self._c.src.request("GET", key, {}, headers=headers).body
            )
        except S3RequestError as err:
            if err.status == 412:
                raise self._changed(name) from None
            raise
        if len(data) != count:
            raise self._refused(
                f"the source store answered a range of {name!r} with {len(data)} bytes"
            )
        return data

    def _changed(self, name: str) -> SourceError:
        return SourceError(
            f"source object {name!r} changed while shard {self._key.rpartition('/')[2]!r} was "
            "composed from it (its ETag moved) — nothing was published: run again with "
            "--resume once the source is stable"
        )

    # -- parts ------------------------------------------------------------------------------
    def _start(self) -> str:
        if self._upload_id is None:
            headers = {"x-amz-checksum-algorithm": "CRC32C"}
            try:
                root = self._upload.retrier.run(
                    lambda: self._c.dst.request(
                        "POST", self._key, {"uploads": ""}, headers=headers
                    ).xml()
                )
            except S3RequestError as err:
                if err.status in REFUSING_STATUS:
                    raise self._refused(
                        f"it refused a multipart upload with CRC-32C ({err})"
                    ) from None
                raise
            upload_id = root.findtext(f"{NS}UploadId") or root.findtext("UploadId")
            if not upload_id:
                raise self._refused("it answered CreateMultipartUpload without an upload id")
            self._upload_id = upload_id
        return self._upload_id

    def _submit(self, call: Callable[..., _Part], *args: object) -> None:
        """Run ``call(number, upload_id, *args)`` as the next part, once fewer than
        ``PARTS_IN_FLIGHT`` are under way (a failed one raises here)."""
        upload_id = self._start()
        while True:
            running = [f for f in self._futures if not f.done()]
            failed = next((f for f in self._futures if f.done() and f.exception()), None)
            if failed is not None:
                failed.result()
            if len(running) < PARTS_IN_FLIGHT:
                break
            wait(running, timeout=POLL, return_when=FIRST_EXCEPTION)
        self._number += 1
        self._futures.append(self._pool.submit(call, self._number, upload_id, *args))

    def _send_buffer(self) -> None:
        if self._buf:
            body, self._buf = bytes(self._buf), bytearray()
            self._submit(self._upload_part, body)

    def _upload_part(self, number: int, upload_id: str, body: bytes) -> _Part:
        crc = hasher(COMPOSED)
        crc.update(body)
        value = int(crc.hexdigest(), 16)
        headers = {"x-amz-checksum-crc32c": _crc_header(value)}
        query = {"partNumber": str(number), "uploadId": upload_id}
        answer = self._upload.retrier.run(
            lambda: self._c.dst.request("PUT", self._key, query, headers=headers, body=body)
        )
        given = _crc_value(answer.headers.get("x-amz-checksum-crc32c"))
        if given is not None and given != value:
            raise OSError(f"the store took part {number} with another CRC-32C than was sent")
        return _Part(number, answer.headers.get("etag", ""), value, len(body))

    def _copy_part(
        self, number: int, upload_id: str, key: str, start: int, end: int, etag: str, name: str
    ) -> _Part:
        headers = {
            "x-amz-copy-source": urllib.parse.quote(f"/{self._c.src.bucket}/{key}", safe="/"),
            "x-amz-copy-source-range": f"bytes={start}-{end - 1}",
            "x-amz-copy-source-if-match": etag,
        }
        query = {"partNumber": str(number), "uploadId": upload_id}
        try:
            root = self._upload.retrier.run(
                lambda: self._c.dst.request(
                    "PUT", self._key, query, headers=headers, timeout=COPY_TIMEOUT
                ).xml()
            )
        except S3RequestError as err:
            if err.status == 412:
                raise self._changed(name) from None
            if err.status in REFUSING_STATUS:
                raise self._refused(
                    f"it refused to copy a byte range (UploadPartCopy: {err})"
                ) from None
            raise
        crc = _crc_value(root.findtext(f"{NS}ChecksumCRC32C") or root.findtext("ChecksumCRC32C"))
        if crc is None:
            raise self._refused(
                "it computed no CRC-32C of a copied range, so the shard could not be checked"
            )
        part_etag = root.findtext(f"{NS}ETag") or root.findtext("ETag") or ""
        return _Part(number, part_etag, crc, end - start)

    def _parts(self) -> list[_Part]:
        """Every part, once all are done (the first failure raised)."""
        while True:
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
        total = 0
        for part in parts:
            total = crc32c_combine(total, part.crc, part.size)
        if self._upload.exclusive:
            taken = self._upload.retrier.run(lambda: self._there())
            if taken:
                raise name_taken(self.url)
        body = (
            "<CompleteMultipartUpload>"
            + "".join(
                f"<Part><PartNumber>{p.number}</PartNumber><ETag>{escape(p.etag)}</ETag>"
                f"<ChecksumCRC32C>{_crc_header(p.crc)}</ChecksumCRC32C></Part>"
                for p in parts
            )
            + "</CompleteMultipartUpload>"
        ).encode()
        query = {"uploadId": self._start()}

        def complete() -> str:
            root = self._upload.retrier.run(
                lambda: self._c.dst.request(
                    "POST", self._key, query, body=body, timeout=COPY_TIMEOUT
                ).xml()
            )
            return root.findtext(f"{NS}ETag") or root.findtext("ETag") or ""

        self.etag = guarded(self._upload.guard, self.url, complete)
        self._upload_id = None
        self.checksum = tagged(COMPOSED, f"{total:08x}")
        self._pool.shutdown(wait=False)

    def _there(self) -> bool:
        try:
            self._c.dst.request("HEAD", self._key, {})
        except S3RequestError as err:
            if err.status == 404:
                return False
            raise
        return True

    def abort(self) -> None:
        """Stop: parts not started are dropped, those under way end, and the upload is
        aborted (retried patiently; told, with what to do, if it cannot be)."""
        for future in self._futures:
            future.cancel()
        running = [f for f in self._futures if not f.done()]
        if running:  # a copy under way ends in the store anyway: waited for a while, no more
            wait(running, timeout=self._upload.cleanup.patience)
        self._pool.shutdown(wait=False)
        upload_id, self._upload_id = self._upload_id, None
        if upload_id is None:
            return
        query = {"uploadId": upload_id}
        try:
            self._upload.cleanup.run(lambda: self._c.dst.request("DELETE", self._key, query))
        except S3RequestError as err:
            if err.status == 404:
                return
            self._upload.notice(
                f"the unfinished upload of {self.url} could not be aborted ({err}) — once the "
                "store is back, run ishard again with --resume (it aborts such uploads), or set "
                "a lifecycle rule"
            )
        except OSError as err:
            self._upload.notice(
                f"the unfinished upload of {self.url} could not be aborted ({err}) — once the "
                "store is back, run ishard again with --resume (it aborts such uploads), or set "
                "a lifecycle rule"
            )
