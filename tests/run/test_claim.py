"""Claiming a destination: a finished dataset is never written over without --overwrite, however
two runs interleave (the emptiness check is made again under the lock), and a check that can
fail is made before DST is touched, so the corrected command needs no --resume/--overwrite.

Interleavings are made deterministic: locally run B is paused between its check and its lock
(a test wrapper around ``ishard.run.shard.acquire`` that waits for a file; production code has no
hook) while run A finishes, fails, is killed or is paused itself; on S3 a loopback proxy in
front of the SeaweedFS server holds B's lock PUT (until A is where the test wants it) or
delays it by a fixed time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import assert_error, make_tree, objects, run_ishard, snapshot
from s3server import S3Proxy

WAIT = 120.0  # a generous bound for anything awaited (never reached when things work)
LOCK = ".ishard-run/lock"

# ``python -c HOLD POINT REACHED GO ARGS…``: the command line, paused at POINT until the file
# GO exists (REACHED is created on arrival): ``lock`` after the destination check and before
# the lock; ``planned`` with the lock held and the run's records written, before any shard.
HOLD = (
    "import os, sys, time\n"
    "from ishard import cli\n"
    "from ishard.run import shard as run\n"
    "from ishard.progress import Progress\n"
    "point, reached, go = sys.argv[1:4]\n"
    "def hold():\n"
    "    open(reached, 'w').close()\n"
    "    end = time.monotonic() + 120\n"
    "    while not os.path.exists(go) and time.monotonic() < end:\n"
    "        time.sleep(0.01)\n"
    "if point == 'lock':\n"
    "    real = run.acquire\n"
    "    def acquire(*args):\n"
    "        hold()\n"
    "        return real(*args)\n"
    "    run.acquire = acquire\n"
    "else:\n"
    "    class Held(Progress):\n"
    "        def planned(self, shards, nbytes):\n"
    "            hold()\n"
    "    cli.shard.make_progress = lambda *a, **k: Held()\n"
    "cli.main(sys.argv[4:])\n"
)


class Held:
    """A command started paused at ``point`` (see HOLD)."""

    def __init__(self, tmp: Path, tag: str, point: str, *args, env: dict | None = None) -> None:
        self.reached, self.go = tmp / f"{tag}.reached", tmp / f"{tag}.go"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, point, str(self.reached), str(self.go), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**(os.environ if env is None else env), "COLUMNS": "200"},
        )

    def wait_until_held(self) -> None:
        deadline = time.monotonic() + WAIT
        while not self.reached.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(("never reached its pause", self.finish()))
            time.sleep(0.02)

    def release(self) -> None:
        self.go.touch()

    def finish(self) -> subprocess.CompletedProcess:
        self.release()
        out, err = self.proc.communicate(timeout=WAIT)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)


TREE = {f"d{i % 2}/{i:03d}.jpg": 6_000 + 101 * i for i in range(12)}
A_OPTS = ("--shard-size", "20KB", "--no-progress")
B_OPTS = ("--shard-size", "50KB", "--no-progress", "--ext", ".tgz")  # other names, other bytes


def check_verifies(dst, *extra, env: dict | None = None) -> None:
    result = run_ishard("verify", dst, *extra, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- locally


def a_finishes(src, dst, tmp, *opts):
    def run():
        done = run_ishard("shard", src, dst, *A_OPTS, *opts)
        assert done.returncode == 0, done.stderr

    return run


def a_killed(src, dst, tmp):
    """A is killed with its lock held and its records written, before any shard."""

    def run():
        a = Held(tmp, "a", "planned", "shard", src, dst, *A_OPTS)
        a.wait_until_held()
        a.proc.kill()
        a.proc.wait(WAIT)

    return run


LOCAL_FINISHED = {  # what A does while B waits between its check and its lock: finish
    "tar": (),
    "zip": ("--ext", ".zip"),
    "dali-index": ("--index", "dali"),
    "overwrite": ("--overwrite",),
    "by-count": ("--samples-per-shard", "3"),
}


def b_after_a(tmp_path: Path, a_does, *opts: str):
    """B finds DST empty and waits to take its lock while A does ``a_does`` there: the
    source, DST, what DST then holds, and how B ended."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    b = Held(tmp_path, "b", "lock", "shard", src, dst, *B_OPTS)
    b.wait_until_held()
    a_does(src, dst, tmp_path, *opts)()
    return src, dst, snapshot(dst), b.finish()


@pytest.mark.parametrize("how", sorted(LOCAL_FINISHED))
def test_a_dataset_finished_between_the_check_and_the_lock_is_left_alone_locally(how, tmp_path):
    _, dst, before, result = b_after_a(tmp_path, a_finishes, *LOCAL_FINISHED[how])
    assert "manifest.json" in before
    assert_error(
        result,
        1,
        f"another ishard run finished a dataset in {str(dst)!r} after this run found it empty",
        "wrote nothing there",
        "--overwrite",
    )
    assert snapshot(dst) == before  # A's dataset, byte for byte; no run records of B's
    check_verifies(dst, "--deep")


def test_a_run_killed_between_the_check_and_the_lock_is_named_with_resume(tmp_path):
    src, dst, before, result = b_after_a(tmp_path, a_killed)
    assert ".ishard-run/run.json" in before
    assert_error(
        result,
        1,
        f"another ishard run wrote into {str(dst)!r} after this run found it empty",
        "add --resume to finish that run, or --overwrite",
    )
    assert snapshot(dst).keys() == before.keys()
    assert snapshot(dst)[".ishard-run/run.json"] == before[".ishard-run/run.json"]
    resumed = run_ishard("shard", src, dst, *A_OPTS, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    check_verifies(dst, "--deep")


def test_a_run_still_writing_is_named_as_the_holder_not_resume_or_overwrite(tmp_path):
    """A holds DST (paused after writing its records); B, started after A and also while A
    waits between its check and its lock, is told another run is writing — not to add
    --resume or --overwrite — and A then finishes untouched."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    b = Held(tmp_path, "b", "lock", "shard", src, dst, *B_OPTS)
    b.wait_until_held()
    a = Held(tmp_path, "a", "planned", "shard", src, dst, *A_OPTS)
    a.wait_until_held()
    late = run_ishard("shard", src, dst, *B_OPTS)  # a run that starts now
    for result in (b.finish(), late):
        line = assert_error(
            result, 1, f"another ishard run is writing into {str(dst)!r}", f"pid {a.proc.pid}"
        )
        assert "--overwrite" not in line
    done = a.finish()
    assert done.returncode == 0, done.stderr
    assert not (dst / ".ishard-run").exists()
    check_verifies(dst, "--deep")
    reference = run_ishard("shard", src, tmp_path / "ref", *A_OPTS)
    assert reference.returncode == 0
    assert snapshot(dst) == snapshot(tmp_path / "ref")


def test_a_run_that_failed_before_writing_leaves_dst_free_for_the_waiting_run(tmp_path):
    """A fails while planning (its template has too few names) and leaves DST as it was:
    B, waiting between its check and its lock, then writes its dataset."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    b = Held(tmp_path, "b", "lock", "shard", src, dst, *B_OPTS)
    b.wait_until_held()
    a = run_ishard("shard", src, dst, *A_OPTS, "--shard-template", "only-{0..1}")
    assert_error(a, 2, "yields 2 name(s) but the plan needs")
    result = b.finish()
    assert result.returncode == 0, result.stderr
    check_verifies(dst, "--deep")


# ---------------------------------------------------------------- on S3


class LockPut:
    """A proxy rule: B's lock PUT is held until ``go`` is set (``delay`` None), or delayed by
    ``delay`` seconds; ``arrived`` is set once it reached the proxy."""

    def __init__(self, prefix: str, delay: float | None = None) -> None:
        self.key, self.delay = f"{prefix}/{LOCK}", delay
        self.arrived, self.go = threading.Event(), threading.Event()

    def __call__(self, request):
        if request.method == "PUT" and request.key == self.key and not self.arrived.is_set():
            self.arrived.set()
            if self.delay is None:
                self.go.wait(WAIT)
            else:
                time.sleep(self.delay)  # the interleaving under test, not a synchronisation


def wait_for(event: threading.Event, proc: subprocess.Popen | Held) -> None:
    deadline = time.monotonic() + WAIT
    proc = proc.proc if isinstance(proc, Held) else proc
    while not event.wait(0.05):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"


def start(env, endpoint: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ishard", *map(str, args), "--endpoint-url", endpoint],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "COLUMNS": "200"},
    )


def finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=WAIT)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def under(client, bucket: str, prefix: str) -> dict[str, bytes]:
    return {
        k.removeprefix(prefix + "/"): v for k, v in objects(client, bucket, prefix + "/").items()
    }


S3_HELD = ["finished-tar", "finished-zip", "running", "killed"]


@pytest.mark.parametrize("how", S3_HELD)
def test_s3_lock_put_held_while_another_run_finishes_or_holds_dst(
    how, s3_server, s3env, s3_bucket, tmp_path
):
    """B's lock PUT is held at the proxy until A (direct to the server) has finished a
    dataset, is writing (paused with its lease held), or was killed; then it goes through. B
    must write nothing and say why; A's dataset stays as A left it."""
    client = s3_server.client()
    src = make_tree(tmp_path / "src", TREE)
    dst = f"s3://{s3_bucket}/out"
    rule = LockPut("out")
    proxy = S3Proxy(s3_server.endpoint_url, rule)
    a: Held | None = None
    try:
        b = start(s3env, proxy.endpoint_url, "shard", src, dst, *B_OPTS)
        wait_for(rule.arrived, b)  # B found DST empty; its lock PUT waits at the proxy
        extra = ("--endpoint-url", s3_server.endpoint_url)
        if how.startswith("finished"):
            ext = (".zip",) if how.endswith("zip") else (".tar",)
            done = run_ishard("shard", src, dst, *A_OPTS, "--ext", *ext, *extra, env=s3env)
            assert done.returncode == 0, done.stderr
        else:
            a = Held(tmp_path, "a", "planned", "shard", src, dst, *A_OPTS, *extra, env=s3env)
            a.wait_until_held()
            if how == "killed":
                a.proc.kill()
                a.proc.wait(WAIT)
        before = under(client, s3_bucket, "out")
        rule.go.set()
        result = finish(b)
    finally:
        rule.go.set()
        proxy.close()
    if how.startswith("finished"):
        assert_error(
            result,
            1,
            f"another ishard run finished a dataset in {dst!r} after this run found it empty",
            "--overwrite",
        )
        assert under(client, s3_bucket, "out") == before  # no lock or record of B's left
        check_verifies(dst, *extra, env=s3env)
        return
    assert_error(result, 1, f"another ishard run is writing into {dst!r}")
    assert under(client, s3_bucket, "out") == before
    assert a is not None
    if how == "running":
        done = a.finish()
        assert done.returncode == 0, done.stderr
        check_verifies(dst, *extra, env=s3env)


LOSER_LINES = {
    (1, "ishard: error: another ishard run is writing into "),
    (1, "ishard: error: another ishard run finished a dataset in "),
    (2, "ishard: error: destination "),
}


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.8, 1.5, 2.5, 4.0])
def test_s3_lock_put_delayed_two_runs_one_dataset(delay, s3_server, s3env, s3_bucket, tmp_path):
    """B starts first and its lock PUT is delayed by ``delay`` s; A starts right after B
    reached the proxy, direct to the server. Two such pairs side by side (A writing .tar in
    one, .zip in the other). Whichever way each pair interleaves, exactly one run writes a
    dataset, the other exits 1 naming the destination and writes nothing, and the dataset
    equals what the winner alone writes."""
    client = s3_server.client()
    src = make_tree(tmp_path / "src", TREE)
    pairs = [("t", ".tar"), ("z", ".zip")]
    rules = [LockPut(f"out{tag}", delay) for tag, _ in pairs]
    proxies = [S3Proxy(s3_server.endpoint_url, rule) for rule in rules]
    direct = s3_server.endpoint_url
    try:
        bs = [
            start(s3env, proxy.endpoint_url, "shard", src, f"s3://{s3_bucket}/out{tag}", *B_OPTS)
            for proxy, (tag, _) in zip(proxies, pairs)
        ]
        for rule, b in zip(rules, bs):
            wait_for(rule.arrived, b)
        as_ = [
            start(s3env, direct, "shard", src, f"s3://{s3_bucket}/out{tag}", *A_OPTS, "--ext", ext)
            for tag, ext in pairs
        ]
        results = [(finish(a), finish(b)) for a, b in zip(as_, bs)]
    finally:
        for proxy in proxies:
            proxy.close()
    refs = {"B": start(s3env, direct, "shard", src, f"s3://{s3_bucket}/refB", *B_OPTS)}
    for tag, ext in pairs:
        refs[ext] = start(
            s3env, direct, "shard", src, f"s3://{s3_bucket}/ref{tag}", *A_OPTS, "--ext", ext
        )
    assert all(finish(r).returncode == 0 for r in refs.values())
    for (tag, ext), (a, b) in zip(pairs, results):
        dst = f"s3://{s3_bucket}/out{tag}"
        codes = sorted([a.returncode, b.returncode])
        assert codes in ([0, 1], [0, 2]), (a.returncode, a.stderr, b.returncode, b.stderr)
        winner, loser = ("A", b) if a.returncode == 0 else ("B", a)
        # the loser found the winner writing (at its lock), finished (under its lock), or,
        # starting late, holding DST (at its first check, or under its lock: exit 2)
        line = assert_error(loser, loser.returncode, dst)
        assert (loser.returncode, line.split(repr(dst))[0]) in LOSER_LINES, line
        out = under(client, s3_bucket, f"out{tag}")
        ref = under(client, s3_bucket, "refB" if winner == "B" else f"ref{tag}")
        manifest, expected = (
            json.loads(out.pop("manifest.json")),
            json.loads(ref.pop("manifest.json")),
        )
        assert manifest["shardlist"] == expected["shardlist"]
        assert out == ref  # the winner's dataset, whole; nothing of the loser's
        check_verifies(dst, "--endpoint-url", direct, env=s3env)


# ---------------------------------------------------------------- checks before the claim


def test_dask_not_installed_leaves_dst_untouched(tmp_path):
    """``distributed`` cannot be imported (a package of that name on PYTHONPATH that raises
    ImportError): the run stops before DST is touched, and the command run again where
    Dask is installed needs no --resume or --overwrite."""
    shim = tmp_path / "shim" / "distributed"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('no distributed here')\n")
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    args = ("shard", src, dst, *A_OPTS, "--executor", "dask", "--jobs", "1")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(shim.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    assert_error(
        run_ishard(*args, env=env),
        2,
        "--executor dask needs Dask's distributed",
        "pip install 'ishard[dask]'",
    )
    assert not dst.exists()
    dst.mkdir()  # an empty folder given by the user stays empty too
    assert_error(run_ishard(*args, env=env), 2, "--executor dask needs")
    assert list(dst.iterdir()) == []
    fixed = run_ishard(*args)
    assert fixed.returncode == 0, fixed.stderr
    check_verifies(dst, "--deep")


def test_a_template_too_long_for_a_file_name_is_refused_before_dst_is_touched(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    long = "x" * 300 + "-%06d"
    assert_error(
        run_ishard("shard", src, dst, *A_OPTS, "--shard-template", long),
        2,
        f"shard names would be too long for {str(dst)!r}",
        "has 311 bytes",
        "shorten --shard-template",
    )
    assert not dst.exists()
    fixed = run_ishard("shard", src, dst, *A_OPTS, "--shard-template", "x" * 30 + "-%06d")
    assert fixed.returncode == 0, fixed.stderr
    check_verifies(dst, "--deep")


def test_names_that_grow_too_long_are_refused_after_planning_with_dst_as_it_was(tmp_path):
    """The first name fits, the 10th does not (one more digit): found once the plan is
    made, before anything is written; DST is then as it was."""
    src = make_tree(tmp_path / "src", {f"{i:02d}.jpg": 100 for i in range(12)})
    dst = tmp_path / "out"
    dst.mkdir()
    limit = os.pathconf(dst, "PC_NAME_MAX") - len(".." + "0" * 7 + ".ishard-tmp")
    template = "y" * (limit - len("0.tar")) + "%d"  # 'yyy…0.tar' fits exactly, 'yyy…10.tar' not
    result = run_ishard(
        "shard", src, dst, "--shard-size", "1", "--no-progress", "--shard-template", template
    )
    assert_error(result, 2, "shard names would be too long", f"has {limit + 1} bytes")
    assert list(dst.iterdir()) == []
    fixed = run_ishard("shard", src, dst, "--shard-size", "1", "--no-progress")
    assert fixed.returncode == 0, fixed.stderr


def test_an_s3_key_over_1024_bytes_is_refused_before_dst_is_touched(
    s3_server, s3env, s3_bucket, tmp_path
):
    client = s3_server.client()
    src = make_tree(tmp_path / "src", TREE)
    dst = f"s3://{s3_bucket}/out"
    extra = ("--endpoint-url", s3_server.endpoint_url)
    long = "k" * 1020 + "-%06d"  # 'out/kkk…-000000.tar': 1035 bytes
    result = run_ishard("shard", src, dst, *A_OPTS, "--shard-template", long, *extra, env=s3env)
    assert_error(
        result,
        2,
        f"store keys would be too long for {dst!r}",
        "has 1035 bytes",
        "the store allows 1024",
        "shorten --shard-template",
    )
    assert objects(client, s3_bucket) == {}
    fixed = run_ishard("shard", src, dst, *A_OPTS, *extra, env=s3env)
    assert fixed.returncode == 0, fixed.stderr
    check_verifies(dst, *extra, env=s3env)


def test_a_key_the_store_refuses_when_written_leaves_dst_as_it_was(
    s3_server, s3env, s3_bucket, tmp_path
):
    """A 1,000-byte template makes 1015-byte keys: within S3's limit, but this server
    (SeaweedFS) refuses the first shard. Nothing
    was published, so the run's records go with it: the corrected command needs no
    --resume or --overwrite."""
    client = s3_server.client()
    src = make_tree(tmp_path / "src", TREE)
    dst = f"s3://{s3_bucket}/out"
    extra = ("--endpoint-url", s3_server.endpoint_url)
    long = "k" * 1000 + "-%06d"
    result = run_ishard("shard", src, dst, *A_OPTS, "--shard-template", long, *extra, env=s3env)
    assert result.returncode == 1, result.stderr
    assert objects(client, s3_bucket) == {}
    fixed = run_ishard("shard", src, dst, *A_OPTS, *extra, env=s3env)
    assert fixed.returncode == 0, fixed.stderr
    check_verifies(dst, *extra, env=s3env)
