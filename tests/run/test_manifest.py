"""DST/manifest.json: a wids shard index whose every number agrees with the shards on disk.

Expected values come from the test data (names and sizes) and from reading the shards with
tarfile / zipfile, never from ishard's own readers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet
import pytest
import xxhash
from helpers import (
    DATASET_RECORDS,
    entry_matches,
    invoke_ishard,
    make_tree,
    read_shard,
    recorded_checksum,
    shard_files,
    stem,
)
from helpers import SMALL_TREE as TREE

from ishard.formats import ARCHIVE_EXTS

HIDDEN = {".DS_Store": b"finder", "train/.cache/0001.jpg": 10}


def sizes(files: dict[str, bytes | int]) -> dict[str, int]:
    return {name: v if isinstance(v, int) else len(v) for name, v in files.items()}


def run(src: Path, dst: Path, *args: str) -> dict:
    done = invoke_ishard("shard", src, dst, "--no-progress", *args)
    assert done.returncode == 0, done.stderr
    return json.loads((dst / "manifest.json").read_bytes())


@pytest.mark.parametrize("ext", ARCHIVE_EXTS)
def test_manifest_agrees_with_the_shards_and_the_source(ext, tmp_path):
    src = make_tree(tmp_path / "src", {**TREE, **HIDDEN})
    dst = tmp_path / "dst"
    doc = run(src, dst, "--ext", ext, "--shard-size", "4KiB")

    assert doc["__kind__"] == "wids-shard-index-v1"
    assert doc["wids_version"] == 1
    shards = shard_files(dst)
    assert [e["url"] for e in doc["shardlist"]] == [p.name for p in shards]
    assert len(shards) == 4

    expected_keys = {stem(name) for name in TREE}
    found_keys: set[str] = set()
    per_shard = []
    for entry, path in zip(doc["shardlist"], shards):
        data = path.read_bytes()
        assert entry_matches(entry, data) and recorded_checksum(entry)[0] == "xxh128", path.name
        assert entry["filesize"] == os.path.getsize(path) == len(data)
        members = read_shard(path)
        keys = {stem(name) for name, _ in members}
        assert entry["nsamples"] == len(keys), path.name
        found_keys |= keys
        per_shard.append(
            {
                "name": path.name,
                "files": len(members),
                "samples": len(keys),
                "payload_bytes": sum(len(body) for _, body in members),
            }
        )
    assert found_keys == expected_keys
    assert sum(e["nsamples"] for e in doc["shardlist"]) == len(expected_keys) == 7

    own = doc["ishard"]
    version = invoke_ishard("--version").stdout
    assert own["version"] and own["version"] in version
    assert own["source"] == str(src)
    assert own["options"]["ext"] == ext
    assert own["options"]["shard_size"] == 4096
    assert own["options"]["sample_key_pattern"] == "base_file_name"
    assert own["totals"] == {
        "shards": 4,
        "samples": len(expected_keys),
        "files": len(TREE),
        "payload_bytes": sum(sizes(TREE).values()),
        "archive_bytes": sum(os.path.getsize(p) for p in shards),
    }
    assert own["shards"] == per_shard
    skipped = {s["reason"]: s for s in own["skipped"]}
    assert sum(s["count"] for s in own["skipped"]) == len(HIDDEN)
    assert all("hidden" in reason for reason in skipped)
    examples = [e for s in own["skipped"] for e in s["examples"]]
    assert ".DS_Store" in examples and any(e.startswith("train/.cache") for e in examples)
    assert sorted(os.listdir(dst)) == sorted([p.name for p in shards] + [*DATASET_RECORDS])

    # the sample index: a row per member, in archive order, read with pyarrow
    index = (dst / "samples.parquet").read_bytes()
    rows = pyarrow.parquet.read_table(dst / "samples.parquet").to_pylist()
    assert own["samples_index"] == {
        "name": "samples.parquet",
        "rows": len(rows),
        "bytes": len(index),
        "checksum": "xxh128:" + xxhash.xxh128(index).hexdigest(),
    }
    archived = [(p.name, name, len(body)) for p in shards for name, body in read_shard(p)]
    assert [(r["shard"], r["member"], r["size"]) for r in rows] == archived
    for r in rows:
        assert r["key"] == stem(r["source"]) == stem(r["member"])
        assert r["member"].rpartition(".")[2] == r["source"].rpartition(".")[2]
        assert r["size"] == sizes(TREE)[r["source"]]
        assert r["mtime"] == int(os.stat(src / r["source"]).st_mtime)
    assert sorted(r["source"] for r in rows) == sorted(TREE)


def test_manifest_counts_after_sample_exts_exclude(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    doc = run(
        src,
        dst,
        "--sample-exts",
        ".jpg,.json",
        "--missing-extension-action",
        "exclude",
        "--shard-size",
        "4KiB",
        "--member-names",
        "original",
    )
    # by hand: samples with both a .jpg and a .json are 0001, 0002, 0003; 0001 loses its
    # .xml and .cls files; every other sample lacks one of the two and is left out whole
    kept = {n: s for n, s in sizes(TREE).items() if n.endswith((".jpg", ".json"))}
    members = {}
    for path in shard_files(dst):
        members.update(read_shard(path))
    assert members.keys() == kept.keys()
    own = doc["ishard"]
    assert own["totals"]["files"] == len(kept) == 6
    assert own["totals"]["samples"] == 3 == sum(e["nsamples"] for e in doc["shardlist"])
    assert own["totals"]["payload_bytes"] == sum(kept.values())
    assert sum(s["count"] for s in own["skipped"]) == len(TREE) - len(kept)
    assert own["options"]["sample_exts"] == [".jpg", ".json"]


def test_manifest_records_the_shuffle_seed_that_repeats_the_run(tmp_path):
    files = {f"d/{i:03d}.bin": 700 + i for i in range(40)}
    src = make_tree(tmp_path / "src", files)
    first = run(
        src,
        tmp_path / "one",
        "--sort",
        "shuffle",
        "--shard-size",
        "4KiB",
        "--member-names",
        "original",
    )
    seed = first["ishard"]["seed"]
    assert isinstance(seed, int)
    assert first["ishard"]["options"]["sort"] == f"shuffle:{seed}"
    again = run(
        src,
        tmp_path / "two",
        "--sort",
        f"shuffle:{seed}",
        "--shard-size",
        "4KiB",
        "--member-names",
        "original",
    )
    assert again["shardlist"] == first["shardlist"]
    one = {p.name: p.read_bytes() for p in shard_files(tmp_path / "one")}
    two = {p.name: p.read_bytes() for p in shard_files(tmp_path / "two")}
    assert one == two
    order = [name for p in shard_files(tmp_path / "one") for name, _ in read_shard(p)]
    assert sorted(order) == sorted(files) and order != sorted(order)
