"""``--duplicates``: exact duplicates found at planning time, by an inventory's checksums or
ETags (no byte read) or, for a listing without them, by the bytes of files whose sizes
collide — reported in the summary, or dropped (the first by name kept) and recorded in the
manifest; the column engine and the row reader find the same."""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import tarfile
from unittest import mock

import pytest
from helpers import (
    SCHEMA,
    assert_error,
    make_tree,
    put,
    run_ishard,
    s3_csv_report,
    s3_parquet_report,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ishard
from ishard.model import FileEntry
from ishard.planning.duplicates import content_hashes

PLANNERS = ("engine", "rows")
MIB = 1 << 20


def summary(src, inventory, *args, planner: str) -> dict:
    """The dry run's summary (``--json``) of a plan over ``inventory``, by ``planner``."""
    env = {"ISHARD_PLANNER": planner} if planner else {}
    ran = run_ishard(
        "shard", src, "--src-list", inventory, "--dry-run=summary", "--json", "-v",
        "--shard-size", "1MiB", *args, env={**os.environ, **env},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert f"planner: {planner}" in ran.stderr  # as asked, not handed back
    return json.loads(ran.stdout)


def inventory_csv(path, rows: list[tuple[str, int, str]], column: str = "etag"):
    """A CSV inventory of (name, size, ETag or checksum) rows, big enough for the engine to
    read it whatever ``ISHARD_PLANNER`` says."""
    with open(path, "w", newline="") as out:
        csv.writer(out, lineterminator="\n").writerows([("name", "size", column), *rows])
    return path


# single-part ETags, as S3 quotes them in a listing and not in an inventory; multipart
# ETags, equal only for the same parts of the same bytes (and so of one size)
ETAG_ROWS = [
    ("a/0001.jpg", 100, "9e107d9d372bb6826bd81d3542a419d6"),
    ("a/0002.jpg", 100, '"9e107d9d372bb6826bd81d3542a419d6"'),  # = 0001: quotes aside
    ("a/0003.jpg", 101, "9e107d9d372bb6826bd81d3542a419d6"),  # another size: not one
    ("b/0004.jpg", 5 * MIB, "d41d8cd98f00b204e9800998ecf8427e-2"),
    ("b/0005.jpg", 5 * MIB, "d41d8cd98f00b204e9800998ecf8427e-2"),  # = 0004
    ("b/0006.jpg", 5 * MIB, "d41d8cd98f00b204e9800998ecf8427e-3"),  # other parts: not one
    ("b/0007.jpg", 5 * MIB, "d41d8cd98f00b204e9800998ecf8427e"),  # single-part: not one
    ("c/0008.jpg", 100, "9e107d9d372bb6826bd81d3542a419d6"),  # = 0001, a third of them
    ("c/0009.jpg", 7, ""),  # no ETag: never a duplicate
    ("c/0010.jpg", 7, ""),
]


@pytest.mark.parametrize("planner", PLANNERS)
def test_a_csv_inventorys_etags_report_duplicates_in_the_dry_run(tmp_path, planner):
    inventory = inventory_csv(tmp_path / "inv.csv", ETAG_ROWS)
    found = summary(tmp_path / "src", inventory, planner=planner)
    assert found["files"] == len(ETAG_ROWS)  # reported, not dropped: the default
    assert found["duplicates"] == {
        "by": "the inventory's 'etag' column, and the size",
        "groups": 2,
        "copies": 3,
        "bytes": 100 + 5 * MIB + 100,
        "dropped": False,
        "examples": [
            {"name": "a/0002.jpg", "same_as": "a/0001.jpg"},
            {"name": "b/0005.jpg", "same_as": "b/0004.jpg"},
            {"name": "c/0008.jpg", "same_as": "a/0001.jpg"},
        ],
    }


def test_the_summary_says_how_many_and_how_to_drop_them(tmp_path):
    inventory = inventory_csv(tmp_path / "inv.csv", ETAG_ROWS)
    ran = run_ishard("shard", tmp_path / "src", "--src-list", inventory, "--dry-run=summary")
    assert ran.returncode == 0, ran.stderr
    line = next(x for x in ran.stdout.splitlines() if x.startswith("duplicates:"))
    assert line == (
        "duplicates: 3 files (5.00MiB) repeat the bytes of an earlier one, in 2 groups, by the "
        "inventory's 'etag' column, and the size — e.g. 'a/0002.jpg' = 'a/0001.jpg'; kept "
        "(--duplicates drop leaves them out)"
    )


@pytest.mark.parametrize("planner", PLANNERS)
def test_drop_keeps_the_first_by_name_and_counts_the_others_left_out(tmp_path, planner):
    inventory = inventory_csv(tmp_path / "inv.csv", ETAG_ROWS, column="sha256")
    found = summary(tmp_path / "src", inventory, "--duplicates", "drop", planner=planner)
    assert found["files"] == len(ETAG_ROWS) - 3
    assert found["duplicates"]["dropped"] is True
    assert found["duplicates"]["by"] == "the inventory's 'sha256' column, and the size"
    left_out = {s["reason"]: s for s in found["skipped"]}
    gone = left_out["exact duplicate of an earlier file (--duplicates drop)"]
    assert (gone["count"], gone["examples"]) == (3, ["a/0002.jpg", "b/0005.jpg", "c/0008.jpg"])


@pytest.mark.parametrize("planner", PLANNERS)
def test_off_and_an_inventory_without_checksums_say_nothing(tmp_path, planner):
    inventory = inventory_csv(tmp_path / "inv.csv", ETAG_ROWS)
    assert "duplicates" not in summary(
        tmp_path / "src", inventory, "--duplicates", "off", planner=planner
    )
    plain = tmp_path / "plain.csv"
    plain.write_text("name,size\na/1.jpg,5\nb/2.jpg,5\n")
    assert "duplicates" not in summary(tmp_path / "src", plain, planner=planner)


@pytest.mark.parametrize("planner", PLANNERS)
def test_an_s3_csv_report_with_etags_finds_duplicates_without_reading_a_byte(tmp_path, planner):
    """The report names objects of a source that does not exist here: the ETags tell."""
    lines = [
        ["src-bucket", "train/a.jpg", "2048", "2024-01-02T03:04:05.000Z", "e1", "STANDARD"],
        ["src-bucket", "train/b.jpg", "2048", "2024-01-02T03:04:05.000Z", "e1", "STANDARD"],
        ["src-bucket", "train/c.jpg", "2048", "2024-01-02T03:04:05.000Z", "e2-4", "STANDARD"],
        ["src-bucket", "train/d+e.jpg", "2048", "2024-01-02T03:04:05.000Z", "e2-4", "STANDARD"],
        ["src-bucket", "train/f.jpg", "2049", "2024-01-02T03:04:05.000Z", "e1", "STANDARD"],
    ]
    schema = "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass"
    assert SCHEMA != schema
    report = s3_csv_report(tmp_path, lines, schema=schema)
    found = summary(tmp_path / "nowhere", report, planner=planner)
    assert found["duplicates"]["by"] == "the inventory's 'ETag' column, and the size"
    assert found["duplicates"]["examples"] == [
        {"name": "train/b.jpg", "same_as": "train/a.jpg"},
        {"name": "train/d e.jpg", "same_as": "train/c.jpg"},  # the key decoded
    ]


@pytest.mark.parametrize("planner", PLANNERS)
def test_an_s3_parquet_report_with_etags_drops_duplicates(tmp_path, planner):
    when = "2024-01-02 03:04:05"
    rows = [("x/1.jpg", 9, when, "aa"), ("x/2.jpg", 9, when, "aa"), ("x/3.jpg", 9, when, "bb")]
    report = s3_parquet_report(tmp_path, rows)
    found = summary(tmp_path / "nowhere", report, "--duplicates", "drop", planner=planner)
    assert found["files"] == 2
    assert found["duplicates"]["examples"] == [{"name": "x/2.jpg", "same_as": "x/1.jpg"}]
    assert found["duplicates"]["by"] == "the inventory's 'e_tag' column, and the size"


def test_a_local_tree_is_hashed_where_sizes_collide_and_drop_is_in_the_manifest(tmp_path):
    src = make_tree(
        tmp_path / "src",
        {
            "a/1.jpg": b"same bytes",
            "a/1.cls": b"3",
            "b/2.jpg": b"same bytes",  # = a/1.jpg
            "b/2.cls": b"4",  # the size of a/1.cls, other bytes
            "c/3.jpg": b"same bytez",  # the size of a/1.jpg, other bytes
            "c/3.cls": b"3",  # = a/1.cls
        },
    )
    ran = run_ishard("shard", src, "--dry-run=summary", "--duplicates", "report")
    assert ran.returncode == 0, ran.stderr
    assert (
        "duplicates: 2 files (11B) repeat the bytes of an earlier one, in 2 groups, by the "
        "bytes (xxh128) of files whose sizes collide — e.g. 'b/2.jpg' = 'a/1.jpg'"
    ) in ran.stdout
    auto = run_ishard("shard", src, "--dry-run=summary")  # auto: no checksums, nothing read
    assert "duplicates" not in auto.stdout

    dst = tmp_path / "dst"
    ran = run_ishard("shard", src, dst, "--duplicates", "drop", "-q")
    assert ran.returncode == 0, ran.stderr
    manifest = json.loads((dst / "manifest.json").read_text())["ishard"]
    assert manifest["duplicates"]["pairs"] == [
        {"name": "b/2.jpg", "same_as": "a/1.jpg"},
        {"name": "c/3.cls", "same_as": "a/1.cls"},
    ]
    members = []
    for shard in sorted(dst.glob("*.tar")):
        with tarfile.open(shard) as tar:
            members += tar.getnames()
    assert sorted(members) == ["1.cls", "1.jpg", "2.cls", "3.jpg"]


def test_only_files_whose_sizes_collide_are_read(tmp_path):
    names = ["a", "b", "c", "d", "e"]
    sizes = [5, 6, 5, 7, 6]
    asked: list[str] = []

    def read(entries):
        for entry in entries:
            asked.append(entry.name)
            assert isinstance(entry, FileEntry)
            yield entry, io.BytesIO(b"x" * entry.size)

    hashes = content_hashes(names, sizes, read)
    assert asked == ["a", "b", "c", "e"]
    assert hashes[3] is None and hashes[0] == hashes[2] and hashes[1] == hashes[4]
    assert hashes[0] != hashes[1]


def test_a_bad_value_is_one_line_and_the_go_spelling_looks_for_none(tmp_path):
    inventory = inventory_csv(tmp_path / "inv.csv", ETAG_ROWS)
    ran = run_ishard(
        "shard", tmp_path / "src", "--src-list", inventory, "--dry-run", "--duplicates", "maybe"
    )
    assert_error(ran, 2, "--duplicates")
    src = make_tree(tmp_path / "tree", {"a/1.jpg": b"same", "b/1.jpg": b"same"})
    go = run_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'out'}", "-dry_run")
    assert go.returncode == 0, go.stderr
    assert "duplicates" not in go.stdout


# random inventories with ETags, hidden and repeated names among them: both planners find
# the same duplicates and keep the same files
_NAMES = st.sampled_from(["a/1.jpg", "a/1.cls", "b/2.jpg", "b/.h.jpg", "c/3.jpg", "c/3.txt",
                          "d/4.jpg", "e/5.jpg", "a/1.jpg"])  # fmt: skip
_ROWS = st.lists(
    st.tuples(_NAMES, st.integers(0, 3), st.sampled_from(["e1", '"e1"', "e2-2", "", " e3 "])),
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=_ROWS, mode=st.sampled_from(["report", "drop"]))
def test_both_planners_find_the_same_duplicates(tmp_path, rows, mode):
    inventory = inventory_csv(tmp_path / "inv.csv", rows)
    plans = {}
    said: list[str] = []
    told = logging.Handler()
    told.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("ishard")
    level = logger.level
    logger.addHandler(told)
    logger.setLevel(logging.INFO)
    try:
        for planner in PLANNERS:
            with mock.patch.dict(os.environ, {"ISHARD_PLANNER": planner}):
                try:
                    plans[planner] = ishard.plan(
                        str(tmp_path / "src"), src_list=str(inventory), duplicates=mode,
                        member_names="original", shard_size="1KiB",
                    )  # fmt: skip
                except ishard.IshardError as refused:
                    plans[planner] = str(refused)
    finally:
        logger.removeHandler(told)
        logger.setLevel(level)
    engine, rows_plan = plans["engine"], plans["rows"]
    if isinstance(rows_plan, str):
        assert engine == rows_plan
        return
    assert any(line.startswith("planner: engine") for line in said)  # not handed back
    assert engine.duplicates == rows_plan.duplicates
    assert engine.skipped == rows_plan.skipped
    assert [s.members() for s in engine.shards] == [s.members() for s in rows_plan.shards]


def test_a_buckets_listing_reports_duplicates_by_its_etags(cli, client, s3_bucket):
    """A bucket lists each object's ETag: the default reports what they show, with no byte
    read; drop leaves the copies out and the manifest lists them."""
    put(client, s3_bucket, {
        "ds/a/1.jpg": b"same bytes", "ds/b/2.jpg": b"same bytes", "ds/c/3.jpg": b"same bytez",
        "ds/a/1.cls": b"7", "ds/b/2.cls": b"8",
    })  # fmt: skip
    ran = cli("shard", f"s3://{s3_bucket}/ds", "--dry-run=summary", "--json")
    assert ran.returncode == 0, ran.stderr
    found = json.loads(ran.stdout)["duplicates"]
    assert found["by"] == "the listing's ETags, and the size"
    assert (found["copies"], found["groups"], found["bytes"]) == (1, 1, 10)
    assert found["examples"] == [{"name": "ds/b/2.jpg", "same_as": "ds/a/1.jpg"}]
    off = cli("shard", f"s3://{s3_bucket}/ds", "--dry-run=summary", "--json", "--duplicates=off")
    assert "duplicates" not in json.loads(off.stdout)

    ran = cli("shard", f"s3://{s3_bucket}/ds", f"s3://{s3_bucket}/out", "--duplicates", "drop")
    assert ran.returncode == 0, ran.stderr
    manifest = json.loads(
        client.get_object(Bucket=s3_bucket, Key="out/manifest.json")["Body"].read()
    )
    assert manifest["ishard"]["duplicates"]["pairs"] == [
        {"name": "ds/b/2.jpg", "same_as": "ds/a/1.jpg"}
    ]
    assert manifest["ishard"]["totals"]["files"] == 4
