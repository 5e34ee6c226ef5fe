"""A dataset that grows: ``--append`` adds new samples in new shards and leaves every old one
untouched, ``--update`` rewrites only the shards whose samples changed or went. Read back with
webdataset, wids, pyarrow and ``ishard verify --deep``; compared with the source's bytes."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet
import pytest
from helpers import (
    invoke_ishard,
    make_tree,
    read_webdataset,
    read_wids,
    snapshot_but_lock,
    source_samples,
)

from ishard.readback.verify import verify

pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# 60 samples (.jpg + .cls) over 3 directories; with 24KB shards about 15 shards
TREE = {
    **{f"d{i % 3}/{i:04d}.jpg": 5_000 + 97 * (i % 13) for i in range(60)},
    **{f"d{i % 3}/{i:04d}.cls": 2 + i % 3 for i in range(60)},
}
# 6 more samples, one of them in a new folder; their names sort among the old ones
NEW = {
    **{f"d{i % 3}/{i:04d}a.jpg": 4_000 + 31 * i for i in range(0, 60, 12)},
    **{f"d{i % 3}/{i:04d}a.cls": 3 for i in range(0, 60, 12)},
    "d9/9999.jpg": 7_000,
    "d9/9999.cls": 4,
}
COMMON = ("--shard-size", "24KB", "--no-progress")


def shards_of(dst: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(dst.glob("*.tar"))}


def manifest(dst: Path) -> dict:
    return json.loads((dst / "manifest.json").read_bytes())


def index_rows(dst: Path) -> list[tuple[str, str, int]]:
    """(shard, member, size) of every row of samples.parquet, read with pyarrow."""
    table = pyarrow.parquet.read_table(dst / "samples.parquet").to_pylist()
    return [(r["shard"], r["member"], r["size"]) for r in table]


def archived_rows(dst: Path) -> list[tuple[str, str, int]]:
    """(shard, member, size) of every member of the manifest's shards, read with tarfile."""
    import tarfile

    rows = []
    for entry in manifest(dst)["shardlist"]:
        with tarfile.open(dst / entry["url"]) as tar:
            rows += [(entry["url"], m.name, m.size) for m in tar.getmembers()]
    return rows


def shard(src: Path, dst: Path, *args: str) -> subprocess.CompletedProcess:
    return invoke_ishard("shard", src, dst, *COMMON, *args)


@pytest.fixture
def grown(tmp_path):
    """A source, a dataset made of it (and a copy of that dataset as it was), then new
    samples added to the source."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    assert shard(src, dst).returncode == 0
    before = tmp_path / "before"
    shutil.copytree(dst, before)
    make_tree(src, NEW, mtime=1_700_000_500)
    return src, dst, before


def test_append_writes_only_the_new_samples_and_leaves_every_old_shard_untouched(grown, tmp_path):
    src, dst, before = grown
    old = shards_of(before)
    done = shard(src, dst, "--append")
    assert done.returncode == 0, done.stderr
    assert "append: the dataset held 60 samples; 6 new, 0 changed, 0 removed" in done.stdout
    now = shards_of(dst)
    assert {n: now[n] for n in old} == old  # byte for byte
    added = sorted(set(now) - set(old))
    assert added and added[0] == f"shard-{len(old):06d}.tar"  # the numbering goes on
    assert [e["url"] for e in manifest(dst)["shardlist"]] == [*old, *added]
    assert manifest(dst)["ishard"]["totals"]["samples"] == 66
    # every reader finds every sample of the source, old and new, with its bytes
    expected = source_samples(src)
    assert read_webdataset(dst, [*old, *added]) == expected
    assert read_wids(dst / "manifest.json", tmp_path / "cache") == expected
    # the new shards hold exactly the new samples
    assert set(read_webdataset(dst, added)) == {Path(n).name.partition(".")[0] for n in NEW}
    # the index describes every member of every shard the manifest lists
    assert index_rows(dst) == archived_rows(dst)
    checked = verify(dst, deep=True)
    assert checked.ok and checked.shards == len(now)


def test_a_reader_of_the_old_manifest_still_reads_every_sample_after_an_append(grown, tmp_path):
    src, dst, before = grown
    held_manifest = dst / "manifest.old.json"  # a reader that loaded the manifest before
    held_manifest.write_bytes((before / "manifest.json").read_bytes())
    assert shard(src, dst, "--append").returncode == 0
    old_samples = read_wids(before / "manifest.json", tmp_path / "c1")
    assert read_wids(held_manifest, tmp_path / "c2") == old_samples
    assert len(old_samples) == 60
    held_manifest.unlink()


def test_append_refuses_changed_and_removed_samples_and_writes_nothing(grown):
    src, dst, _ = grown
    (src / "d1/0001.cls").write_bytes(b"relabelled")
    (src / "d2/0002.jpg").unlink()
    (src / "d2/0002.cls").unlink()
    untouched = snapshot_but_lock(dst)
    done = shard(src, dst, "--append")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        (
            "ishard: error: 1 sample the destination holds changed in the source (a file added, "
            "changed or removed), e.g. '0001'; 1 sample the destination holds no longer in the "
            "source, e.g. '0002' — --append only adds samples: use --update to rewrite the "
            "shards that hold them, or leave the source as it was"
        )
    ]
    assert snapshot_but_lock(dst) == untouched


def test_update_rewrites_only_the_shards_whose_samples_changed_or_went(grown, tmp_path):
    src, dst, before = grown
    (src / "d1/0001.cls").write_bytes(b"relabelled")
    (src / "d2/0050.jpg").unlink()
    (src / "d2/0050.cls").unlink()
    old = shards_of(before)
    holders = {
        r["shard"]
        for r in pyarrow.parquet.read_table(before / "samples.parquet").to_pylist()
        if r["key"] in ("0001", "0050")
    }
    assert len(holders) == 2
    done = shard(src, dst, "--update")
    assert done.returncode == 0, done.stderr
    assert "6 new, 1 changed, 1 removed" in done.stdout
    now = shards_of(dst)
    assert set(old) - set(now) == holders  # the replaced shards are gone
    assert {n: now[n] for n in set(old) - holders} == {n: old[n] for n in set(old) - holders}
    listed = [e["url"] for e in manifest(dst)["shardlist"]]
    assert sorted(listed) == sorted(now)
    expected = source_samples(src)
    assert "0050" not in expected and expected["0001"]["cls"] == b"relabelled"
    assert read_webdataset(dst, listed) == expected
    assert read_wids(dst / "manifest.json", tmp_path / "cache") == expected
    assert index_rows(dst) == archived_rows(dst)
    # nothing more to do: a second update writes nothing
    again = shard(src, dst, "--update")
    assert again.returncode == 0 and "nothing to update" in again.stderr
    assert shards_of(dst) == now


def test_append_dry_run_shows_what_would_be_added_and_writes_nothing(grown):
    src, dst, _ = grown
    untouched = snapshot_but_lock(dst)
    done = shard(src, dst, "--append", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would write" in done.stdout and "6 new" in done.stdout
    assert f"shard-{len(shards_of(dst)):06d}.tar" in done.stdout
    assert snapshot_but_lock(dst) == untouched


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (("--shard-size", "48KB"), "--shard-size 48KB is not the dataset's"),
        (("--ext", ".tgz"), "--ext .tgz is not the dataset's"),
        (("--overwrite",), "--append and --overwrite cannot be used together"),
        (("--num-shards", "4"), "--append cannot keep --num-shards's promise"),
        (("--no-sample-index",), "drop --no-sample-index"),
    ],
)
def test_append_refuses_other_options_naming_them(grown, given, says):
    src, dst, _ = grown
    untouched = snapshot_but_lock(dst)
    done = invoke_ishard("shard", src, dst, "--no-progress", *COMMON[:2], "--append", *given)
    if given[0] == "--shard-size":
        done = invoke_ishard("shard", src, dst, "--no-progress", "--append", *given)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and len(done.stderr.splitlines()) == 1
    assert snapshot_but_lock(dst) == untouched


def test_append_needs_a_dataset_with_a_sample_index(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    assert shard(src, tmp_path / "plain", "--no-sample-index").returncode == 0
    without = shard(src, tmp_path / "plain", "--append")
    assert without.returncode == 2 and "has no sample index" in without.stderr


TRIALS = 8


@pytest.mark.parametrize("mode", ["--append", "--update"])
def test_a_killed_append_or_update_resumes_to_exactly_the_uninterrupted_result(
    grown, tmp_path, mode, fault_trials
):
    """kill -9 at a random moment of an append (or an update), then ``--resume``: the end is
    byte for byte an uninterrupted run's (shards, index, manifest), and right after the kill
    every shard the old manifest lists is still whole. When the kill lands does not decide
    the outcome, only which path a trial takes."""
    src, _, before = grown
    if mode == "--update":
        (src / "d1/0001.cls").write_bytes(b"relabelled")
    reference = tmp_path / "reference"
    shutil.copytree(before, reference)
    started = time.monotonic()
    assert shard(src, reference, mode).returncode == 0
    whole = time.monotonic() - started
    expected = snapshot_but_lock(reference)
    rng = random.Random(20261127)
    for trial in range(TRIALS):
        target = tmp_path / f"trial{trial}"
        shutil.copytree(before, target)
        command = ["shard", str(src), str(target), *COMMON, mode]
        run = subprocess.Popen([sys.executable, "-m", "ishard", *command])
        time.sleep(rng.uniform(0.05, 1.1) * whole)
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=120)
        listed = manifest(target)["shardlist"]
        for entry in listed:  # the manifest there never names a shard that is not whole
            assert (target / entry["url"]).stat().st_size == entry["filesize"], trial
        resumed = shard(src, target, mode, "--resume")
        assert resumed.returncode == 0, (trial, resumed.stderr)
        identical = snapshot_but_lock(target) == expected
        fault_trials(f"kill -9 {mode}", 1, identical)
        assert identical, trial
    assert os.path.exists(reference / "samples.parquet")


@pytest.mark.damaged_destination
def test_verify_checks_the_sample_index_against_the_manifest(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    assert shard(src, dst).returncode == 0
    assert invoke_ishard("verify", dst).returncode == 0
    index = dst / "samples.parquet"
    data = bytearray(index.read_bytes())
    data[len(data) // 2] ^= 1
    index.write_bytes(bytes(data))
    damaged = invoke_ishard("verify", dst)
    assert damaged.returncode == 1
    assert "samples.parquet: xxh128 is " in damaged.stdout + damaged.stderr
    index.unlink()
    gone = invoke_ishard("verify", dst)
    assert gone.returncode == 1
    assert "samples.parquet: is missing (the manifest names it as the sample index)" in (
        gone.stdout + gone.stderr
    )


def test_update_of_a_removal_alone_drops_its_shard_and_writes_none(tmp_path):
    """A shard whose only sample went is removed and nothing is written in its place; the
    other shards stay byte for byte, and no warning speaks of shards that were not cut."""
    src = make_tree(tmp_path / "src", {f"a/{i:03d}.jpg": 3_000 for i in range(6)})
    dst = tmp_path / "out"
    assert shard(src, dst, "--shard-size", "1").returncode == 0
    before = shards_of(dst)
    (src / "a/002.jpg").unlink()
    done = shard(src, dst, "--shard-size", "1", "--update")
    assert done.returncode == 0, done.stderr
    assert "0 new, 0 changed, 1 removed" in done.stdout and "warning" not in done.stderr
    assert shards_of(dst) == {n: d for n, d in before.items() if n != "shard-000002.tar"}
    assert [e["url"] for e in manifest(dst)["shardlist"]] == sorted(shards_of(dst))
    assert index_rows(dst) == archived_rows(dst)


def test_the_compared_index_is_kept_in_the_run_records_never_through_a_link(grown, tmp_path):
    """The copy of the index a growing run keeps in ``.ishard-run/held.parquet`` replaces a
    link planted under that name; what the link points to is not written."""
    src, dst, _ = grown
    victim = tmp_path / "victim"
    victim.write_bytes(b"mine")
    (dst / ".ishard-run").mkdir()
    (dst / ".ishard-run" / "held.parquet").symlink_to(victim)
    done = shard(src, dst, "--append")
    assert done.returncode == 0, done.stderr
    assert victim.read_bytes() == b"mine"
    assert not (dst / ".ishard-run").exists()
