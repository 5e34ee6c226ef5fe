"""One contract, every store: the same checks against a local directory, ``memory://``, S3
(SeaweedFS), Azure Blob (Azurite) and GCS (fake-gcs-server), each opened as a user's URL would
open it.

The GCS emulator takes no write through the API obstore writes with (see ``gcs_emulator``):
on ``gs://`` objects are put through the emulator's JSON API, and the checks of ishard's own
writes (conditional small files, shard uploads) are skipped, each saying so."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from ishard.errors import IshardError, UsageError
from ishard.store import open_store
from ishard.store.base import Refused, Unconditional, Upload
from ishard.store.retry import Retrier

KINDS = ["local", "memory", "s3", "azure", "gcs"]
NO_GCS_WRITES = "the GCS emulator refuses XML-API writes (see tests/support/gcs_emulator.py)"
# keys around '/': bytewise 'a-b' < 'a.b' < 'a/x' < 'a0'; and a space, a '+', non-ASCII
KEYS = ["a0", "a/x", "a-b", "a.b", "b/c/d.bin", "b/c e+f/é.jpg", "a/y/z"]


@pytest.fixture(params=KINDS)
def store(request, tmp_path):
    """An empty store of each kind, opened from its URL."""
    kind = request.param
    if kind == "local":
        yield open_store(str(tmp_path / "root"))
        return
    if kind == "memory":
        root = f"memory://contract-{uuid.uuid4().hex}"
        yield open_store(root)
        return
    if kind == "s3":
        server = request.getfixturevalue("s3_server")
        bucket = request.getfixturevalue("s3_bucket")
        yield open_store(
            f"s3://{bucket}",
            endpoint_url=server.endpoint_url,
            storage_options={"key": server.access_key, "secret": server.secret_key},
        )
        return
    if kind == "gcs":
        server = request.getfixturevalue("fake_gcs")
        bucket = request.getfixturevalue("gcs_bucket")
        opened = open_store(f"gs://{bucket}", storage_options=server.storage_options())
        SEEDERS[id(opened)] = lambda key, body: server.put(bucket, key, body)
        yield opened
        SEEDERS.pop(id(opened), None)
        return
    azurite = request.getfixturevalue("azurite")
    container = request.getfixturevalue("azure_container")
    yield open_store(f"az://{container}", storage_options=azurite.storage_options())


SEEDERS: dict = {}  # a store the tests cannot write through: how objects get there


def seed(store, key: str, body: bytes) -> None:
    """Put an object there for the test: through the store, or the emulator's own API."""
    SEEDERS.get(id(store), store.put)(key, body)


def writes_or_skip(store) -> None:
    if store.scheme == "gs":
        pytest.skip(NO_GCS_WRITES)


def fill(store, keys=KEYS) -> dict[str, bytes]:
    data = {key: f"<{key}>".encode() * 3 for key in keys}
    for key, body in data.items():
        seed(store, key, body)
    return data


def listed(store, prefix: str = "") -> list[str]:
    """The keys listed, in bytewise order (SeaweedFS lists folder by folder, S3 bytewise;
    ishard sorts every listing)."""
    keys = [info.key for page in store.pages(prefix, Retrier(1)) for info in page]
    assert len(keys) == len(set(keys)), keys  # every key once
    return sorted(keys, key=lambda k: k.encode())


def test_listing_is_bytewise_and_filters_by_prefix(store):
    if store.scheme == "file":
        store.make_root()
    data = fill(store)
    assert listed(store) == sorted(data, key=lambda k: k.encode())
    assert listed(store, "a") == ["a-b", "a.b", "a/x", "a/y/z", "a0"]
    assert listed(store, "a/") == ["a/x", "a/y/z"]
    assert listed(store, "b/c ") == ["b/c e+f/é.jpg"]
    assert listed(store, "zz") == []
    sizes = {info.key: info.size for page in store.pages("", Retrier(1)) for info in page}
    assert sizes == {key: len(body) for key, body in data.items()}


def test_reads_whole_ranged_async_streamed_and_stat(store):
    if store.scheme == "file":
        store.make_root()
    body = bytes(range(256)) * 40
    seed(store, "d/blob.bin", body)
    assert store.read("d/blob.bin") == body
    assert store.read("d/blob.bin", 100, 1000) == body[100:1000]
    if store.loop is not None:
        got = asyncio.run_coroutine_threadsafe(
            store.read_async("d/blob.bin", 5, 9), store.loop
        ).result(30)
        assert got == body[5:9]
    with store.open_read("d/blob.bin") as stream:
        assert stream.read(10) == body[:10]
        assert stream.read() == body[10:]
    info = store.stat("d/blob.bin")
    assert (info.key, info.size) == ("d/blob.bin", len(body))
    assert (info.etag is not None) == (store.scheme != "file") or store.scheme == "memory"
    with pytest.raises(FileNotFoundError):
        store.stat("d/missing.bin")
    with pytest.raises(FileNotFoundError):
        store.read("d/missing.bin")


def test_small_files_delete_find_and_emptiness(store):
    if store.scheme == "file":
        store.make_root()
    assert not store.has_objects("")
    for key in ("s/lock", "s/done/1.json", "s/done/2.json"):
        seed(store, key, b"{}")
    assert store.get("s/lock")[0] == b"{}"
    assert store.has_objects("") and store.has_objects("s/") and not store.has_objects("t/")
    assert store.exists("s/lock") and store.exists("s/done") and not store.exists("s/nope")
    assert store.is_folder("s/done") and not store.is_folder("s/lock")
    assert sorted(store.find("s/done")) == ["s/done/1.json", "s/done/2.json"]
    store.delete(["s/done/1.json", "s/done/missing.json"])
    assert store.find("s/done") == ["s/done/2.json"]
    store.delete_tree("s")
    assert store.find("s") == [] and not store.has_objects("s/")
    with pytest.raises(FileNotFoundError):
        store.get("s/lock")


def test_small_files_written_whole_and_on_conditions(store):
    writes_or_skip(store)
    if store.scheme == "file":
        store.make_root()
    first = store.put("s/lock", b"one")
    assert store.get("s/lock")[0] == b"one"
    assert store.has_objects("") and store.has_objects("s/") and not store.has_objects("t/")
    if store.capabilities.conditional:
        with pytest.raises(Refused):
            store.put("s/lock", b"two", mode="create")
        with pytest.raises(Refused):
            store.put("s/lock", b"two", mode=("match", '"00000000000000000000000000000000"'))
        second = store.put("s/lock", b"three", mode=("match", first))
        assert store.get("s/lock") == (b"three", second) or store.get("s/lock")[0] == b"three"
    else:
        with pytest.raises(Unconditional):
            store.put("s/lock", b"two", mode="create")
    store.delete_tree("s")
    assert store.find("s") == []


def test_a_sink_publishes_only_on_commit_and_abort_leaves_nothing(store):
    writes_or_skip(store)
    if store.scheme == "file":
        store.make_root()
    retrier = Retrier(2)
    notices: list[str] = []
    upload = Upload(retrier, retrier, part_size=5 << 20, expected=12 << 20, notice=notices.append)
    sink = store.sink("shard.tar", upload)
    body = bytes(range(256)) * (11 << 12)  # 11 MiB in two writes: three parts on a bucket
    sink.write(body[: 7 << 20])
    sink.write(body[7 << 20 :])
    sink.close()
    assert "shard.tar" not in listed(store)
    sink.commit()
    assert store.read("shard.tar") == body
    assert sink.checksum is not None and sink.size == len(body)

    doomed = store.sink("doomed.tar", upload)
    doomed.write(body)
    doomed.abort()
    assert [k for k in listed(store) if not k.startswith(".")] == ["shard.tar"]
    assert listed(store) == ["shard.tar"] or store.scheme == "file"  # no temp file left
    assert notices == []


def test_errors_are_one_line_with_the_exit_code(store, tmp_path):
    if store.scheme == "file":
        store.make_root()
    try:
        store.read("nothing/here.bin")
    except Exception as err:  # noqa: BLE001 - the store's own error type
        out = store.error(err, "source", store.url_of("nothing/here.bin"))
    assert isinstance(out, IshardError) and "\n" not in str(out)
    if store.scheme != "file":  # a bucket's or URL's missing object: a bad invocation
        assert isinstance(out, UsageError) and out.exit_code == 2
        assert "does not exist" in str(out)
    else:  # a local file that went missing while a run reads it: a runtime failure
        assert out.exit_code == 1 and "cannot read" in str(out) and "nothing/here.bin" in str(out)
