"""The run state in DST/.ishard-run and the destination, through the CLI: nothing is read,
written or removed through a link planted there, a killed run's leftovers (temp records, temp
shards, multipart uploads) never stop a later run, an unseeded shuffle resumes, a source file
rewritten within the same second is noticed, and destinations that cannot work say so."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    DATASET_RECORDS,
    HOW_IT_RUNS,
    assert_error,
    in_private_namespace,
    invoke_ishard,
    make_tree,
    run_ishard,
    s3_env,
)

# Every finished destination a test here leaves must pass `ishard verify --deep`.
pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# 24 samples (.jpg + .cls) over 2 directories: with 8KB shards 12 shards.
TREE = {
    **{f"d{i % 2}/{i:04d}.jpg": 3_000 + 97 * (i % 11) for i in range(24)},
    **{f"d{i % 2}/{i:04d}.cls": 2 + i % 3 for i in range(24)},
}
COMMON = ("--shard-size", "8KB", "--no-progress", "--jobs", "1")

# Runs ishard and SIGKILLs it right after the Nth shard is complete and recorded (one writer,
# in this process): a kill -9 "after some shards" that does not depend on timing.
KILL_AFTER = """
import os, signal, sys
from ishard import cli
from ishard.run import resume
real = resume.Recorder.shard_done
count = [0]
def shard_done(self, result):
    real(self, result)
    count[0] += 1
    if count[0] == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)
resume.Recorder.shard_done = shard_done
cli.main(sys.argv[2:])
"""


def killed_run(
    src: Path | str, dst: Path, after: int, *args: str, env: dict | None = None
) -> subprocess.CompletedProcess:
    """``ishard shard SRC DST`` killed with SIGKILL once ``after`` shards are complete."""
    done = subprocess.run(
        [sys.executable, "-c", KILL_AFTER, str(after), "shard", str(src), str(dst), *COMMON, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (links as their target text) with its bytes; not a run's
    lock file (it names the last run)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if str(path.relative_to(root)) == ".ishard-run/lock" and not path.is_symlink():
            continue
        if path.is_symlink():
            out[str(path.relative_to(root))] = f"-> {os.readlink(path)}".encode()
        elif path.is_file():
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    return make_tree(tmp_path_factory.mktemp("runstate") / "src", TREE)


@pytest.fixture(scope="module")
def reference(src, tmp_path_factory) -> dict[str, bytes]:
    """Every file of one uninterrupted run (shards and manifest), byte for byte."""
    dst = tmp_path_factory.mktemp("reference") / "out"
    done = invoke_ishard("shard", src, dst, *COMMON)
    assert done.returncode == 0, done.stderr
    out = files(dst)
    assert len(out) > 6
    return out


def make_victim(root: Path) -> Path:
    """A folder that looks like run state (someone else's): ``done/`` records and run.json."""
    victim = root / "victim"
    (victim / "done").mkdir(parents=True)
    (victim / "done" / "000000000.json").write_bytes(b'{"name": "precious"}')
    (victim / "run.json").write_bytes(b'{"fingerprint": "mine"}')
    (victim / "lock").write_bytes(b"mine")
    return victim


@pytest.mark.parametrize(
    "link", [".ishard-run", ".ishard-run/done", ".ishard-run/run.json", ".ishard-run/lock"]
)
@pytest.mark.parametrize("mode", ["--overwrite", "--resume"])
def test_a_linked_run_state_is_refused_and_nothing_is_touched_through_it(src, tmp_path, link, mode):
    """A link planted in DST's run state (to a folder of the same shape elsewhere): with
    --overwrite or --resume, one clear line (exit 2), the link's target untouched, no shard."""
    victim = make_victim(tmp_path)
    dst = tmp_path / "out"
    (dst / ".ishard-run").mkdir(parents=True)
    target = victim if link == ".ishard-run" else victim / Path(link).name
    if link == ".ishard-run":
        (dst / ".ishard-run").rmdir()
    (dst / link).symlink_to(target)
    (dst / "notes.txt").write_bytes(b"user's")  # not empty: a run needs --overwrite/--resume
    before, dst_before = files(victim), files(dst)
    result = invoke_ishard("shard", src, dst, *COMMON, mode)
    line = assert_error(result, 2)
    assert line == (
        f"ishard: error: {str(dst / link)!r} is a symbolic link or not a "
        f"{'directory' if Path(link).name in ('.ishard-run', 'done') else 'regular file'}"
        " — ishard keeps its run state in .ishard-run/ inside the destination and "
        "follows no link there: remove it (and check what put it there), then run "
        "again"
    )
    assert files(victim) == before
    assert files(dst) == dst_before


def test_a_linked_manifest_is_replaced_not_written_through(src, tmp_path, reference):
    victim = make_victim(tmp_path)
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "manifest.json").symlink_to(victim / "run.json")
    before = files(victim)
    result = invoke_ishard("shard", src, dst, *COMMON, "--overwrite")
    assert result.returncode == 0, result.stderr
    assert files(victim) == before
    assert not (dst / "manifest.json").is_symlink()
    assert files(dst) == reference


def plant(path: Path, kind: str) -> str:
    """Put a FIFO (no writer: an open of it would block for good) or a link to a FIFO under
    ``path``; the words ishard must use for it."""
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO"
    target = path.parent.parent / "elsewhere"
    os.mkfifo(target)
    path.symlink_to(target)
    return "a symbolic link"


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_manifest_planted_as_a_fifo_or_link_is_refused_or_replaced_never_opened(
    src, tmp_path, reference, kind
):
    """Finding: a FIFO under DST/manifest.json blocked verify, --resume and --overwrite on
    opening it. Now verify and --resume refuse it with one line (exit 2) without opening it,
    and --overwrite (which starts over) replaces it, unread."""
    dst = tmp_path / "out"
    assert run_ishard("shard", src, dst, *COMMON).returncode == 0
    (dst / "manifest.json").unlink()
    what = plant(dst / "manifest.json", kind)
    refusal = (
        f"ishard: error: {str(dst / 'manifest.json')!r} is {what}, not a regular file — "
        "ishard reads its manifest and run records only from regular files and follows no "
        "link: remove it (and check what put it there), then run again"
    )
    for args in (("verify", dst), ("shard", src, dst, *COMMON, "--resume")):
        result = subprocess.run(
            [sys.executable, "-m", "ishard", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert assert_error(result, 2) == refusal
    result = subprocess.run(
        [sys.executable, "-m", "ishard", "shard", str(src), str(dst), *COMMON, "--overwrite"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (dst / "manifest.json").is_file() and not (dst / "manifest.json").is_symlink()
    assert files(dst) == reference
    assert run_ishard("verify", dst, "--deep").returncode == 0


def test_resume_rewrites_a_complete_shard_replaced_by_a_link(src, tmp_path, reference):
    """A recorded shard swapped for a link to a copy elsewhere (same bytes, same md5): not
    kept as a link, written again as a file; the copy is untouched."""
    dst = tmp_path / "out"
    killed_run(src, dst, 3)
    name = min(n for n in reference if n.endswith(".tar"))
    elsewhere = tmp_path / "elsewhere.tar"
    os.replace(dst / name, elsewhere)
    (dst / name).symlink_to(elsewhere)
    result = invoke_ishard("shard", src, dst, *COMMON, "--resume")
    assert result.returncode == 0, result.stderr
    assert "kept 2 shards from the earlier run (checked), wrote " in result.stdout
    assert not (dst / name).is_symlink()
    assert files(dst) == reference
    assert elsewhere.read_bytes() == reference[name]


def test_a_stray_temp_record_in_done_is_ignored_and_removed(src, tmp_path, reference):
    """kill -9 while a shard's record was being written leaves a temp record in done/: a
    later --resume ignores it (the shard is checked like any other) and finishes."""
    dst = tmp_path / "out"
    killed_run(src, dst, 3)
    done = dst / ".ishard-run" / "done"
    assert len(list(done.iterdir())) == 3
    (done / ".000000003.json.4242.ishard-tmp").write_bytes(b'{"name": "shard-0')
    (done / ".000000004.json.4243.ishard-tmp").write_bytes(b"")
    result = invoke_ishard("shard", src, dst, *COMMON, "--resume")
    assert result.returncode == 0, result.stderr
    assert "kept 3 shards from the earlier run (checked), wrote " in result.stdout
    assert files(dst) == reference  # the run state (temp records too) is gone


def test_an_unseeded_shuffle_is_resumed_with_its_printed_seed(src, tmp_path):
    """An unseeded --sort shuffle prints its seed; killed after some shards, --resume reuses
    it; the result equals, byte for byte, an uninterrupted run with --sort shuffle:<seed>."""
    dst = tmp_path / "out"
    first = killed_run(src, dst, 3, "--sort", "shuffle")
    found = re.findall(
        r"^ishard: shuffle seed: (\d+) \(drawn for this run; --resume reuses "
        r"it, --sort shuffle:(\d+) repeats the order\)$",
        first.stderr,
        re.MULTILINE,
    )
    assert len(found) == 1 and found[0][0] == found[0][1], first.stderr
    seed = found[0][0]
    resumed = invoke_ishard("shard", src, dst, *COMMON, "--sort", "shuffle", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.splitlines()[0] == (
        f"ishard: shuffle seed: {seed} (the interrupted run's, reused by --resume)"
    )
    assert "kept 3 shards from the earlier run (checked), wrote " in resumed.stdout
    again = invoke_ishard("shard", src, tmp_path / "seeded", *COMMON, "--sort", f"shuffle:{seed}")
    assert again.returncode == 0, again.stderr
    assert files(dst) == files(tmp_path / "seeded")
    # a finished run resumes with the seed its manifest records
    finished = invoke_ishard("shard", src, dst, *COMMON, "--sort", "shuffle", "--resume")
    assert finished.returncode == 0, finished.stderr
    assert f"shuffle seed: {seed} " in finished.stderr
    assert files(dst) == files(tmp_path / "seeded")


def _rewrite_in_place(path: Path) -> None:
    st = path.stat()
    data = path.read_bytes()
    path.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])  # same size, other bytes
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # the same second


def _replace_by_a_new_file(path: Path) -> None:
    st = path.stat()
    data = path.read_bytes()
    new = path.with_name(path.name + ".new")
    new.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same mtime, to the nanosecond
    os.replace(new, path)  # only the inode tells


@pytest.mark.parametrize("change", [_rewrite_in_place, _replace_by_a_new_file])
def test_resume_notices_a_file_rewritten_same_size_within_the_same_second(tmp_path, change):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    killed_run(src, dst, 3)
    before = files(dst)
    change(src / "d0/0000.jpg")  # a member of the first shard, which is complete
    result = invoke_ishard("shard", src, dst, *COMMON, "--resume")
    line = assert_error(result, 1)
    assert line == (
        f"ishard: error: cannot resume into {str(dst)!r}: the plan differs from the "
        f"interrupted run's: source: {len(TREE)} files (changed 1: d0/0000.jpg) — "
        "the shards written so far hold the earlier files: use --overwrite to start "
        "over"
    )
    assert files(dst) == before


def test_overwrite_removes_a_killed_runs_temp_files(src, tmp_path, reference):
    dst = tmp_path / "out"
    killed_run(src, dst, 2)
    name = sorted(n for n in reference if n.endswith(".tar"))[4]
    (dst / f".{name}.4242.ishard-tmp").write_bytes(b"half a shard")
    (dst / ".manifest.json.4242.ishard-tmp").write_bytes(b"{")
    result = invoke_ishard("shard", src, dst, *COMMON, "--overwrite")
    assert result.returncode == 0, result.stderr
    assert files(dst) == reference


def test_a_resumed_manifest_is_byte_identical(src, tmp_path, reference):
    """Options that only change how a run goes (--resume, --jobs, --retries …) leave the
    manifest as an uninterrupted run writes it."""
    dst = tmp_path / "out"
    killed_run(src, dst, 2)
    result = invoke_ishard("shard", src, dst, *COMMON, "--resume", *HOW_IT_RUNS)
    assert result.returncode == 0, result.stderr
    assert (dst / "manifest.json").read_bytes() == reference["manifest.json"]
    assert files(dst) == reference


def test_verify_on_an_interrupted_run_advises_resume(src, tmp_path):
    dst = tmp_path / "out"
    killed_run(src, dst, 2)
    line = assert_error(invoke_ishard("verify", dst), 1)
    assert line == (
        f"ishard: error: no manifest.json in {str(dst)!r} — it is written when a "
        "run ends; run ishard shard again with the same source and options and "
        "--resume to finish the job"
    )


# In a private user and mount namespace (nothing outside sees it): $SETUP, then ishard.
NAMESPACE = """
set -u
{setup} || exit 99
"$PY" -m ishard shard "$SRC" "$DST" --no-progress 2> "$ERR"
echo $? > "$RC"
"""


def in_namespace(tmp_path: Path, setup: str, src: Path, dst: Path) -> tuple[int, str]:
    """Run ``setup`` (shell, as root of a new user+mount namespace), then ``ishard shard SRC
    DST``; return its exit code and stderr. Skips where such namespaces are unavailable."""
    rc, err = tmp_path / "ns.rc", tmp_path / "ns.err"
    env = {"SRC": str(src), "DST": str(dst), "ERR": str(err), "T": str(tmp_path)}
    in_private_namespace(NAMESPACE.format(setup=setup), env, rc, "no private mount namespace")
    return int(rc.read_text()), err.read_text()


def test_a_destination_under_a_read_only_parent_is_one_clear_error(src, tmp_path):
    """A read-only file system (a tmpfs mounted read-only in a private namespace, so root is
    stopped too) where DST would be created: one line naming the path and the fix."""
    ro = tmp_path / "ro"
    ro.mkdir()
    rc, err = in_namespace(
        tmp_path, 'mount -t tmpfs -o ro,size=64k ishard-ro "$T/ro"', src, ro / "data" / "out"
    )
    assert rc == 1, err
    assert err.splitlines() == [
        (
            f"ishard: error: cannot create the destination {str(ro / 'data' / 'out')!r}: Read-only "
            f"file system (in {str(ro)!r}) — choose a destination you can write to, or create it "
            "first"
        )
    ]


@pytest.mark.parametrize("inner", ["", "a/out"])
def test_a_destination_inside_the_source_through_a_bind_mount_is_refused(tmp_path, inner):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10, "b/2.jpg": 20})
    view = tmp_path / "view"
    view.mkdir()
    dst = view / inner if inner else view
    rc, err = in_namespace(tmp_path, 'mount --bind "$SRC" "$T/view"', src, dst)
    assert rc == 2, err
    assert err.splitlines() == [
        (
            f"ishard: error: destination {str(dst)!r} is inside the "
            f"source {str(src)!r} — write the shards somewhere else"
        )
    ]
    assert sorted(p.name for p in src.iterdir()) == ["a", "b"]  # nothing written into SRC
    assert sorted(p.name for p in (src / "a").iterdir()) == ["1.jpg"]


def test_resume_notices_an_object_rewritten_with_the_same_size(s3_server, s3_bucket, tmp_path):
    """An S3 source: an object of a complete shard rewritten with other bytes of the same
    size after the kill (its listed ETag changes) makes --resume refuse."""
    client = s3_server.client()
    for name, size in TREE.items():
        client.put_object(Bucket=s3_bucket, Key=name, Body=bytes([len(name)]) * size)
    env = s3_env(s3_server)
    where = ("--endpoint-url", s3_server.endpoint_url)
    dst = tmp_path / "out"
    killed_run(f"s3://{s3_bucket}", dst, 3, *where, env=env)
    before = files(dst)
    client.put_object(Bucket=s3_bucket, Key="d0/0000.jpg", Body=b"\xff" * TREE["d0/0000.jpg"])
    result = run_ishard("shard", f"s3://{s3_bucket}", dst, *COMMON, *where, "--resume", env=env)
    assert f"source: {len(TREE)} files (changed 1: d0/0000.jpg)" in assert_error(result, 1)
    assert files(dst) == before


def test_overwrite_aborts_a_killed_runs_multipart_upload(
    s3_server, s3_bucket, src, tmp_path, reference
):
    """An S3 destination holding a killed run's shard and its open multipart upload of a
    planned shard: --overwrite aborts that upload (and no other) and writes the same bytes as a
    local run."""
    client = s3_server.client()
    planned = sorted(n for n in reference if n.endswith(".tar"))[3]
    dangling = client.create_multipart_upload(Bucket=s3_bucket, Key=f"out/{planned}")["UploadId"]
    client.upload_part(
        Bucket=s3_bucket,
        Key=f"out/{planned}",
        PartNumber=1,
        UploadId=dangling,
        Body=b"half a shard",
    )
    other = client.create_multipart_upload(Bucket=s3_bucket, Key="out/notes.bin")["UploadId"]
    client.put_object(Bucket=s3_bucket, Key="out/shard-000000.tar", Body=b"a killed run's")
    env = s3_env(s3_server)
    try:
        result = run_ishard(
            "shard",
            src,
            f"s3://{s3_bucket}/out",
            *COMMON,
            "--overwrite",
            "--endpoint-url",
            s3_server.endpoint_url,
            env=env,
        )
        assert result.returncode == 0, result.stderr
        left = client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])
        assert [(u["Key"], u["UploadId"]) for u in left] == [("out/notes.bin", other)]
    finally:
        client.abort_multipart_upload(Bucket=s3_bucket, Key="out/notes.bin", UploadId=other)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    written = {
        k.removeprefix("out/"): client.get_object(Bucket=s3_bucket, Key=k)["Body"].read()
        for k in keys
    }
    assert {n: d for n, d in written.items() if n not in DATASET_RECORDS} == {
        n: d for n, d in reference.items() if n not in DATASET_RECORDS
    }


def test_a_state_tree_is_removed_without_following_links_on_any_python(tmp_path):
    """``localstate.remove``'s tree removal as Python 3.10 runs it (no ``rmtree(dir_fd=)``):
    the tree goes, a link inside it goes as a link, what it points to stays."""
    import os

    from ishard.store.local.state import remove_tree_walking

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    tree = tmp_path / "root" / "state"
    (tree / "done").mkdir(parents=True)
    (tree / "done" / "1.json").write_text("{}")
    (tree / "run.json").write_text("{}")
    (tree / "done" / "link").symlink_to(outside, target_is_directory=True)
    fd = os.open(tmp_path / "root", os.O_RDONLY | os.O_DIRECTORY)
    try:
        remove_tree_walking(fd, "state")
    finally:
        os.close(fd)
    assert not tree.exists() and (tmp_path / "root").is_dir()
    assert (outside / "keep.txt").read_text() == "mine"
