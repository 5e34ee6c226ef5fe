"""Warnings are told after planning and before anything is written, everywhere the plan shows:
stderr, every dry run, the final summary, --json, the Python API; --strict makes them errors."""

from __future__ import annotations

import json
import warnings

import pytest
from helpers import few_shards_note, invoke_ishard, make_tree, snapshot

import ishard

# a.jpg and a.xml in two directories: one sample to ishard, two to WebDataset readers
SPLIT = {"img/a.jpg": 3, "ann/a.xml": 4, "img/b.jpg": 5, "ann/b.xml": 6}
ORIGINAL = ("--member-names", "original")


@pytest.fixture
def src(tmp_path):
    return make_tree(tmp_path / "src", SPLIT)


def warning_lines(stderr: str) -> list[str]:
    return [
        ln.removeprefix("ishard: warning: ")
        for ln in stderr.splitlines()
        if ln.startswith("ishard: warning: ")
    ]


def test_warnings_come_after_planning_and_before_the_first_shard(src, tmp_path):
    """With --progress (plain lines, no terminal) the warnings precede 'planned' and every
    'wrote' line; the summary repeats them and --json holds them."""
    run = invoke_ishard(
        "shard", src, tmp_path / "out", "--progress", "--samples-per-shard", "1", *ORIGINAL
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    told = warning_lines(run.stderr)
    assert len(told) == 2 and told[0].startswith("2 samples that WebDataset readers take as")
    planned = next(i for i, ln in enumerate(lines) if ln.startswith("ishard: planned"))
    assert lines[0].startswith("ishard: listed 4 files")  # listing, then the warnings
    assert lines[1:planned] == [f"ishard: warning: {w}" for w in told], lines
    assert any(ln.startswith("ishard: wrote") for ln in lines[planned:])
    assert run.stdout.splitlines()[-3:] == [
        "2 warnings (on stderr too, before writing):",
        *(f"  {w}" for w in told),
    ]
    js = invoke_ishard("shard", src, tmp_path / "js", "--json", *ORIGINAL)
    assert js.returncode == 0 and warning_lines(js.stderr) == told
    assert json.loads(js.stdout)["warnings"] == told


@pytest.mark.parametrize("mode", ["text", "show_keys", "json", "summary"])
def test_every_dry_run_tells_the_warnings(mode, src):
    dry = invoke_ishard("shard", src, f"--dry-run={mode}", *ORIGINAL)
    assert dry.returncode == 0, dry.stderr
    told = warning_lines(dry.stderr)
    assert len(told) == 2 and "--member-names sample" in told[-1]
    if mode == "json":
        assert json.loads(dry.stdout)["summary"]["warnings"] == told
    else:
        assert dry.stdout.splitlines()[-3:] == [
            "2 warnings (on stderr too, before the plan):",
            *(f"  {w}" for w in told),
        ]


STRICT_CASES = [  # (options, the first warning's start, where): each kind, each place
    ((*ORIGINAL, "new"), "2 samples that WebDataset readers take as several"),
    (("old", "--overwrite", "--compress-level", "3"), "--compress-level 3 has no effect"),
    (
        ("--dry-run", "--sample-exts", ".jpg", "--missing-extension-action", "warn"),
        "sample 'a': file",
    ),
    (("--dry-run=json", *ORIGINAL), "2 samples that WebDataset readers take as several"),
]


@pytest.mark.parametrize("options,warning", STRICT_CASES)
def test_strict_fails_before_anything_is_written(options, warning, src, tmp_path):
    """A new DST is not created; an existing one (--overwrite) is left byte for byte, with no
    run records or lock; a dry run fails too."""
    new, old = tmp_path / "new", make_tree(tmp_path / "old", {"keep.txt": b"x"})
    before = snapshot(old)
    where = {"new": str(new), "old": str(old)}
    run = invoke_ishard("shard", src, *(where.get(o, o) for o in options), "--strict")
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    *told, error = run.stderr.splitlines()
    assert told[0].startswith(f"ishard: warning: {warning}"), told
    assert error.startswith("ishard: error: --strict and the plan has "), error
    assert "nothing was written" in error and "Traceback" not in run.stderr
    assert not new.exists()
    assert snapshot(old) == before and sorted(p.name for p in old.iterdir()) == ["keep.txt"]


def test_strict_without_warnings_writes_as_usual(src, tmp_path):
    run = invoke_ishard("shard", src, tmp_path / "out", "--strict")  # default names: no warning
    assert run.returncode == 0 and run.stderr.splitlines() == [few_shards_note(1, 2)]  # no error
    assert (tmp_path / "out" / "manifest.json").exists()


def test_api_warns_with_ishard_warning_and_strict_raises(src, tmp_path):
    with pytest.warns(ishard.IshardWarning) as caught:
        report = ishard.shard(src, tmp_path / "out", member_names="original")
    assert [str(w.message) for w in caught] == list(report.warnings) == list(report.plan.warnings)
    assert len(report.warnings) == 2 and caught[0].filename == __file__
    with pytest.warns(ishard.IshardWarning):
        assert ishard.plan(src, member_names="original").warnings == report.warnings
    with pytest.raises(ishard.StrictError) as err, pytest.warns(ishard.IshardWarning):
        ishard.shard(src, tmp_path / "strict", member_names="original", strict=True)
    assert err.value.warnings == report.warnings and not (tmp_path / "strict").exists()
    with warnings.catch_warnings():  # the warnings filter can stop a run, too
        warnings.simplefilter("error", ishard.IshardWarning)
        with pytest.raises(ishard.IshardWarning):
            ishard.shard(src, tmp_path / "filtered", member_names="original")
        assert not (tmp_path / "filtered").exists()
        assert ishard.shard(src, tmp_path / "default").warnings == ()  # <key>.<ext> names
    with pytest.raises(ishard.UsageError, match="strict must be True or False, not 'yes'"):
        ishard.plan(src, strict="yes")
