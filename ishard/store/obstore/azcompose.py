"""Composing in Azure Blob Storage (``store/compose.py``): a block blob whose blocks this
machine uploads (Put Block) or the store copies (Put Block From URL: a byte range of the
source, conditional on its ETag), committed by Put Block List — only then does it exist.

Blocks take any size, so no byte of a large member passes through this machine. The store
gives each block's CRC-64/NVME (``x-ms-content-crc64``), the shard's checksum combined from
them. The requests are signed with the account's key (Shared Key), and the store reads the
source through a service SAS signed with it, valid for an hour; with other credentials (a SAS
token alone, Microsoft Entra ID) composing is refused, with the reason. Uncommitted blocks of
a failed shard cannot be deleted: Azure drops them after a week, as it does a client upload's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import urllib.parse
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from email.utils import formatdate
from typing import TYPE_CHECKING

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
from .s3requests import TIMEOUT, Connections, RequestError

if TYPE_CHECKING:
    from ..base import Upload
    from ..location import Location

VERSION = "2021-08-06"  # the service version the requests and the SAS are made for
# Put Block From URL copies up to 100 MiB a block; a blob holds 50,000 blocks
LIMITS = Limits(min_part=0, max_copy=100 << 20, max_parts=50_000, checksum="crc64nvme")
COPY_TIMEOUT = 600.0
SAS_HOURS = 1  # how long the store may read the source through the SAS
EMULATOR = ("devstoreaccount1", "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")  # fmt: skip
_NAMES = ("account_name", "azure_storage_account_name")
_KEYS = ("account_key", "azure_storage_account_key", "access_key", "azure_storage_access_key",
         "master_key", "azure_storage_master_key")  # fmt: skip
_ENDPOINTS = ("endpoint", "azure_storage_endpoint", "azure_endpoint")
_STANDARD = ("content-encoding", "content-language", "content-length", "content-md5",
             "content-type", "date", "if-modified-since", "if-match", "if-none-match",
             "if-unmodified-since", "range")  # fmt: skip


def account_of(config: dict) -> tuple[str, bytes, str] | str:
    """The account's name, key and blob endpoint from the store's settings (as obstore takes
    them, then the environment; the emulator's well-known account); else why there is none."""
    env = os.environ
    emulator = str(config.get("use_emulator", env.get("AZURE_STORAGE_USE_EMULATOR"))).lower()
    name = next((config[k] for k in _NAMES if config.get(k)), env.get("AZURE_STORAGE_ACCOUNT_NAME"))
    key = next((config[k] for k in _KEYS if config.get(k)), None) or env.get(
        "AZURE_STORAGE_ACCOUNT_KEY", env.get("AZURE_STORAGE_ACCESS_KEY")
    )
    endpoint = next(
        (config[k] for k in _ENDPOINTS if config.get(k)), env.get("AZURE_STORAGE_ENDPOINT")
    )
    if emulator == "true":
        name, key = name or EMULATOR[0], key or EMULATOR[1]
        base = env.get("AZURITE_BLOB_STORAGE_URL") or "http://127.0.0.1:10000"
        endpoint = endpoint or f"{base.rstrip('/')}/{name}"
    if not name or not key:
        return "composing in Azure needs the account's key (account_key=…), to sign its requests"
    try:
        secret = base64.b64decode(str(key), validate=True)
    except ValueError:
        return "the account key is not base64"
    return str(name), secret, str(endpoint or f"https://{name}.blob.core.windows.net")


def azure_composer(
    source: Location, dest: Location, *, min_size: int, part_size: int
) -> Composer | str:
    """The run's composer between two containers of one Azure account; else why not."""
    mine = account_of(dest.store.settings["config"])  # type: ignore[attr-defined]
    theirs = account_of(source.store.settings["config"])  # type: ignore[attr-defined]
    if isinstance(mine, str):
        return mine
    if mine != theirs:
        return "SRC and DST are in other Azure accounts, or reached through other endpoints"
    account = Account(*mine)
    src, dst = source.store.root, dest.store.root  # type: ignore[attr-defined]
    return Composer(
        LIMITS,
        lambda key, upload: AzureUpload(account, src, dst, key, upload),
        min_size=min_size,
        part_size=part_size,
        url_of=dest.store.url_of,  # type: ignore[attr-defined]
    )


class Account:
    """Requests to one storage account's blob service, signed with its key (Shared Key), each
    thread on a connection of its own."""

    def __init__(self, name: str, key: bytes, endpoint: str) -> None:
        self.name, self._key = name, key
        parts = urllib.parse.urlsplit(endpoint)
        self._scheme, self._host, self._base = parts.scheme, parts.netloc, parts.path.rstrip("/")
        self.endpoint = endpoint.rstrip("/")
        self._connections = Connections(self._scheme, self._host)

    def _sign(self, text: str) -> str:
        return base64.b64encode(
            hmac.new(self._key, text.encode(), hashlib.sha256).digest()
        ).decode()

    def path(self, container: str, blob: str) -> str:
        return urllib.parse.quote(f"{self._base}/{container}/{blob}", safe="/")

    def url(self, container: str, blob: str) -> str:
        """The blob's URL, readable by the store for an hour (a service SAS)."""
        expiry = (datetime.now(timezone.utc) + timedelta(hours=SAS_HOURS)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        fields = ["r", "", expiry, f"/blob/{self.name}/{container}/{blob}", "", "", "", VERSION,
                  "b", "", "", "", "", "", "", ""]  # fmt: skip
        query = urllib.parse.urlencode(
            {
                "sv": VERSION,
                "se": expiry,
                "sr": "b",
                "sp": "r",
                "sig": self._sign("\n".join(fields)),
            }
        )
        return f"{self._scheme}://{self._host}{self.path(container, blob)}?{query}"

    def request(
        self,
        method: str,
        container: str,
        blob: str,
        query: dict[str, str],
        *,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        timeout: float = TIMEOUT,
    ) -> dict[str, str]:
        """One signed request; the answer's headers (lower-case names), or ``RequestError``."""
        sent = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": VERSION}
        sent.update({k.lower(): v for k, v in (headers or {}).items()})
        path = self.path(container, blob)
        standard = [str(len(body)) if n == "content-length" and body else sent.get(n, "")
                    for n in _STANDARD]  # fmt: skip
        canonical = "".join(f"{k}:{v}\n" for k, v in sorted(sent.items()) if k.startswith("x-ms-"))
        resource = f"/{self.name}{path}" + "".join(
            f"\n{k.lower()}:{v}" for k, v in sorted(query.items())
        )
        signature = self._sign("\n".join([method, *standard]) + "\n" + canonical + resource)
        sent["authorization"] = f"SharedKey {self.name}:{signature}"
        sent["content-length"] = str(len(body))
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        conn = self._connections.get(timeout)
        try:
            conn.request(method, target, body=body or None, headers=sent)
            answer = conn.getresponse()
            data = answer.read()
        except BaseException:
            self._connections.drop()  # a connection in an unknown state is not used again
            raise
        got = {k.lower(): v for k, v in answer.getheaders()}
        if answer.status >= 300:
            code, message = got.get("x-ms-error-code", ""), ""
            try:
                root = ET.fromstring(data)
                code, message = root.findtext("Code") or code, root.findtext("Message") or ""
            except ET.ParseError:
                pass
            raise RequestError(
                answer.status, code or answer.reason, message.splitlines()[0] if message else ""
            )
        return got


def _block_id(number: int) -> str:
    return base64.b64encode(f"ishard-{number:08d}".encode()).decode()


def _crc64(headers: dict[str, str]) -> int | None:
    text = headers.get("x-ms-content-crc64")
    try:
        raw = base64.b64decode(text or "", validate=True)
    except ValueError:
        return None
    return int.from_bytes(raw, "little") if len(raw) == 8 else None


class AzureUpload:
    """One shard's block blob (``compose.Service``): blocks staged, then committed."""

    def __init__(self, account: Account, src: str, dst: str, key: str, upload: Upload) -> None:
        self._account, self._src, self._dst, self._key = account, src, dst, key
        self._retrier = upload.retrier

    def source(self, name: str, size: int) -> Source:
        """``name``'s ETag now, and the MD5 the store keeps of a blob put whole."""
        got = looked_up(
            name,
            size,
            f"az://{self._src}",
            lambda: self._retrier.run(lambda: self._account.request("HEAD", self._src, name, {})),
        )
        try:
            md5 = base64.b64decode(got.get("content-md5", ""), validate=True).hex() or None
        except ValueError:
            md5 = None
        return Source(got["etag"], md5 if md5 and len(md5) == 32 else None)

    def first_bytes(self, name: str, count: int, source: Source) -> bytes:
        raise AssertionError("Azure takes blocks of any size: no first bytes are borrowed")

    def start(self) -> None:
        """Nothing to begin: blocks are staged under the blob's name until committed."""

    def put_part(self, number: int, body: bytes) -> Part:
        query = {"comp": "block", "blockid": _block_id(number)}
        got = self._retrier.run(
            lambda: self._account.request("PUT", self._dst, self._key, query, body=body)
        )
        crc = _crc64(got)
        if crc is None:
            raise ComposeRefused("it gave no CRC-64 of a block, so the shard could not be checked")
        return Part(number, _block_id(number), crc, len(body))

    def copy_part(self, number: int, name: str, start: int, end: int, source: Source) -> Part:
        headers = {
            "x-ms-copy-source": self._account.url(self._src, name),
            "x-ms-source-range": f"bytes={start}-{end - 1}",
            "x-ms-source-if-match": source.etag,
        }
        query = {"comp": "block", "blockid": _block_id(number)}
        try:
            got = self._retrier.run(
                lambda: self._account.request(
                    "PUT", self._dst, self._key, query, headers=headers, timeout=COPY_TIMEOUT
                )
            )
        except RequestError as err:
            if err.status == 412:
                raise source_changed(name, self._key) from None
            if err.status == 404 and err.code == "BlobNotFound":
                raise source_missing(name, f"az://{self._src}") from None
            if err.status in (*REFUSING_STATUS, 404):  # 404 CannotVerifyCopySource too: the
                # store could not read the source through its URL (a firewall, an endpoint)
                raise ComposeRefused(
                    f"it refused to copy a byte range (Put Block From URL: {err})"
                ) from None
            raise
        crc = _crc64(got)
        if crc is None:
            raise ComposeRefused(
                "it gave no CRC-64 of a copied range, so the shard could not be checked"
            )
        return Part(number, _block_id(number), crc, end - start)

    def complete(self, parts: list[Part], exclusive: bool) -> str:
        """Commit the blocks (``exclusive``: only where no blob has the name, a condition of
        the request itself)."""
        body = (
            "<?xml version='1.0' encoding='utf-8'?><BlockList>"
            + "".join(f"<Latest>{p.token}</Latest>" for p in parts)
            + "</BlockList>"
        ).encode()
        headers = {
            "content-type": "application/xml",
            **({"if-none-match": "*"} if exclusive else {}),
        }
        try:
            got = self._retrier.run(
                lambda: self._account.request(
                    "PUT", self._dst, self._key, {"comp": "blocklist"}, headers=headers, body=body
                )
            )
        except RequestError as err:
            if exclusive and err.status in (409, 412):
                raise name_taken(f"az://{self._dst}/{self._key}") from None
            raise
        return got.get("etag", "")

    def abort(self) -> None:
        """Nothing can be: Azure drops uncommitted blocks after a week."""
