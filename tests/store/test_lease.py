"""The destination lease on an object store, and S3 requests under faults, through the CLI
against the real SeaweedFS server (``s3server.py``), some of them through a loopback proxy that
holds, delays or refuses chosen requests.

A paused run whose lease ran out must not publish anything once another run took over; two
runs starting together while the lock PUT is slow: exactly one proceeds; throttled (503) store
requests are retried by ishard itself; ``--resume`` rewrites a kept S3 shard whose bytes were
replaced; the "another run is writing" line names only what the lock record holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import (
    LOCK,
    assert_error,
    blob,
    finish,
    listing,
    make_tree,
    objects,
    poll,
    put,
    run_ishard,
    start_ishard,
    uploads,
    without_note,
)
from s3server import S3Proxy, slow_down

WAIT = 60.0  # generous bound for anything awaited (never reached when things work)
SMALL_SHARDS = ("--shard-size", "25KB", "--no-progress")  # a few 10 kB files: a few shards


def ishard_at(endpoint: str, env: dict, *args, **extra_env):
    """``ishard ARGS --endpoint-url ENDPOINT`` run to its end."""
    return run_ishard(*args, "--endpoint-url", endpoint, env={**env, **extra_env})


def verify(s3_server, env: dict, *dsts: str) -> None:
    """``ishard verify DST`` passes for each of ``dsts`` (checked side by side)."""
    runs = [start_ishard(s3_server.endpoint_url, env, "verify", dst) for dst in dsts]
    for dst, result in zip(dsts, map(finish, runs)):
        assert result.returncode == 0, (dst, result.stdout, result.stderr)


def read_lock(client, bucket: str, prefix: str) -> dict | None:
    try:
        return json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}/{LOCK}")["Body"].read())
    except client.exceptions.NoSuchKey:
        return None


def shards_of(client, bucket: str, prefix: str) -> dict[str, bytes]:
    return {
        k.removeprefix(prefix + "/"): v for k, v in objects(client, bucket, prefix + "/").items()
    }


# ---------------------------------------------------------------- a paused run


def holding_third_shard(s3_server):
    """A proxy to the server that holds the first GET of ``ds/004.bin`` (2 files a shard: the
    third shard's first) until ``release`` is set; ``held`` is set when it is held."""
    held, release = threading.Event(), threading.Event()

    def hold(request):
        if request.method == "GET" and request.key == "ds/004.bin" and not held.is_set():
            held.set()
            release.wait(WAIT)

    return S3Proxy(s3_server.endpoint_url, hold), held, release


def take_over_when_expired(s3_server, s3env, client, bucket: str, src, dst: str, *common: str):
    """Once run A's lease on ``out`` has run out, as the lock object itself says (a renewal in
    flight may extend it), run B takes the destination with --overwrite and finishes."""
    poll(
        "run A's lease to run out",
        lambda: (read_lock(client, bucket, "out") or {}).get("expires", 0) < time.time() - 0.5,
        bound=30,
    )
    b = ishard_at(
        s3_server.endpoint_url,
        s3env,
        "shard",
        src,
        dst,
        *common,
        "--overwrite",
        "--sort",
        "alpha:dec",
    )
    assert b.returncode == 0, (b.stdout, b.stderr)


def test_a_paused_run_whose_lease_ran_out_publishes_nothing_after_another_run_took_over(
    s3_server, s3env, client, s3_bucket, tmp_path
):
    """Run A (2 s lease) is frozen while it waits for a source object of its third shard; once
    its lease has run out, run B takes the destination with --overwrite (other member order,
    so every shard differs from A's) and finishes. Thawed, A must stop with one clear line and
    publish nothing: the destination is exactly B's output, and verify passes."""
    files = {f"ds/{i:03d}.bin": blob(f"p{i}", 30_000) for i in range(12)}
    put(client, s3_bucket, files)
    proxy, held, release = holding_third_shard(s3_server)
    src, dst = f"s3://{s3_bucket}/ds", f"s3://{s3_bucket}/out"
    common = ("--shard-size", "50KB", "--jobs", "1", "--no-progress")
    a = start_ishard(
        proxy.endpoint_url, s3env, "shard", src, dst, *common, ISHARD_LEASE_SECONDS="2"
    )
    try:
        poll("run A to read its third shard", lambda: held.is_set() or a.poll() is not None)
        assert a.poll() is None, finish(a)
        a.send_signal(signal.SIGSTOP)
        assert {"shard-000000.tar", "shard-000001.tar"} <= set(shards_of(client, s3_bucket, "out"))
        take_over_when_expired(s3_server, s3env, client, s3_bucket, src, dst, *common)
    finally:
        release.set()
        a.send_signal(signal.SIGCONT)
        a_result = finish(a)
        proxy.close()
    line = assert_error(
        a_result,
        1,
        f"another ishard run took over {dst!r}",
        "published nothing more",
        f"ishard verify {dst}",
    )
    assert "None" not in line

    ref = start_ishard(
        s3_server.endpoint_url,
        s3env,
        "shard",
        src,
        f"s3://{s3_bucket}/ref",
        *common,
        "--sort",
        "alpha:dec",
    )
    verify(s3_server, s3env, dst)
    assert finish(ref).returncode == 0
    out, expected = shards_of(client, s3_bucket, "out"), shards_of(client, s3_bucket, "ref")
    assert (
        out.keys() == expected.keys() and len(out) == 8
    )  # six shards, the sample index and the manifest
    manifest, expected_manifest = (json.loads(x.pop("manifest.json")) for x in (out, expected))
    assert manifest["shardlist"] == expected_manifest["shardlist"]
    assert out == expected  # nothing of A's: its two shards were replaced, no third appeared
    assert uploads(client, s3_bucket) == []


def test_a_shard_published_after_the_lease_was_taken_over_is_reported_as_possibly_inconsistent(
    s3_server, s3env, client, s3_bucket, tmp_path
):
    """Run A's second shard PUT (after its lease check) and its lease renewals are held in the
    network; its lease runs out, run B takes over with --overwrite and finishes; then the held
    requests go through and A's shard lands over B's. A cannot undo that: it must say the
    destination may be inconsistent and to run verify, which then finds the shard."""
    src = make_tree(tmp_path / "src", {f"{i:03d}.bin": blob(f"l{i}", 30_000) for i in range(8)})
    caught, release = threading.Event(), threading.Event()

    def hold_second_shard(request):
        if request.method == "PUT" and request.key == "out/shard-000001.tar":
            caught.set()
        if (
            caught.is_set()
            and request.method == "PUT"
            and request.key in ("out/shard-000001.tar", f"out/{LOCK}")
        ):
            release.wait(WAIT)

    proxy = S3Proxy(s3_server.endpoint_url, hold_second_shard)
    dst = f"s3://{s3_bucket}/out"
    common = ("--shard-size", "50KB", "--jobs", "1", "--no-progress")
    a = start_ishard(
        proxy.endpoint_url, s3env, "shard", src, dst, *common, ISHARD_LEASE_SECONDS="2"
    )
    try:
        poll("run A to commit its second shard", lambda: caught.is_set() or a.poll() is not None)
        assert a.poll() is None, finish(a)
        take_over_when_expired(s3_server, s3env, client, s3_bucket, src, dst, *common)
    finally:
        release.set()
        a_result = finish(a)
        proxy.close()
    assert_error(
        a_result,
        1,
        f"shard-000001.tar was published in {dst!r} after this run's lease",
        "may be inconsistent",
        f"ishard verify {dst}",
    )
    check = ishard_at(s3_server.endpoint_url, s3env, "verify", dst)
    assert check.returncode == 1 and "shard-000001.tar" in check.stdout + check.stderr


# ---------------------------------------------------------------- a slow lock PUT


def test_two_runs_starting_together_while_the_lock_put_is_slow_exactly_one_proceeds(
    s3_server, s3env, client, s3_bucket, tmp_path
):
    """Both runs find no lock. The first lock PUT is held until the other run has read the
    lock too (so both decided to take it), then goes through; every later lock PUT takes 1 s
    (more than the 0.5 s a run used to wait before re-reading its lock). The store decides:
    one run proceeds, the other is refused with the usual line. Three such trials, side by
    side (each pair through its own proxy, into its own prefix)."""
    src = make_tree(tmp_path / "src", {f"{i}.jpg": blob(f"s{i}", 10_000) for i in range(6)})

    class SlowLockPut:
        def __init__(self, prefix: str) -> None:
            self.lock_key = f"{prefix}/{LOCK}"
            self.reads, self.mutex, self.first = threading.Semaphore(0), threading.Lock(), True

        def __call__(self, request):
            if request.key != self.lock_key or request.method != "PUT":
                return
            with self.mutex:
                first, self.first = self.first, False
            if first:  # until both runs have read the lock (their first request for it)
                for _ in range(2):
                    self.reads.acquire(timeout=WAIT)
            else:
                time.sleep(1.0)
            return

        def after(self, request, status) -> None:
            if request.key == self.lock_key and request.method == "GET":
                self.reads.release()

    prefixes = [f"out{trial}" for trial in range(3)]
    rules = [SlowLockPut(prefix) for prefix in prefixes]
    proxies = [S3Proxy(s3_server.endpoint_url, rule, rule.after) for rule in rules]
    try:
        runs = [
            [
                start_ishard(
                    proxy.endpoint_url,
                    s3env,
                    "shard",
                    src,
                    f"s3://{s3_bucket}/{prefix}",
                    *SMALL_SHARDS,
                )
                for _ in range(2)
            ]
            for proxy, prefix in zip(proxies, prefixes)
        ]
        trials = [[finish(run) for run in pair] for pair in runs]
    finally:
        for proxy in proxies:
            proxy.close()
    for prefix, results in zip(prefixes, trials):
        codes = sorted(r.returncode for r in results)
        assert codes == [0, 1], [(r.returncode, r.stderr) for r in results]
        loser = next(r for r in results if r.returncode == 1)
        assert_error(
            loser,
            1,
            f"another ishard run is writing into 's3://{s3_bucket}/{prefix}'",
            "it started at the same moment as this one",
        )
        keys = {o["Key"] for o in listing(client, s3_bucket, prefix + "/")}
        assert f"{prefix}/manifest.json" in keys  # the winner finished, its lock is gone
        assert not any("/.ishard-run/" in k for k in keys), keys


# ---------------------------------------------------------------- throttling


class Throttle:
    """Answers every 3rd request (counting from ``phase``) with ``503 ServiceUnavailable`` (a
    503 neither s3fs nor, with NO_LOWER_RETRIES, botocore retries: only ishard does); counts
    those by method."""

    def __init__(self, phase: int = 0) -> None:
        self.lock = threading.Lock()
        self.count = phase
        self.refused: dict[str, int] = {}

    def __call__(self, request):
        with self.lock:
            self.count += 1
            if self.count % 3:
                return None
            self.refused[request.method] = self.refused.get(request.method, 0) + 1
        return slow_down(request, "ServiceUnavailable", "Service is unable to handle request.")


NO_LOWER_RETRIES = ()  # obstore's own retries are always off: ishard's are the only layer


def test_throttled_store_requests_are_retried_by_ishard_local_to_s3_and_back(
    s3_server, s3env, client, s3_bucket, tmp_path
):
    """Every store request a run makes (destination check, lock and its probes, run records,
    existence checks, uploads, manifest, removing the records, listing pages, reads) survives
    a 503 for every third request, in each of the three phases (so each request of the run is
    refused in one of them): each refusal is one retry of ishard's own (--json counts them).
    The runs (three local -> S3, one S3 -> local) go side by side, each through its own proxy."""
    files = {f"d{i % 3}/{i:03d}.jpg": blob(f"t{i}", 12_000 + 500 * i) for i in range(6)}
    src = make_tree(tmp_path / "src", files)
    put(client, s3_bucket, {f"in/{k}": v for k, v in files.items()})
    throttles = [Throttle(phase) for phase in range(4)]
    proxies = [S3Proxy(s3_server.endpoint_url, t) for t in throttles]
    try:
        runs = [
            start_ishard(
                proxies[phase].endpoint_url,
                s3env,
                "shard",
                src,
                f"s3://{s3_bucket}/out{phase}",
                "--shard-size",
                "40KB",
                "--no-progress",
                "--json",
                *NO_LOWER_RETRIES,
            )
            for phase in range(3)
        ]
        runs.append(
            start_ishard(
                proxies[3].endpoint_url,
                s3env,
                "shard",
                f"s3://{s3_bucket}/in",
                tmp_path / "back",
                "--shard-size",
                "40KB",
                "--no-progress",
                *NO_LOWER_RETRIES,
            )
        )
        results = [finish(run) for run in runs]
    finally:
        for proxy in proxies:
            proxy.close()
    for result in results:
        assert result.returncode == 0, (result.args, result.stdout, result.stderr)
        assert without_note(result.stderr) == ""  # not even a notice about the run's records
    methods: set[str] = set()
    for phase in range(3):
        refused = throttles[phase].refused
        assert json.loads(results[phase].stdout)["retries"] == sum(refused.values()), refused
        methods |= refused.keys()
        assert listing(client, s3_bucket, f"out{phase}/.ishard-run") == []
    # reads, writes and deletes (one bulk POST ?delete, or DELETE) were all refused once
    assert {"GET", "PUT"} <= methods and methods & {"POST", "DELETE"}, methods
    assert sum(throttles[3].refused.values()) >= 3  # listing and reads on the way back
    local = subprocess.Popen(
        [sys.executable, "-m", "ishard", "verify", str(tmp_path / "back")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    verify(s3_server, s3env, *(f"s3://{s3_bucket}/out{phase}" for phase in range(3)))
    assert local.wait(WAIT) == 0, local.communicate()[0]
    assert uploads(client, s3_bucket) == []


class RefuseEachAfterManifest:
    """Once the manifest is written, every request (the clean-up: listing and removing the
    run's records, reading and removing the lock) is answered ``503`` the first ``times`` it
    is sent (the same method, path and query), then let through; counts the refusals."""

    def __init__(self, manifest_key: str, times: int) -> None:
        self.manifest_key, self.times = manifest_key, times
        self.published = threading.Event()
        self.lock = threading.Lock()
        self.seen: dict[tuple[str, str], int] = {}

    def __call__(self, request):
        if not self.published.is_set():
            return None
        with self.lock:
            sent = self.seen[request.method, request.path] = (
                self.seen.get((request.method, request.path), 0) + 1
            )
        if sent > self.times:
            return None
        return slow_down(request, "ServiceUnavailable", "Service is unable to handle request.")

    def after(self, request, status) -> None:
        if request.method == "PUT" and request.key == self.manifest_key and status == 200:
            self.published.set()


@pytest.mark.parametrize("retries", [1, 3])
def test_a_throttled_clean_up_is_retried_retries_times_and_leaves_nothing(
    s3_server, s3env, client, s3_bucket, tmp_path, retries
):
    """--retries N is N more tries after the first. Every clean-up request is refused N times:
    the run still removes its records and its lock (no notice), each of those requests was
    sent exactly N + 1 times, --json counts each refusal as a retry, and the next run into
    the destination (--overwrite) is not refused."""
    src = make_tree(tmp_path / "src", {f"{i}.jpg": blob(f"c{i}", 10_000) for i in range(4)})
    rule = RefuseEachAfterManifest("out/manifest.json", retries)
    dst = f"s3://{s3_bucket}/out"
    with S3Proxy(s3_server.endpoint_url, rule, rule.after) as proxy:
        result = ishard_at(
            proxy.endpoint_url,
            s3env,
            "shard",
            src,
            dst,
            *SMALL_SHARDS,
            "--json",
            "--retries",
            str(retries),
        )
    assert result.returncode == 0 and without_note(result.stderr) == "", result.stderr
    assert rule.seen and set(rule.seen.values()) == {retries + 1}, rule.seen
    assert json.loads(result.stdout)["retries"] == retries * len(rule.seen)
    assert listing(client, s3_bucket, "out/.ishard-run") == []
    again = ishard_at(
        s3_server.endpoint_url, s3env, "shard", src, dst, *SMALL_SHARDS, "--overwrite"
    )
    assert again.returncode == 0 and without_note(again.stderr) == "", again.stderr
    verify(s3_server, s3env, dst)


def test_records_that_cannot_be_removed_after_the_manifest_are_a_notice_not_a_failure(
    s3_server, s3env, client, s3_bucket, tmp_path
):
    """Once the manifest is written the dataset is complete: the store refusing every later
    request to remove the run's records is a notice, and the exit code stays 0. The lock is
    then removed on its own, and that request is retried too (refused twice, with
    --retries 2): no lock is left to refuse the next run."""
    src = make_tree(tmp_path / "src", {f"{i}.jpg": blob(f"n{i}", 10_000) for i in range(4)})
    published = threading.Event()
    lock_deletes = []

    def refuse_cleanup(request):  # the records go in one bulk delete: POST /BUCKET?delete
        if not (published.is_set() and request.method == "POST" and request.query == "delete"):
            return None
        if b"run.json" not in request.body:  # the lock alone
            lock_deletes.append(request.body)
            if len(lock_deletes) > 2:
                return None
        return slow_down(request, "ServiceUnavailable", "Service is unable to handle request.")

    def after(request, status):
        if request.method == "PUT" and request.key == "out/manifest.json" and status == 200:
            published.set()

    dst = f"s3://{s3_bucket}/out"
    with S3Proxy(s3_server.endpoint_url, refuse_cleanup, after) as proxy:
        result = ishard_at(
            proxy.endpoint_url,
            s3env,
            "shard",
            src,
            dst,
            *SMALL_SHARDS,
            "--retries",
            "2",
            *NO_LOWER_RETRIES,
        )
    assert result.returncode == 0, result.stderr
    notice = (
        f"ishard: the dataset is complete, but this run's records in {dst!r} could not "
        f"be removed (cannot reach destination {dst!r} at {proxy.endpoint_url}: 503 "
        "Service Unavailable — check "
        "the endpoint and the network, then run again); they do no harm"
    )
    assert without_note(result.stderr).splitlines() == [notice]
    assert len(lock_deletes) == 3 and read_lock(client, s3_bucket, "out") is None
    assert listing(client, s3_bucket, "out/.ishard-run")  # the records the store kept
    verify(s3_server, s3env, dst)


# ---------------------------------------------------------------- resume checks what it keeps


def test_resume_rewrites_a_kept_s3_shard_replaced_by_same_size_garbage(
    s3_server, s3env, client, s3_bucket, tmp_path
):
    """A run killed after two shards; one of them is then overwritten with other bytes of the
    same size. --resume must not keep it (its ETag is not the one recorded), and the result
    passes verify and equals an uninterrupted run."""
    files = {f"ds/{i:03d}.bin": blob(f"r{i}", 30_000) for i in range(8)}
    put(client, s3_bucket, files)
    proxy, held, release = holding_third_shard(s3_server)
    src, dst = f"s3://{s3_bucket}/ds", f"s3://{s3_bucket}/out"
    common = ("--shard-size", "50KB", "--jobs", "1", "--no-progress")
    run = start_ishard(proxy.endpoint_url, s3env, "shard", src, dst, *common)
    try:
        poll("the run to read its third shard", lambda: held.is_set() or run.poll() is not None)
        run.kill()
        run.wait(WAIT)
    finally:
        release.set()
        proxy.close()
    assert run.returncode == -signal.SIGKILL
    done = shards_of(client, s3_bucket, "out")
    assert {"shard-000000.tar", "shard-000001.tar"} <= done.keys()
    assert "manifest.json" not in done
    original = done["shard-000001.tar"]
    client.put_object(
        Bucket=s3_bucket, Key="out/shard-000001.tar", Body=bytes(len(original))
    )  # same size, other bytes

    resumed = ishard_at(s3_server.endpoint_url, s3env, "shard", src, dst, *common, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming: 1 of 4 shards were already complete" in resumed.stdout + resumed.stderr
    fresh = start_ishard(
        s3_server.endpoint_url, s3env, "shard", src, f"s3://{s3_bucket}/fresh", *common
    )
    verify(s3_server, s3env, dst)
    assert finish(fresh).returncode == 0
    out, expected = shards_of(client, s3_bucket, "out"), shards_of(client, s3_bucket, "fresh")
    manifest, expected_manifest = (json.loads(x.pop("manifest.json")) for x in (out, expected))
    assert manifest["shardlist"] == expected_manifest["shardlist"]
    assert out == expected and out["shard-000001.tar"] == original


# ---------------------------------------------------------------- the busy line


def resume_over_lock(s3_server, s3env, client, bucket: str, src, lock: bytes | dict):
    """``ishard shard SRC s3://BUCKET/out --resume`` where the lock object ``lock`` (a record,
    or bytes as they are) was planted."""
    body = lock if isinstance(lock, bytes) else json.dumps(lock)
    client.put_object(Bucket=bucket, Key=f"out/{LOCK}", Body=body)
    dst = f"s3://{bucket}/out"
    return ishard_at(s3_server.endpoint_url, s3env, "shard", src, dst, "--resume", "--no-progress")


@pytest.mark.parametrize("fields, shown", [
    ({}, ""),
    ({"host": "trainer-3", "started": "2026-11-22 09:00:00 UTC"},
     " (on trainer-3, started 2026-11-22 09:00:00 UTC)"),
    ({"pid": 77}, " (pid 77)"),
])  # fmt: skip
def test_a_live_lock_missing_fields_is_described_without_them(
    s3_server, s3env, client, s3_bucket, tmp_path, fields, shown
):
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one"})
    lock = {"id": "x", **fields, "expires": time.time() + 300}
    result = resume_over_lock(s3_server, s3env, client, s3_bucket, src, lock)
    line = assert_error(
        result,
        1,
        f"another ishard run is writing into 's3://{s3_bucket}/out'"
        f"{shown} — wait for it to finish or stop it, then add "
        "--resume to finish its work; if it was killed",
    )
    assert "None" not in line
    assert sorted(objects(client, s3_bucket)) == [f"out/{LOCK}"]


@pytest.mark.parametrize("value", ["soon", "0.001", "0", "1e9", "nan"])
def test_a_lease_length_outside_its_range_is_a_usage_error(
    s3_server, s3env, client, s3_bucket, tmp_path, value
):
    """A lease of a millisecond means nothing (and renews hundreds of times a second); one of
    years keeps a killed run's destination locked: both are refused like a word."""
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one"})
    result = ishard_at(
        s3_server.endpoint_url,
        s3env,
        "shard",
        src,
        f"s3://{s3_bucket}/out",
        "--no-progress",
        ISHARD_LEASE_SECONDS=value,
    )
    assert_error(
        result,
        2,
        f"ISHARD_LEASE_SECONDS={value!r} is not a number of seconds from 2 "
        "to 3600 — unset it (the default is 60) or write e.g. 60",
    )
    assert listing(client, s3_bucket) == []


YEAR_5000 = 95_617_584_000  # 5000-01-01 UTC, in seconds since 1970


@pytest.mark.parametrize("body, problem", [
    (b'{"id": "x", "host": "trainer-3", "expires": "soon"}',
     "its expiry time is 'soon', not a number of seconds"),
    (b'{"id": "x", "pid": 1e40, "expires": 1}', "its pid is 1e+40, not a process id"),
    (b"\x00not json", "it names no run id"),
    (b'["x", 1]', "it names no run id"),
    (b'{"id": "x", "expires": 1, "host": ["\\u001b[2J"]}',
     "its host is [\'\\x1b[2J\'], not text"),
])  # fmt: skip
def test_a_malformed_lock_is_reported_with_how_to_clear_it(
    s3_server, s3env, client, s3_bucket, tmp_path, body, problem
):
    """A lock object no run of ishard wrote is neither taken over nor a crash: one line names
    the object and what is wrong with it, and says to delete it; deleting it is enough."""
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one"})
    result = resume_over_lock(s3_server, s3env, client, s3_bucket, src, body)
    dst, lock = f"s3://{s3_bucket}/out", f"s3://{s3_bucket}/out/{LOCK}"
    line = assert_error(
        result,
        1,
        f"the lock object {lock!r} is not one ishard writes "
        f"({problem}) — if no ishard run is writing into {dst!r}, "
        f"delete the lock object {lock!r}",
    )
    assert "\x1b" not in result.stderr and "Traceback" not in line
    assert objects(client, s3_bucket) == {f"out/{LOCK}": body}  # untouched
    client.delete_object(Bucket=s3_bucket, Key=f"out/{LOCK}")
    again = ishard_at(s3_server.endpoint_url, s3env, "shard", src, dst, "--resume", "--no-progress")
    assert again.returncode == 0, again.stderr


def test_a_live_lock_s_fields_reach_the_terminal_escaped(
    s3_server, s3env, client, s3_bucket, tmp_path
):
    """A planted host ``ESC[2J`` (clear the screen) and a start time with a newline are shown
    as escapes, not sent to the terminal; the line stays one line."""
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one"})
    lock = {"id": "x", "host": "\x1b[2J", "started": "today\nishard: done"}
    result = resume_over_lock(
        s3_server, s3env, client, s3_bucket, src, {**lock, "expires": time.time() + 300}
    )
    line = assert_error(
        result,
        1,
        f"another ishard run is writing into 's3://{s3_bucket}/out' "
        "(on '\\x1b[2J', started 'today\\nishard: done') — wait",
    )
    assert "\x1b" not in result.stderr and "its lock runs out in" in line


def test_a_lock_that_runs_out_in_the_year_5000_says_how_to_clear_it(
    s3_server, s3env, client, s3_bucket, tmp_path
):
    """No run of ishard sets a lease longer than an hour: a lock that runs out in the year
    5000 would block DST for ever, so the refusal names the lock object to delete."""
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one"})
    lock = {"id": "x", "host": "trainer-3", "pid": 77, "expires": YEAR_5000}
    result = resume_over_lock(s3_server, s3env, client, s3_bucket, src, lock)
    dst, url = f"s3://{s3_bucket}/out", f"s3://{s3_bucket}/out/{LOCK}"
    assert_error(
        result,
        1,
        f"another ishard run is writing into {dst!r} (pid 77 on trainer-3)",
        "its lock says it runs out in 297",
        " years, later than any lease (at most 3600 "
        f"s): if no ishard run is writing into {dst!r}, delete the lock object {url!r}",
    )
    client.delete_object(Bucket=s3_bucket, Key=f"out/{LOCK}")
    again = ishard_at(s3_server.endpoint_url, s3env, "shard", src, dst, "--resume", "--no-progress")
    assert again.returncode == 0, again.stderr


class RefuseAllFromFirstShard:
    """From the first shard request on (its PUT, or its multipart upload's POST), every
    request is answered 503; ``refused`` is set when the first such answer was sent."""

    def __init__(self) -> None:
        self.on, self.refused = threading.Event(), threading.Event()

    def __call__(self, request):
        if request.method in ("PUT", "POST") and request.key.startswith("out/shard-"):
            self.on.set()
        if not self.on.is_set():
            return None
        return slow_down(request, "ServiceUnavailable", "Service is unable to handle request.")

    def after(self, request, status) -> None:
        if status == 503:
            self.refused.set()


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_signal_ends_a_run_whose_store_refuses_everything_at_once(
    s3_server, s3env, client, s3_bucket, tmp_path, signum, code
):
    """A run whose every store request is being refused (503) and retried with backoff
    (--retries 6: almost 12 s of waiting for each request) stops within 5 s of a stop signal
    with its one line and exit code: once a signal arrived nothing is tried again, and a
    backoff wait ends with the signal. --resume through the store then finishes the run."""
    src = make_tree(tmp_path / "src", {f"{i}.jpg": blob(f"s{i}", 10_000) for i in range(6)})
    rule = RefuseAllFromFirstShard()
    dst = f"s3://{s3_bucket}/out"
    common = (*SMALL_SHARDS, "--retries", "6")
    with S3Proxy(s3_server.endpoint_url, rule, rule.after) as proxy:
        run = start_ishard(proxy.endpoint_url, s3env, "shard", src, dst, *common)
        assert rule.refused.wait(WAIT), "no request was refused"
        run.send_signal(signum)
        sent = time.monotonic()
        try:
            run.wait(timeout=WAIT)
        finally:
            stopped = time.monotonic() - sent
        result = finish(run)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert stopped < 5, f"stopped {stopped:.1f} s after the signal"
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"ishard: error: interrupted ({signal.Signals(signum).name})")
    done = ishard_at(s3_server.endpoint_url, s3env, "shard", src, dst, *common, "--resume")
    assert done.returncode == 0, (done.stdout, done.stderr)
    verify(s3_server, s3env, dst)


def test_an_interrupted_api_run_leaves_the_next_call_its_retries(
    s3_server, client, s3_bucket, tmp_path
):
    """Python API: Ctrl-C while ishard.shard() reads a store that refuses (503) stops it with
    ``Interrupted`` (exit code 130) without retrying; the next call in the same process is no
    stopping run: its throttled listing request is retried, and it plans."""
    import ishard
    from ishard.errors import Interrupted

    put(client, s3_bucket, {f"ds/{i}.jpg": blob(f"a{i}", 10_000) for i in range(6)})
    refused = threading.Event()

    def refuse_reads(request):
        if request.method == "GET" and request.key.startswith("ds/"):
            if not refused.is_set():
                refused.set()
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            return slow_down(request)
        return None

    listed = []

    def refuse_first_listing(request):
        if request.method == "GET" and "list-type=2" in request.query and not listed:
            listed.append(request.path)
            return slow_down(request)
        return None

    store = {"storage_options": ("key=" + s3_server.access_key,
                                 "secret=" + s3_server.secret_key)}  # fmt: skip
    first = S3Proxy(s3_server.endpoint_url, refuse_reads)
    # Ctrl-C as in an interactive session (a test run in the background has it ignored)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(Interrupted) as stopped:
            ishard.shard(
                f"s3://{s3_bucket}/ds",
                tmp_path / "out",
                shard_size="25KB",
                retries=6,
                endpoint_url=first.endpoint_url,
                **store,
            )
    finally:
        signal.signal(signal.SIGINT, handler)
        first.close()
    assert stopped.value.exit_code == 130 and "interrupted (SIGINT)" in str(stopped.value)
    second = S3Proxy(s3_server.endpoint_url, refuse_first_listing)
    try:
        plan = ishard.plan(
            f"s3://{s3_bucket}/ds", shard_size="25KB", endpoint_url=second.endpoint_url, **store
        )
    finally:
        second.close()
    assert listed and plan.file_count == 6
