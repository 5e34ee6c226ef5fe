"""A growing dataset is never shrunk, renamed or written over by accident: a source that lists
nothing, an ``--update`` that would remove most samples, a manifest whose numbering or index
says something else than the dataset holds, a file of the user's at the next shard name — each
refused with one line, the dataset left byte for byte as it was."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest
from helpers import (
    assert_error,
    invoke_ishard,
    make_tree,
    objects,
    run_ishard,
    s3_env,
    shard_checksum,
    snapshot,
)

# 10 samples of a .jpg and a .cls; with --shard-size 2 (samples) five shards
TREE = {
    **{f"d/{i:02d}.jpg": 300 + 7 * i for i in range(10)},
    **{f"d/{i:02d}.cls": 2 for i in range(10)},
}
COMMON = ("--shard-size", "2", "--no-progress")


def shard(src: Path, dst: Path, *args: str):
    return invoke_ishard("shard", src, dst, *COMMON, *args)


@pytest.fixture
def dataset(tmp_path):
    """A source and the dataset made of it."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    done = shard(src, dst)
    assert done.returncode == 0, done.stderr
    return src, dst


def edit_manifest(dst: Path, change) -> None:
    doc = json.loads((dst / "manifest.json").read_bytes())
    change(doc)
    (dst / "manifest.json").write_bytes(json.dumps(doc, indent=2).encode())


# -- a source that lists nothing ------------------------------------------------------------
@pytest.mark.parametrize("mode", ["--update", "--append"])
def test_growth_from_an_empty_source_is_refused_as_a_fresh_run_is(dataset, tmp_path, mode):
    _src, dst = dataset
    empty = tmp_path / "mnt"
    empty.mkdir()
    fresh = shard(empty, tmp_path / "fresh")
    line = assert_error(fresh, 1, "nothing to shard under", "the source has no files")
    before = snapshot(dst)
    done = shard(empty, dst, mode)
    assert assert_error(done, fresh.returncode) == line
    assert snapshot(dst) == before


@pytest.mark.parametrize("mode", ["--update", "--append"])
def test_growth_from_a_source_whose_files_are_all_left_out_is_refused(dataset, tmp_path, mode):
    _src, dst = dataset
    hidden = make_tree(tmp_path / "hidden", {".d/00.jpg": 10, "d/.01.jpg": 10})
    before = snapshot(dst)
    done = shard(hidden, dst, mode)
    assert_error(done, 1, "nothing to shard under", "every file was left out")
    assert snapshot(dst) == before


def test_growth_from_a_missing_source_leaves_the_dataset_as_it_was(dataset, tmp_path):
    _src, dst = dataset
    before = snapshot(dst)
    done = shard(tmp_path / "unmounted", dst, "--update")
    assert_error(done, 2, "does not exist")
    assert snapshot(dst) == before


# -- --max-remove ---------------------------------------------------------------------------
def remove_samples(src: Path, count: int) -> None:
    for i in range(count):
        (src / f"d/{i:02d}.jpg").unlink()
        (src / f"d/{i:02d}.cls").unlink()


def test_an_update_removing_more_than_max_remove_is_refused_before_anything_is_written(
    dataset,
):
    src, dst = dataset
    remove_samples(src, 6)
    before = snapshot(dst)
    done = shard(src, dst, "--update")
    assert_error(
        done,
        1,
        "would remove 6 of the dataset's 10 samples (60 %), more than --max-remove 50 %",
        "--max-remove 60",
        "all",
    )
    assert snapshot(dst) == before
    assert_error(shard(src, dst, "--update", "--max-remove", "59"), 1, "more than --max-remove 59")
    assert snapshot(dst) == before
    allowed = shard(src, dst, "--update", "--max-remove", "60")
    assert allowed.returncode == 0, allowed.stderr
    assert "0 new, 0 changed, 6 removed" in allowed.stdout


def test_max_remove_all_lets_an_update_remove_every_sample_but_one(dataset):
    src, dst = dataset
    remove_samples(src, 9)
    done = shard(src, dst, "--update", "--max-remove", "all")
    assert done.returncode == 0, done.stderr
    assert json.loads((dst / "manifest.json").read_bytes())["ishard"]["totals"]["samples"] == 1


def test_changed_samples_do_not_count_as_removed(dataset):
    src, dst = dataset
    for i in range(8):
        (src / f"d/{i:02d}.cls").write_bytes(b"relabelled")
    done = shard(src, dst, "--update")
    assert done.returncode == 0, done.stderr
    assert "0 new, 8 changed, 0 removed" in done.stdout


@pytest.mark.parametrize("value", ["101", "-1", "half", "50.5", ""])
def test_a_bad_max_remove_is_a_usage_error(dataset, value):
    src, dst = dataset
    before = snapshot(dst)
    assert_error(shard(src, dst, "--update", "--max-remove", value), 2, "--max-remove", "all")
    assert snapshot(dst) == before


def test_max_remove_is_a_typed_keyword_of_the_api(dataset):
    import ishard
    from ishard.errors import DataError, UsageError

    src, dst = dataset
    remove_samples(src, 6)
    with pytest.raises(DataError, match="more than --max-remove 50 %"):
        ishard.shard(src, dst, shard_size="2", update=True)
    with pytest.raises(UsageError, match="max_remove"):
        ishard.shard(src, dst, shard_size="2", update=True, max_remove=2.5)
    report = ishard.shard(src, dst, shard_size="2", update=True, max_remove="all")
    assert report.plan.growth.removed == 6


def test_max_remove_is_shown_in_help():
    done = invoke_ishard("shard", "--help")
    assert done.returncode == 0
    assert "--max-remove" in done.stdout


# -- the manifest's numbering ---------------------------------------------------------------
@pytest.mark.parametrize("numbering", [[0], [3], [-5], [], ["x"], [1.5], [True], None, [5, 5], "5"])
@pytest.mark.parametrize("mode", ["--append", "--update"])
def test_a_numbering_that_does_not_hold_is_refused_and_nothing_is_written(dataset, numbering, mode):
    src, dst = dataset
    make_tree(src, {"d/99.jpg": 10, "d/99.cls": 1}, mtime=1_700_000_500)

    def change(doc):
        doc["ishard"]["numbering"] = numbering

    edit_manifest(dst, change)
    before = snapshot(dst)
    done = shard(src, dst, mode)
    assert_error(
        done,
        1,
        "manifest.json's ishard.numbering",
        f"ishard.numbering is {json.dumps(numbering)}",
        "ishard verify",
        "--overwrite",
    )
    assert snapshot(dst) == before


def test_a_numbering_ahead_of_the_listed_shards_is_taken(dataset):
    src, dst = dataset
    make_tree(src, {"d/99.jpg": 10, "d/99.cls": 1}, mtime=1_700_000_500)
    edit_manifest(dst, lambda doc: doc["ishard"].__setitem__("numbering", [9]))
    done = shard(src, dst, "--append")
    assert done.returncode == 0, done.stderr
    assert (dst / "shard-000009.tar").exists()
    assert json.loads((dst / "manifest.json").read_bytes())["ishard"]["numbering"] == [10]


# -- no name written over -------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["--append", "--update"])
def test_a_file_at_the_next_shard_name_stops_the_run_and_is_left_alone(dataset, mode):
    src, dst = dataset
    new = {f"d/{i}.{ext}": 10 for i in (98, 99) for ext in ("jpg", "cls")}
    make_tree(src, new, mtime=1_700_000_500)
    (dst / "shard-000005.tar").write_bytes(b"the user's own file")
    before = snapshot(dst)
    done = shard(src, dst, mode)
    assert_error(done, 1, "shard-000005.tar' is already there", "manifest.json does not list")
    assert snapshot(dst) == before


def test_an_exclusive_sink_never_publishes_over_a_name_taken_meanwhile(tmp_path):
    """The race the check before writing cannot see: a file appears at the shard's name while
    it is written; the shard is not published, the file is kept, no temp file is left."""
    from ishard.errors import DataError
    from ishard.store import resolve
    from ishard.store.retry import Retrier
    from ishard.store.sinks import open_sink

    dest = resolve(str(tmp_path), role="destination")
    sink = open_sink(
        dest,
        "shard-000001.tar",
        retrier=Retrier(0),
        cleanup=Retrier(0),
        part_size=5 << 20,
        expected=3,
        notice=lambda _text: None,
        exclusive=True,
    )
    sink.write(b"new")
    sink.close()
    (tmp_path / "shard-000001.tar").write_bytes(b"mine")
    with pytest.raises(DataError, match="shard-000001.tar"):
        sink.commit()
    sink.abort()
    assert snapshot(tmp_path) == {"shard-000001.tar": b"mine"}


# -- the sample index held against the manifest ---------------------------------------------
def rewrite_index(dst: Path, edit) -> None:
    """samples.parquet with its rows as ``edit`` gives them back (its types as written), and
    the manifest's record of it made to match, as a careful editor would."""
    table = pyarrow.parquet.read_table(dst / "samples.parquet")
    rows = edit(table.to_pylist())
    out = io.BytesIO()
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows, schema=table.schema), out)
    data = out.getvalue()
    (dst / "samples.parquet").write_bytes(data)

    def change(doc):
        doc["ishard"]["samples_index"].update(
            bytes=len(data), rows=len(rows), checksum="xxh128:" + shard_checksum(data, "xxh128")
        )

    edit_manifest(dst, change)


@pytest.mark.damaged_destination
@pytest.mark.parametrize("mode", ["--append", "--update"])
def test_an_index_missing_rows_is_refused_before_growth_acts_on_it(dataset, mode):
    src, dst = dataset
    rewrite_index(dst, lambda rows: [r for r in rows if r["key"] not in ("02", "03")])
    make_tree(src, {"d/99.jpg": 10, "d/99.cls": 1}, mtime=1_700_000_500)
    before = snapshot(dst)
    done = shard(src, dst, mode)
    assert_error(done, 1, "samples.parquet", "'shard-000001.tar'", "manifest.json", "ishard verify")
    assert snapshot(dst) == before


@pytest.mark.damaged_destination
def test_an_index_with_rows_of_a_shard_the_manifest_does_not_list_is_refused(dataset):
    src, dst = dataset
    rewrite_index(
        dst,
        lambda rows: [dict(r, shard="../elsewhere.tar") if r["key"] == "09" else r for r in rows],
    )
    before = snapshot(dst)
    done = shard(src, dst, "--update")
    assert_error(done, 1, "samples.parquet", "'../elsewhere.tar'", "does not list")
    assert snapshot(dst) == before


@pytest.mark.damaged_destination
def test_an_index_holding_a_sample_in_two_shards_is_refused(dataset):
    """Every shard's counts agree with the manifest, but one sample is in two shards (and one
    is in none): the dataset's count of samples does not."""
    src, dst = dataset

    def doubled(rows):
        again = [dict(r, shard="shard-000001.tar") for r in rows if r["key"] == "00"]
        return [r for r in rows if r["key"] != "02"] + again

    rewrite_index(dst, doubled)
    before = snapshot(dst)
    done = shard(src, dst, "--update")
    assert_error(done, 1, "samples.parquet", "9 samples", "manifest.json", "10", "ishard verify")
    assert snapshot(dst) == before


def test_an_object_at_the_next_shard_name_in_a_bucket_stops_the_run(s3_server, s3_bucket, tmp_path):
    """In a store the destination is listed once for the new names: an object of someone
    else's there stops the run, and is left as it was, as is every object of the dataset."""
    env = s3_env(s3_server)
    src = make_tree(tmp_path / "src", TREE)
    dst = f"s3://{s3_bucket}/data"
    args = (*COMMON, "--endpoint-url", s3_server.endpoint_url)
    done = run_ishard("shard", src, dst, *args, env=env)
    assert done.returncode == 0, done.stderr
    new = {f"d/{i}.{ext}": 10 for i in (98, 99) for ext in ("jpg", "cls")}
    make_tree(src, new, mtime=1_700_000_500)
    client = s3_server.client()
    client.put_object(Bucket=s3_bucket, Key="data/shard-000005.tar", Body=b"not ishard's")

    before = objects(client, s3_bucket)
    grown = run_ishard("shard", src, dst, *args, "--append", env=env)
    assert_error(grown, 1, "shard-000005.tar' is already there", "manifest.json does not list")
    assert objects(client, s3_bucket) == before
