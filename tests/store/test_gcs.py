"""ishard with a ``gs://`` source, against a real GCS API server (fake-gcs-server on 127.0.0.1,
see gcs_emulator.py): the same tree sharded from the bucket and from a local copy gives the
same shards, member for member; a prefix and a missing object behave as on S3.

The emulator takes no write through the API obstore writes with, so ``gs://`` destinations are
not run here (docs/object-stores.md says so)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from helpers import make_tree, read_members, run_ishard

FILES = {
    f"train/{cls}/{cls}_{i:03d}.{ext}": 700 + 37 * i + len(ext)
    for cls in ("cat", "dog")
    for i in range(12)
    for ext in ("jpg", "cls", "json")
} | {"train/readme.txt": 90, "val/x_000.jpg": 500, "val/x_000.cls": 10}


def members(path: Path) -> list[tuple[str, bytes]]:
    """A shard's members in order (times differ: an object's time is its upload time)."""
    return read_members(path.name, path.read_bytes())


def options(server) -> list[str]:
    return [
        f
        for key, value in server.storage_options().items()
        for f in ("--storage-option", f"{key}={str(value).lower() if value is True else value}")
    ]


@pytest.fixture
def tree_in_gcs(fake_gcs, gcs_bucket, tmp_path):
    local = make_tree(tmp_path / "local", FILES)
    assert fake_gcs.put_tree(gcs_bucket, local) == len(FILES)
    return local, gcs_bucket


@pytest.mark.parametrize("ext", [".tar", ".tar.lz4", ".zip"])
def test_a_gcs_source_shards_like_the_same_tree_on_disk(fake_gcs, tree_in_gcs, tmp_path, ext):
    local, bucket = tree_in_gcs
    common = ["--shard-size", "8KiB", "--ext", ext]
    from_disk = run_ishard("shard", local / "train", tmp_path / "a", *common)
    from_gcs = run_ishard(
        "shard", f"gs://{bucket}/train", tmp_path / "b", *common, *options(fake_gcs)
    )
    assert from_disk.returncode == 0, from_disk.stderr
    assert from_gcs.returncode == 0, from_gcs.stderr
    shards = sorted(p.name for p in (tmp_path / "a").iterdir() if p.name.endswith(ext))
    assert len(shards) > 3
    assert shards == sorted(p.name for p in (tmp_path / "b").iterdir() if p.name.endswith(ext))
    for name in shards:
        assert members(tmp_path / "a" / name) == members(tmp_path / "b" / name), name
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert sum(s["nsamples"] for s in manifest["shardlist"]) == 25  # 24 samples + readme


def test_members_read_from_gcs_are_the_objects(fake_gcs, tree_in_gcs, tmp_path):
    local, bucket = tree_in_gcs
    result = run_ishard("shard", f"gs://{bucket}/val", tmp_path / "out", *options(fake_gcs))
    assert result.returncode == 0, result.stderr
    with tarfile.open(tmp_path / "out" / "shard-000000.tar") as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert got == {
        name.removeprefix("val/"): (local / name).read_bytes()
        for name in FILES
        if name.startswith("val/")
    }


def test_an_empty_gcs_prefix_is_one_line_exit_1(fake_gcs, gcs_bucket, tmp_path):
    result = run_ishard("shard", f"gs://{gcs_bucket}/nothing", tmp_path / "out", *options(fake_gcs))
    assert result.returncode == 1, result.stderr  # as for an empty folder: a data error
    assert "nothing to shard" in result.stderr
    assert result.stderr.startswith("ishard: error:") and len(result.stderr.splitlines()) == 1
    assert f"gs://{gcs_bucket}/nothing" in result.stderr and not (tmp_path / "out").exists()
