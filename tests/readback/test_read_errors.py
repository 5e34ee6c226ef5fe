"""What the read commands take and how their failures read: DST or DST/manifest.json, a path
or a store URL, with --endpoint-url and --storage-option on each; a failed read worded as a
read of the thing read (never with --resume); every store error one line, no client's debug
dump; and the failures of a run that are no store's (memory, a bad --src-list, a killed Dask
scheduler, a lock removed by someone else, a key too long for the store) one line each."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading

import pytest
from helpers import (
    LOCK,
    WAIT,
    assert_error,
    finish,
    invoke_ishard,
    make_tree,
    poll,
    run_ishard,
    s3_env,
    start_ishard,
)
from localserver import free_port
from s3server import S3Proxy

TREE = {"a/1.jpg": b"1" * 300, "a/1.cls": b"7", "a/2.jpg": b"2" * 200, "a/2.cls": b"8"}
DUMP_MARKS = ("Generic {", "source:", "Error {", "Custom {", "kind:", "ErrorKind", "Some(")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A small local dataset (one .tar shard, its manifest and sample index) and its source."""
    root = tmp_path_factory.mktemp("reads")
    src = make_tree(root / "src", TREE)
    ran = invoke_ishard("shard", src, root / "out", "--no-progress")
    assert ran.returncode == 0, ran.stderr
    return src, root / "out"


def copy_of(dst, where):
    """A copy of the dataset ``dst`` at ``where`` (to spoil)."""
    where.mkdir()
    for f in dst.iterdir():
        (where / f.name).write_bytes(f.read_bytes())
    return where


def planted(path, kind: str) -> None:
    """``path`` replaced by a FIFO or a link to another file."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(path.with_name("manifest.json"))


# ---------------------------------------------------------------- reads worded as reads


@pytest.mark.parametrize("kind", ["fifo", "link"])
@pytest.mark.parametrize("command", ["find", "cat", "append"])
def test_a_planted_sample_index_is_refused_as_a_read_of_it(dataset, tmp_path, command, kind):
    """Finding: find and cat (and --append, reading the old dataset) said "cannot write 'DST'
    … run again with --resume" of a FIFO or a link where samples.parquet belongs."""
    _, out = dataset
    dst = copy_of(out, tmp_path / "out")
    planted(dst / "samples.parquet", kind)
    if command == "append":
        more = make_tree(tmp_path / "more", {**TREE, "a/3.jpg": b"3" * 50})
        result = invoke_ishard("shard", more, dst, "--append", "--no-progress")
    elif command == "find":
        result = invoke_ishard("find", dst, "1")
    else:
        result = invoke_ishard("cat", dst, "1", "-o", tmp_path / "got")
    line = assert_error(result, 1, "cannot read", repr(str(dst / "samples.parquet")))
    assert "--resume" not in line and "cannot write" not in line


def test_cat_of_a_shard_that_is_a_fifo_is_a_read_of_that_shard(dataset, tmp_path):
    _, out = dataset
    dst = copy_of(out, tmp_path / "out")
    planted(dst / "shard-000000.tar", "fifo")
    line = assert_error(
        invoke_ishard("cat", dst, "1", "-o", tmp_path / "got"),
        1,
        "cannot read",
        repr(str(dst / "shard-000000.tar")),
    )
    assert "--resume" not in line


# ---------------------------------------------------------------- what users type


@pytest.mark.parametrize(
    "command",
    [("find", "1"), ("verify",), ("split",), ("diff", "{dst}"), ("cat", "1", "-o", "{got}")],
)
def test_read_commands_take_dst_or_its_manifest(dataset, tmp_path, command):
    """Finding: ``ishard find DST/manifest.json KEY`` said "cannot write
    'DST/manifest.json/DST/manifest.json' … --resume"; every read command takes either."""
    _, out = dataset
    name, *rest = command
    outputs = []
    for i, given in enumerate((out, out / "manifest.json")):
        args = [a.format(dst=out, got=tmp_path / f"got{i}") for a in rest]
        result = invoke_ishard(name, given, *args)
        assert result.returncode == 0, (given, result.stderr)
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    if name == "cat":
        assert sorted(p.name for p in (tmp_path / "got1").rglob("*")) == ["1.cls", "1.jpg"]


@pytest.mark.parametrize("command", ["find", "cat", "ls", "verify", "diff", "split"])
def test_every_read_command_takes_the_store_options(command):
    shown = invoke_ishard(command, "--help").stdout
    assert "--endpoint-url" in shown and "--storage-option" in shown


# ---------------------------------------------------------------- stores


@pytest.fixture(scope="module")
def s3_dataset(s3_server, tmp_path_factory):
    """The small dataset written to a bucket: (bucket, source, local copy of the dataset)."""
    root = tmp_path_factory.mktemp("s3reads")
    src = make_tree(root / "src", TREE)
    bucket = s3_server.make_bucket()
    env = s3_env(s3_server)
    where = ("--endpoint-url", s3_server.endpoint_url, "--no-progress")
    ran = run_ishard("shard", src, f"s3://{bucket}/ds", *where, env=env)
    assert ran.returncode == 0, ran.stderr
    ran = run_ishard("shard", src, root / "local", "--no-progress", env=env)
    assert ran.returncode == 0, ran.stderr
    return bucket, src, root / "local"


@pytest.mark.parametrize("given", ["s3://{b}/ds", "s3://{b}/ds/", "s3://{b}/ds/manifest.json"])
def test_split_reads_a_dataset_in_a_bucket(s3_server, s3_dataset, given):
    """Finding: ``ishard split s3://bucket/dataset`` printed a Rust debug dump, had no
    --endpoint-url and refused a folder URL."""
    bucket, _, local = s3_dataset
    env = s3_env(s3_server)
    there = run_ishard(
        "split", given.format(b=bucket), "--endpoint-url", s3_server.endpoint_url, env=env
    )
    here = run_ishard("split", local, env=env)
    assert there.returncode == 0, there.stderr
    assert there.stdout == here.stdout and there.stderr == ""


def command_lines(bucket: str, src, tmp_path) -> dict[str, tuple[str, ...]]:
    ds = f"s3://{bucket}/ds"
    return {
        "ls": ("ls", f"{ds}/shard-000000.tar"),
        "verify": ("verify", ds),
        "find": ("find", ds, "1"),
        "cat": ("cat", ds, "1", "-o", str(tmp_path / "got")),
        "diff": ("diff", ds, ds),
        "split": ("split", ds),
        "shard": ("shard", str(src), f"s3://{bucket}/new", "--no-progress", "--retries", "0"),
    }


@pytest.mark.parametrize("failure", ["no-bucket", "no-object", "wrong-port", "bad-keys"])
def test_no_store_error_prints_a_debug_dump(s3_server, s3_dataset, tmp_path, failure):
    """Finding: some store errors reached the terminal as a client's multi-line debug dump
    (``ishard split s3://…``: 24 lines); every one, of every command, is one line. The
    endpoint is given as AWS_ENDPOINT_URL, as a user of the AWS tools would."""
    bucket, src, _ = s3_dataset
    env = {**s3_env(s3_server), "AWS_ENDPOINT_URL": s3_server.endpoint_url}
    if failure == "no-bucket":
        bucket = "no-such-bucket-here"
    elif failure == "no-object":
        bucket = s3_server.make_bucket()
    elif failure == "wrong-port":
        env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{free_port()}"
    else:
        env.update(AWS_ACCESS_KEY_ID="AKIAWRONGKEY", AWS_SECRET_ACCESS_KEY="wrongsecret0123")
    for name, args in command_lines(bucket, src, tmp_path).items():
        result = run_ishard(*args, env=env)
        if name == "shard" and failure == "no-object":
            continue  # a run into an empty bucket succeeds
        line = assert_error(result, result.returncode, "")
        assert result.returncode in (1, 2), (name, line)
        assert not any(mark in line for mark in DUMP_MARKS), (name, line)
        assert "unexpected" not in line, (name, line)
        if failure == "no-bucket" and name != "shard":
            assert "does not exist" in line, (name, line)
        if name != "shard":
            assert "--resume" not in line and "cannot write" not in line, (name, line)


# ---------------------------------------------------------------- memory


MEMORY_SCRIPT = """
import resource, sys
from ishard import inspection
from ishard.errors import IshardError
found, _ = inspection.find(sys.argv[1], ["big"])
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (48 << 20), hard))
try:
    inspection.read_sample(sys.argv[1], found[0])
except IshardError as err:
    print(type(err).__name__, err.exit_code, err)
"""


def test_running_out_of_memory_is_its_own_line(tmp_path):
    """Finding: a MemoryError was told as "cannot reach … check the endpoint and the
    network". A sample of 96 MiB read whole under an address-space limit 48 MiB above what
    the process uses."""
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "big.bin", "wb") as f:
        f.truncate(96 << 20)  # sparse: nothing written but its size
    ran = run_ishard("shard", src, tmp_path / "out", "--no-progress", "--checksum", "none")
    assert ran.returncode == 0, ran.stderr
    got = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(tmp_path / "out")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    (line,) = got.stdout.splitlines()
    assert line.startswith("OutOfMemory 1 out of memory"), line
    assert "network" not in line and "endpoint" not in line
    assert "--memory-limit" in line


# ---------------------------------------------------------------- --src-list


def test_a_src_list_named_gz_that_is_not_gzip_is_one_line_naming_it(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    listed = tmp_path / "list.csv.gz"
    listed.write_text("name,size\na/1.jpg,300\n")
    result = invoke_ishard("shard", src, tmp_path / "out", "--src-list", listed)
    assert_error(result, 2, f"--src-list {str(listed)!r} is not gzip")
    assert not (tmp_path / "out").exists()


def test_a_src_list_that_is_gzip_of_nothing_readable_is_one_line(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    listed = tmp_path / "list.csv.gz"
    listed.write_bytes(gzip.compress(b"name,size\na/1.jpg,300\n")[:30])  # cut short
    result = invoke_ishard("shard", src, tmp_path / "out", "--src-list", listed)
    line = assert_error(result, 2, repr(str(listed)))
    assert "unexpected" not in line


def test_an_empty_parquet_src_list_is_said_to_be_empty(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    listed = tmp_path / "list.parquet"
    listed.write_bytes(b"")
    result = invoke_ishard("shard", src, tmp_path / "out", "--src-list", listed)
    line = assert_error(result, 2, f"--src-list {str(listed)!r} is empty")
    assert "not a Parquet file" in line and "no header" not in line


# ---------------------------------------------------------------- a lock removed mid-run


def test_a_lock_removed_mid_run_is_said_to_be_removed(s3_server, s3_bucket, tmp_path):
    """Finding: a lock deleted by someone else while a run held it was told as "the run was
    paused or cut off". The third shard's first source read is held until the lock has been
    deleted and a renewal of it has been answered; the run then stops, naming the lock."""
    env = s3_env(s3_server)
    client = s3_server.client()
    src = make_tree(tmp_path / "src", {f"{i:03d}.bin": bytes([i]) * 30_000 for i in range(8)})
    removed, renewed = threading.Event(), threading.Event()

    def hold(request):
        if request.method == "GET" and request.key.endswith("004.bin") and not removed.is_set():
            client.delete_object(Bucket=s3_bucket, Key=f"out/{LOCK}")
            removed.set()
            renewed.wait(WAIT)

    def after(request, status):
        if removed.is_set() and request.method == "PUT" and request.key == f"out/{LOCK}":
            renewed.set()

    src_bucket = s3_server.make_bucket()
    for f in sorted(src.iterdir()):
        client.put_object(Bucket=src_bucket, Key=f"ds/{f.name}", Body=f.read_bytes())
    proxy = S3Proxy(s3_server.endpoint_url, hold, after)
    dst = f"s3://{s3_bucket}/out"
    args = ("shard", f"s3://{src_bucket}/ds", dst, "--shard-size", "50KB", "--jobs", "1")
    run = start_ishard(proxy.endpoint_url, env, *args, "--no-progress", ISHARD_LEASE_SECONDS="2")
    try:
        poll("the lock's removal to be seen", lambda: renewed.is_set() or run.poll() is not None)
    finally:
        renewed.set()
        result = finish(run)
        proxy.close()
    line = assert_error(result, 1, "was removed", f"{dst}/{LOCK}")
    assert "paused or cut off" not in line
