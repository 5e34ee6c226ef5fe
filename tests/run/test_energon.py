"""``--index energon``: Megatron-Energon's metadata written with the dataset — a ``.tar.idx``
beside each tar and ``.nv-meta/`` — from the sample index, no shard read again. Checked against
the shards as Python's ``tarfile`` reads them (each sample's first header, each member's data,
where the last member ends) and, where megatron-energon is installed, against what
``energon prepare`` writes for the same shards and with Energon's own loader."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from energon_checks import (
    check_energon_files,
    energon_command,
    energon_reads,
    shards_of,
    tar_samples,
)
from helpers import (
    assert_error,
    download,
    invoke_ishard,
    make_tree,
    read_webdataset,
    snapshot,
)

TREE = {
    **{f"d{i % 3}/{i:02d}.jpg": 300 + 37 * i for i in range(24)},
    **{f"d{i % 3}/{i:02d}.cls": 2 for i in range(24)},
    **{f"d{i % 3}/{i:02d}.txt": 40 for i in range(0, 24, 5)},
}
OPTS = ("--shard-size", "3KiB", "--index", "energon")


def test_energon_files_say_what_the_shards_hold(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    done = invoke_ishard("shard", src, dst, *OPTS)
    assert done.returncode == 0, done.stderr
    assert len(shards_of(dst)) > 3
    check_energon_files(dst)
    again = tmp_path / "again"  # the same dataset gets the same files, its uuid too
    assert invoke_ishard("shard", src, again, *OPTS).returncode == 0
    assert snapshot(again / ".nv-meta") == snapshot(dst / ".nv-meta")


@pytest.mark.parametrize("mode", ["--append", "--update"])
def test_energon_files_follow_growth(tmp_path, mode):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    assert invoke_ishard("shard", src, dst, *OPTS).returncode == 0
    make_tree(src, {"d1/50.jpg": 900, "d1/50.cls": 2, "d2/51.jpg": 700, "d2/51.cls": 2})
    if mode == "--update":
        (src / "d0/00.cls").write_bytes(b"changed")
    before = set(shards_of(dst))
    done = invoke_ishard("shard", src, dst, mode)  # --index energon taken from the manifest
    assert done.returncode == 0, done.stderr
    now = shards_of(dst)
    assert set(now) - before
    check_energon_files(dst)
    gone = before - set(now)
    assert bool(gone) == (mode == "--update")
    for shard in gone:  # a replaced shard's index went with it
        assert not (dst / shard).exists() and not (dst / f"{shard}.idx").exists()
    assert sorted(read_webdataset(dst, now)) == sorted(p.stem for p in src.rglob("*.jpg"))


def test_energon_and_dali_indexes_together(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    done = invoke_ishard("shard", src, dst, "--shard-size", "3KiB", "--index", "energon,dali")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((dst / "manifest.json").read_bytes())
    assert manifest["ishard"]["options"]["index"] == "dali,energon"
    for shard in shards_of(dst):
        assert (dst / shard.replace(".tar", ".idx")).is_file()  # DALI's
    check_energon_files(dst)


def test_a_split_by_ratios_takes_the_shards_in_order(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    done = invoke_ishard("shard", src, dst, *OPTS, "--energon-split", "3,1,1")
    assert done.returncode == 0, done.stderr
    shards = shards_of(dst)
    assert len(shards) == 5, shards  # 3, 1 and 1 of them
    check_energon_files(dst, {"train": shards[:3], "val": shards[3:4], "test": shards[4:]})
    grown = invoke_ishard("shard", src, dst, "--append", "--energon-split", "1,0,0")
    assert_error(grown, 2, "--energon-split")  # the dataset's split is kept, not changed


@pytest.mark.parametrize(
    "args, says",
    [
        (("--index", "energon", "--ext", ".tgz"), "--index energon indexes plain tar shards"),
        (("--index", "energon", "--no-sample-index"), "drop --no-sample-index"),
        (("--index", "energon,wds"), "--index 'energon,wds' names 'wds', which is no index"),
        (("--energon-split", "1,1,1"), "only --index energon writes — add --index energon"),
        (("--index", "energon", "--energon-split", "8,x"), "--energon-split '8,x' is not a split"),
        (("--index", "energon", "--energon-split", "folders"), "and 'shard-000000.tar' is in none"),
    ],
)
def test_energon_refuses_what_it_cannot_index(tmp_path, args, says):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10})
    result = invoke_ishard("shard", src, tmp_path / "out", *args)
    assert_error(result, 2, says)
    assert not (tmp_path / "out").exists()


def test_two_samples_of_one_energon_key_are_refused_naming_it(tmp_path):
    """Energon keys a sample by its member names up to the first dot: ``x.a.jpg`` and
    ``x.b.jpg`` in two shards are two samples of one key, which its index cannot hold."""
    src = make_tree(tmp_path / "src", {"x.a.jpg": 10, "x.b.jpg": 20})
    result = invoke_ishard(
        "shard", src, tmp_path / "out", "--index", "energon", "--samples-per-shard", "1",
        "--member-names", "original",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "ishard: error: two samples have the Energon key 'x' (in 'shard-000000.tar' and "
        "'shard-000001.tar')"
    )
    published = {p.name for p in (tmp_path / "out").iterdir()}
    assert "manifest.json" not in published and "samples.parquet" not in published


# ---------------------------------------------------------------- with megatron-energon


def test_tar_indexes_are_energon_prepares_bytes(tmp_path):
    command = energon_command()
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    assert invoke_ishard("shard", src, dst, *OPTS).returncode == 0
    prepared = tmp_path / "prepared"
    shutil.copytree(dst, prepared, ignore=shutil.ignore_patterns("*.idx", ".nv-meta"))
    subprocess.run(
        [*command, "prepare", str(prepared), "--non-interactive", "--split-ratio", "1,0,0",
         "--sample-type", "CrudeWebdataset"],
        check=True, capture_output=True,
    )  # fmt: skip
    for shard in shards_of(dst):
        assert (dst / f"{shard}.idx").read_bytes() == (prepared / f"{shard}.idx").read_bytes()
    tables = "SELECT * FROM samples ORDER BY 1, 3", "SELECT * FROM sample_parts ORDER BY 1, 2, 4"
    for query in tables:
        ours = sqlite3.connect(dst / ".nv-meta/index.sqlite").execute(query).fetchall()
        theirs = sqlite3.connect(prepared / ".nv-meta/index.sqlite").execute(query).fetchall()
        assert ours == theirs


def source_parts(src: Path) -> dict[str, dict[str, str]]:
    parts: dict[str, dict[str, str]] = {}
    for path in src.rglob("*.*"):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        parts.setdefault(path.stem, {})[path.suffix[1:]] = digest
    return parts


def test_energons_loader_reads_every_sample_without_prepare_and_after_growth(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    assert invoke_ishard("shard", src, dst, *OPTS).returncode == 0
    assert energon_reads(dst) == source_parts(src)
    make_tree(src, {"d1/50.jpg": 900, "d1/50.cls": 2})
    (src / "d0/03.cls").write_bytes(b"relabelled")
    assert invoke_ishard("shard", src, dst, "--update").returncode == 0
    assert energon_reads(dst) == source_parts(src)
    make_tree(src, {"d2/60.jpg": 700, "d2/60.cls": 2})
    assert invoke_ishard("shard", src, dst, "--append").returncode == 0
    assert energon_reads(dst) == source_parts(src)


def test_energons_loader_reads_the_train_part_of_a_split(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    assert invoke_ishard("shard", src, dst, *OPTS, "--energon-split", "3,1,1").returncode == 0
    train = shards_of(dst)[:3]
    keys = {k for shard in train for k, _, _ in tar_samples(dst / shard)[0]}
    expected = {k: v for k, v in source_parts(src).items() if k in keys}
    assert energon_reads(dst) == expected and 0 < len(expected) < len(source_parts(src))


def test_energon_files_in_a_bucket(cli, client, s3_bucket, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    done = cli("shard", src, f"s3://{s3_bucket}/ds", *OPTS, "--member-names", "sample")
    assert done.returncode == 0, done.stderr
    copy = download(client, s3_bucket, "ds/", tmp_path / "copy")
    assert (copy / ".nv-meta" / "index.sqlite").is_file()
    check_energon_files(copy)


def test_an_overwrite_takes_the_earlier_datasets_energon_files_away(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    assert invoke_ishard("shard", src, dst, *OPTS).returncode == 0
    assert invoke_ishard("shard", src, dst, "--shard-size", "9KiB", "--overwrite").returncode == 0
    left = [p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file()]
    assert not [n for n in left if n.endswith(".tar.idx") or n.startswith(".nv-meta/")], left
    again = invoke_ishard("shard", src, dst, *OPTS[2:], "--shard-size", "5KiB", "--overwrite")
    assert again.returncode == 0, again.stderr
    check_energon_files(dst)
    shards = set(shards_of(dst))
    assert {p.name for p in dst.glob("*.tar.idx")} == {f"{s}.idx" for s in shards}
