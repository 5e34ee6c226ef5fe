"""ishard against a real S3 server (SeaweedFS on 127.0.0.1, see s3server.py).

Sources and destinations in buckets, ``ais://`` through the S3 API, ``--src-list`` inventories,
the errors a person sees, and a fault test that kills the server in the middle of a run.
Every shard is read back with tarfile/zipfile/lz4 and compared byte for byte.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from urllib.parse import quote_plus

import pytest
from helpers import (
    MiB,
    assert_error,
    assert_ok,
    blob,
    checksum_fields,
    listing,
    make_tree,
    objects,
    put,
    read_members_checked,
    read_webdataset,
    read_wids,
    stem,
    uploads,
)

import ishard
from ishard.formats import ARCHIVE_EXTS
from ishard.progress import Progress

FORMATS = ARCHIVE_EXTS


# ---------------------------------------------------------------- helpers


def check_shards(
    shards: dict[str, bytes], manifest: dict, expected: dict[str, bytes], algorithm: str = "xxh128"
) -> None:
    """``shards`` (name -> bytes) hold ``expected`` exactly once, samples unsplit, and the
    manifest lists every shard with its true checksum (by ``algorithm``; xxh128 is the native
    spelling's default, md5 the Go spelling's) and size."""
    assert manifest["shardlist"] == [
        {
            "url": name,
            **checksum_fields(shards[name], algorithm),
            "nsamples": manifest["shardlist"][i]["nsamples"],
            "filesize": len(shards[name]),
        }
        for i, name in enumerate(sorted(shards))
    ]
    seen: dict[str, bytes] = {}
    sample_shard: dict[str, str] = {}
    for name, data in shards.items():
        members = read_members_checked(name, data)
        for member, content in members:
            assert member not in seen, f"{member} twice"
            seen[member] = content
            assert sample_shard.setdefault(stem(member), name) == name, f"{member} split"
        assert (
            len({stem(m) for m, _ in members})
            == manifest["shardlist"][sorted(shards).index(name)]["nsamples"]
        )
    assert seen == expected


def split_shards(objs: dict[str, bytes], prefix: str) -> tuple[dict[str, bytes], dict]:
    """Objects under ``prefix`` as (shard name -> bytes, parsed manifest)."""
    names = {k[len(prefix) :]: v for k, v in objs.items() if k.startswith(prefix)}
    manifest = json.loads(names.pop("manifest.json"))
    names.pop("samples.parquet", None)  # the sample index: not a shard
    return names, manifest


def local_shards(dst: Path) -> tuple[dict[str, bytes], dict]:
    files = {p.name: p.read_bytes() for p in dst.iterdir()}
    manifest = json.loads(files.pop("manifest.json"))
    files.pop("samples.parquet", None)  # the sample index: not a shard
    return files, manifest


def plan_members(plan) -> dict[str, list[str]]:
    return {s.name: [f.name for f in s.members()] for s in plan.shards}


def creds_options(server) -> tuple[str, str]:
    """The server's credentials as ``--storage-option`` values."""
    return (f"key={server.access_key}", f"secret={server.secret_key}")


# ---------------------------------------------------------------- fixtures


# These tests check members by their object names: runs keep them (--member-names original).
ORIGINAL = ("--member-names", "original")


def shard(src, dst, **options):
    return ishard.shard(src, dst, member_names="original", **options)


def plan(src, **options):
    return ishard.plan(src, member_names="original", **options)


@pytest.fixture
def bucket2(s3_server, s3_bucket) -> str:
    """A second fresh bucket (after ``s3_bucket`` made sure the server runs)."""
    return s3_server.make_bucket()


# Samples in two directories: a .jpg and a .cls per sample, sizes varied.
TREE = {
    **{f"train/{i:03d}.jpg": blob(f"train{i}", 20_000 + 3_000 * i) for i in range(8)},
    **{f"train/{i:03d}.cls": str(i % 3).encode() for i in range(8)},
    **{f"val/{i:03d}.jpg": blob(f"val{i}", 30_000) for i in range(10, 14)},
    **{f"val/{i:03d}.cls": b"1" for i in range(10, 14)},
}


# ---------------------------------------------------------------- local -> S3


@pytest.mark.parametrize("ext", FORMATS)
def test_local_to_s3_every_format_reads_back(cli, client, s3_bucket, tmp_path, ext):
    src = make_tree(tmp_path / "src", TREE)
    result = cli("shard", src, f"s3://{s3_bucket}/out", "--ext", ext, "--shard-size", "100KB")
    assert_ok(result)
    assert f"s3://{s3_bucket}/out/manifest.json" in result.stdout

    objs = objects(client, s3_bucket)
    assert all(k.startswith("out/") for k in objs)
    shards, manifest = split_shards(objs, "out/")
    assert len(shards) >= 3 and all(name.endswith(ext) for name in shards)
    check_shards(shards, manifest, TREE)
    assert uploads(client, s3_bucket) == []

    # the same bytes as a run into a local directory
    shard(src, tmp_path / "local", ext=ext, shard_size="100KB")
    local, local_manifest = local_shards(tmp_path / "local")
    assert local == shards
    assert local_manifest["shardlist"] == manifest["shardlist"]


# ---------------------------------------------------------------- S3 -> local


def test_s3_to_local_names_relative_to_bucket_with_raw_listing_prefix(
    cli, client, s3_server, s3_bucket, tmp_path
):
    matched = {f"matched_prefix_/{k}": v for k, v in TREE.items()}
    put(client, s3_bucket, matched)
    put(client, s3_bucket, {"unmatched_prefix_/train/999.jpg": b"u", "other.jpg": b"o"})
    put(client, s3_bucket, {"matched_prefix_/dir/": b"", "matched_prefix_/.cache/x.jpg": b"h"})

    result = cli("shard", f"s3://{s3_bucket}/matched_prefix_", tmp_path / "out",
                 "--shard-size", "100KB")  # fmt: skip
    assert_ok(result)
    shards, manifest = local_shards(tmp_path / "out")
    check_shards(shards, manifest, matched)  # member names keep the prefix (bucket-relative)
    assert manifest["ishard"]["skipped"][0]["examples"] == ["matched_prefix_/.cache/x.jpg"]

    # the same plan as the same tree on a local disk
    make_tree(tmp_path / "tree", matched)
    local = plan(tmp_path / "tree", prefix="matched_prefix_", shard_size="100KB")
    remote = plan(f"s3://{s3_bucket}/matched_prefix_", shard_size="100KB",
                         endpoint_url=s3_server.endpoint_url,
                         storage_options=creds_options(s3_server))  # fmt: skip
    assert plan_members(remote) == plan_members(local)
    assert {
        n: [m for m, _ in read_members_checked(n, d)] for n, d in shards.items()
    } == plan_members(local)


def test_go_spelling_src_bck_is_bucket_plus_name_prefix(cli, client, s3_bucket, tmp_path):
    """Go: -src_bck=s3://bucket/prefix lists under the prefix and the member names keep it;
    -shard_size=3 is three samples per shard."""
    under = {f"imgs/{k}": v for k, v in TREE.items() if k.startswith("val/")}
    put(client, s3_bucket, {**under, "imgs-old/train/900.jpg": b"o", "top.jpg": b"t"})
    dst = tmp_path / "out"
    result = cli(f"-src_bck=s3://{s3_bucket}/imgs/", f"-dst_bck={dst}", "-shard_size=3")
    assert_ok(result)
    assert "cut by count: 3 samples per shard" in result.stdout
    shards, manifest = local_shards(dst)
    check_shards(shards, manifest, under, "md5")  # every object under imgs/, names as in the bucket
    assert [e["nsamples"] for e in manifest["shardlist"]] == [3, 1]


# ---------------------------------------------------------------- S3 -> S3


def test_s3_to_s3_between_buckets_url_prefix_and_prefix_option(
    cli, client, s3_bucket, bucket2, tmp_path
):
    data = {f"data/{k}": v for k, v in TREE.items()}
    put(client, s3_bucket, {**data, "other/000.jpg": b"other", "data-old/1.jpg": b"old"})
    train = {k: v for k, v in data.items() if k.startswith("data/train/")}
    val = {k: v for k, v in data.items() if k.startswith("data/val/")}

    runs = [
        (f"s3://{s3_bucket}/data/", "all", (), data),
        (f"s3://{s3_bucket}/data", "val", ("--prefix", "data/val"), val),
        (f"s3://{s3_bucket}", "train", ("--prefix", "data/train/"), train),
    ]
    for src, out, extra, expected in runs:
        result = cli("shard", src, f"s3://{bucket2}/shards/{out}", "--shard-size", "100KB",
                     *extra)  # fmt: skip
        assert_ok(result)
        shards, manifest = split_shards(objects(client, bucket2, f"shards/{out}/"),
                                        f"shards/{out}/")  # fmt: skip
        check_shards(shards, manifest, expected)
    # --prefix disjoint from the URL's prefix: nothing to shard, a runtime failure
    result = cli("shard", f"s3://{s3_bucket}/data", f"s3://{bucket2}/none", "--prefix", "other")
    assert_error(result, 1, "nothing to shard")
    assert listing(client, bucket2, "none") == []
    assert uploads(client, bucket2) == []
    assert sorted(objects(client, s3_bucket)) == sorted([*data, "other/000.jpg", "data-old/1.jpg"])


BIG = {
    "big/a.bin": blob("a", 9 * MiB + 123),  # above the 8 MiB read chunk: ranged GETs
    "big/b.bin": blob("b", 4 * MiB),
    "big/c.txt": b"c" * 10,
    "big/d.txt": b"d" * 20,
}


def test_multipart_shards_are_byte_identical_and_deterministic(
    cli, client, s3_bucket, bucket2, tmp_path
):
    put(client, s3_bucket, BIG)
    common = ("--shard-size", "12MiB", "--part-size", "5MiB")
    assert_ok(cli("shard", f"s3://{s3_bucket}/big", f"s3://{bucket2}/run1", *common))
    # another read-ahead budget and one writer: the same bytes
    assert_ok(cli("shard", f"s3://{s3_bucket}/big", f"s3://{bucket2}/run2", *common,
                  "--read-buffer", "1MiB", "--jobs", "1"))  # fmt: skip
    assert_ok(cli("shard", f"s3://{s3_bucket}/big", tmp_path / "local", *common))

    run1, manifest1 = split_shards(objects(client, bucket2, "run1/"), "run1/")
    run2, manifest2 = split_shards(objects(client, bucket2, "run2/"), "run2/")
    local, local_manifest = local_shards(tmp_path / "local")
    check_shards(run1, manifest1, BIG)
    assert run1 == run2 == local
    assert manifest1["shardlist"] == manifest2["shardlist"] == local_manifest["shardlist"]

    multipart = 0
    for name, data in run1.items():
        etag = client.head_object(Bucket=bucket2, Key=f"run1/{name}")["ETag"].strip('"')
        if len(data) > 5 * MiB:  # streamed in 5 MiB parts: the ETag counts them
            assert etag.endswith(f"-{math.ceil(len(data) / (5 * MiB))}"), (name, etag)
            multipart += 1
        else:  # one PUT: the ETag is the md5
            assert etag == hashlib.md5(data).hexdigest()
    assert multipart >= 1
    assert uploads(client, bucket2) == []


def test_dask_workers_read_and_write_the_store_themselves(cli, client, s3_bucket, bucket2):
    """--executor dask: worker processes open the buckets (credentials and endpoint travel with
    the task); the shards are the same objects a local run writes."""
    put(client, s3_bucket, TREE)
    common = ("--shard-size", "100KB", "--ext", ".tgz")
    assert_ok(cli("shard", f"s3://{s3_bucket}", f"s3://{bucket2}/local", *common))
    assert_ok(
        cli(
            "shard",
            f"s3://{s3_bucket}",
            f"s3://{bucket2}/dask",
            *common,
            "--executor",
            "dask",
            "--jobs",
            "2",
        )
    )
    local, local_manifest = split_shards(objects(client, bucket2, "local/"), "local/")
    dask, dask_manifest = split_shards(objects(client, bucket2, "dask/"), "dask/")
    check_shards(dask, dask_manifest, TREE)
    assert dask == local
    assert dask_manifest["shardlist"] == local_manifest["shardlist"]
    assert uploads(client, bucket2) == []


# ---------------------------------------------------------------- dry run, ais://


def test_dry_run_against_a_bucket_prints_the_plan_and_writes_nothing(
    cli, client, s3_bucket, bucket2
):
    data = {f"ds/{k}": v for k, v in TREE.items()}
    put(client, s3_bucket, data)
    before = sorted(objects(client, s3_bucket).items())

    text = cli("shard", f"s3://{s3_bucket}/ds", f"s3://{bucket2}/out", "--dry-run=files",
               "--shard-size", "100KB")  # fmt: skip
    assert_ok(text)
    as_json = cli("shard", f"s3://{s3_bucket}/ds", "--dry-run=json", "--shard-size", "100KB")
    assert_ok(as_json)
    doc = json.loads(as_json.stdout)
    names = [f["name"] for s in doc["shards"] for smp in s["samples"] for f in smp["files"]]
    assert sorted(names) == sorted(data)
    lines = text.stdout.splitlines()
    for shard_doc in doc["shards"]:
        assert any(line.startswith(shard_doc["name"]) for line in lines)
    for name in data:
        assert any(line.strip().startswith(name) for line in lines), name
    assert f"would write {len(doc['shards'])} shards" in text.stdout

    assert listing(client, bucket2) == [] and uploads(client, bucket2) == []
    assert sorted(objects(client, s3_bucket).items()) == before


def test_ais_url_goes_through_the_s3_api_with_the_same_names(cli, client, s3_bucket, tmp_path):
    data = {f"ImageNet/Data/{k}": v for k, v in TREE.items()}
    put(client, s3_bucket, {**data, "ImageNet/Other/x.jpg": b"x"})
    for scheme in ("s3", "ais"):  # --endpoint-url stands in for $AIS_ENDPOINT/s3
        assert_ok(cli("shard", f"{scheme}://{s3_bucket}/ImageNet/Data", tmp_path / scheme,
                      "--shard-size", "100KB"))  # fmt: skip
    ais, ais_manifest = local_shards(tmp_path / "ais")
    s3, s3_manifest = local_shards(tmp_path / "s3")
    check_shards(ais, ais_manifest, data)  # bucket-relative names: ImageNet/Data/...
    assert ais == s3
    assert ais_manifest["shardlist"] == s3_manifest["shardlist"]
    assert ais_manifest["ishard"]["source"] == f"ais://{s3_bucket}/ImageNet/Data"


def test_ais_url_without_an_endpoint_is_a_usage_error(cli, tmp_path):
    result = cli("shard", "ais://bucket/prefix", tmp_path / "out", endpoint=False)
    assert_error(result, 2, "ais://bucket/prefix", "AIS_ENDPOINT")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- --src-list


def inventory_rows(client, bucket: str) -> list[dict]:
    return [
        {"name": o["Key"], "size": o["Size"], "mtime": int(o["LastModified"].timestamp()),
         "iso": o["LastModified"].strftime("%Y-%m-%dT%H:%M:%S.000Z")}
        for o in listing(client, bucket)
    ]  # fmt: skip


def write_list(kind: str, rows: list[dict], bucket: str, where: Path) -> Path:
    """An inventory of ``rows`` as a CSV with a header, JSON Lines, a list of names alone (in
    a store, gzip'ed), or an AWS S3 Inventory (manifest.json + gzip'ed headerless CSV data
    files with URL-encoded keys)."""
    where.mkdir(parents=True, exist_ok=True)
    if kind == "names":
        path = where / "names.txt.gz"
        path.write_bytes(gzip.compress("".join(r["name"] + "\n" for r in rows).encode()))
        return path
    if kind == "csv":
        path = where / "list.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(["name", "size", "etag"])
            out.writerows([r["name"], r["size"], "x"] for r in reversed(rows))
        return path
    if kind == "jsonl":
        path = where / "list.jsonl"
        lines = [{"name": r["name"], "size": r["size"], "mtime": r["mtime"]} for r in rows]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path
    if kind == "s3-inventory-parquet":
        return parquet_inventory(rows, bucket, where)
    if kind == "s3-inventory-orc":
        return orc_inventory(rows, bucket, where)
    # AWS layout: <prefix>/<bucket>/<config>/<date>/manifest.json beside <config>/data/*.csv.gz
    config = where / "inventory" / bucket / "cfg"
    (config / "data").mkdir(parents=True)
    (config / "2024-01-01T00-00Z").mkdir()
    files = []
    for part, chunk in enumerate((rows[::2], rows[1::2])):
        text = io.StringIO()
        out = csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n")
        out.writerows([bucket, quote_plus(r["name"], safe=""), r["size"], r["iso"]] for r in chunk)
        data = gzip.compress(text.getvalue().encode("utf-8"))
        name = f"{part:08x}-6f1a-4c2e-9d7b-3a2b1c0d9e8f.csv.gz"
        (config / "data" / name).write_bytes(data)
        files.append({"key": f"inventory/{bucket}/cfg/data/{name}", "size": len(data),
                      "MD5checksum": hashlib.md5(data).hexdigest()})  # fmt: skip
    manifest = {
        "sourceBucket": bucket,
        "destinationBucket": "arn:aws:s3:::inventory-bucket",
        "version": "2016-11-30",
        "creationTimestamp": "1704067200000",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate",
        "files": files,
    }
    path = config / "2024-01-01T00-00Z" / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2))
    return path


def parquet_inventory(
    rows: list[dict], bucket: str, where: Path, dest: str = "inventory-bucket"
) -> Path:
    """An AWS S3 Inventory report in Parquet (keys as they are, times as TIMESTAMP), two data
    files, in AWS's layout under ``where``; ``dest`` is its destination bucket."""
    import duckdb

    config = where / "inventory" / bucket / "cfg"
    (config / "data").mkdir(parents=True)
    (config / "2024-01-01T00-00Z").mkdir()
    files = []
    with duckdb.connect() as con:
        for part, chunk in enumerate((rows[::2], rows[1::2])):
            con.execute("CREATE OR REPLACE TABLE t (bucket VARCHAR, key VARCHAR, size BIGINT, "
                        "last_modified_date TIMESTAMP)")  # fmt: skip
            con.executemany("INSERT INTO t VALUES (?, ?, ?, epoch_ms(CAST(? AS BIGINT) * 1000))",
                            [[bucket, r["name"], r["size"], r["mtime"]] for r in chunk])  # fmt: skip
            name = f"{part:08x}-6f1a-4c2e-9d7b-3a2b1c0d9e8f.parquet"
            con.execute(f"COPY t TO '{config / 'data' / name}' (FORMAT parquet)")
            files.append(
                {"key": f"inventory/{bucket}/cfg/data/{name}", "size": 1, "MD5checksum": "0"}
            )
    manifest = {
        "sourceBucket": bucket,
        "destinationBucket": "arn:aws:s3:::inventory-bucket",
        "version": "2016-11-30",
        "creationTimestamp": "1704067200000",
        "fileFormat": "Parquet",
        "fileSchema": "message s3.inventory { required binary bucket (STRING); required binary "
        "key (STRING); optional int64 size; optional int64 last_modified_date "
        "(TIMESTAMP(MILLIS,true));}",
        "files": files,
    }
    path = config / "2024-01-01T00-00Z" / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2))
    return path


def orc_inventory(rows: list[dict], bucket: str, where: Path) -> Path:
    """The Parquet report of :func:`parquet_inventory` in ORC, its data files by pyarrow."""
    import pyarrow as pa
    from pyarrow import orc

    path = parquet_inventory(rows, bucket, where)
    manifest = json.loads(path.read_text())
    manifest["fileFormat"] = "ORC"
    manifest["fileSchema"] = (
        "struct<bucket:string,key:string,size:bigint,last_modified_date:timestamp>"
    )
    for item, chunk in zip(manifest["files"], (rows[::2], rows[1::2])):
        (where / item["key"]).unlink()
        item["key"] = item["key"].replace(".parquet", ".orc")
        table = pa.table({
            "bucket": [bucket] * len(chunk), "key": [r["name"] for r in chunk],
            "size": pa.array([r["size"] for r in chunk], pa.int64()),
            "last_modified_date": pa.array([r["mtime"] * 1000 for r in chunk], pa.timestamp("ms")),
        })  # fmt: skip
        orc.write_table(table, str(where / item["key"]))
    path.write_text(json.dumps(manifest, indent=2))
    return path


@pytest.mark.parametrize("planner", ["rows", "engine"])
@pytest.mark.parametrize("kind", ["s3-inventory", "s3-inventory-parquet", "s3-inventory-orc"])
def test_s3_inventory_is_read_from_the_store(
    cli, client, s3_bucket, bucket2, tmp_path, kind, planner
):
    """A report left where AWS writes it (manifest and data files in the inventory's
    destination bucket), CSV, Parquet or ORC, plans what listing the bucket plans, read by
    either planner (``$ISHARD_PLANNER``; the engine fetches the data files first)."""
    put(client, s3_bucket, LISTED)
    manifest = write_list(kind, inventory_rows(client, s3_bucket), s3_bucket, tmp_path / "inv")
    doc = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**doc, "destinationBucket": f"arn:aws:s3:::{bucket2}"}))
    for path in (tmp_path / "inv").rglob("*"):
        if path.is_file():
            key = path.relative_to(tmp_path / "inv").as_posix()
            client.put_object(Bucket=bucket2, Key=key, Body=path.read_bytes())
    url = f"s3://{bucket2}/{manifest.relative_to(tmp_path / 'inv').as_posix()}"
    src = f"s3://{s3_bucket}/ds"
    listed = cli("shard", src, "--dry-run=json", "--shard-size", "100KB")
    env = {"ISHARD_PLANNER": planner}
    from_list = cli("shard", src, "-v", "--dry-run=json", "--shard-size", "100KB",
                    "--src-list", url, env=env)  # fmt: skip
    assert_ok(listed)
    assert from_list.returncode == 0, from_list.stderr
    assert json.loads(from_list.stdout)["shards"] == json.loads(listed.stdout)["shards"]
    assert f"planner: {planner} (" in from_list.stderr, from_list.stderr


@pytest.mark.parametrize("key", ["secret/data.csv.gz", "inventory/../secret/data.csv.gz"])
def test_an_s3_inventory_manifest_naming_keys_outside_its_report_is_refused(
    cli, client, s3_bucket, bucket2, tmp_path, key
):
    """Finding: a manifest's files[].key was read wherever it pointed. In a store, a data file
    must be a key under the report's prefix (the folder above manifest.json's) in the
    manifest's bucket; another key of that bucket is one line naming it, exit 2."""
    put(client, s3_bucket, LISTED)
    manifest = write_list("s3-inventory", inventory_rows(client, s3_bucket), s3_bucket,
                          tmp_path / "inv")  # fmt: skip
    doc = json.loads(manifest.read_text())
    first = (tmp_path / "inv" / doc["files"][0]["key"]).read_bytes()
    doc["files"].append({"key": key, "size": len(first), "MD5checksum": "0"})
    manifest.write_text(json.dumps({**doc, "destinationBucket": f"arn:aws:s3:::{bucket2}"}))
    for path in (tmp_path / "inv").rglob("*"):
        if path.is_file():
            put(client, bucket2, {path.relative_to(tmp_path / "inv").as_posix(): path.read_bytes()})
    put(client, bucket2, {"secret/data.csv.gz": first})  # a real data file, outside the report
    url = f"s3://{bucket2}/{manifest.relative_to(tmp_path / 'inv').as_posix()}"
    done = cli("shard", f"s3://{s3_bucket}/ds", "--dry-run", "--src-list", url)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (line,) = done.stderr.splitlines()
    report = f"s3://{bucket2}/inventory/{s3_bucket}/cfg/"
    where = "outside the report" + (f"'s folder {report!r}" if ".." not in key else "")
    assert line == (
        f"ishard: error: --src-list {url!r} names data file {key!r}, which lies "
        f"{where} — ishard reads only the data files of the report itself: use the "
        "manifest.json AWS wrote, in its place"
    )


LISTED = {
    **{f"ds/{k}": v for k, v in TREE.items()},
    "ds/odd/a b+c%41.jpg": b"spaces, plus and percent",
    "ds/odd/a b+c%41.cls": b"7",
    "ds/odd/naïve.jpg": b"not ascii",
    "zz/outside.jpg": b"outside the URL prefix",
}


@pytest.mark.parametrize(
    "kind", ["csv", "jsonl", "names", "s3-inventory", "s3-inventory-parquet", "s3-inventory-orc"]
)
def test_src_list_gives_the_same_shards_as_listing_the_bucket(
    cli, client, s3_bucket, tmp_path, kind
):
    put(client, s3_bucket, LISTED)
    inventory = write_list(kind, inventory_rows(client, s3_bucket), s3_bucket, tmp_path / "inv")
    src = f"s3://{s3_bucket}/ds"
    assert_ok(cli("shard", src, tmp_path / "listed", "--shard-size", "100KB"))
    assert_ok(cli("shard", src, tmp_path / "inv-out", "--shard-size", "100KB",
                  "--src-list", inventory))  # fmt: skip
    listed, listed_manifest = local_shards(tmp_path / "listed")
    from_list, list_manifest = local_shards(tmp_path / "inv-out")
    expected = {k: v for k, v in LISTED.items() if k.startswith("ds/")}
    check_shards(from_list, list_manifest, expected)
    if kind == "csv":  # no times in the list: same shards and members, other tar mtimes
        assert {n: read_members_checked(n, d) for n, d in from_list.items()} == {
            n: read_members_checked(n, d) for n, d in listed.items()
        }
    else:  # times in the list (a list of names: from the store): byte-identical shards
        assert from_list == listed
        assert list_manifest["shardlist"] == listed_manifest["shardlist"]


def test_src_list_name_missing_from_the_bucket_fails_at_read_time(
    cli, client, s3_bucket, bucket2, tmp_path
):
    put(client, s3_bucket, {"m/a.bin": blob("ma", 6 * MiB), "m/b.bin": b"b"})
    path = tmp_path / "list.csv"
    path.write_text(f"name,size\nm/a.bin,{6 * MiB}\nm/b.bin,1\nm/ghost.bin,100\n")
    # one shard: a.bin streams as a multipart upload before ghost.bin is reached
    result = cli("shard", f"s3://{s3_bucket}/m", f"s3://{bucket2}/out", "--src-list", path,
                 "--shard-size", "64MiB", "--part-size", "5MiB", "--jobs", "1")  # fmt: skip
    assert_error(result, 1, "'m/ghost.bin'", "missing")
    # no shard, no manifest, and no records: nothing was published, so DST is as it was
    assert [o["Key"] for o in listing(client, bucket2)] == []
    assert uploads(client, bucket2) == []


def test_a_names_list_in_the_store_takes_sizes_from_the_bucket(cli, client, s3_bucket, tmp_path):
    put(client, s3_bucket, {"n/a.jpg": b"a" * 300, "n/a.cls": b"1", "n/b.jpg": b"b" * 500,
                            "lists/names.txt": b"n/b.jpg\nn/a.jpg\nn/a.cls\n"})  # fmt: skip
    names = f"s3://{s3_bucket}/lists/names.txt"
    done = cli("shard", f"s3://{s3_bucket}/n", tmp_path / "o", "--src-list", names, "-v",
               "--dry-run", "--json")  # fmt: skip
    assert done.returncode == 0, done
    plan = json.loads(done.stdout)
    assert (plan["files"], plan["bytes"], plan["samples"]) == (3, 801, 2)
    assert "planner: rows (a list of names alone: each size is read from the source)" in done.stderr
    put(client, s3_bucket, {"lists/names.txt": b"n/a.jpg\nn/ghost.jpg\n"})
    result = cli("shard", f"s3://{s3_bucket}/n", tmp_path / "o", "--src-list", names)
    assert_error(result, 1, "'n/ghost.jpg' is named in --src-list but is not in the source")
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("role", ["source", "destination"])
def test_missing_bucket_is_a_usage_error(cli, client, s3_bucket, tmp_path, role):
    put(client, s3_bucket, {"x/1.jpg": b"1"})
    if role == "source":
        result = cli("shard", "s3://ishard-no-such-bucket/x", tmp_path / "out")
        assert not (tmp_path / "out").exists()
    else:
        result = cli("shard", f"s3://{s3_bucket}/x", "s3://ishard-no-such-bucket/out")
    assert_error(result, 2, role, "'s3://ishard-no-such-bucket/", "does not exist")
    assert sorted(objects(client, s3_bucket)) == ["x/1.jpg"]


@pytest.mark.parametrize("role, how", [("source", "env"), ("destination", "storage-option")])
def test_wrong_secret_is_refused_and_never_shown(
    cli, client, s3_server, s3_bucket, tmp_path, role, how
):
    secret = "WrongSecret-5f2c9e1d7a"
    put(client, s3_bucket, {"x/1.jpg": b"1"})
    src, dst = f"s3://{s3_bucket}/x", tmp_path / "out"
    if role == "destination":
        src, dst = make_tree(tmp_path / "src", {"1.jpg": b"1"}), f"s3://{s3_bucket}/out"
    if how == "env":
        result = cli("shard", src, dst, env={"AWS_SECRET_ACCESS_KEY": secret})
    else:
        access_key = creds_options(s3_server)[0]
        result = cli("shard", src, dst, "--storage-option", access_key,
                     "--storage-option", f"secret={secret}", creds=False)  # fmt: skip
    line = assert_error(
        result,
        1,
        role,
        "credentials",
        "were refused (SignatureDoesNotMatch: ",
        "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    )
    assert secret not in result.stdout + result.stderr
    assert f"secret={secret[:6]}" not in line  # the option is not echoed, not even in part
    assert sorted(objects(client, s3_bucket)) == ["x/1.jpg"]


def test_credentials_from_storage_options_never_reach_output_or_manifest(
    cli, client, s3_server, s3_bucket, bucket2
):
    put(client, s3_bucket, {"x/1.jpg": b"1", "x/1.cls": b"c"})
    key, secret = creds_options(s3_server)
    result = cli("shard", f"s3://{s3_bucket}/x", f"s3://{bucket2}/out", "--storage-option", key,
                 "--storage-option", secret, "--json", creds=False)  # fmt: skip
    assert_ok(result)
    manifest = objects(client, bucket2)["out/manifest.json"].decode()
    for text in (result.stdout, manifest):
        assert s3_server.secret_key not in text
    # how the store was reached only says how the run went: not in the manifest at all
    assert "storage_options" not in json.loads(manifest)["ishard"]["options"]


@pytest.mark.parametrize("role", ["source", "destination"])
def test_no_credentials_at_all_is_a_clear_runtime_error(cli, client, s3_bucket, tmp_path, role):
    put(client, s3_bucket, {"x/1.jpg": b"1"})
    src, dst = f"s3://{s3_bucket}/x", tmp_path / "out"
    if role == "destination":
        src, dst = make_tree(tmp_path / "src", {"1.jpg": b"1"}), f"s3://{s3_bucket}/out"
    result = cli("shard", src, dst, creds=False)
    assert_error(result, 1, role, "no credentials", "AWS_ACCESS_KEY_ID")
    assert sorted(objects(client, s3_bucket)) == ["x/1.jpg"]


def test_ls_lists_a_shard_in_a_bucket(cli, client, s3_bucket):
    members = {"a/0001.jpg": blob("a", 3000), "a/0001.cls": b"7", "b/0002.jpg": b""}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    put(client, s3_bucket, {"out/shard-000000.tar": buffer.getvalue()})
    result = cli("ls", "--json", f"s3://{s3_bucket}/out/shard-000000.tar")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["members"] == [
        {"name": n, "size": len(d)} for n, d in members.items()
    ]
    assert_error(
        cli("ls", f"s3://{s3_bucket}/out"),
        2,
        f"'s3://{s3_bucket}/out' is a directory",
        f"ishard verify s3://{s3_bucket}/out",
    )


def test_destination_prefix_not_empty_needs_overwrite(cli, client, s3_bucket, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    put(client, s3_bucket, {"out/old.txt": b"old", "elsewhere/x.txt": b"x"})
    result = cli("shard", src, f"s3://{s3_bucket}/out", "--shard-size", "100KB")
    assert_error(result, 2, f"'s3://{s3_bucket}/out'", "not empty", "--overwrite")
    assert sorted(objects(client, s3_bucket)) == ["elsewhere/x.txt", "out/old.txt"]

    # a bucket with objects elsewhere is fine: only the prefix must be empty
    assert_ok(cli("shard", src, f"s3://{s3_bucket}/fresh", "--shard-size", "100KB"))
    fresh, _ = split_shards(objects(client, s3_bucket, "fresh/"), "fresh/")

    assert_ok(cli("shard", src, f"s3://{s3_bucket}/out", "--shard-size", "100KB", "--overwrite"))
    out, manifest = split_shards(objects(client, s3_bucket, "out/"), "out/")
    assert out.pop("old.txt") == b"old"
    assert out == fresh
    check_shards(out, manifest, TREE)


# ---------------------------------------------------------------- fault: the server dies


class KillServer(Progress):
    """Kills the S3 server once (after the first shard, or midway into the next one) and
    brings it back when ishard says it could not abort an upload yet."""

    def __init__(self, server, when: str) -> None:
        self.server, self.when = server, when
        self.lock = threading.Lock()
        self.done: list[str] = []
        self.notices: list[str] = []
        self.payload = 0
        self.payload_at_first_done: int | None = None
        self.killed = False

    def _kill(self) -> None:
        self.killed = True
        self.server.stop(kill=True)

    def wrote(self, nbytes: int) -> None:
        with self.lock:
            self.payload += nbytes
            base = self.payload_at_first_done
            opened = base is not None and self.payload - base >= 7 * MiB  # > one 5 MiB part
            if self.when == "mid-upload" and not self.killed and opened:  # an upload is open
                self._kill()

    def shard_done(self, result) -> None:
        with self.lock:
            self.done.append(result.name)
            if self.payload_at_first_done is None:
                self.payload_at_first_done = self.payload
                if self.when == "between-shards":
                    self._kill()

    def notice(self, text: str) -> None:
        with self.lock:
            self.notices.append(text)
            if not self.server.running:
                self.server.restart(kill=True)


@pytest.mark.parametrize("when", ["between-shards", "mid-upload"])
def test_server_killed_mid_run_leaves_no_partial_shard_or_upload(
    s3_server, client, s3_bucket, tmp_path, when
):
    """One writer, so what is open when the server dies is decided by the hooks alone:
    between shards nothing is (shard-000001 fails to start its upload); mid-upload,
    shard-000001's upload is open. Either way ishard checks for an open upload of
    shard-000001 once the server is back (it cannot know whether a CreateMultipartUpload whose
    answer it never got was carried out), so it says once that it must wait."""
    files = {f"{i:03d}.bin": blob(f"f{i}", MiB) for i in range(48)}
    src = make_tree(tmp_path / "src", files)
    options = {"shard_size": "12MiB", "part_size": "5MiB", "jobs": 1, "retries": 2}
    planned = plan_members(plan(src, shard_size=options["shard_size"]))
    assert len(planned) == 4 and all(len(m) == 12 for m in planned.values())

    progress = KillServer(s3_server, when)
    storage = (*creds_options(s3_server), "skip_instance_cache=true")
    try:
        with pytest.raises(ishard.IshardError) as failure:
            shard(src, f"s3://{s3_bucket}/out", progress=progress,
                         endpoint_url=s3_server.endpoint_url, storage_options=storage,
                         **options)  # fmt: skip
    finally:
        if not s3_server.running:
            s3_server.start()
    err = failure.value
    assert progress.killed
    assert err.exit_code == 1
    message = str(err)
    assert "\n" not in message and f"s3://{s3_bucket}/out" in message
    assert s3_server.secret_key not in message

    client = s3_server.client()
    assert uploads(client, s3_bucket) == []
    written = objects(client, s3_bucket)
    records = {k for k in written if k.startswith("out/.ishard-run/")}  # kept for --resume
    assert records >= {"out/.ishard-run/run.json", "out/.ishard-run/done/000000000.json"}
    if when == "mid-upload":  # the server came back before the run ended: lock removed
        assert "out/.ishard-run/lock" not in records
    written = {k: v for k, v in written.items() if k not in records}
    assert "out/manifest.json" not in written
    names = {k.removeprefix("out/"): v for k, v in written.items()}
    assert set(names) <= set(planned) and set(names) != set(planned)
    assert progress.done == ["shard-000000.tar"] and set(names) == {"shard-000000.tar"}
    for name, data in names.items():  # a complete archive of exactly its planned members
        assert read_members_checked(name, data) == [(m, files[m]) for m in planned[name]]
    assert len(progress.notices) == 1 and "could not abort" in progress.notices[0]
    assert "shard-000001.tar" in progress.notices[0]

    # --resume keeps shard-000000, writes the rest: the same objects as a run that never failed
    shard(
        src,
        f"s3://{s3_bucket}/out",
        endpoint_url=s3_server.endpoint_url,
        storage_options=storage,
        resume=True,
        **options,
    )
    shard(
        src,
        f"s3://{s3_bucket}/fresh",
        endpoint_url=s3_server.endpoint_url,
        storage_options=storage,
        **options,
    )
    resumed, resumed_manifest = split_shards(objects(client, s3_bucket, "out/"), "out/")
    fresh, fresh_manifest = split_shards(objects(client, s3_bucket, "fresh/"), "fresh/")
    assert resumed == fresh and len(resumed) == 4
    assert resumed_manifest["shardlist"] == fresh_manifest["shardlist"]
    assert uploads(client, s3_bucket) == []


# ---------------------------------------------------------------- kill -9, resume, the lock


def test_kill_9_mid_upload_then_resume_aborts_the_dangling_upload(
    cli, s3_server, clean_env, client, s3_bucket, tmp_path
):
    """ishard killed outright while a multipart upload is open: the upload dangles until
    --resume aborts it; the resumed output equals a run that was never killed."""
    files = {f"{i:03d}.bin": blob(f"k{i}", MiB) for i in range(36)}
    src = make_tree(tmp_path / "src", files)
    common = (
        "--shard-size",
        "12MiB",
        "--part-size",
        "5MiB",
        "--jobs",
        "1",
        "--no-progress",
        *ORIGINAL,
    )
    env = {
        **clean_env,
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
    }
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ishard",
            "shard",
            str(src),
            f"s3://{s3_bucket}/out",
            *common,
            "--endpoint-url",
            s3_server.endpoint_url,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while run.poll() is None and not uploads(client, s3_bucket):
            time.sleep(0.01)  # until an upload is open (or the run is over)
        run.send_signal(signal.SIGSTOP)  # frozen: the upload stays open while it is looked at
        dangling = uploads(client, s3_bucket)
    finally:
        run.kill()
        run.wait()
    assert run.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert_ok(cli("shard", src, f"s3://{s3_bucket}/out", *common, "--resume"))
    assert_ok(cli("shard", src, f"s3://{s3_bucket}/fresh", *common))
    assert uploads(client, s3_bucket) == []
    resumed, resumed_manifest = split_shards(objects(client, s3_bucket, "out/"), "out/")
    fresh, fresh_manifest = split_shards(objects(client, s3_bucket, "fresh/"), "fresh/")
    assert resumed == fresh and len(fresh) == 3
    assert resumed_manifest["shardlist"] == fresh_manifest["shardlist"]
    assert len(dangling) == 1  # one writer: one upload was open when it died, and is gone now


@pytest.mark.parametrize("expires_in", [300, -5])
def test_a_live_lock_on_a_bucket_refuses_and_an_expired_one_does_not(
    cli, client, s3_bucket, tmp_path, expires_in
):
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one", "a/2.jpg": b"two"})
    lock = {
        "id": "x",
        "host": "trainer-3",
        "pid": 77,
        "started": "2026-11-22 09:00:00 UTC",
        "expires": time.time() + expires_in,
    }
    client.put_object(Bucket=s3_bucket, Key="out/.ishard-run/lock", Body=json.dumps(lock))
    result = cli("shard", src, f"s3://{s3_bucket}/out", "--resume", "--no-progress")
    if expires_in > 0:
        line = assert_error(
            result,
            1,
            f"another ishard run is writing into 's3://{s3_bucket}/out' "
            "(pid 77 on trainer-3, started 2026-11-22 09:00:00 UTC)",
        )
        assert "its lock runs out in" in line
        assert sorted(objects(client, s3_bucket)) == ["out/.ishard-run/lock"]
    else:
        assert_ok(result)
        assert sorted(objects(client, s3_bucket)) == [
            "out/manifest.json",
            "out/samples.parquet",
            "out/shard-000000.tar",
        ]


@pytest.mark.parametrize(
    "variable, separator",
    [
        ("ISHARD_STORAGE_OPTION", " "),
        ("ISHARD_STORAGE_OPTION", "\n"),
        ("ISHARD_STORAGE_OPTIONS", " "),
    ],
)
def test_storage_options_from_the_environment_reach_the_store(
    cli, client, s3_server, s3_bucket, bucket2, variable, separator
):
    """Finding: ISHARD_STORAGE_OPTION, the flag's own name, was ignored. It (and the older
    ISHARD_STORAGE_OPTIONS) gives the store its credentials: values apart by whitespace."""
    put(client, s3_bucket, {"x/1.jpg": b"1", "x/1.cls": b"c"})
    result = cli(
        "shard",
        f"s3://{s3_bucket}/x",
        f"s3://{bucket2}/out",
        creds=False,
        env={variable: separator.join(creds_options(s3_server))},
    )
    assert_ok(result)
    stored = objects(client, bucket2)
    members = read_members_checked("shard-000000.tar", stored["out/shard-000000.tar"])
    assert members == [("x/1.cls", b"c"), ("x/1.jpg", b"1")]
    assert s3_server.secret_key not in result.stdout + result.stderr


@pytest.mark.parametrize("char", ["\n", "\t", "\x7f"])
def test_a_key_the_s3_client_cannot_parse_is_left_out_and_reported_like_a_local_name(
    cli, client, s3_bucket, tmp_path, char
):
    """Finding: one key with a newline, a tab or DEL failed the whole listing as 'cannot reach
    source — check the endpoint and the network', after retries, printing the raw character.
    obstore cannot parse such a key in any listing answer; the listing goes on through s3fs,
    which reads it: the key is left out and reported escaped, as a local file's name would be,
    and every other object, before and after it, is sharded."""
    put(
        client,
        s3_bucket,
        {
            "ds/a/1.jpg": b"one",
            f"ds/a/bad{char}x.jpg": b"bad",
            "ds/a/c.jpg": b"c",
            "ds/b/2.jpg": b"two",
            "ds/0.jpg": b"zero",
        },
    )
    done = cli("shard", f"s3://{s3_bucket}/ds", tmp_path / "out")
    assert_ok(done)
    assert "left out 1: unsafe name" in done.stdout and repr(f"ds/a/bad{char}x.jpg") in done.stdout
    assert not any(c in done.stdout.replace("\n", "") for c in "\t\x7f"), done.stdout
    shards, _ = local_shards(tmp_path / "out")
    members = [m for d in shards.values() for m, _ in read_members_checked("x.tar", d)]
    assert members == ["ds/0.jpg", "ds/a/1.jpg", "ds/a/c.jpg", "ds/b/2.jpg"]
    done = cli("shard", f"s3://{s3_bucket}/ds", tmp_path / "out2", "--storage-option",
               "backend=fsspec")  # fmt: skip
    assert_ok(done)
    assert "left out 1: unsafe name" in done.stdout and repr(f"ds/a/bad{char}x.jpg") in done.stdout
    assert local_shards(tmp_path / "out2")[0] == shards


def test_a_key_the_s3_client_cannot_parse_without_s3fs_is_one_line_naming_it_and_the_fix(
    cli, client, s3_bucket, tmp_path
):
    """Without s3fs, such a key stops the run at once: one line naming the key escaped and
    the install that lets ishard list it, exit 1."""
    put(client, s3_bucket, {"ds/a/1.jpg": b"one", "ds/a/bad\nx.jpg": b"bad"})
    blocked = tmp_path / "no-s3fs"
    (blocked / "s3fs").mkdir(parents=True)
    (blocked / "s3fs" / "__init__.py").write_text("raise ImportError('s3fs is not installed')\n")
    done = cli("shard", f"s3://{s3_bucket}/ds", tmp_path / "out", env={"PYTHONPATH": str(blocked)})
    assert done.returncode == 1 and done.stdout == "", done.stderr
    (line,) = done.stderr.splitlines()
    assert line == (
        f"ishard: error: the listing of source 's3://{s3_bucket}/ds' holds the key "
        "'ds/a/bad\\nx.jpg' (a control character), which its S3 client cannot parse "
        "— rename or delete that object, or pip install 'ishard[s3]': ishard then "
        "lists the rest of it through fsspec, whose client reads such keys, and "
        "leaves them out and reports them"
    )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("char", ["\x1b", "\x07"])
def test_a_key_the_store_lists_garbled_is_left_out_and_reported(
    cli, client, s3_bucket, tmp_path, char
):
    """Finding: a key with ESC or BEL, which SeaweedFS's XML listing sends as U+FFFD, was
    listed under that other name, then failed the run as 'missing'. Such a name, which is no
    object, is left out and reported; the run shards the rest."""
    put(client, s3_bucket, {"ds/a/1.jpg": b"one", f"ds/a/bad{char}x.jpg": b"bad"})
    done = cli("shard", f"s3://{s3_bucket}/ds", tmp_path / "out")
    assert_ok(done)
    assert "left out 1: key listed with U+FFFD in place of a character" in done.stdout, done.stdout
    assert "'ds/a/bad\ufffdx.jpg'" in done.stdout and char not in done.stdout
    shards, manifest = local_shards(tmp_path / "out")
    assert [m for d in shards.values() for m, _ in read_members_checked("x.tar", d)] == [
        "ds/a/1.jpg"
    ]
    assert "ds/a/bad\ufffdx.jpg" in json.dumps(manifest, ensure_ascii=False)


@pytest.mark.parametrize("kind", ["parquet", "csv.gz", "jsonl.gz", "csv"])
def test_an_inventory_in_a_store_is_read_by_the_column_engine(
    cli, client, s3_bucket, tmp_path, kind
):
    """Finding: a Parquet inventory in a bucket was read as CSV ('line 1: not UTF-8 …'), and
    then refused ('copy it to a local file'). Parquet, gzip'ed and plain inventories in a
    store are fetched into the engine's private folder and read by it (``-v`` says so): the
    shards are those of the same inventory as a local file, and nothing is left behind."""
    import duckdb

    put(client, s3_bucket, LISTED)
    rows = inventory_rows(client, s3_bucket)
    local = tmp_path / f"inv.{kind}"
    if kind == "parquet":
        listed = ", ".join(f"({r['name']!r}, {r['size']})" for r in rows)
        duckdb.execute(f"COPY (SELECT * FROM (VALUES {listed}) t(name, size)) TO '{local}' "
                       "(FORMAT parquet)")  # fmt: skip
    else:
        plain = write_list(kind.removesuffix(".gz"), rows, s3_bucket, tmp_path / "plain")
        data = plain.read_bytes()  # CRLF line ends, as Python's csv module writes them
        local.write_bytes(gzip.compress(data) if kind.endswith(".gz") else data)
    put(client, s3_bucket, {f"lists/inv.{kind}": local.read_bytes()})
    url = f"s3://{s3_bucket}/lists/inv.{kind}"
    spill = tmp_path / "spill"
    spill.mkdir()
    src = f"s3://{s3_bucket}/ds"
    how = ("--dry-run=json", "--shard-size", "100KB", "--tmp-dir", spill)
    from_store = cli("shard", src, *how, "-v", "--src-list", url)
    from_file = cli("shard", src, *how, "--src-list", local)
    assert from_store.returncode == 0, from_store.stderr
    assert_ok(from_file)
    why = "a Parquet file" if kind == "parquet" else "in a store: the column engine fetches it"
    assert f"planner: engine ({why}" in from_store.stderr, from_store.stderr
    assert json.loads(from_store.stdout)["shards"] == json.loads(from_file.stdout)["shards"]
    assert list(spill.iterdir()) == []  # the fetched copy went with the engine's folder


def test_diff_compares_destinations_in_the_store_and_on_disk(cli, s3_bucket, tmp_path):
    """``ishard diff`` over store URLs: a copy on disk of the same run is the same (exit 0);
    after a label changed in place, the run in the store differs in exactly that sample,
    its shard rewritten (the store's shards read back), exit 1."""
    src = make_tree(tmp_path / "src", TREE)
    for dst in (f"s3://{s3_bucket}/a", tmp_path / "a"):
        assert cli("shard", src, dst, "--shard-size", "100KB").returncode == 0
    same = cli("diff", f"s3://{s3_bucket}/a", tmp_path / "a")
    assert same.returncode == 0, same.stderr
    assert same.stdout.startswith("no differences: ")
    (src / "train/003.cls").write_bytes(b"2")  # was b"0": one byte, the same size
    assert cli("shard", src, f"s3://{s3_bucket}/b", "--shard-size", "100KB").returncode == 0
    found = cli("diff", f"s3://{s3_bucket}/a/manifest.json", f"s3://{s3_bucket}/b", "--json")
    assert found.returncode == 1, found.stderr
    doc = json.loads(found.stdout)
    changed = doc["samples"]["changed"]
    assert [c["key"] for c in changed] == ["003"]  # base_file_name, the default pattern
    assert doc["shards"]["rewritten"] == [changed[0]["new_shard"]]
    assert not doc["samples"]["added"] and not doc["samples"]["removed"]
    assert not doc["samples"]["moved"]


def test_append_and_update_grow_a_dataset_in_the_store(cli, client, s3_bucket, tmp_path):
    """A source and a dataset both in the store: ``--append`` adds the new objects' samples in
    new shards (every old shard object untouched, its ETag too), ``--update`` replaces only
    the shard holding an object rewritten in place; after each, the shards read back hold
    exactly the source's objects and ``ishard verify --deep`` passes."""
    put(client, s3_bucket, {f"src/{k}": v for k, v in TREE.items()})
    src, dst = f"s3://{s3_bucket}/src", f"s3://{s3_bucket}/out"
    assert_ok(cli("shard", src, dst, "--shard-size", "100KB"))
    before = {o["Key"]: o["ETag"] for o in listing(client, s3_bucket, "out/")}
    new = {
        f"val/{i:03d}.{ext}": blob(f"new{i}{ext}", 25_000)
        for i in (20, 21)
        for ext in ("jpg", "cls")
    }
    put(client, s3_bucket, {f"src/{k}": v for k, v in new.items()})
    grown = cli("shard", src, dst, "--shard-size", "100KB", "--append")
    assert grown.returncode == 0, grown.stderr
    assert "2 new, 0 changed, 0 removed" in grown.stdout
    after = {o["Key"]: o["ETag"] for o in listing(client, s3_bucket, "out/")}
    old_shards = {k for k in before if k.endswith(".tar")}
    assert {k: after[k] for k in old_shards} == {k: before[k] for k in old_shards}
    shards, manifest = split_shards(objects(client, s3_bucket, "out/"), "out/")
    assert set(shards) > {k.removeprefix("out/") for k in old_shards}
    expected = {f"src/{k}": v for k, v in {**TREE, **new}.items()}  # names from the bucket
    check_shards(shards, manifest, expected)
    assert_ok(cli("verify", dst, "--deep", "-q"))
    # the shards as downloaded, read with webdataset and wids (through the manifest)
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    for key, data in objects(client, s3_bucket, "out/").items():
        (fetched / key.removeprefix("out/")).write_bytes(data)
    listed = [e["url"] for e in manifest["shardlist"]]
    by_webdataset = read_webdataset(fetched, listed)
    by_wids = read_wids(fetched / "manifest.json", tmp_path / "cache")
    assert by_webdataset == by_wids
    assert sum(len(files) for files in by_wids.values()) == len(expected)

    client.put_object(Bucket=s3_bucket, Key="src/train/003.cls", Body=b"relabelled")
    refused = cli("shard", src, dst, "--shard-size", "100KB", "--append")
    assert refused.returncode == 1 and "e.g. '003'" in refused.stderr
    updated = cli("shard", src, dst, "--shard-size", "100KB", "--update")
    assert updated.returncode == 0, updated.stderr
    shards, manifest = split_shards(objects(client, s3_bucket, "out/"), "out/")
    check_shards(shards, manifest, {**expected, "src/train/003.cls": b"relabelled"})
    holder = next(
        n for n, d in shards.items() if "src/train/003.cls" in dict(read_members_checked(n, d))
    )
    assert f"out/{holder}" not in before  # a new shard holds it; the old one is gone
    assert_ok(cli("verify", dst, "--deep", "-q"))


@pytest.mark.parametrize("ext", [".tar", ".tar.zst"])
def test_cat_reads_a_sample_from_the_store_with_one_ranged_get(
    cli, s3_server, s3_bucket, tmp_path, ext
):
    """``ishard find`` and ``ishard cat`` on a dataset in the store: the sample's files hold
    the source's bytes, and reading it took one GET of its shard, with a Range header (seen
    at a proxy in front of the server)."""
    from s3server import S3Proxy

    src = make_tree(tmp_path / "src", TREE)
    dst = f"s3://{s3_bucket}/out"
    assert_ok(cli("shard", src, dst, "--ext", ext, "--shard-size", "100KB"))
    found = cli("find", dst, "012", "--json")
    assert found.returncode == 0, found.stderr
    (sample,) = json.loads(found.stdout)["samples"]
    seen: list = []
    proxy = S3Proxy(
        s3_server.endpoint_url, after=lambda request, status: seen.append((request, status))
    )
    try:
        out = tmp_path / "one"
        done = cli(
            "cat", dst, "012", "-o", out, "--endpoint-url", proxy.endpoint_url, endpoint=False
        )
    finally:
        proxy.close()
    assert done.returncode == 0, done.stderr
    for name in ("val/012.jpg", "val/012.cls"):
        assert (out / name).read_bytes() == TREE[name]
    shard_gets = [r for r, _ in seen if r.method == "GET" and r.key == f"out/{sample['shard']}"]
    assert len(shard_gets) == 1
    start, end = sample["range"]
    assert shard_gets[0].headers.get("Range", shard_gets[0].headers.get("range")) == (
        f"bytes={start}-{end - 1}"
    )
