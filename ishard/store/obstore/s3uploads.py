"""A killed run's open S3 multipart uploads, listed and aborted.

obstore aborts the uploads of the runs it sees fail, but a run killed outright (``kill -9``,
a lost machine) leaves its upload open, holding storage, and obstore can neither list open
uploads nor abort one it did not start. These two S3 requests (``ListMultipartUploads``,
``AbortMultipartUpload``) are therefore sent here (``s3requests``).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from .s3requests import NS, S3Client

if TYPE_CHECKING:
    from ..retry import Retrier


def abort_open_uploads(settings: dict, bucket: str, keys: set[str], retrier: Retrier) -> int:
    """Abort every open multipart upload of these keys in ``bucket``; return how many. Without
    credentials that can sign (a store left to obstore's own credential chain), nothing can be
    asked and 0 is returned."""
    signing = settings.get("signing")
    if not keys or not signing:
        return 0
    client = S3Client(signing, bucket)
    if not client.usable:
        return 0
    prefix = _common_prefix(keys)
    aborted = 0
    marker: dict[str, str] = {}
    while True:
        query = {"uploads": "", "prefix": prefix, **marker}
        root = retrier.run(partial(client.request, "GET", "", query)).xml()
        for upload in root.iter(f"{NS}Upload"):
            key, upload_id = upload.findtext(f"{NS}Key"), upload.findtext(f"{NS}UploadId")
            if key in keys and upload_id:
                retrier.run(partial(client.request, "DELETE", key, {"uploadId": upload_id}))
                aborted += 1
        if root.findtext(f"{NS}IsTruncated") != "true":
            return aborted
        marker = {
            "key-marker": root.findtext(f"{NS}NextKeyMarker") or "",
            "upload-id-marker": root.findtext(f"{NS}NextUploadIdMarker") or "",
        }


def _common_prefix(keys: set[str]) -> str:
    first, last = min(keys), max(keys)
    size = 0
    while size < min(len(first), len(last)) and first[size] == last[size]:
        size += 1
    return first[:size]
