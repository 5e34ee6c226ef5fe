"""--resume after kill -9 and Ctrl-C, refusal when the plan changed, shards checked before they
are kept, and one run at a time per destination (local; the S3 side is in test_s3.py)."""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    HOLD,
    HOW_IT_RUNS,
    invoke_ishard,
    make_tree,
    run_losing,
    snapshot_but_lock,
    with_stop_signals,
)

from ishard.readback.verify import verify
from ishard.sizes import format_size

# Every finished destination a test here leaves must pass `ishard verify --deep`.
pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# 120 samples (.jpg + .cls) over 3 directories: with 64KB shards about 20 shards.
TREE = {
    **{f"d{i % 3}/{i:04d}.jpg": 9_000 + 211 * (i % 17) for i in range(120)},
    **{f"d{i % 3}/{i:04d}.cls": 3 + i % 5 for i in range(120)},
}
COMMON = ("--shard-size", "64KB", "--no-progress")
TRIALS = 10  # kill -9 trials; each is a run, a kill at a random moment and a resume


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """The source tree and, per format, the output of one uninterrupted run."""
    root = tmp_path_factory.mktemp("resume")
    src = make_tree(root / "src", TREE)
    reference = {}
    for ext in (".tar", ".tgz", ".tar.zst"):
        done = invoke_ishard("shard", src, root / f"ref{ext}", *COMMON, "--ext", ext)
        assert done.returncode == 0, done.stderr
        reference[ext] = snapshot_but_lock(root / f"ref{ext}")
        assert len(reference[ext]) > 15
    return src, reference


def start(src: Path, dst: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ishard", "shard", str(src), str(dst), *COMMON, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def visible(dst: Path) -> dict[str, bytes]:
    """What a user sees in ``dst``: files under final names (no hidden part: temp files and
    the run record are hidden), as ``snapshot`` reports them."""
    return {
        name: data
        for name, data in snapshot_but_lock(dst).items()
        if not any(part.startswith(".") for part in Path(name).parts)
    }


def kill_at_random(src: Path, dst: Path, whole: float, rng: random.Random, *args: str) -> bool:
    """Start a run, SIGKILL it after a random part of ``whole`` (an uninterrupted run's time);
    True if it was stopped before it finished."""
    run = start(src, dst, *args)
    time.sleep(rng.uniform(0.1, 1.0) * whole)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=120)
    return run.returncode == -signal.SIGKILL and not (dst / "manifest.json").exists()


# What follows a kill: a --resume; a restart with --overwrite; or a --overwrite restart that is
# killed too, then a --resume.
RECOVERIES = ("resume", "overwrite", "overwrite, killed, resume")


def test_killed_runs_resume_to_exactly_the_uninterrupted_output(dataset, tmp_path, fault_trials):
    """kill -9 at a random moment (planning, writing, the manifest, or after the end), then a
    --resume or an --overwrite restart (itself killed at random, then resumed, in a third of the
    trials): every shard under its final name after a kill is whole (byte for byte the
    uninterrupted run's), and the end result is byte for byte the uninterrupted run's,
    manifest included, with nothing left over (no temp file, no stale shard, no run state) and
    `ishard verify` passing. When a kill lands does not decide the outcome, only which path a
    trial exercises."""
    src, reference = dataset
    rng = random.Random(20261122)
    started = time.monotonic()
    run = start(src, tmp_path / "timing", "--ext", ".tgz")
    run.communicate(timeout=120)
    whole = time.monotonic() - started
    interrupted = 0
    for trial in range(TRIALS):
        ext = (".tar", ".tgz", ".tar.zst")[trial % 3]  # the sample index's offsets and
        jobs = ("1", "2")[trial // 2 % 2]  # frames resumed from the run records too
        recovery = RECOVERIES[trial // 3 % 3]
        dst = tmp_path / f"trial{trial}"
        interrupted += kill_at_random(src, dst, whole, rng, "--ext", ext, "--jobs", jobs)
        left = visible(dst)
        for name, data in left.items():  # no torn shard is visible after the kill
            assert data == reference[ext].get(name), (trial, name)
        if recovery.startswith("overwrite"):
            again = ("--ext", ext, "--overwrite")
            if recovery == "overwrite":
                done = invoke_ishard("shard", src, dst, *COMMON, *again)
                assert done.returncode == 0, (trial, done.stderr)
            else:
                interrupted += kill_at_random(src, dst, whole, rng, *again)
                for name, data in visible(dst).items():
                    assert data == reference[ext].get(name), (trial, name)
        if recovery.endswith("resume"):
            resumed = invoke_ishard("shard", src, dst, *COMMON, "--ext", ext, "--resume")
            assert resumed.returncode == 0, (trial, resumed.stderr)
        identical = snapshot_but_lock(dst) == reference[ext]
        fault_trials("kill -9", 1, identical, len(left))
        assert identical, (trial, recovery)
        checked = verify(dst)  # what `ishard verify` runs, without a new interpreter per trial
        assert checked.problems == () and checked.shards_ok == checked.shards > 0, trial
    assert interrupted >= 1  # kills land at random moments: some before the end


def start_held(src: Path, dst: Path, first: str) -> subprocess.Popen:
    """A .tgz run with two writers, in a session of its own, returned once ``first`` is
    complete and both writers are held mid-shard (HOLD)."""
    argv = [sys.executable, HOLD, "shard", src, dst, *COMMON, "--ext", ".tgz", "--jobs", "2"]
    run = subprocess.Popen(
        with_stop_signals(argv),
        env={**os.environ, "ISHARD_TEST_FIRST": first},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while run.poll() is None and time.monotonic() < deadline:
        done = list((dst / ".ishard-run" / "done").glob("*"))
        if done and len(list(dst.glob("*ishard-tmp"))) == 2:  # both writers mid-shard
            break
        time.sleep(0.01)
    assert run.poll() is None, run.communicate()
    return run


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_a_stop_signal_exits_128_plus_its_number_leaves_no_temp_file_and_resumes(
    dataset, tmp_path, signum, code
):
    """Ctrl-C, SIGTERM (a scheduler's stop) and SIGHUP (a closed terminal), sent to the whole
    process group as a terminal sends them, while one shard is complete and others are
    half-written: exit 130 / 143 / 129 within seconds, one line naming the signal, the
    complete shard stays, no temp file is left, and --resume finishes byte-identical."""
    src, reference = dataset
    dst = tmp_path / "out"
    first = min(n for n in reference[".tgz"] if n.endswith(".tgz"))
    run = start_held(src, dst, first)
    os.killpg(run.pid, signum)
    _, err = run.communicate(timeout=120)
    assert run.returncode == code, err
    (line,) = err.splitlines()
    assert line.startswith(
        f"ishard: error: interrupted ({signal.Signals(signum).name}) — "
        "complete shards were kept and no partial one was left; run again "
        "with --resume"
    ), err
    assert not [p for p in dst.rglob("*ishard-tmp*")]
    assert visible(dst) == {first: reference[".tgz"][first]}  # the complete shard stays
    resumed = invoke_ishard("shard", src, dst, *COMMON, "--ext", ".tgz", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    shards = len([n for n in reference[".tgz"] if n.endswith(".tgz")])
    assert f"kept 1 shard from the earlier run (checked), wrote {shards - 1}; " in resumed.stdout
    assert snapshot_but_lock(dst) == reference[".tgz"]


def interrupted_run(src: Path, dst: Path, *args: str) -> None:
    """A run stopped by a failure after some shards: the last planned file is removed once
    planning is done, so the last shard fails and the rest stay complete."""
    last = max(n for n in TREE if n.startswith("d2/"))
    done = run_losing(src / last, "shard", src, dst, *COMMON, "--jobs", "1", *args)
    assert done.returncode == 1 and "cannot read" in done.stderr, done.stderr


def test_a_damaged_complete_shard_is_written_again(dataset, tmp_path):
    src, reference = dataset
    dst = tmp_path / "out"
    interrupted_run(src, dst)
    kept = sorted(dst.glob("shard-*.tar"))
    assert len(kept) >= 5
    flipped = bytearray(kept[1].read_bytes())
    flipped[700] ^= 0xFF  # same size, other bytes: only the md5 shows it
    kept[1].write_bytes(bytes(flipped))
    os.truncate(kept[3], 1000)
    resumed = invoke_ishard("shard", src, dst, *COMMON, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot_but_lock(dst) == reference[".tar"]


def test_resume_refuses_when_the_source_changed(tmp_path):
    copy = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    interrupted_run(copy, dst)
    before = snapshot_but_lock(dst)
    (copy / "d0/0000.jpg").write_bytes(b"changed")
    (copy / "d1/0001.cls").unlink()
    make_tree(copy, {"d9/a.jpg": 10, "d9/b.jpg": 20})
    before_bytes = sum(TREE.values())
    after_bytes = sum(p.stat().st_size for p in copy.rglob("*") if p.is_file())
    resumed = invoke_ishard("shard", copy, dst, *COMMON, "--resume")
    assert resumed.returncode == 1
    assert resumed.stderr.splitlines() == [
        (
            f"ishard: error: cannot resume into {str(dst)!r}: the plan differs from the interrupted "
            f"run's: source: {len(TREE)} → {len(TREE) + 1} files, {format_size(before_bytes)} → "
            f"{format_size(after_bytes)} (new 2: d9/a.jpg, d9/b.jpg; gone 1: d1/0001.cls; "
            "changed 1: d0/0000.jpg) — the shards written so far hold the earlier files: use "
            "--overwrite to start over"
        )
    ]
    assert snapshot_but_lock(dst) == before  # nothing touched


def test_resume_names_the_changed_files_of_a_big_source_by_range(tmp_path):
    """Past SEGMENTS files run.json keeps runs of names, not every name: the refusal names the
    run of the listing that changed."""
    names = [f"x/{i:05d}.bin" for i in range(600)]
    src = make_tree(tmp_path / "src", dict.fromkeys(names, 1))
    dst = tmp_path / "out"
    # 6 shards: the run publishes 5 before the last fails (a run that published nothing
    # leaves nothing to resume: its records go)
    common = ("--shard-size", "100B", "--no-progress", "--jobs", "1")
    done = run_losing(src / names[-1], "shard", src, dst, *common)
    assert done.returncode == 1 and "cannot read" in done.stderr, done.stderr
    make_tree(src, {"x/00301a.bin": 1})  # sorts between x/00301.bin and x/00302.bin
    resumed = invoke_ishard("shard", src, dst, *common, "--resume")
    assert resumed.returncode == 1
    (line,) = resumed.stderr.splitlines()
    assert (
        "the plan differs from the interrupted run's: source: 600 → 601 files, 600B → 601B "
        "(differences in 3 → 4 files from x/00300.bin to x/00302.bin)" in line
    ), line


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        (("--shard-size", "65KB"), "--shard-size 64KB → 65KB"),
        (("--ext", ".tgz"), "--ext .tar → .tgz"),
        (("--sort", "alpha:dec"), "--sort unset → alpha:dec"),
        (("--checksum", "none"), "--checksum xxh128 → none"),
    ],
)
def test_resume_refuses_when_an_output_option_changed(change, phrase, dataset, tmp_path):
    src, _ = dataset
    dst = tmp_path / "out"
    interrupted_run(src, dst)
    resumed = invoke_ishard("shard", src, dst, *COMMON, "--resume", *change)
    assert resumed.returncode == 1
    assert resumed.stderr.splitlines() == [
        (
            f"ishard: error: cannot resume into {str(dst)!r}: the plan differs from the interrupted "
            f"run's: {phrase} — rerun with the earlier options, or use --overwrite to start over"
        )
    ]


def test_resume_may_change_how_the_run_goes(dataset, tmp_path):
    src, reference = dataset
    dst = tmp_path / "out"
    interrupted_run(src, dst)
    resumed = invoke_ishard("shard", src, dst, *COMMON, "--resume", *HOW_IT_RUNS)
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot_but_lock(dst) == reference[".tar"]


def test_a_finished_run_resumes_to_nothing_and_a_missing_shard_is_rewritten(dataset, tmp_path):
    src, reference = dataset
    dst = tmp_path / "out"
    assert invoke_ishard("shard", src, dst, *COMMON).returncode == 0
    again = invoke_ishard("shard", src, dst, *COMMON, "--resume")
    assert again.returncode == 0, again.stderr
    shards = len([n for n in reference[".tar"] if n.endswith(".tar")])
    assert again.stdout.startswith(
        f"kept {shards} shards from the earlier run (checked), wrote 0; {shards} shards: "
    )
    changed = invoke_ishard("shard", src, dst, *COMMON, "--resume", "--shard-size", "65KB")
    assert changed.returncode == 1
    assert changed.stderr.splitlines() == [
        (
            f"ishard: error: cannot resume into {str(dst)!r}: the plan differs from the finished "
            "run's: --shard-size 64KB → 65KB — rerun with the earlier options, or use --overwrite "
            "to start over"
        )
    ]
    (dst / "shard-000004.tar").unlink()
    again = invoke_ishard("shard", src, dst, *COMMON, "--resume", "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["kept_shards"], summary["written_shards"]) == (shards - 1, 1)
    assert snapshot_but_lock(dst) == reference[".tar"]


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (
            "finished",
            (),
            (
                "holds an unfinished or finished ishard run — add --resume to finish "
                "it, or --overwrite to start over"
            ),
        ),
        (
            "interrupted",
            (),
            (
                "holds an unfinished or finished ishard run — add --resume to "
                "finish it, or --overwrite to start over"
            ),
        ),
        (
            "foreign",
            ("--resume",),
            (
                "is not empty and holds no ishard run to resume — use an "
                "empty destination, or --overwrite"
            ),
        ),
    ],
)
def test_destinations_that_need_a_decision_exit_2(setup, args, message, dataset, tmp_path):
    src, _ = dataset
    dst = tmp_path / "out"
    if setup == "finished":
        assert invoke_ishard("shard", src, dst, *COMMON).returncode == 0
    elif setup == "interrupted":
        interrupted_run(src, dst)
    else:
        make_tree(dst, {"notes.txt": b"mine"})
    before = snapshot_but_lock(dst)
    result = invoke_ishard("shard", src, dst, *COMMON, *args)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"ishard: error: destination {str(dst)!r} {message}"]
    assert snapshot_but_lock(dst) == before


def test_a_second_run_into_the_same_destination_refuses(dataset, tmp_path):
    """While a live run holds the lock (taken here as ishard takes it), another run refuses
    and changes nothing; once the holder is gone, the same command works."""
    src, reference = dataset
    dst = tmp_path / "out"
    lock = dst / ".ishard-run" / "lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    os.write(
        fd,
        json.dumps(
            {"pid": 4242, "host": "trainer-7", "started": "2026-11-22 10:00:00 UTC"}
        ).encode(),
    )
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = invoke_ishard("shard", src, dst, *COMMON, "--resume")
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            (
                f"ishard: error: another ishard run is writing into {str(dst)!r} (pid 4242 on "
                "trainer-7, started 2026-11-22 10:00:00 UTC) — wait for it to finish or stop it, "
                "then add --resume to finish its work; a run that was killed holds no lock"
            )
        ]
        assert sorted(p.name for p in dst.iterdir()) == [".ishard-run"]
    finally:
        os.close(fd)  # the holder "dies": the kernel drops its lock; the file stays
    result = invoke_ishard("shard", src, dst, *COMMON, "--resume")
    assert result.returncode == 0, result.stderr
    assert snapshot_but_lock(dst) == reference[".tar"]


def test_a_held_local_lock_s_record_is_shown_escaped(dataset, tmp_path):
    """The local lock file's record is only shown (flock decides): a planted host that
    would clear the terminal, and a record that is no JSON object, are no crash and reach
    the terminal escaped."""
    src, _ = dataset
    dst = tmp_path / "out"
    lock = dst / ".ishard-run" / "lock"
    lock.parent.mkdir(parents=True)
    for record, shown in (
        (rb'{"pid": 7, "host": "\u001b[2J"}', " (pid 7 on '\\x1b[2J')"),
        (b'["not", "a", "record"]', ""),
    ):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        os.write(fd, record)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            result = invoke_ishard("shard", src, dst, *COMMON, "--resume")
        finally:
            os.close(fd)
        assert result.returncode == 1 and "\x1b" not in result.stderr
        assert result.stderr.splitlines() == [
            (
                f"ishard: error: another ishard run is writing into {str(dst)!r}{shown} — wait "
                "for it to finish or stop it, then add --resume to finish its work; a run that "
                "was killed holds no lock"
            )
        ]


def test_a_failed_plan_leaves_no_destination_behind(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10})
    result = invoke_ishard("shard", src, tmp_path / "out", "--prefix", "zzz")
    assert result.returncode == 1 and "nothing to shard" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_writer_process_killed_outright_fails_with_resume_advice(dataset, tmp_path):
    """A forked shard writer killed by someone else (the OOM killer, kill -9 of one process):
    the run stops with one line that says complete shards were kept and --resume finishes,
    and --resume does finish, byte-identical to the uninterrupted run."""
    src, reference = dataset
    dst = tmp_path / "out"
    first = min(n for n in reference[".tgz"] if n.endswith(".tgz"))
    run = start_held(src, dst, first)
    writers = Path(f"/proc/{run.pid}/task/{run.pid}/children").read_text().split()
    assert writers, "no forked writer process to kill"
    os.kill(int(writers[0]), signal.SIGKILL)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 1, err
    (line,) = err.splitlines()
    assert line.startswith("ishard: error: a shard writer process died unexpectedly"), line
    assert "run again with --resume" in line and "--overwrite" not in line, line
    resumed = invoke_ishard("shard", src, dst, *COMMON, "--ext", ".tgz", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot_but_lock(dst) == reference[".tgz"]
    verified = invoke_ishard("verify", dst)
    assert verified.returncode == 0, verified.stdout + verified.stderr
