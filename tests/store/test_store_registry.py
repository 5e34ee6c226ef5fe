"""Backends own their schemes: a new one registers a scheme in its own module, and a scheme
claimed twice is refused unless the first claim is only a fallback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import invoke_ishard, make_tree, snapshot

from ishard.errors import UsageError
from ishard.store import Location, registry, resolve
from ishard.store.fsspec import FsspecStore

PACKAGE = Path(__file__).resolve().parents[2] / "ishard"


# -- a stub backend, as a module of its own would be: AIStore's ais:// served from a folder ----
class FolderBucket(FsspecStore):
    """``ais://BUCKET/…`` as the folder ``BUCKET`` under :data:`FOLDER` of this machine."""

    FOLDER = ""

    @classmethod
    def open_bucket(cls, url, kind, bucket, endpoint_url, options, role):
        import fsspec

        store = cls(
            url, fsspec.filesystem("file", auto_mkdir=True), f"{cls.FOLDER}/{bucket}", "ais"
        )
        store.bucket_name = bucket
        return store

    def url_of(self, key: str) -> str:
        return f"ais://{self.bucket_name}/{key}"


STUB = registry.Backend("folder-ais", schemes={"ais": "ais"}, bucket=FolderBucket.open_bucket)


@pytest.fixture
def backends(monkeypatch):
    """The registry as it is, given back after the test."""
    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))


@pytest.fixture
def stub_ais(backends, tmp_path, monkeypatch):
    monkeypatch.setattr(FolderBucket, "FOLDER", str(tmp_path / "ais"))
    monkeypatch.delenv("AIS_ENDPOINT", raising=False)  # the stub needs no S3 gateway
    registry.register(STUB)
    return tmp_path / "ais"


def test_a_stub_backend_registered_for_ais_shards_and_lists(stub_ais, tmp_path):
    files = {f"s{i}.{ext}": 300 + i for i in range(6) for ext in ("jpg", "cls")}
    make_tree(stub_ais / "src", files)
    make_tree(tmp_path / "src", files)
    (stub_ais / "dst").mkdir()
    options = ("--shard-size", "2KiB", "--checksum", "none")
    ran = invoke_ishard("shard", "ais://src", "ais://dst/out", *options, "-q")
    assert ran.returncode == 0, ran.stderr
    here = invoke_ishard("shard", str(tmp_path / "src"), str(tmp_path / "out"), *options, "-q")
    assert here.returncode == 0, here.stderr
    shards = {k: v for k, v in snapshot(stub_ais / "dst" / "out").items() if k.endswith(".tar")}
    assert len(shards) > 1
    assert shards == {k: v for k, v in snapshot(tmp_path / "out").items() if k.endswith(".tar")}
    first = min(shards)
    listed = invoke_ishard("ls", f"ais://dst/out/{first}")
    assert listed.returncode == 0, listed.stderr
    assert "s0.jpg" in listed.stdout and "s0.cls" in listed.stdout
    verified = invoke_ishard("verify", "ais://dst/out", "--deep")
    assert verified.returncode == 0, verified.stderr


def test_register_refuses_a_scheme_another_backend_claims(backends):
    with pytest.raises(ValueError, match=r"'s3'.*obstore"):
        registry.register(registry.Backend("other", schemes={"s3": "s3"}, bucket=print))
    assert registry.serving("s3").name == "obstore"


def test_ais_stays_the_s3_gateway_without_another_backend(monkeypatch):
    monkeypatch.setenv("AIS_ENDPOINT", "http://127.0.0.1:9")
    loc = resolve("ais://bkt/p", storage_options={"backend": "fsspec"})
    assert loc.store.fs.endpoint_url == "http://127.0.0.1:9/s3"
    with pytest.raises(UsageError, match="AIS_ENDPOINT"):
        monkeypatch.delenv("AIS_ENDPOINT")
        resolve("ais://bkt/p")


@pytest.mark.parametrize(
    ("given", "path"),
    [("data/list.csv", "data/list.csv"), ("file:///x/list.csv", "/x/list.csv"),
     ("s3://b/list.csv", None), ("memory://list.csv", None)],
)  # fmt: skip
def test_a_location_says_whether_a_url_is_local(given, path):
    assert Location.local_path(given) == path


def test_planning_and_split_ask_the_location_what_is_local():
    rule = re.compile(r'"://" (not )?in|file://')
    found = [
        f"{source.relative_to(PACKAGE)}:{number}"
        for folder in ("planning", "split")
        for source in sorted((PACKAGE / folder).rglob("*.py"))
        for number, line in enumerate(source.read_text().splitlines(), 1)
        if rule.search(line)
    ]
    assert found == []
