"""kill -9 on a bucket destination, with ``--overwrite`` restarts and ``--resume``s mixed:
after every kill no torn shard is visible, and the run that follows leaves no temp object, no
open upload, no stale shard, and exactly the objects of a run that was never killed."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

from helpers import (
    DATASET_RECORDS,
    MiB,
    assert_ok,
    blob,
    make_tree,
    objects,
    read_members_checked,
    uploads,
)

FILES = {f"{i:03d}.bin": blob(f"m{i}", MiB // 2 + 4099 * i) for i in range(40)}
COMMON = ("--shard-size", "6MiB", "--part-size", "5MiB", "--no-progress")
TRIALS = 4  # each: a run killed at a random moment, then an --overwrite or a --resume


def _start(src, url: str, env: dict, endpoint: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ishard", "shard", str(src), url, *COMMON, *args,
         "--endpoint-url", endpoint, "--member-names", "original"], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)  # fmt: skip


def _shards(objs: dict[str, bytes], prefix: str) -> dict[str, bytes]:
    """Objects under ``prefix`` that a user sees: no hidden part (the run state is hidden)."""
    return {k[len(prefix):]: v for k, v in objs.items()
            if k.startswith(prefix) and not any(p.startswith(".") for p in k[len(prefix):].split("/"))}  # fmt: skip


def test_kill_9_with_overwrite_and_resume_mixed_leaves_exactly_a_clean_run(
    cli,
    s3_server,
    clean_env,
    client,
    s3_bucket,
    tmp_path,
    fault_trials,
):
    src = make_tree(tmp_path / "src", FILES)
    env = {
        **clean_env,
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
    }
    assert_ok(cli("shard", src, f"s3://{s3_bucket}/ref", *COMMON))
    reference = _shards(objects(client, s3_bucket, "ref/"), "ref/")
    assert len(reference) > 4
    planned = {name: read_members_checked(name, data) for name, data in reference.items()
               if name not in DATASET_RECORDS}  # fmt: skip

    rng = random.Random(20261123)
    started = time.monotonic()
    assert_ok(cli("shard", src, f"s3://{s3_bucket}/timing", *COMMON, "--jobs", "2"))
    whole = time.monotonic() - started
    url, prefix = f"s3://{s3_bucket}/out", "out/"
    killed = 0
    for trial in range(TRIALS):
        # first a fresh run (--overwrite over whatever an earlier trial left), then kills
        # alternate between being followed by --resume and by --overwrite
        first = "--overwrite" if trial else None
        jobs = ("1", "2")[trial % 2]
        run = _start(src, url, env, s3_server.endpoint_url, *filter(None, [first]), "--jobs", jobs)
        time.sleep(rng.uniform(0.05, 0.9) * whole)
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=120)
        killed += run.returncode == -signal.SIGKILL
        left = _shards(objects(client, s3_bucket, prefix), prefix)
        for name, data in left.items():  # whatever is under a final name is whole
            if name in DATASET_RECORDS:
                assert data == reference[name], trial
            else:
                assert read_members_checked(name, data) == planned[name], (trial, name)
        mode = ("--resume", "--overwrite")[trial % 2]
        done = cli("shard", src, url, *COMMON, mode, "--jobs", jobs)
        assert done.returncode == 0 and "error" not in done.stderr, (trial, done.stderr)
        after = objects(client, s3_bucket, prefix)
        identical = _shards(after, prefix) == reference
        clean = uploads(client, s3_bucket) == [] and sorted(after) == sorted(
            prefix + name for name in reference
        )  # no run state, no stray object
        fault_trials("kill -9 (S3, --overwrite/--resume mixed)", 1, identical and clean, len(left))
        assert clean, (trial, sorted(after), uploads(client, s3_bucket))
        assert identical, trial
        verified = cli("verify", url, "--deep")
        assert verified.returncode == 0, (trial, verified.stdout, verified.stderr)
    assert killed >= TRIALS // 2  # the kills land at random moments: most of them mid-run
