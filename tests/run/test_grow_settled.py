"""A job can run the same growing command every day: ``--append`` and ``--update`` into a DST
that holds nothing yet are a fresh run (said on stderr), never into one holding other files
or a stopped run; ``--append``, ``--update`` and ``--resume`` take every option that shapes
shards from what DST records when it is not given, and refuse one given otherwise, spelt as
one would type it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import VANISH, assert_error, invoke_ishard, make_tree, snapshot

import ishard

pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# 30 samples (.jpg + .cls) in 3 folders: with --shard-size 2 (samples) 15 shards
TREE = {
    **{f"d{i % 3}/{i:02d}.jpg": 300 + 7 * i for i in range(30)},
    **{f"d{i % 3}/{i:02d}.cls": 2 for i in range(30)},
}
NEW = {"d1/99.jpg": 333, "d1/99.cls": 2, "d2/98.jpg": 222, "d2/98.cls": 2}


def options_of(dst: Path) -> dict:
    return json.loads((dst / "manifest.json").read_bytes())["ishard"]["options"]


def fresh_line(mode: str, dst: Path) -> str:
    return (
        f"ishard: {mode}: {str(dst)!r} holds no dataset yet — this run makes it of the whole "
        f"source, as a run without {mode} would"
    )


@pytest.mark.parametrize("mode", ["--append", "--update"])
@pytest.mark.parametrize("exists", [False, True])
def test_growth_into_nothing_is_the_fresh_run_byte_for_byte(tmp_path, mode, exists):
    src = make_tree(tmp_path / "src", TREE)
    plain = tmp_path / "plain"
    assert invoke_ishard("shard", src, plain, "--shard-size", "2").returncode == 0
    dst = tmp_path / "dst"
    if exists:
        dst.mkdir()
    done = invoke_ishard("shard", src, dst, "--shard-size", "2", mode)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [fresh_line(mode, dst)]
    assert done.stdout.startswith("wrote 15 shards: 30 samples, 60 files")
    assert snapshot(dst) == snapshot(plain)


def test_a_dry_run_of_growth_into_nothing_plans_the_whole_source_and_creates_nothing(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    done = invoke_ishard("shard", src, dst, "--shard-size", "2", "--update", "--dry-run=summary")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [fresh_line("--update", dst)]
    assert done.stdout.startswith("would write 15 shards: 30 samples, 60 files")
    assert not dst.exists()


@pytest.mark.parametrize("mode", ["--append", "--update"])
def test_growth_into_a_destination_of_other_files_is_refused_and_leaves_them(tmp_path, mode):
    src = make_tree(tmp_path / "src", TREE)
    dst = make_tree(tmp_path / "dst", {"notes.txt": 5})
    before = snapshot(dst)
    done = invoke_ishard("shard", src, dst, mode)
    assert_error(done, 2, "holds no finished dataset (manifest.json is missing)")
    assert snapshot(dst) == before


@pytest.mark.parametrize("mode", ["--append", "--update"])
def test_growth_from_an_empty_source_into_nothing_is_refused_as_a_fresh_run_is(tmp_path, mode):
    empty = tmp_path / "mnt"
    empty.mkdir()
    fresh = invoke_ishard("shard", empty, tmp_path / "fresh")
    line = assert_error(fresh, 1, "nothing to shard under")
    done = invoke_ishard("shard", empty, tmp_path / "dst", mode)
    assert done.returncode == 1 and done.stderr.splitlines()[-1] == line
    assert not (tmp_path / "dst").exists()


def stopped_first_run(tmp_path: Path, *shaping: str) -> tuple[Path, Path, Path]:
    """A source, the dataset an uninterrupted run makes of it (``whole``), and a first run
    into ``dst`` under the same options that stopped after it published some shards (the
    last file vanished under it; it is put back)."""
    src = make_tree(tmp_path / "src", TREE)
    whole, dst = tmp_path / "whole", tmp_path / "dst"
    assert invoke_ishard("shard", src, whole, *shaping).returncode == 0
    last = max(p for p in src.rglob("*") if p.is_file())
    command = [sys.executable, "-c", VANISH, str(last), "shard", str(src), str(dst), "--jobs", "1"]
    done = subprocess.run([*command, *shaping], capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    os.rename(f"{last}.away", last)
    assert (dst / ".ishard-run").is_dir() and not (dst / "manifest.json").exists()
    assert any(dst.glob("*.tgz"))
    return src, whole, dst


def test_a_stopped_first_run_is_refused_by_growth_and_finished_by_growth_with_resume(tmp_path):
    src, whole, dst = stopped_first_run(tmp_path, "--shard-size", "2", "--ext", ".tgz")
    before = snapshot(dst)
    refused = invoke_ishard("shard", src, dst, "--update")
    assert_error(refused, 2, "holds no finished dataset", "add --resume to finish its run")
    assert snapshot(dst) == before
    done = invoke_ishard("shard", src, dst, "--update", "--resume")  # no option retyped
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"ishard: --update --resume: {str(dst)!r} holds a stopped run and no dataset yet — this "
        "run finishes that run, as --resume alone would"
    )
    assert snapshot(dst) == snapshot(whole)


def test_resume_takes_the_stopped_runs_options(tmp_path):
    shaping = (
        "--shard-size",
        "700B",
        "--ext",
        ".tgz",
        "--compress-level",
        "1",
        "--checksum",
        "md5",
    )
    src, whole, dst = stopped_first_run(tmp_path, *shaping)
    differs = invoke_ishard("shard", src, dst, "--resume", "--ext", ".tar.gz")
    assert_error(differs, 1, "the plan differs from the interrupted run's: --ext .tgz → .tar.gz")
    done = invoke_ishard("shard", src, dst, "--resume")
    assert done.returncode == 0, done.stderr
    assert snapshot(dst) == snapshot(whole)


@pytest.fixture
def dataset(tmp_path):
    """A dataset made with options other than the defaults, and new samples in its source."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    shaping = ("--shard-size", "2", "--ext", ".tgz", "--collapse", "--sort", "shuffle:7")
    made = invoke_ishard("shard", src, dst, *shaping, "--member-names", "original")
    assert made.returncode == 0, made.stderr
    make_tree(src, NEW, mtime=1_700_000_500)
    return src, dst


@pytest.mark.parametrize("mode", ["--append", "--update"])
def test_growth_takes_every_shaping_option_from_the_manifest(dataset, tmp_path, mode):
    src, dst = dataset
    recorded = options_of(dst)
    retyped = tmp_path / "retyped"  # the same dataset, grown with every option given
    shutil.copytree(dst, retyped)
    given = ("--shard-size", "2", "--ext", ".tgz", "--collapse", "--sort", "shuffle:7")
    spelt = invoke_ishard("shard", src, retyped, *given, "--member-names", "original", mode)
    assert spelt.returncode == 0, spelt.stderr
    done = invoke_ishard("shard", src, dst, mode)
    assert done.returncode == 0, done.stderr
    assert "append" in done.stdout or "update" in done.stdout
    assert snapshot(dst) == snapshot(retyped)
    assert options_of(dst) == recorded
    assert max(p.name for p in dst.glob("shard-*")) == "shard-000015.tgz"


def test_an_unseeded_shuffle_given_again_means_the_datasets(dataset, tmp_path):
    src, dst = dataset
    done = invoke_ishard("shard", src, dst, "--append", "--sort", "shuffle")
    assert done.returncode == 0, done.stderr
    assert "shuffle seed" not in done.stderr  # no seed drawn: the dataset's is taken
    assert options_of(dst)["sort"] == "shuffle:7"


@pytest.mark.parametrize(
    ("given", "shown", "recorded", "option"),
    [
        (("--shard-size", "3"), "--shard-size 3", "--shard-size 2", "--shard-size"),
        (("--shard-size", "48KB"), "--shard-size 48KB", "--shard-size 2", "--shard-size"),
        (("--ext", ".tar"), "--ext .tar", "--ext .tgz", "--ext"),
        (("--no-collapse",), "--no-collapse", "--collapse", "--collapse"),
        (("--sort", "alpha:inc"), "--sort alpha:inc", "--sort shuffle:7", "--sort"),
        (("--member-names", "sample"), "--member-names sample", "--member-names original", "--member-names"),
        (("--compress-level", "9"), "--compress-level 9", "no --compress-level", "--compress-level"),
    ],
)  # fmt: skip
def test_a_given_option_other_than_the_datasets_is_refused_as_typed(
    dataset, given, shown, recorded, option
):
    src, dst = dataset
    before = snapshot(dst)
    done = invoke_ishard("shard", src, dst, "--append", *given)
    line = assert_error(done, 2)
    assert line == (
        f"ishard: error: --append: {shown} is not the dataset's — the dataset in {str(dst)!r} "
        f"was made with {recorded}: leave {option} out to take it, or re-shard it with "
        "--overwrite"
    )
    assert snapshot(dst) == before


def test_an_option_from_the_environment_counts_as_given(dataset):
    src, dst = dataset
    done = invoke_ishard("shard", src, dst, "--update", env={"ISHARD_EXT": ".tar"})
    line = assert_error(done, 2, "ISHARD_EXT .tar is not the dataset's")  # named as given
    assert "was made with --ext .tgz: leave --ext out" in line


def test_the_api_takes_what_its_call_does_not_give(dataset):
    src, dst = dataset
    report = ishard.shard(src, dst, append=True)
    assert [r.name for r in report.results] == ["shard-000015.tgz"]
    assert options_of(dst)["shard_size"] is None and options_of(dst)["samples_per_shard"] == 2
    with pytest.raises(ishard.UsageError, match=r"--ext \.zip is not the dataset's"):
        ishard.shard(src, dst, update=True, ext=".zip")


def stopped_night(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A dataset of TREE (``before``, kept aside), then a night that brought three new
    samples and stopped after it published two of its three shards (the last file vanished
    under it; it is put back); the source then changes again."""
    src = make_tree(tmp_path / "src", TREE)
    dst, before = tmp_path / "dst", tmp_path / "before"
    assert invoke_ishard("shard", src, dst, "--shard-size", "2").returncode == 0
    shutil.copytree(dst, before)
    make_tree(
        src, {f"d3/{i}.{ext}": 50 + i for i in (90, 91, 92, 93, 94, 95) for ext in ("jpg", "cls")}
    )
    command = [sys.executable, "-c", VANISH, str(src / "d3/95.jpg"), "shard", str(src), str(dst)]
    done = subprocess.run(
        [*command, "--update", "--jobs", "1"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr
    os.rename(src / "d3/95.jpg.away", src / "d3/95.jpg")
    assert {p.name for p in dst.glob("*.tar")} - {p.name for p in before.glob("*.tar")} == {
        "shard-000015.tar",
        "shard-000016.tar",
    }
    make_tree(src, {"d3/96.jpg": 146, "d3/96.cls": 2})  # the next night's source
    return src, dst, before


def test_a_stopped_night_is_cleared_by_the_next_with_no_option_added(tmp_path):
    src, dst, before = stopped_night(tmp_path)
    reference = tmp_path / "reference"
    shutil.copytree(before, reference)
    assert invoke_ishard("shard", src, reference, "--update").returncode == 0
    done = invoke_ishard("shard", src, dst, "--update")  # the same command as every night
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        (
            "ishard: removed 2 shards a stopped run published and no manifest lists "
            "('shard-000015.tar', 'shard-000016.tar'): its records show them as it wrote them; "
            "this run plans from the source as it is now"
        )
    ]
    assert snapshot(dst) == snapshot(reference)


def test_a_file_not_as_the_stopped_run_recorded_it_is_left_and_stops_the_night(tmp_path):
    src, dst, _ = stopped_night(tmp_path)
    (dst / "shard-000016.tar").write_bytes(b"someone else's bytes now")
    done = invoke_ishard("shard", src, dst, "--update")
    assert_error(done, 1, "shard-000016.tar' is already there", "manifest.json does not list")
    assert (dst / "shard-000016.tar").read_bytes() == b"someone else's bytes now"
