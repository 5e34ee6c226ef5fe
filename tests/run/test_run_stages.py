"""The run as named stages: one ``Run`` whose methods are the stages in order, writers that
take a typed settings value built once, and a lock that says itself whether it can be lost."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from helpers import make_tree

import ishard
from ishard.options.record import make_options
from ishard.run import shard as run
from ishard.run.write import WriterSettings
from ishard.store.location import resolve
from ishard.store.lockrecord import acquire

STAGES = (
    "recheck",
    "seed",
    "plan",
    "decide",
    "begin",
    "write",
    "publish",
    "remove_replaced",
    "leave",
)
FILES = {f"{k:02d}.{ext}": 100 + k for k in range(6) for ext in ("jpg", "cls")}


def _record_stages(monkeypatch) -> list[str]:
    """The names of the ``Run`` stages called, in order, from now on."""
    seen: list[str] = []
    for name in STAGES:
        real = getattr(run.Run, name)

        def stage(self, *args, _real=real, _name=name):
            seen.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(run.Run, name, stage)
    return seen


def test_a_run_goes_through_its_stages_in_order(tmp_path, monkeypatch):
    src = make_tree(tmp_path / "src", FILES)
    seen = _record_stages(monkeypatch)
    report = ishard.shard(src, tmp_path / "out", samples_per_shard=3)
    assert seen == list(STAGES)
    assert len(report.results) == 2 and (tmp_path / "out" / "manifest.json").is_file()


def test_an_unchanged_dataset_stops_after_deciding(tmp_path, monkeypatch):
    """``--append`` with nothing new: planned, decided unchanged, left; nothing begun."""
    src = make_tree(tmp_path / "src", FILES)
    dst = tmp_path / "out"
    ishard.shard(src, dst, samples_per_shard=3)
    before = (dst / "manifest.json").read_bytes()
    seen = _record_stages(monkeypatch)
    report = ishard.shard(src, dst, samples_per_shard=3, append=True)
    assert seen == ["recheck", "seed", "plan", "decide", "leave"]
    assert report.results == () and (dst / "manifest.json").read_bytes() == before


def test_a_failed_stage_still_leaves_and_releases_the_lock(tmp_path, monkeypatch):
    """A stage that fails after the records were written: the run leaves (its records go
    from a DST it found empty) and the lock is free for the next run."""
    src = make_tree(tmp_path / "src", FILES)
    dst = tmp_path / "out"
    seen = _record_stages(monkeypatch)

    def broken(self, *args):
        seen.append("write")
        raise ishard.IshardError("the writers broke")

    monkeypatch.setattr(run.Run, "write", broken)
    with pytest.raises(ishard.IshardError, match="the writers broke"):
        ishard.shard(src, dst, samples_per_shard=3)
    assert seen == ["recheck", "seed", "plan", "decide", "begin", "write", "leave"]
    assert not dst.exists()  # it made DST: it took it away again
    monkeypatch.undo()
    assert len(ishard.shard(src, dst, samples_per_shard=3).results) == 2


def test_warnings_of_later_stages_point_at_the_caller(tmp_path):
    """The warning that an earlier manifest lists names ishard never writes (told while
    deciding) is attributed to the caller of ``shard()``, as the plan's warnings are."""
    src = make_tree(tmp_path / "src", FILES)
    dst = tmp_path / "out"
    ishard.shard(src, dst, samples_per_shard=3)
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest["shardlist"].append({"url": "notes.txt", "nsamples": 1, "filesize": 4})
    (dst / "manifest.json").write_text(json.dumps(manifest))
    (dst / "notes.txt").write_text("mine")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ishard.shard(src, dst, samples_per_shard=3, overwrite=True)
    told = [w for w in caught if issubclass(w.category, ishard.IshardWarning)]
    assert len(told) == 1 and "'notes.txt'" in str(told[0].message)
    assert told[0].filename == __file__
    assert (dst / "notes.txt").read_text() == "mine"


def test_writer_settings_are_one_typed_value_built_from_the_options():
    opts = make_options(compress_level=9, zip_compression="deflated", index="dali")
    settings = WriterSettings.of(opts)
    assert settings.dali_index and settings.archive.zip_deflate
    assert settings.archive.level == 9 and settings.archive.gzip_library == opts.gzip_library
    plain = WriterSettings.of(make_options())
    assert not plain.dali_index and not plain.archive.zip_deflate and plain.archive.level is None
    with pytest.raises(AttributeError):  # frozen: built once, never changed by a writer
        settings.dali_index = False  # type: ignore[misc]


def test_a_local_lock_says_it_cannot_be_lost(tmp_path: Path):
    dest = resolve(str(tmp_path / "out"))
    dest.store.make_root()
    lock = acquire(dest)
    try:
        assert lock.guard is None and lock.for_workers() is None
    finally:
        lock.release()
