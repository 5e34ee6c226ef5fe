"""``ishard shard --dry-run``: what it prints in each mode and with ``--json``, and that it looks
at DST as the real run will (and refuses as it does, in its words and exit code), writing
nothing."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from helpers import assert_error, invoke_ishard, make_tree, objects, run_ishard, s3_env, snapshot

from ishard.store import resolve
from ishard.store.lockrecord import acquire

# twelve samples of an image and a label each: a few shards at 8KiB
FILES: dict[str, bytes | int] = {}
for i in range(12):
    FILES[f"img/s{i:02d}.jpg"] = 3000 + 37 * i
    FILES[f"lbl/s{i:02d}.cls"] = f"label {i % 3}\n".encode()
SIZE = ("--shard-size", "8KiB")


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "src", FILES)


def _shard_names(text: str) -> list[str]:
    return [word for word in text.split() if word.startswith("shard-0")]


def test_dry_run_summary_prints_the_totals_alone_and_the_bare_dry_run_a_row_per_shard(src):
    """Finding: --dry-run=summary printed a line per shard (1,481 lines for 1,478 shards) and no
    mode printed the totals alone."""
    table = invoke_ishard("shard", src, "--dry-run", *SIZE)
    assert table.returncode == 0, table.stderr
    shards = _shard_names(table.stdout)
    assert len(shards) > 3  # a row per shard stays the bare dry run's
    summary = invoke_ishard("shard", src, "--dry-run=summary", *SIZE)
    assert summary.returncode == 0, summary.stderr
    lines = summary.stdout.splitlines()
    assert _shard_names(summary.stdout) == [], summary.stdout
    assert lines[0].startswith(f"would write {len(shards)} shards: 12 samples, 24 files")
    assert len(lines) <= 4, summary.stdout  # totals, the cut, the spread of payloads


@pytest.mark.parametrize("mode", ["--dry-run", "--dry-run=shards", "--dry-run=summary"])
def test_json_is_honoured_by_a_dry_run(src, mode):
    """Finding: --dry-run --json ignored --json: the plan's summary comes as JSON, the one
    --dry-run=json holds (a real run's --json prints its summary too)."""
    whole = invoke_ishard("shard", src, "--dry-run=json", *SIZE)
    assert whole.returncode == 0, whole.stderr
    done = invoke_ishard("shard", src, mode, "--json", *SIZE)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(whole.stdout)["summary"]


def test_json_with_a_mode_that_lists_members_prints_the_whole_plan(src):
    whole = invoke_ishard("shard", src, "--dry-run=json", *SIZE)
    done = invoke_ishard("shard", src, "--dry-run=files", "--json", *SIZE)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(whole.stdout)


def _refused_alike(src: Path, dst: Path, *extra: str) -> str:
    """A dry run into ``dst`` is refused as the real run is (one line, its exit code and words)
    and leaves ``dst`` byte-identical; return the line."""
    before = snapshot(dst)
    real = invoke_ishard("shard", src, dst, *SIZE, *extra)
    assert real.returncode in (1, 2), real
    assert snapshot(dst) == before
    dry = invoke_ishard("shard", src, dst, "--dry-run", *SIZE, *extra)
    line = assert_error(dry, real.returncode)
    assert dry.stderr == real.stderr
    assert snapshot(dst) == before
    return line


def test_a_dry_run_refuses_a_non_empty_destination_as_the_run_does(src, tmp_path):
    """Finding: a dry run never looked at DST (exit 0, then the real run was refused)."""
    dst = make_tree(tmp_path / "out", {"old.tar": b"x"})
    line = _refused_alike(src, dst)
    assert "is not empty" in line and "--overwrite" in line
    done = invoke_ishard("shard", src, dst, "--dry-run", "--overwrite", *SIZE)
    assert done.returncode == 0, done.stderr
    assert snapshot(dst) == {"old.tar": b"x"}


def test_a_dry_run_refuses_a_finished_dataset_a_file_and_a_destination_inside_the_source(
    src, tmp_path
):
    done = invoke_ishard("shard", src, tmp_path / "out", *SIZE)
    assert done.returncode == 0, done.stderr
    assert "--resume" in _refused_alike(src, tmp_path / "out")
    (tmp_path / "file").write_bytes(b"x")
    assert "is a file" in _refused_alike(src, tmp_path / "file")
    assert "inside the source" in _refused_alike(src, src / "img" / "out")
    assert not (src / "img" / "out").exists()


def test_a_dry_run_refuses_a_destination_a_live_run_holds(src, tmp_path):
    dst = tmp_path / "out"
    dst.mkdir()
    lock = acquire(resolve(str(dst), role="destination"))
    try:
        for extra in ((), ("--overwrite",), ("--resume",)):
            line = _refused_alike(src, dst, *extra)
            assert "another ishard run is writing into" in line
    finally:
        lock.release()
    done = invoke_ishard("shard", src, dst, "--dry-run", *SIZE)  # free again: the plan
    assert done.returncode == 0, done.stderr


def test_a_dry_run_of_growth_refuses_a_destination_that_is_no_dataset(src, tmp_path):
    plain = tmp_path / "plain"
    done = invoke_ishard("shard", src, plain, "--no-sample-index", *SIZE)
    assert done.returncode == 0, done.stderr
    for mode in ("--append", "--update"):
        assert "no sample index" in _refused_alike(src, plain, mode)
        assert "holds no finished dataset" in _refused_alike(
            src, make_tree(tmp_path / "other", {"x.bin": b"x"}), mode
        )
    grown = tmp_path / "grown"
    assert invoke_ishard("shard", src, grown, *SIZE).returncode == 0
    line = _refused_alike(src, grown, "--append", "--shard-size", "16KiB")
    assert "--shard-size" in line and "made with" in line


def test_a_dry_run_into_a_missing_destination_creates_nothing(src, tmp_path):
    dst = tmp_path / "new" / "out"
    done = invoke_ishard("shard", src, dst, "--dry-run", *SIZE)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "new").exists()
    alone = invoke_ishard("shard", src, "--dry-run", *SIZE)  # no DST: the plan, as ever
    assert alone.returncode == 0 and alone.stdout == done.stdout


@pytest.mark.parametrize(("word", "mode"), [("sumary", "summary"), ("jsn", "json")])
def test_a_mistyped_mode_after_dry_run_is_refused_not_taken_as_dst(
    src, tmp_path, monkeypatch, word, mode
):
    """Finding: --dry-run sumary quietly planned into a destination named 'sumary'."""
    monkeypatch.chdir(tmp_path)
    done = invoke_ishard("shard", src, "--dry-run", word)
    assert_error(done, 2, repr(word), f"did you mean --dry-run={mode}")
    assert not (tmp_path / word).exists()


def test_a_destination_named_like_a_mode_still_works(src, tmp_path, monkeypatch):
    """Only a near miss of a mode word that is no existing path, right after --dry-run, is
    refused: an existing folder, a path, a name placed before --dry-run are destinations."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sumary").mkdir()
    for args in (
        ["--dry-run", "sumary"],
        ["--dry-run", "./summry"],
        ["summry", "--dry-run"],
        ["--dry-run", "out"],
    ):
        done = invoke_ishard("shard", src, *args, *SIZE)
        assert done.returncode == 0, (args, done.stderr)
        assert _shard_names(done.stdout), args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src", "sumary"]


def test_a_dry_run_into_a_bucket_refuses_a_live_lease_and_a_non_empty_prefix(
    s3_server, s3_bucket, tmp_path
):
    """On a store the lock is a lease object: read, never written, by a dry run."""
    client = s3_server.client()
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one", "a/2.jpg": b"two"})
    env = s3_env(s3_server)
    endpoint = ("--endpoint-url", s3_server.endpoint_url)

    def both(dst: str, *extra: str) -> str:
        before = objects(client, s3_bucket)
        real = run_ishard("shard", src, dst, *endpoint, "--no-progress", *extra, env=env)
        dry = run_ishard("shard", src, dst, *endpoint, "--dry-run", *extra, env=env)
        line = assert_error(dry, real.returncode)
        left = re.compile(r"runs out in \d+ s")  # seconds left: counted at each look
        assert left.sub("", dry.stderr) == left.sub("", real.stderr)
        assert objects(client, s3_bucket) == before
        return line

    lock = {"id": "x", "host": "trainer-3", "pid": 77, "started": "2026-11-22 09:00:00 UTC"}
    lock["expires"] = time.time() + 600
    client.put_object(Bucket=s3_bucket, Key="out/.ishard-run/lock", Body=json.dumps(lock))
    for extra in ((), ("--overwrite",), ("--resume",)):
        line = both(f"s3://{s3_bucket}/out", *extra)
        assert "another ishard run is writing into" in line and "pid 77 on trainer-3" in line
    client.put_object(Bucket=s3_bucket, Key="other/x.bin", Body=b"x")
    assert "is not empty" in both(f"s3://{s3_bucket}/other")
