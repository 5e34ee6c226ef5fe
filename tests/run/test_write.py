"""Writing shards: byte-for-byte determinism, atomic results, clean failures and --overwrite.

Shards are checked by their bytes and with tarfile / zipfile, never with ishard's own readers.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    DATASET_RECORDS,
    entry_matches,
    invoke_ishard,
    make_tree,
    member_names,
    read_shard,
    recorded_checksum,
    shard_files,
    without_root_powers,
)
from helpers import SMALL_TREE as TREE

import ishard
from ishard.errors import SourceError
from ishard.formats import ARCHIVE_EXTS
from ishard.progress import Progress

# TREE's sample 0005 has a .bin file in two directories, and these tests find members by
# their source paths: the runs keep source paths as member names.
SHARD_ARGS = ("--shard-size", "4KiB", "--no-progress", "--member-names", "original")


def shard(src: Path, dst: Path, **options) -> ishard.Report:
    """``ishard.shard`` keeping source paths as member names."""
    return ishard.shard(src, dst, member_names="original", **options)


def shard_cli(src: Path, dst: Path, *args: str) -> subprocess.CompletedProcess:
    done = invoke_ishard("shard", src, dst, *SHARD_ARGS, *args)
    assert done.returncode == 0, done.stderr
    return done


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry under ``root`` (hidden ones included) with its bytes and mtime_ns."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel] = (path.read_bytes() if path.is_file() else b"<dir>", path.stat().st_mtime_ns)
    return out


def shard_bytes(dst: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in shard_files(dst)}


def manifest(dst: Path) -> dict:
    return json.loads((dst / "manifest.json").read_text())


# ---------------------------------------------------------------- determinism


VARIANTS = [(ext,) for ext in ARCHIVE_EXTS] + [
    (".zip", "--zip-compression", "deflated"),
    (".tgz", "--compress-level", "1", "--sort", "shuffle:7"),
    (".tar.lz4", "--compress-level", "9", "--sort", "alpha:dec"),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=" ".join)
def test_same_command_twice_gives_byte_identical_shards(variant, tmp_path):
    ext, *extra = variant
    src = make_tree(tmp_path / "src", TREE)
    # a second copy made in the opposite order, so directory order differs on disk
    copy = make_tree(tmp_path / "copy", dict(reversed(list(TREE.items()))))
    shard_cli(src, tmp_path / "one", "--ext", ext, *extra)
    shard_cli(copy, tmp_path / "two", "--ext", ext, *extra)
    one, two = shard_bytes(tmp_path / "one"), shard_bytes(tmp_path / "two")
    assert len(one) >= 3 and all(name.endswith(ext) for name in one)
    assert one == two
    assert manifest(tmp_path / "one")["shardlist"] == manifest(tmp_path / "two")["shardlist"]


@pytest.mark.parametrize("ext", ARCHIVE_EXTS)
def test_jobs_1_and_jobs_4_give_byte_identical_shards(ext, tmp_path):
    files = {**TREE, **{f"many/{i:04d}.bin": 1500 + i for i in range(24)}}
    src = make_tree(tmp_path / "src", files)
    shard_cli(src, tmp_path / "serial", "--ext", ext, "--jobs", "1")
    shard_cli(src, tmp_path / "parallel", "--ext", ext, "--jobs", "4")
    serial, parallel = shard_bytes(tmp_path / "serial"), shard_bytes(tmp_path / "parallel")
    assert len(serial) > 8
    assert serial == parallel
    lists = [manifest(tmp_path / d)["shardlist"] for d in ("serial", "parallel")]
    assert lists[0] == lists[1]


# ---------------------------------------------------------------- what a finished run leaves


@pytest.mark.parametrize("ext", ARCHIVE_EXTS)
def test_successful_run_leaves_only_shards_and_manifest(ext, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    before = snapshot(src)
    dst = tmp_path / "dst"
    shard_cli(src, dst, "--ext", ext, "--jobs", "4")
    listed = [entry["url"] for entry in manifest(dst)["shardlist"]]
    assert sorted(os.listdir(dst)) == sorted(listed + [*DATASET_RECORDS])
    for name in listed:
        assert read_shard(dst / name), name  # complete and readable
    assert snapshot(src) == before, "the source was changed"


# ---------------------------------------------------------------- failures while writing


class Meddle(Progress):
    """Changes the source after planning, before any shard is written (a racing writer)."""

    def __init__(self, action) -> None:
        self.action = action

    def planned(self, shards: int, nbytes: int) -> None:
        self.action()


def _vanish(path: Path) -> None:
    path.unlink()


def _shrink(path: Path) -> None:
    os.truncate(path, path.stat().st_size - 1)


def _grow(path: Path) -> None:
    with open(path, "ab") as f:
        f.write(b"+")


def _to_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


@contextlib.contextmanager
def finalizer_errors():
    """Collect what finalizers raise inside the block and at a garbage collection after it."""
    seen: list[str] = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(f"{u.exc_type.__name__}: {u.exc_value}")
    try:
        yield seen
        gc.collect()
    finally:
        sys.unraisablehook = hook


ACTIONS = {
    "vanish": (_vanish, "cannot read"),
    "shrink": (_shrink, "shrank"),
    "grow": (_grow, "grew"),
    "directory": (_to_directory, "cannot read"),
}
# a small file (copied through the writer's buffer) and one above 1 MiB (streamed)
VICTIMS = ("train/a/0002.jpg", "big/0005.bin")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Shards of an undisturbed run per format: {ext: {shard name: bytes}}."""
    cache: dict[str, dict[str, bytes]] = {}

    def get(ext: str) -> dict[str, bytes]:
        if ext not in cache:
            tmp = tmp_path_factory.mktemp("ref")
            src = make_tree(tmp / "src", TREE)
            shard(src, tmp / "dst", ext=ext, shard_size="4KiB", jobs=1)
            cache[ext] = shard_bytes(tmp / "dst")
        return cache[ext]

    return get


def holder(shards: dict[str, bytes], member: str) -> str:
    """The one shard (by name) whose members include ``member``."""
    found = [name for name, data in shards.items() if member in member_names(name, data)]
    assert len(found) == 1, found
    return found[0]


def assert_clean_failure(dst: Path, good: dict[str, bytes], victim: str) -> None:
    """DST holds no temp file, no manifest, not the victim's shard; other shards are exact;
    the run's records for --resume (``.ishard-run/``) hold no temp file either."""
    present = sorted(os.listdir(dst)) if dst.exists() else []
    if ".ishard-run" in present:
        present.remove(".ishard-run")
        records = [p.name for p in (dst / ".ishard-run").rglob("*") if p.is_file()]
        assert records and not [n for n in records if "ishard-tmp" in n], records
    for name in present:
        assert name in good, f"unexpected {name!r} in DST after a failed run"
    assert holder(good, victim) not in present
    for name in present:
        assert (dst / name).read_bytes() == good[name], f"{name} differs from an undisturbed run"
        assert read_shard(dst / name)


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("victim", VICTIMS)
@pytest.mark.parametrize("ext", ARCHIVE_EXTS)
@pytest.mark.parametrize("jobs", [1, 4])
def test_source_changed_after_listing_fails_naming_the_file_and_leaves_no_partial_shard(
    jobs, ext, victim, action, tmp_path, reference
):
    change, words = ACTIONS[action]
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    with finalizer_errors() as late:
        with pytest.raises(SourceError) as caught:
            shard(
                src,
                dst,
                ext=ext,
                shard_size="4KiB",
                jobs=jobs,
                progress=Meddle(lambda: change(src / victim)),
            )
        message = str(caught.value)
        del caught  # its traceback keeps the failed writer alive
    assert repr(victim) in message and words in message, message
    assert "\n" not in message
    assert_clean_failure(dst, reference(ext), victim)
    assert late == [], "an abandoned shard's writer still wrote when it was collected"


CLI_WITH_MEDDLING = """
import os, sys
from ishard import cli
from ishard.progress import Progress

class Vanish(Progress):
    def planned(self, shards, nbytes):
        os.unlink(sys.argv[1])

cli.shard.make_progress = lambda *args, **kwargs: Vanish()
cli.main(sys.argv[2:])
"""


@pytest.mark.parametrize("ext", [".tar", ".zip"])
def test_cli_reports_a_vanished_file_in_one_line_with_exit_1(ext, tmp_path, reference):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    victim = "train/a/0002.jpg"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CLI_WITH_MEDDLING,
            str(src / victim),
            "shard",
            str(src),
            str(dst),
            "--ext",
            ext,
            *SHARD_ARGS,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ishard: error: "), done.stderr
    assert repr(victim) in lines[0]
    assert "Traceback" not in done.stderr
    assert_clean_failure(dst, reference(ext), victim)


def test_cli_unreadable_file_fails_with_its_name(tmp_path, reference):
    src = make_tree(tmp_path / "src", TREE)
    victim = "train/a/0002.jpg"
    os.chmod(src / victim, 0)
    dst = tmp_path / "dst"
    try:
        done = subprocess.run(
            [
                *without_root_powers(),
                sys.executable,
                "-m",
                "ishard",
                "shard",
                str(src),
                str(dst),
                *SHARD_ARGS,
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        os.chmod(src / victim, 0o644)
    assert done.returncode == 1
    assert repr(victim) in done.stderr and "cannot read" in done.stderr
    assert_clean_failure(dst, reference(".tar"), victim)


# ---------------------------------------------------------------- --overwrite


def test_non_empty_destination_is_refused_with_exit_2_and_left_alone(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "notes.txt").write_bytes(b"mine")
    (dst / "shard-000000.tar").write_bytes(b"not a shard")
    before = snapshot(dst)
    done = invoke_ishard("shard", src, dst, *SHARD_ARGS)
    assert done.returncode == 2
    assert done.stderr.startswith("ishard: error: ") and "not empty" in done.stderr
    assert "--overwrite" in done.stderr
    assert snapshot(dst) == before


def test_rerun_into_previous_output_without_overwrite_changes_nothing(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    shard_cli(src, dst)
    before = snapshot(dst)
    (src / "train/a/0002.jpg").write_bytes(b"changed")
    done = invoke_ishard("shard", src, dst, *SHARD_ARGS)
    assert done.returncode == 2, done.stderr
    assert snapshot(dst) == before


@pytest.mark.parametrize("ext", [".tar", ".zip"])
def test_overwrite_replaces_same_named_shards_and_keeps_other_files(ext, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    shard_cli(src, dst, "--ext", ext)
    old = shard_bytes(dst)
    (dst / "notes.txt").write_bytes(b"mine")
    (src / "train/a/0002.jpg").write_bytes(b"new content of the same size".ljust(2500, b"!"))
    os.utime(src / "train/a/0002.jpg", (1_700_000_000, 1_700_000_000))
    shard_cli(src, dst, "--ext", ext, "--overwrite")
    assert (dst / "notes.txt").read_bytes() == b"mine"
    new = {p.name: p.read_bytes() for p in shard_files(dst) if p.name != "notes.txt"}
    assert new.keys() == old.keys()
    changed = holder(old, "train/a/0002.jpg")
    assert [n for n in new if new[n] != old[n]] == [changed]
    now = (src / "train/a/0002.jpg").read_bytes()
    assert dict(read_shard(dst / changed))["train/a/0002.jpg"] == now
    for entry in manifest(dst)["shardlist"]:
        assert entry_matches(entry, new[entry["url"]])
    assert sorted(os.listdir(dst)) == sorted([*new, "notes.txt", *DATASET_RECORDS])


def test_failed_overwrite_run_leaves_no_manifest_that_disagrees_with_the_shards(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    shard_cli(src, dst, "--jobs", "1")
    # change a file of the first shard and make one of a later shard vanish mid-run
    (src / "train/a/0001.jpg").write_bytes(b"x" * 3000)
    os.utime(src / "train/a/0001.jpg", (1_700_000_000, 1_700_000_000))
    victim = src / "train/a/0002.jpg"
    with pytest.raises(SourceError):
        shard(src, dst, shard_size="4KiB", jobs=1, overwrite=True, progress=Meddle(victim.unlink))
    replaced = dict(read_shard(dst / "shard-000000.tar"))
    assert replaced["train/a/0001.jpg"] == b"x" * 3000, "the run did not replace the first shard"
    if (dst / "manifest.json").exists():
        for entry in manifest(dst)["shardlist"]:
            data = (dst / entry["url"]).read_bytes()
            assert entry_matches(entry, data), (
                f"manifest.json describes an old {entry['url']} that the failed run replaced"
            )


# ---------------------------------------------------------------- --checksum none


@pytest.mark.parametrize("ext", ARCHIVE_EXTS)
def test_checksum_none_writes_the_same_shards_and_no_checksum(ext, tmp_path, reference):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    shard(src, dst, ext=ext, shard_size="4KiB", jobs=2, checksum="none")
    assert shard_bytes(dst) == reference(ext)
    entries = manifest(dst)["shardlist"]
    assert [e["url"] for e in entries] == sorted(reference(ext))
    for entry in entries:
        assert recorded_checksum(entry) is None
        assert entry["filesize"] == len(reference(ext)[entry["url"]])
    assert manifest(dst)["ishard"]["options"]["checksum"] == "none"


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("victim", VICTIMS)
@pytest.mark.parametrize("jobs", [1, 4])
def test_source_changed_after_listing_is_seen_without_a_checksum(
    jobs, victim, action, tmp_path, reference
):
    change, words = ACTIONS[action]
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    with pytest.raises(SourceError) as caught:
        shard(
            src,
            dst,
            shard_size="4KiB",
            jobs=jobs,
            checksum="none",
            progress=Meddle(lambda: change(src / victim)),
        )
    message = str(caught.value)
    assert repr(victim) in message and words in message, message
    assert_clean_failure(dst, reference(".tar"), victim)


@pytest.mark.parametrize("algorithm", ["xxh128", "blake3", "sha256", "md5", "none"])
def test_any_checksum_writes_the_same_shards_and_the_digest_is_of_the_file(
    algorithm, tmp_path, reference
):
    """Whatever the checksum, a local shard holds the same bytes (its big member included),
    and the digest recorded is the finished file's."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    shard(src, dst, shard_size="4KiB", jobs=1, checksum=algorithm)
    assert shard_bytes(dst) == reference(".tar")
    for entry in manifest(dst)["shardlist"]:
        data = (dst / entry["url"]).read_bytes()
        if algorithm == "none":
            assert recorded_checksum(entry) is None
        else:
            assert recorded_checksum(entry)[0] == algorithm and entry_matches(entry, data)
