"""A dataset of fewer shards than a training job's readers (8: ranks × DataLoader workers) is
told so in one line on stderr, with how to get more — not when the count was the user's
choice, not beside a dry run's JSON, not with ``-q``. A growing dataset with nothing new says
so in one line and prints no summary."""

from __future__ import annotations

import json

import pytest
from helpers import few_shards_note, invoke_ishard, make_tree, snapshot

pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# 20 samples of 10 KB: 2.2 MB in all, one shard at the default 256MiB
TREE = {
    **{f"d/{i:02d}.jpg": 10_000 for i in range(20)},
    **{f"d/{i:02d}.cls": 2 for i in range(20)},
}


@pytest.fixture
def src(tmp_path):
    return make_tree(tmp_path / "src", TREE)


def test_a_run_of_fewer_than_8_shards_says_how_many_and_how_to_get_more(src, tmp_path):
    done = invoke_ishard("shard", src, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote 1 shard: 20 samples")
    assert done.stderr.splitlines() == [few_shards_note(1, 20)]
    assert "--num-shards 8 makes 8, a smaller --shard-size more" in done.stderr
    more = invoke_ishard("shard", src, tmp_path / "more", "--num-shards", "8")  # as it says
    assert more.returncode == 0 and more.stdout.startswith("wrote 8 shards")
    assert more.stderr == ""  # the count was given: no note


@pytest.mark.parametrize(
    "args",
    [
        ("--num-shards", "3"),
        ("--shards-multiple-of", "2", "--shard-size", "100KB"),
        ("--shard-size", "10KB"),  # 20 shards
        ("-q",),
    ],
)
def test_no_note_where_the_count_was_chosen_is_enough_or_quiet_is_asked(src, tmp_path, args):
    done = invoke_ishard("shard", src, tmp_path / "out", *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_no_note_when_every_shard_holds_one_sample_already(tmp_path):
    few = make_tree(tmp_path / "few", {f"{i}.jpg": 10 for i in range(5)})
    done = invoke_ishard("shard", few, tmp_path / "out", "--shard-size", "1")
    assert done.returncode == 0 and done.stdout.startswith("wrote 5 shards")
    assert done.stderr == ""


def test_a_text_dry_run_says_it_and_a_json_one_does_not(src):
    text = invoke_ishard("shard", src, "--dry-run=summary", "--shard-size", "64KB")
    assert text.returncode == 0 and text.stdout.startswith("would write 3 shards")
    assert text.stderr.splitlines() == [few_shards_note(3, 20)]
    for mode in (("--dry-run=json",), ("--dry-run", "--json")):
        done = invoke_ishard("shard", src, *mode, "--shard-size", "64KB")
        assert done.returncode == 0 and done.stderr == "", done.stderr
        json.loads(done.stdout)


def test_a_growing_dataset_counts_all_its_shards_and_nothing_new_prints_no_summary(src, tmp_path):
    dst = tmp_path / "out"
    first = invoke_ishard("shard", src, dst, "--shard-size", "50KB")
    assert first.stderr.splitlines() == [few_shards_note(4, 20)]
    make_tree(src, {"d/99.jpg": 10_000, "d/99.cls": 2}, mtime=1_700_000_500)
    grown = invoke_ishard("shard", src, dst, "--append")
    assert grown.returncode == 0 and grown.stdout.startswith("wrote 1 shard: 1 sample")
    assert grown.stderr.splitlines() == [few_shards_note(5, 21, str(dst))]
    before = snapshot(dst)
    for mode in ("--append", "--update"):
        same = invoke_ishard("shard", src, dst, mode)
        assert same.returncode == 0 and same.stdout == ""
        assert same.stderr.splitlines() == [
            (
                f"ishard: nothing to {mode[2:]}: the dataset in {str(dst)!r} holds every one of "
                "the source's 21 samples as it is; nothing was written"
            )
        ]
    as_json = invoke_ishard("shard", src, dst, "--update", "--json")
    assert json.loads(as_json.stdout)["written_shards"] == 0  # a script still gets its document
    assert snapshot(dst) == before
