"""Failures while a run writes that used to end in a traceback or the wrong words: a store
that refuses a write with a 4xx answer (told as its refusal of that object, not as a network
failure), and the Dask scheduler killed mid-run (one line, nothing half-written, --resume
finishes). SeaweedFS and Dask processes on 127.0.0.1 only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import distributed
from helpers import WAIT, assert_error, make_tree, poll, run_ishard, s3_env, start_dask_worker
from s3server import S3Proxy

TREE = {"a/1.jpg": b"1" * 600, "a/1.cls": b"7", "b/2.jpg": b"2" * 500, "b/2.cls": b"8"}


# ---------------------------------------------------------------- a store's 4xx answer


def test_a_shard_name_the_store_refuses_is_its_refusal_not_an_unreachable_store(
    s3_server, s3_bucket, tmp_path
):
    """Finding: SeaweedFS answers 400 to a key with a part over 255 bytes (S3 allows 1,024
    for the whole key, which planning checks); the run said "cannot reach … check the endpoint
    and the network". Now it names the refused object (shortened), the store's answer and a
    fix that fits, exit 1, and nothing is left under a shard's name."""
    src = make_tree(tmp_path / "src", TREE)
    template = "x" * 1000 + "-%06d"
    result = run_ishard(
        "shard", src, f"s3://{s3_bucket}/out", "--shard-template", template, "--no-progress",
        "--retries", "0", "--endpoint-url", s3_server.endpoint_url, env=s3_env(s3_server),
    )  # fmt: skip
    line = assert_error(result, 1, "refused", "400", "xxxx")
    assert "cannot reach" not in line and "network" not in line, line
    assert "x" * 1000 not in line, line  # the key shortened
    assert "length" in line, line
    listed = s3_server.client().list_objects_v2(Bucket=s3_bucket).get("Contents", [])
    assert not [o["Key"] for o in listed if "xxxx" in o["Key"]]


def test_a_read_the_store_refuses_is_its_refusal_of_a_read_of_the_dataset(
    s3_server, s3_bucket, tmp_path
):
    """The same 4xx answer to a read command's request (every GET of the manifest answered
    400, as a store answers a request it does not take): a refused read of the dataset, not
    "cannot reach" nor a write."""
    src = make_tree(tmp_path / "src", TREE)
    env = s3_env(s3_server)
    dst = f"s3://{s3_bucket}/ds"
    ran = run_ishard("shard", src, dst, "--no-progress", "--endpoint-url",
                     s3_server.endpoint_url, env=env)  # fmt: skip
    assert ran.returncode == 0, ran.stderr

    def refuse(request):
        if request.method == "GET" and request.key.endswith("manifest.json"):
            body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidRequest'
                    b"</Code><Message>Not taken here.</Message></Error>")  # fmt: skip
            return 400, [("Content-Type", "application/xml")], body
        return None

    proxy = S3Proxy(s3_server.endpoint_url, refuse)
    try:
        result = run_ishard("verify", dst, "--endpoint-url", proxy.endpoint_url, env=env)
    finally:
        proxy.close()
    line = assert_error(result, 1, "the store refused a read of dataset", "400",
                        "InvalidRequest: Not taken here.")  # fmt: skip
    assert "cannot reach" not in line and "write" not in line, line


# ---------------------------------------------------------------- the Dask scheduler lost

# 6 samples of ~60 KB: with 120KB shards 3 shards (.tar: same bytes from any writer)
DASK_TREE = {f"d/{i:03d}.jpg": 60_000 + 97 * i for i in range(6)}
DASK_ARGS = ("--shard-size", "120KB", "--no-progress", "--executor", "dask")


def start_scheduler(start, folder: Path) -> tuple[subprocess.Popen, str]:
    """A `dask scheduler` process on 127.0.0.1 (a port of its choosing) and its address."""
    folder.mkdir(exist_ok=True)
    record = folder / "scheduler.json"
    proc = start(
        "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
        "--no-dashboard", "--scheduler-file", str(record),
    )  # fmt: skip
    poll("the scheduler's address", lambda: record.exists() and record.stat().st_size)
    return proc, json.loads(record.read_text())["address"]


def temps(dst: Path) -> list[Path]:
    return [p for p in dst.rglob("*") if p.name.endswith(".ishard-tmp")]


def test_the_dask_scheduler_killed_mid_run_is_one_line_and_resume_finishes(processes, tmp_path):
    """Finding: the scheduler killed (SIGKILL) while shards were written ended the run with
    distributed's traceback and `unexpected FuturesCancelledError`. Now: one line naming the
    scheduler and --resume, exit 1, no traceback; nothing under a final name but the complete
    shard; a --resume on a new scheduler finishes byte-identical to a local run. The kill comes
    once the first shard is complete and the second is held mid-write on the worker."""
    src = make_tree(tmp_path / "src", DASK_TREE)
    ref = run_ishard("shard", src, tmp_path / "ref", "--shard-size", "120KB", "--no-progress")
    assert ref.returncode == 0, ref.stderr
    expected = snapshot_shards(tmp_path / "ref")
    names = sorted(n for n in expected if n.endswith(".tar"))
    assert len(names) == 3
    scheduler, address = start_scheduler(processes, tmp_path)
    held = start_dask_worker(processes, address, held=True, first=names[0])
    with distributed.Client(address, timeout=WAIT) as client:
        client.wait_for_workers(1, timeout=WAIT)
    dst = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "ishard", "shard", src, dst, *DASK_ARGS, "--scheduler", address],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        poll("the first shard and a held one", lambda: (dst / names[0]).exists() and temps(dst))
        scheduler.kill()
        out, err = run.communicate(timeout=WAIT)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    line = assert_error(subprocess.CompletedProcess([], run.returncode, out, err), 1)
    assert line.startswith(f"ishard: error: lost the Dask scheduler at {address} "), line
    assert "--resume" in line, line
    assert "unexpected" not in line, line
    assert not (dst / "manifest.json").exists()
    assert set(snapshot_shards(dst)) == {names[0]}, snapshot_shards(dst)
    held.kill()  # it would hold the resumed run's shards too (and its temp file is left)
    held.wait(timeout=WAIT)
    _, address = start_scheduler(processes, tmp_path / "again")
    start_dask_worker(processes, address, held=False)
    resumed = run_ishard("shard", src, dst, *DASK_ARGS, "--scheduler", address, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert snapshot_shards(dst) == expected
    assert not temps(dst) and not (dst / ".ishard-run").exists()


def snapshot_shards(dst: Path) -> dict[str, bytes]:
    """The files of ``dst`` but hidden ones (the run's records), with their bytes."""
    return {p.name: p.read_bytes() for p in sorted(dst.iterdir()) if not p.name.startswith(".")}
