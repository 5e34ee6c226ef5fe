"""``--overwrite`` leaves exactly the new run's output: the earlier run's archives it does not
rewrite are removed once its manifest is written (locally and on S3), files that are not
ishard's stay, and an interrupted overwrite finished by ``--resume`` ends the same way."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import webdataset as wds
from helpers import (
    DATASET_RECORDS,
    few_shards_note,
    invoke_ishard,
    make_tree,
    run_ishard,
    run_losing,
)

# Every finished destination a test here leaves must pass `ishard verify --deep`.
pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# 24 samples (.jpg + .cls): 6 shards at 12KB, 2 at 64KB, 1 at 1MB.
TREE = {
    **{f"d{i % 2}/{i:03d}.jpg": 3_000 + 37 * i for i in range(24)},
    **{f"d{i % 2}/{i:03d}.cls": 2 for i in range(24)},
}
SMALL = ("--shard-size", "12KB", "--no-progress", "--jobs", "1")
BIG = ("--shard-size", "1MB", "--no-progress", "--jobs", "1")
KEYS = sorted(f"{i:03d}" for i in range(24))  # members are <sample key>.<extension>


def shards(names) -> list[str]:
    return sorted(n for n in names if n.startswith("shard-") and n.endswith(".tar"))


def wds_keys(folder: Path) -> list[str]:
    """Every sample key WebDataset reads from ``folder/shard-*.tar`` (as a training job globs)."""
    urls = [str(folder / n) for n in shards(os.listdir(folder))]
    return sorted(s["__key__"] for s in wds.WebDataset(urls, shardshuffle=False))


def check_exact(folder: Path, manifest: dict, extra: set[str] = frozenset()) -> None:
    """``folder`` holds the manifest's shards, the manifest and ``extra``, nothing else; a
    reader globbing the shards reads each sample once."""
    listed = {e["url"] for e in manifest["shardlist"]}
    visible = {n for n in os.listdir(folder) if not n.startswith(".")}
    assert visible == listed | DATASET_RECORDS | set(extra)
    keys = wds_keys(folder)
    assert keys == KEYS  # each sample once, no duplicates from a stale shard
    assert len(keys) == sum(e["nsamples"] for e in manifest["shardlist"])


@pytest.fixture
def src(tmp_path) -> Path:
    return make_tree(tmp_path / "src", TREE)


def first_run(run, src, dst) -> list[str]:
    done = run("shard", src, dst, *SMALL)
    assert done.returncode == 0, done.stderr
    return done


def test_overwrite_with_bigger_shards_leaves_exactly_the_new_output(src, tmp_path):
    dst = tmp_path / "out"
    first_run(run_ishard, src, dst)
    assert len(shards(os.listdir(dst))) == 6
    done = invoke_ishard("shard", src, dst, *BIG, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "removed 5 archives of the earlier run that this run did not rewrite" in done.stdout
    manifest = json.loads((dst / "manifest.json").read_text())
    assert [e["url"] for e in manifest["shardlist"]] == ["shard-000000.tar"]
    check_exact(dst, manifest)
    assert not (dst / ".ishard-run").exists()
    verified = invoke_ishard("verify", dst)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_files_that_are_not_ishards_survive_an_overwrite(src, tmp_path):
    dst = tmp_path / "out"
    first_run(run_ishard, src, dst)
    (dst / "notes.txt").write_text("mine")
    (dst / "other.tar").write_bytes((dst / "shard-000001.tar").read_bytes())  # looks like one
    outside = tmp_path / "keep.tar"
    outside.write_bytes(b"not ishard's")
    (dst / "shard-000005.tar").unlink()  # an old shard swapped for a link: not removed through
    (dst / "shard-000005.tar").symlink_to(outside)
    done = invoke_ishard("shard", src, dst, *BIG, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "removed 4 archives of the earlier run" in done.stdout
    assert (dst / "notes.txt").read_text() == "mine"
    assert (dst / "other.tar").is_file()
    assert outside.read_bytes() == b"not ishard's"
    assert (dst / "shard-000005.tar").is_symlink()
    (dst / "shard-000005.tar").unlink()  # the link aside, exactly the new output
    check_exact(dst, json.loads((dst / "manifest.json").read_text()), {"notes.txt", "other.tar"})
    (dst / "other.tar").unlink()  # a tar the manifest does not list: verify would say so


def test_a_dali_index_of_the_earlier_run_goes_with_its_shard(src, tmp_path):
    dst = tmp_path / "out"
    first_run(lambda *a: invoke_ishard(*a, "--index", "dali"), src, dst)
    assert len(list(dst.glob("*.idx"))) == 6
    done = invoke_ishard("shard", src, dst, *BIG, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "removed 11 archives" in done.stdout  # 5 shards and 6 indexes (none written now)
    check_exact(dst, json.loads((dst / "manifest.json").read_text()))


def test_an_edited_manifest_cannot_make_overwrite_remove_what_ishard_did_not_write(src, tmp_path):
    """The earlier manifest lists, besides its shards, names ishard never writes as archives:
    a text file, a file in a sub-folder, a tar not of the recorded template's shape, an index
    that is not its shard's. --overwrite removes only the old shards and their DALI indexes,
    leaves the rest, and says so in one warning."""
    dst = tmp_path / "out"
    first_run(lambda *a: invoke_ishard(*a, "--index", "dali"), src, dst)
    (dst / "notes.txt").write_text("mine")
    (dst / "userdata").mkdir()
    (dst / "userdata" / "model.bin").write_bytes(b"weights")
    (dst / "other.tar").write_bytes((dst / "shard-000001.tar").read_bytes())
    (dst / "mine.idx").write_text("an index of mine")
    manifest = json.loads((dst / "manifest.json").read_text())
    for name in ("notes.txt", "userdata/model.bin", "other.tar"):
        manifest["shardlist"].append({"url": name, "nsamples": 1, "filesize": 4})
    manifest["ishard"]["shards"].append({"name": "shard-000002.tar", "dali_index": "mine.idx"})
    (dst / "manifest.json").write_text(json.dumps(manifest))
    done = run_ishard("shard", src, dst, *BIG, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "removed 11 archives of the earlier run" in done.stdout  # 5 shards, 6 indexes
    assert done.stderr.splitlines() == [
        (
            f"ishard: warning: the earlier run's manifest.json or records in {str(dst)!r} list 4 "
            "names that ishard does not write as archives ('mine.idx', 'notes.txt', 'other.tar', "
            "'userdata/model.bin'): they are left alone, not removed"
        ),
        few_shards_note(1, 24),
    ]
    assert (dst / "notes.txt").read_text() == "mine"
    assert (dst / "userdata" / "model.bin").read_bytes() == b"weights"
    assert (dst / "mine.idx").read_text() == "an index of mine"
    assert (dst / "other.tar").is_file()
    check_exact(
        dst,
        json.loads((dst / "manifest.json").read_text()),
        {"notes.txt", "userdata", "other.tar", "mine.idx"},
    )
    (dst / "other.tar").unlink()  # a tar the manifest does not list: verify would say so


# A run that fails after its first shard: the last planned file is moved away once the plan
# is made (helpers.run_losing, put back after), so the last shard cannot be read.
MIDDLE = ("--shard-size", "64KB", "--no-progress", "--jobs", "1")


def interrupted(src: Path, dst: str, *args: str, env: dict | None = None) -> None:
    last = src / max(n for n in TREE if n.startswith("d1/"))
    done = run_losing(last, "shard", src, dst, *args, env=env)
    assert done.returncode == 1 and "cannot read" in done.stderr, done.stderr


def test_an_interrupted_overwrite_keeps_the_old_shards_and_resume_removes_them(src, tmp_path):
    dst = tmp_path / "out"
    first_run(run_ishard, src, dst)
    old = {n: (dst / n).read_bytes() for n in shards(os.listdir(dst))}
    interrupted(src, str(dst), *MIDDLE, "--overwrite")
    assert not (dst / "manifest.json").exists()
    # nothing removed yet: the first new shard replaced its namesake, the old rest stay
    assert shards(os.listdir(dst)) == sorted(old)
    for name in sorted(old)[2:]:
        assert (dst / name).read_bytes() == old[name]
    done = invoke_ishard("shard", src, dst, *MIDDLE, "--resume")
    assert done.returncode == 0, done.stderr
    assert "kept 1 shard from the earlier run (checked), wrote " in done.stdout
    assert "removed 4 archives of the earlier run that this run did not rewrite" in done.stdout
    manifest = json.loads((dst / "manifest.json").read_text())
    assert [e["url"] for e in manifest["shardlist"]] == ["shard-000000.tar", "shard-000001.tar"]
    check_exact(dst, manifest)


def test_an_interrupted_overwrite_restarted_with_overwrite_removes_the_first_runs_shards(
    src, tmp_path
):
    dst = tmp_path / "out"
    first_run(run_ishard, src, dst)
    interrupted(src, str(dst), *MIDDLE, "--overwrite")  # the first manifest is gone now
    done = invoke_ishard("shard", src, dst, *BIG, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "removed 5 archives of the earlier run" in done.stdout
    check_exact(dst, json.loads((dst / "manifest.json").read_text()))


# ---------------------------------------------------------------- S3


@pytest.fixture
def s3(s3_server, s3_bucket):
    """``run(*args)``: ishard against the test server; ``env`` for a subprocess of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and k.lower() not in ("http_proxy", "https_proxy")
    }
    env.update(
        AWS_ACCESS_KEY_ID=s3_server.access_key,
        AWS_SECRET_ACCESS_KEY=s3_server.secret_key,
        NO_PROXY="127.0.0.1,localhost",
    )
    extra = ("--endpoint-url", s3_server.endpoint_url)

    def run(*args):
        return run_ishard(*args, *extra, env=env)

    run.env, run.extra, run.client = env, extra, s3_server.client()
    return run


def download(client, bucket: str, prefix: str, into: Path) -> dict:
    """Every object under ``prefix`` into ``into`` (hidden run records left out); the manifest."""
    into.mkdir()
    keys = [
        o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    ]
    for key in keys:
        name = key[len(prefix) :]
        if not name.startswith("."):
            (into / name).write_bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    return json.loads((into / "manifest.json").read_text())


def test_s3_overwrite_leaves_exactly_the_new_output_and_other_objects(s3, s3_bucket, src, tmp_path):
    dst = f"s3://{s3_bucket}/out"
    first_run(s3, src, dst)
    done = s3("shard", src, dst, *BIG, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "removed 5 archives of the earlier run that this run did not rewrite" in done.stdout
    check_exact(tmp_path / "a", download(s3.client, s3_bucket, "out/", tmp_path / "a"))
    verified = s3("verify", dst)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # objects that are not ishard's stay
    first_run(lambda *a: s3(*a, "--overwrite"), src, dst)
    for key in ("out/notes.txt", "out/other.tar"):
        s3.client.put_object(Bucket=s3_bucket, Key=key, Body=b"mine")
    done = s3("shard", src, dst, *BIG, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "removed 5 archives" in done.stdout
    manifest = download(s3.client, s3_bucket, "out/", tmp_path / "b")
    check_exact(tmp_path / "b", manifest, {"notes.txt", "other.tar"})
    (tmp_path / "b" / "other.tar").unlink()  # the copy's, for the teardown's verify


def test_s3_interrupted_overwrite_then_resume_leaves_exactly_the_new_output(
    s3, s3_bucket, src, tmp_path
):
    dst = f"s3://{s3_bucket}/out"
    first_run(s3, src, dst)
    interrupted(src, dst, *MIDDLE, "--overwrite", *s3.extra, env=s3.env)
    keys = [
        o["Key"]
        for o in s3.client.list_objects_v2(Bucket=s3_bucket, Prefix="out/").get("Contents", [])
    ]
    assert "out/manifest.json" not in keys
    assert len(shards(k.removeprefix("out/") for k in keys)) == 6  # none removed yet
    done = s3("shard", src, dst, *MIDDLE, "--resume")
    assert done.returncode == 0, done.stderr
    assert "removed 4 archives of the earlier run" in done.stdout
    check_exact(tmp_path / "a", download(s3.client, s3_bucket, "out/", tmp_path / "a"))
