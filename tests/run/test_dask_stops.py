"""``--executor dask`` stopped mid-shard: a stop signal, the cluster's last worker gone, one
worker of two killed. Each through the command, on a real scheduler with `dask worker`
processes (some preloaded with tests/support/hold_writers.py, which holds shards mid-write)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import distributed
import pytest
from helpers import (
    WAIT,
    assert_error,
    make_tree,
    poll,
    run_ishard,
    start_dask_worker,
    with_stop_signals,
)

# 8 samples of ~60 KB: with 120KB shards 4 shards (.tar: same bytes from any writer).
TREE = {**{f"d/{i:03d}.jpg": 60_000 + 97 * i for i in range(8)}}
COMMON = ("--shard-size", "120KB", "--no-progress", "--executor", "dask")
FIRST_RECORD = ".ishard-run/done/000000000.json"  # the run state's record of shard 0


@pytest.fixture
def cluster():
    """A scheduler without workers on 127.0.0.1 (the test starts its own `dask worker`s)."""
    with distributed.LocalCluster(
        n_workers=0, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"
    ) as local:
        yield local.scheduler_address


@pytest.fixture
def workers(processes):
    """``workers(address, held=…, first=…)``: starts a `dask worker` (``start_dask_worker``)."""
    return functools.partial(start_dask_worker, processes)


def workers_of(address: str, count: int) -> None:
    with distributed.Client(address, timeout=WAIT) as client:
        client.wait_for_workers(count, timeout=WAIT)


def temps(dst: Path, pid: int | None = None) -> list[Path]:
    mark = f".{pid}.ishard-tmp" if pid else ".ishard-tmp"
    return [p for p in dst.rglob("*") if p.name.endswith(mark)]


def shards_of(dst: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(dst.iterdir()) if not p.name.startswith(".")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The source and what a local run writes from it (shards and manifest)."""
    root = tmp_path_factory.mktemp("dask-stops")
    src = make_tree(root / "src", TREE)
    done = run_ishard("shard", src, root / "ref", "--shard-size", "120KB", "--no-progress")
    assert done.returncode == 0, done.stderr
    names = sorted(n for n in shards_of(root / "ref") if n.endswith(".tar"))
    assert len(names) == 4
    return src, shards_of(root / "ref"), names


def start_run(src: Path, dst: Path, address: str) -> subprocess.Popen:
    return subprocess.Popen(
        with_stop_signals(
            [sys.executable, "-m", "ishard", "shard", src, dst, *COMMON, "--scheduler", address]
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def resume_matches(src: Path, dst: Path, address: str, expected: dict[str, bytes]) -> None:
    resumed = run_ishard("shard", src, dst, *COMMON, "--scheduler", address, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert shards_of(dst) == expected
    assert not (dst / ".ishard-run").exists() and not temps(dst)


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_a_stop_signal_ends_a_dask_run_at_once_and_resume_finishes(
    reference, cluster, workers, tmp_path, signum, code
):
    """The signal arrives once the first shard is complete and another is held mid-write on
    the worker: the run ends within seconds (not after the held shard) with one line and
    128 + the signal's number; the worker abandons the held shard (no temp file), nothing
    else is published, and --resume finishes byte-identical to a local run."""
    src, expected, names = reference
    held = workers(cluster, held=True, first=names[0])
    workers_of(cluster, 1)
    dst = tmp_path / "out"
    run = start_run(src, dst, cluster)
    poll("the first shard and a held one", lambda: (dst / names[0]).exists() and temps(dst), WAIT)
    sent = time.monotonic()
    os.killpg(run.pid, signum)
    _, err = run.communicate(timeout=WAIT)
    took = time.monotonic() - sent
    assert run.returncode == code, err
    (line,) = err.splitlines()
    assert line.startswith(f"ishard: error: interrupted ({signal.Signals(signum).name}) — "), line
    assert took < 30, took  # a hang would be for good: the held shard never ends by itself
    poll("the held shard's temp file to go", lambda: not temps(dst), WAIT)
    assert shards_of(dst) == {names[0]: expected[names[0]]}
    held.kill()  # it would hold the resumed run's shards too
    workers(cluster, held=False)
    resume_matches(src, dst, cluster, expected)


@pytest.mark.parametrize("paused", [False, True])
def test_a_dask_cluster_without_workers_fails_in_one_line_and_resume_finishes(
    reference, cluster, workers, tmp_path, paused
):
    """Finding: the cluster's last worker killed mid-shard left the run waiting for good. Now
    it fails within seconds of NO_WORKERS_SECONDS with one line naming the scheduler and what
    to do (exit 1); --resume with a new worker finishes byte-identical. ``paused``: ishard is
    stopped (SIGSTOP) while the worker dies, so the first shard's result goes with the worker
    before ishard fetched it (Dask then computes it again: a wait for it would be for good)."""
    src, expected, names = reference
    worker = workers(cluster, held=True, first=names[0])
    workers_of(cluster, 1)
    dst = tmp_path / "out"
    run = start_run(src, dst, cluster)
    poll("a held shard", lambda: (dst / names[0]).exists() and temps(dst, worker.pid), WAIT)
    if paused:
        os.kill(run.pid, signal.SIGSTOP)
    else:  # the run has the first shard's result (recorded), so 3 shards are left for certain
        poll("the first shard recorded", lambda: (dst / FIRST_RECORD).exists(), WAIT)
    worker.kill()
    if paused:
        worker.wait(timeout=WAIT)
        with distributed.Client(cluster, timeout=WAIT) as client:
            poll("the scheduler to lose the worker", lambda: not client.nthreads(), WAIT)
        os.kill(run.pid, signal.SIGCONT)
    try:
        _, err = run.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        run.kill()
        raise AssertionError(run.communicate()) from None
    line = assert_error(subprocess.CompletedProcess([], run.returncode, "", err), 1)
    # paused: 3 left, or 4 when the first shard's result went with the worker before ishard
    # fetched it (Dask then computes it again)
    left = (3, 4) if paused else (3,)
    assert any(
        line.startswith(
            f"ishard: error: the Dask cluster at {cluster} has had no "
            f"workers for 10 s with {n} shards still to write"
        )
        for n in left
    ), line
    assert f"start workers (dask worker {cluster}), then run again with --resume" in line
    assert not (dst / "manifest.json").exists()
    workers(cluster, held=False)
    resume_matches(src, dst, cluster, expected)


def test_a_dask_worker_killed_mid_shard_leaves_no_temp_file_after_a_successful_run(
    reference, cluster, workers, tmp_path
):
    """Finding: a worker killed mid-shard: its shard is written again on another worker and
    the run succeeds, but the dead worker's temp file stayed in DST. Now the finished run
    removes it: DST holds exactly a local run's files."""
    src, expected, _ = reference
    doomed = workers(cluster, held=True, first="none")
    workers_of(cluster, 1)
    dst = tmp_path / "out"
    run = start_run(src, dst, cluster)
    poll("the doomed worker's temp file", lambda: temps(dst, doomed.pid), WAIT)
    workers(cluster, held=False)
    workers_of(cluster, 2)
    doomed.kill()
    _, err = run.communicate(timeout=WAIT)
    assert run.returncode == 0, err
    assert shards_of(dst) == expected
    assert not temps(dst), temps(dst)
    assert run_ishard("verify", dst, "--deep").returncode == 0


def test_a_signal_to_the_group_of_a_run_with_its_own_cluster_leaves_no_temp_file(tmp_path):
    """Without --scheduler ishard's local cluster's workers share its process group, so a
    terminal's Ctrl-C or a group SIGTERM reaches them too: they must not die mid-shard (their
    temp files would stay) but abandon their shards as ishard cancels them. The signal is sent
    once the first shard is complete (of dozens; a run that ends first fails the test)."""
    src = make_tree(tmp_path / "src", {f"d/{i:03d}.bin": os.urandom(400_000) for i in range(150)})
    dst = tmp_path / "out"
    args = (
        "--shard-size",
        "1MB",
        "--ext",
        ".tgz",
        "--no-progress",
        "--executor",
        "dask",
        "--jobs",
        "2",
    )
    run = subprocess.Popen(
        with_stop_signals([sys.executable, "-m", "ishard", "shard", src, dst, *args]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    poll("a first shard", lambda: list(dst.glob("shard-*.tgz")) or run.poll() is not None, WAIT)
    os.killpg(run.pid, signal.SIGTERM)
    _, err = run.communicate(timeout=WAIT)
    assert run.returncode == 143, err
    assert not temps(dst), temps(dst)
    assert not (dst / "manifest.json").exists()
    resumed = run_ishard("shard", src, dst, *args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    reference = run_ishard("shard", src, tmp_path / "ref", *args[:-4])
    assert reference.returncode == 0, reference.stderr
    assert shards_of(dst) == shards_of(tmp_path / "ref")
