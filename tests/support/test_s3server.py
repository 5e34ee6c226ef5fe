"""The real S3 server the S3 tests use (SeaweedFS, see s3server.py) does what ishard needs.

Everything goes through s3fs, as ishard will. The restart test stays last: it stops the
shared server (``s3_bucket`` brings it back should a later test need it).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import botocore.exceptions
import pytest

MiB = 1024 * 1024


def error_code(exc: BaseException) -> str | None:
    """The S3 error code behind an s3fs exception (s3fs chains the botocore error)."""
    cause = exc.__cause__
    return getattr(cause, "response", {}).get("Error", {}).get("Code")


def test_server_listens_on_loopback_only(s3_server):
    assert s3_server.endpoint_url == f"http://127.0.0.1:{s3_server.ports['s3']}"
    assert s3_server.running
    assert s3_server.startup_seconds is not None and s3_server.startup_seconds < 60


def test_make_bucket_put_get_list(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    assert s3_bucket in fs.ls("")
    other = s3_server.make_bucket()
    assert other != s3_bucket and fs.ls(other) == []

    fs.pipe({f"{s3_bucket}/a/1.bin": b"one", f"{s3_bucket}/a/2.bin": b"two", f"{s3_bucket}/b": b""})
    assert fs.cat(f"{s3_bucket}/a/1.bin") == b"one"
    assert fs.cat_file(f"{s3_bucket}/a/2.bin", start=1, end=3) == b"wo"  # ranged GET
    info = fs.info(f"{s3_bucket}/a/1.bin")
    assert info["size"] == 3 and info["type"] == "file"
    assert info["ETag"] == '"f97c5d29941bfb1b2fdab0874906ab82"'  # quoted MD5 for a plain PUT
    assert sorted(fs.ls(s3_bucket)) == [f"{s3_bucket}/a", f"{s3_bucket}/b"]
    assert fs.find(f"{s3_bucket}/a") == [f"{s3_bucket}/a/1.bin", f"{s3_bucket}/a/2.bin"]
    # consistent at once: a write is listed and an overwrite read straight back
    fs.pipe(f"{s3_bucket}/a/1.bin", b"uno")
    assert fs.cat(f"{s3_bucket}/a/1.bin") == b"uno"
    fs.rm(f"{s3_bucket}/a/2.bin")
    assert fs.find(s3_bucket) == [f"{s3_bucket}/a/1.bin", f"{s3_bucket}/b"]
    with pytest.raises(FileNotFoundError):
        fs.cat(f"{s3_bucket}/a/2.bin")


def test_listing_pages_through_2100_keys_and_prefixes(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    keys = [f"many/{i:05d}.tar" for i in range(2100)]
    fs.pipe({f"{s3_bucket}/{k}": k.encode() for k in keys} | {f"{s3_bucket}/other.txt": b"x"})

    # s3fs pages internally
    assert fs.find(f"{s3_bucket}/many") == [f"{s3_bucket}/{k}" for k in keys]
    assert len(fs.ls(f"{s3_bucket}/many")) == 2100
    assert fs.ls(s3_bucket) == [f"{s3_bucket}/many", f"{s3_bucket}/other.txt"]

    # ListObjectsV2 itself: 1,000-key pages joined by continuation tokens, in key order
    got, pages, token = [], 0, None
    while True:
        kwargs = {"ContinuationToken": token} if token else {}
        page = fs.call_s3("list_objects_v2", Bucket=s3_bucket, Prefix="many/", **kwargs)
        got += [obj["Key"] for obj in page["Contents"]]
        pages += 1
        assert page["KeyCount"] == len(page["Contents"]) <= 1000
        if not page["IsTruncated"]:
            break
        token = page["NextContinuationToken"]
        assert pages < 10
    assert (pages, got) == (3, keys)

    small = fs.call_s3("list_objects_v2", Bucket=s3_bucket, Prefix="many/", MaxKeys=7)
    assert small["IsTruncated"] and [o["Key"] for o in small["Contents"]] == keys[:7]
    after = fs.call_s3("list_objects_v2", Bucket=s3_bucket, Prefix="many/", StartAfter=keys[1000])
    assert after["Contents"][0]["Key"] == keys[1001]
    narrow = fs.call_s3("list_objects_v2", Bucket=s3_bucket, Prefix="many/020")
    assert [o["Key"] for o in narrow["Contents"]] == keys[2000:2100]
    assert not narrow["IsTruncated"]
    top = fs.call_s3("list_objects_v2", Bucket=s3_bucket, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["many/"]
    assert [o["Key"] for o in top["Contents"]] == ["other.txt"]


def test_multipart_upload_through_s3fs_blocks(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    data = bytes(range(256)) * (11 * MiB // 256) + b"tail"  # 11 MiB + 4: three parts
    with fs.open(f"{s3_bucket}/big.tar", "wb", block_size=5 * MiB) as f:
        for i in range(0, len(data), MiB):
            f.write(data[i : i + MiB])
    info = fs.info(f"{s3_bucket}/big.tar")
    assert info["size"] == len(data)
    assert info["ETag"].strip('"').endswith("-3")  # multipart ETag: md5-of-md5s "-parts"
    assert fs.cat(f"{s3_bucket}/big.tar") == data
    assert fs.call_s3("list_multipart_uploads", Bucket=s3_bucket).get("Uploads", []) == []


def test_list_and_abort_in_progress_multipart_uploads(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    call = fs.call_s3
    first = call("create_multipart_upload", Bucket=s3_bucket, Key="run/a.tar")["UploadId"]
    second = call("create_multipart_upload", Bucket=s3_bucket, Key="run/b.tar")["UploadId"]
    part = b"p" * (5 * MiB)
    etag = call(
        "upload_part", Bucket=s3_bucket, Key="run/a.tar", UploadId=first, PartNumber=1, Body=part
    )["ETag"]
    call("upload_part", Bucket=s3_bucket, Key="run/b.tar", UploadId=second, PartNumber=1, Body=b"x")

    listed = call("list_multipart_uploads", Bucket=s3_bucket, Prefix="run/")["Uploads"]
    assert sorted((u["Key"], u["UploadId"]) for u in listed) == sorted(
        [("run/a.tar", first), ("run/b.tar", second)]
    )
    assert call("list_multipart_uploads", Bucket=s3_bucket, Prefix="nope/").get("Uploads", []) == []
    parts = call("list_parts", Bucket=s3_bucket, Key="run/a.tar", UploadId=first)["Parts"]
    assert [(p["PartNumber"], p["Size"], p["ETag"]) for p in parts] == [(1, 5 * MiB, etag)]
    # an in-progress upload is not an object yet
    assert not fs.exists(f"{s3_bucket}/run/a.tar")

    call("abort_multipart_upload", Bucket=s3_bucket, Key="run/b.tar", UploadId=second)
    listed = call("list_multipart_uploads", Bucket=s3_bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in listed] == [("run/a.tar", first)]
    with pytest.raises(FileNotFoundError):  # NoSuchUpload
        call("list_parts", Bucket=s3_bucket, Key="run/b.tar", UploadId=second)

    call(
        "complete_multipart_upload",
        Bucket=s3_bucket,
        Key="run/a.tar",
        UploadId=first,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )
    assert call("list_multipart_uploads", Bucket=s3_bucket).get("Uploads", []) == []
    assert fs.cat(f"{s3_bucket}/run/a.tar") == part
    assert not fs.exists(f"{s3_bucket}/run/b.tar")


def test_missing_bucket_is_file_not_found(s3_server):
    fs = s3_server.filesystem()
    missing = "no-such-bucket-ishard"
    for action in (
        lambda: fs.ls(missing),
        lambda: fs.cat(f"{missing}/k"),
        lambda: fs.pipe(f"{missing}/k", b"x"),  # no auto-creation on write, as on AWS
    ):
        with pytest.raises(FileNotFoundError, match="The specified bucket does not exist") as exc:
            action()
        assert error_code(exc.value) == "NoSuchBucket"
    assert missing not in fs.ls("")


@pytest.mark.parametrize(
    ("which", "code", "message"),
    [
        ("secret", "SignatureDoesNotMatch", "signature we calculated does not match"),
        ("key", "InvalidAccessKeyId", "access key ID you provided does not exist"),
    ],
)
def test_wrong_credentials_are_denied(s3_server, s3_bucket, which, code, message):
    good = s3_server.filesystem()
    good.pipe(f"{s3_bucket}/secret.bin", b"s")
    bad = s3_server.filesystem(**{which: "wrong-" + which})

    for action in (
        lambda: bad.ls(s3_bucket),
        lambda: bad.cat(f"{s3_bucket}/secret.bin"),
        lambda: bad.pipe(f"{s3_bucket}/new.bin", b"n"),
    ):
        with pytest.raises(PermissionError) as exc:
            action()
        # HEAD (used before a GET) has no body: then s3fs says only "Forbidden", code "403"
        assert error_code(exc.value) in (code, "403")
        if error_code(exc.value) == code:
            assert message in str(exc.value)
    assert good.find(s3_bucket) == [f"{s3_bucket}/secret.bin"]


def test_unsigned_requests_are_denied(s3_server, s3_bucket):
    with pytest.raises(PermissionError, match="Access Denied") as exc:
        s3_server.filesystem(anon=True).ls(s3_bucket)
    assert error_code(exc.value) == "AccessDenied"
    with pytest.raises(urllib.error.HTTPError) as http:
        urllib.request.urlopen(f"{s3_server.endpoint_url}/{s3_bucket}", timeout=5)
    assert http.value.code == 403


def test_restart_keeps_data_and_a_stopped_server_refuses(s3_server, s3_bucket):
    fs = s3_server.filesystem()
    big = b"z" * (6 * MiB)
    with fs.open(f"{s3_bucket}/kept/big.bin", "wb", block_size=5 * MiB) as f:
        f.write(big)
    fs.pipe({f"{s3_bucket}/kept/{i}.txt": str(i).encode() for i in range(20)})
    pending = fs.call_s3("create_multipart_upload", Bucket=s3_bucket, Key="kept/pending")
    port = s3_server.ports["s3"]

    s3_server.stop()  # graceful: SIGTERM
    assert not s3_server.running
    began = time.monotonic()
    with pytest.raises(botocore.exceptions.EndpointConnectionError, match="Could not connect"):
        fs.ls(f"{s3_bucket}/kept", refresh=True)  # not an OSError: s3fs passes it through
    assert time.monotonic() - began < 15

    s3_server.start()
    assert s3_server.ports["s3"] == port
    fs = s3_server.filesystem()
    assert fs.cat(f"{s3_bucket}/kept/big.bin") == big
    assert fs.cat(f"{s3_bucket}/kept/7.txt") == b"7"
    uploads = fs.call_s3("list_multipart_uploads", Bucket=s3_bucket)["Uploads"]
    assert [u["UploadId"] for u in uploads] == [pending["UploadId"]]

    s3_server.restart(kill=True)  # a crash: SIGKILL, no shutdown at all
    fs = s3_server.filesystem()
    assert len(fs.find(f"{s3_bucket}/kept")) == 21
    assert fs.cat(f"{s3_bucket}/kept/big.bin") == big
    fs.pipe(f"{s3_bucket}/kept/after.txt", b"after")  # and it takes writes again
    assert fs.cat(f"{s3_bucket}/kept/after.txt") == b"after"
