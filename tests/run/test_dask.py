"""``--executor dask``: shards written as Dask tasks by worker processes.

A local cluster started by ishard itself, and one started here and named with --scheduler, must
write exactly the shards a local run writes; failures on a worker come back as ishard's one-line
errors with nothing partial left behind.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import distributed
import pytest
from helpers import (
    DATASET_RECORDS,
    assert_error,
    assert_true_totals,
    invoke_ishard,
    make_tree,
    read_members,
    run_ishard,
)

import ishard
from ishard.errors import IshardError, SourceError
from ishard.progress import Progress
from ishard.run import executors

# 12 samples of a .jpg and a .json each, in two directories; ~60 KB payload per sample.
TREE = {
    **{f"train/{i:03d}.jpg": 50_000 + 997 * i for i in range(8)},
    **{f"train/{i:03d}.json": 100 + i for i in range(8)},
    **{f"val/{i:03d}.jpg": 61_000 for i in range(20, 24)},
    **{f"val/{i:03d}.json": 50 for i in range(20, 24)},
}
COMMON = ("--shard-size", "120KB", "--no-progress", "--json", "--member-names", "original")


@pytest.fixture(scope="module")
def scheduler():
    """A two-process Dask cluster on 127.0.0.1 for the module; yields its scheduler address."""
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster:
        yield cluster.scheduler_address


def shard_files(dst: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(dst.iterdir()) if p.name not in DATASET_RECORDS}


def tar_members(path: Path) -> dict[str, bytes]:
    return dict(read_members(path.name, path.read_bytes()))


def assert_ok(result) -> dict:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.mark.parametrize("how", ["own-cluster", "scheduler"])
def test_dask_writes_the_same_tgz_shards_as_a_local_run(how, scheduler, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    assert_ok(run_ishard("shard", src, tmp_path / "local", "--ext", ".tgz", *COMMON))
    extra = ("--jobs", "2") if how == "own-cluster" else ("--scheduler", scheduler)
    summary = assert_ok(
        run_ishard(
            "shard", src, tmp_path / "dask", "--ext", ".tgz", *COMMON, "--executor", "dask", *extra
        )
    )

    local, dask = shard_files(tmp_path / "local"), shard_files(tmp_path / "dask")
    assert len(local) >= 4
    assert dask == local  # same names, same bytes
    assert summary["shards"] == len(local)
    # every source file exactly once, with its bytes (read back with tarfile)
    members = {}
    for name in dask:
        for member, data in tar_members(tmp_path / "dask" / name).items():
            assert member not in members
            members[member] = data
    assert members == {name: (src / name).read_bytes() for name in TREE}
    manifests = [
        json.loads((tmp_path / d / "manifest.json").read_bytes()) for d in ("local", "dask")
    ]
    assert manifests[0]["shardlist"] == manifests[1]["shardlist"]
    # the executor (and --jobs, --scheduler) only say how the run went: the same manifest
    assert (tmp_path / "dask" / "manifest.json").read_bytes() == (
        tmp_path / "local" / "manifest.json"
    ).read_bytes()


def test_gnu_tar_lists_what_dask_workers_wrote(scheduler, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    assert_ok(
        run_ishard(
            "shard", src, tmp_path / "out", *COMMON, "--executor", "dask", "--scheduler", scheduler
        )
    )
    listed = []
    for shard in sorted((tmp_path / "out").glob("*.tar")):
        done = subprocess.run(["tar", "-tf", shard], capture_output=True, text=True, check=True)
        listed += done.stdout.split()
    assert sorted(listed) == sorted(TREE)


def test_plain_progress_of_dask_workers_ends_with_the_real_totals(scheduler, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    result = run_ishard(
        "shard",
        src,
        dst,
        "--shard-size",
        "120KB",
        "--progress",
        "--json",
        "--executor",
        "dask",
        "--scheduler",
        scheduler,
    )
    assert_true_totals(src, dst, result)


class VanishAfterPlanning(Progress):
    """Removes a planned file once planning is done, before any shard is written."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def planned(self, shards: int, nbytes: int) -> None:
        self.path.unlink()


def test_a_worker_failure_is_ishards_error_and_leaves_no_partial_shard(scheduler, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    with pytest.raises(SourceError, match=r"cannot read 'val/021\.jpg' from the source"):
        ishard.shard(
            src,
            dst,
            shard_size="120KB",
            executor="dask",
            scheduler=scheduler,
            progress=VanishAfterPlanning(src / "val/021.jpg"),
        )
    left = sorted(p.name for p in dst.iterdir() if p.name != ".ishard-run")  # kept for --resume
    assert not [n for n in left if "ishard-tmp" in n]  # no temp file anywhere
    assert "manifest.json" not in left
    for name in left:  # whatever was finished is a whole, valid shard without the lost file
        assert "val/021.jpg" not in tar_members(dst / name)


def test_cli_shows_a_worker_failure_in_one_line(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10, "a/2.jpg": 20})
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "shard-000000.tar").mkdir()  # a directory where the shard must go: rename fails
    result = run_ishard(
        "shard", src, dst, "--overwrite", "--executor", "dask", "--jobs", "1", "--no-progress"
    )
    assert_error(result, 1, "shard-000000.tar")
    assert not [p for p in dst.iterdir() if "ishard-tmp" in p.name]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--executor", "spark"), ("--executor 'spark'", "local or dask")),
        (("--scheduler", "tcp://127.0.0.1:8786"), ("needs --executor dask",)),
        (
            ("--executor", "dask", "--scheduler", "127.0.0.1:8786"),
            ("'127.0.0.1:8786' is not a scheduler address", "tcp://HOST:PORT"),
        ),
        (("--executor", "dask", "--scheduler", "http://127.0.0.1:8786"), ("tcp://HOST:PORT",)),
    ],
)
def test_bad_executor_options_exit_2_before_anything_is_written(args, needles, tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10})
    result = run_ishard("shard", src, tmp_path / "out", *args)
    assert_error(result, 2, *needles)
    assert not (tmp_path / "out").exists()


def test_a_scheduler_that_does_not_answer_leaves_dst_untouched(monkeypatch, tmp_path):
    """The scheduler is asked before DST is claimed: after the failure DST is as it was
    (here: not there), and the corrected command needs neither --resume nor --overwrite."""
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setattr(executors, "CONNECT_SECONDS", 2)
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10})
    dst = tmp_path / "out"
    with pytest.raises(IshardError, match=rf"scheduler 'tcp://127.0.0.1:{port}' did not answer"):
        ishard.shard(src, dst, executor="dask", scheduler=f"tcp://127.0.0.1:{port}")
    assert not dst.exists()
    result = invoke_ishard(
        "shard",
        src,
        dst,
        "--executor",
        "dask",
        "--scheduler",
        f"tcp://127.0.0.1:{port}",
        "--no-progress",
    )
    assert_error(
        result,
        1,
        f"the Dask scheduler 'tcp://127.0.0.1:{port}' did not answer",
        "check the address",
    )
    assert not dst.exists()
    fixed = invoke_ishard("shard", src, dst, "--no-progress")
    assert fixed.returncode == 0, fixed.stderr
    assert sorted(p.name for p in dst.iterdir()) == [
        "manifest.json",
        "samples.parquet",
        "shard-000000.tar",
    ]


def test_workers_do_not_inherit_a_cancelled_run(scheduler, tmp_path):
    """A second run on the same cluster after a failed one writes everything: each run has
    its own cancel flag."""
    src = make_tree(tmp_path / "src", TREE)
    with pytest.raises(SourceError):
        ishard.shard(
            src,
            tmp_path / "first",
            shard_size="120KB",
            executor="dask",
            scheduler=scheduler,
            progress=VanishAfterPlanning(src / "train/003.jpg"),
        )
    (src / "train/003.jpg").write_bytes(os.urandom(10))
    report = ishard.shard(
        src, tmp_path / "second", shard_size="120KB", executor="dask", scheduler=scheduler
    )
    assert report.plan.file_count == len(TREE)
    assert sum(len(tar_members(tmp_path / "second" / r.name)) for r in report.results) == len(TREE)


def test_a_shard_plan_reaches_a_worker_whole(tmp_path):
    """Plans travel to workers as columns (ShardPlan.__reduce__): every file, with its size,
    mtime and archive name, in the same samples and order."""
    import pickle

    tree = make_tree(
        tmp_path / "src", {"a/x.jpg": 3, "a/x.cls": 1, "b/y.jpg": 5, "b/y.cls": 2, "c/z.JPEG": 4}
    )
    for member_names in ("original", "sample"):
        plan = ishard.plan(tree, shard_size="1KB", member_names=member_names)
        for shard in plan.shards:
            back = pickle.loads(pickle.dumps(shard))
            assert back == shard
            assert [(f.arcname, f.size, f.mtime) for f in back.members()] == [
                (f.arcname, f.size, f.mtime) for f in shard.members()
            ]


def listed(shard, cancel):
    """A Dask task that writes nothing: the shard's name and counts, as a writer reports them."""
    from ishard.model import ShardResult

    return ShardResult(shard.name, 0, "none", len(shard.samples), shard.file_count, shard.size)


def test_dask_is_handed_a_window_of_shards_not_the_whole_plan(scheduler, tmp_path, monkeypatch):
    """The client builds and submits a shard's plan only when one of the few in flight has
    finished — at 100 million files the whole plan would not fit the client or the scheduler
    — and still gives every shard's result, in plan order."""
    monkeypatch.setattr(executors, "IN_FLIGHT", 1)
    monkeypatch.setattr(executors, "LEAST_IN_FLIGHT", 3)
    plan = ishard.plan(make_tree(tmp_path / "src", TREE), shard_size="1")  # a shard a sample
    finished: list[str] = []
    built: list[tuple[int, int]] = []  # (shard, shards finished when it was built)

    class Built(list):
        def __getitem__(self, index):
            built.append((index, len(finished)))
            return plan.shards[index]

    class Finished(Progress):
        def shard_done(self, result) -> None:
            finished.append(result.name)

    results = executors.write_with_dask(Built(range(len(plan.shards))), listed,
                                        scheduler=scheduler, workers=2, progress=Finished())  # fmt: skip
    assert [r.name for r in results] == plan.shard_names and len(results) == 12
    assert [r.files for r in results] == plan.shard_file_counts
    assert sorted(finished) == sorted(plan.shard_names)
    assert sorted(i for i, _ in built) == list(range(12))
    assert all(i < done + 3 for i, done in built), built  # 3 at once, never more
