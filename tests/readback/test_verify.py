"""``ishard verify``: shards written by the installed ishard, damaged with the standard tools.

Every expectation (checksums, sizes, member counts, sample keys) is computed here with the hash libraries,
tarfile, zipfile and lz4, never with ishard's own code.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers import (
    FIXTURES,
    VANISH,
    assert_error,
    checksum_fields,
    invoke_ishard,
    make_tree,
    recorded_checksum,
    shard_checksum,
    stem,
    tar_codec,
)
from helpers import read_members as shard_members

from ishard.errors import DataError
from ishard.formats import FORMATS as REGISTRY
from ishard.readback.verify import verify
from ishard.run.manifest import member_key_function

FORMATS = tuple(f.exts[0] for f in REGISTRY)  # each format once, by its own extension
SOURCE = FIXTURES / "imagenet"


# ---------------------------------------------------------------- helpers


def refresh_checksum(e: dict, path: Path) -> None:
    """Make a shardlist entry's recorded checksum (of whichever algorithm) fit the file."""
    algorithm, _ = recorded_checksum(e)
    e.update(checksum_fields(path.read_bytes(), algorithm))


def checksum_line(name: str, path: Path, recorded_entry: dict) -> str:
    """verify's line for a shard whose checksum differs from the recorded one."""
    algorithm, value = recorded_checksum(recorded_entry)
    found = shard_checksum(path.read_bytes(), algorithm)
    return f"{name}: {algorithm} is {found}, the manifest says {value}{CHANGED}"


# what verify's line about a changed shard says to do
CHANGED = (
    " — the shard changed after ishard wrote it (damaged or replaced): run the ishard "
    "shard command that wrote it again with --resume, which rewrites such shards (or "
    "--overwrite to start over)"
)


def manifest(dst: Path) -> dict:
    return json.loads((dst / "manifest.json").read_text())


def entry(dst: Path, name: str) -> dict:
    return next(e for e in manifest(dst)["shardlist"] if e["url"] == name)


def files_of(dst: Path, name: str) -> int:
    return next(s["files"] for s in manifest(dst)["ishard"]["shards"] if s["name"] == name)


def read_members(path: Path) -> list[tuple[str, bytes]]:
    """The shard's members in archive order, with their bytes."""
    return shard_members(path.name, path.read_bytes())


def write_members(path: Path, members: list[tuple[str, bytes]]) -> None:
    """Rewrite the shard at ``path`` (same format) to hold exactly ``members``."""
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in members:
                zf.writestr(name, data)
        return
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    packed = tar_codec(path.name)[0](raw)
    if path.name.endswith(".tar.zst"):  # one frame, and the seek table --deep reads
        table = struct.pack("<II", len(packed), len(raw)) + struct.pack("<IBI", 1, 0, 0x8F92EAB1)
        packed += struct.pack("<II", 0x184D2A5E, len(table)) + table
    path.write_bytes(packed)


def fix_manifest(dst: Path, *names: str) -> None:
    """Make the manifest agree with the shards ``names`` as they are now (size, checksum, member
    count, samples, payload), so only what cannot be fixed that way is left to find."""
    doc = manifest(dst)
    for name in names:
        members = read_members(dst / name)
        e = next(e for e in doc["shardlist"] if e["url"] == name)
        e.update(filesize=(dst / name).stat().st_size, nsamples=len({stem(m) for m, _ in members}))
        refresh_checksum(e, dst / name)
        r = next(r for r in doc["ishard"]["shards"] if r["name"] == name)
        r.update(files=len(members), payload_bytes=sum(len(d) for _, d in members))
    (dst / "manifest.json").write_text(json.dumps(doc, indent=2))


def check(dst, *args):
    return invoke_ishard("verify", dst, *args)


def problem_lines(result) -> list[str]:
    """stdout lines before the summary; the summary is checked to be the last line."""
    lines = result.stdout.splitlines()
    assert lines and lines[-1].startswith("verified "), result.stdout
    return lines[:-1]


def assert_clean(result, shards: int) -> None:
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stderr == ""
    assert problem_lines(result) == []
    assert result.stdout.startswith(f"verified {shards} shards (")
    assert result.stdout.rstrip().endswith(": all ok")


def assert_problems(result, expected: list[str], affected: int, shards: int) -> None:
    """Exit 1, exactly ``expected`` problem lines (in order), and the summary's counts."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert problem_lines(result) == expected
    summary = result.stdout.splitlines()[-1]
    plural = "s" if len(expected) != 1 else ""
    assert summary.endswith(
        f": {len(expected)} problem{plural} ({affected} of {shards} listed shards affected)"
    ), summary


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    """The fixture dataset sharded once per format by the installed command."""
    out = {}
    for ext in FORMATS:
        dst = tmp_path_factory.mktemp("written") / ext.strip(".")
        result = invoke_ishard("shard", SOURCE, dst, "--shard-size", "256KiB", "--ext", ext)
        assert result.returncode == 0, result.stderr
        out[ext] = dst
    return out


@pytest.fixture
def shards(written, tmp_path):
    """``shards(ext)``: a fresh copy of that format's shards to damage."""

    def copy(ext: str) -> Path:
        dst = tmp_path / ext.strip(".")
        shutil.copytree(written[ext], dst)
        return dst

    return copy


def shard_names(dst: Path) -> list[str]:
    return [e["url"] for e in manifest(dst)["shardlist"]]


# ---------------------------------------------------------------- clean runs


@pytest.mark.parametrize("ext", FORMATS)
def test_clean_shards_verify_with_and_without_deep(written, ext):
    dst = written[ext]
    n = len(shard_names(dst))
    assert n == 6
    for args in ((), ("--deep",)):
        result = check(dst, *args)
        assert_clean(result, n)
        assert "size, checksum, members" in result.stdout
    assert "member data, samples" in check(dst, "--deep").stdout


def test_progress_lines_without_a_terminal(written):
    result = check(written[".tar"], "--progress")
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    total = sum(e["filesize"] for e in manifest(written[".tar"])["shardlist"])
    assert lines[0] == f"ishard: verifying 6 shards, {total / 2**20:.2f}MiB"
    assert lines[-1].startswith(
        f"ishard: read {total / 2**20:.2f}MiB of {total / 2**20:.2f}MiB (100%), 6/6 shards, "
    )


# ---------------------------------------------------------------- damage, per format


@pytest.mark.parametrize("ext", FORMATS)
def test_a_flipped_byte_is_a_checksum_mismatch(shards, ext):
    dst = shards(ext)
    name = shard_names(dst)[1]
    path = dst / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    result = check(dst)
    assert result.returncode == 1
    lines = problem_lines(result)
    assert checksum_line(name, path, entry(dst, name)) in lines
    assert all(line.startswith(f"{name}: ") for line in lines), lines
    assert "(1 of 6 listed shards affected)" in result.stdout


def test_a_changed_shard_names_the_fix_and_the_fix_mends_it(shards):
    """Finding: a checksum mismatch named no fix. The line says what happened and what to run;
    running it rewrites the shard, and verify is clean again."""
    dst = shards(".tar")
    name = shard_names(dst)[3]
    data = bytearray((dst / name).read_bytes())
    data[len(data) // 3] ^= 0x40
    (dst / name).write_bytes(bytes(data))
    lines = problem_lines(check(dst))
    assert len(lines) == 1 and lines[0].startswith(f"{name}: xxh128 is "), lines
    assert lines[0].endswith(CHANGED)
    fixed = invoke_ishard(
        "shard", SOURCE, dst, "--shard-size", "256KiB", "--ext", ".tar", "--resume"
    )
    assert fixed.returncode == 0, fixed.stderr
    assert_clean(check(dst), 6)


@pytest.mark.parametrize("ext", FORMATS)
def test_a_truncated_shard_fails_size_and_cannot_be_read_back(shards, ext):
    dst = shards(ext)
    name = shard_names(dst)[2]
    path = dst / name
    expected_size = path.stat().st_size
    os.truncate(path, expected_size // 2)
    result = check(dst, "--deep")
    lines = problem_lines(result)
    assert result.returncode == 1
    assert (
        lines[0]
        == f"{name}: size is {expected_size // 2} bytes, the manifest says {expected_size} bytes"
    )
    assert lines[1] == checksum_line(name, path, entry(dst, name))
    assert lines[2].startswith(f"{name}: cannot be read: "), lines
    assert len(lines) == 3


@pytest.mark.parametrize("ext", FORMATS)
def test_a_deleted_shard_is_missing(shards, ext):
    dst = shards(ext)
    name = shard_names(dst)[0]
    (dst / name).unlink()
    assert_problems(check(dst), [f"{name}: is missing (the manifest lists it)"], 1, 6)


def _replace(path: Path, kind: str) -> str:
    """Put something other than the shard under its name; the words verify must use."""
    other = min(p for p in path.parent.glob("shard-*") if p != path)
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO"
    if kind == "dir":
        path.mkdir()
        return "a directory"
    path.symlink_to("/dev/zero" if kind == "link-dev-zero" else other.name)
    return "a symbolic link"


@pytest.mark.parametrize("kind", ["fifo", "link-dev-zero", "link-other-shard", "dir"])
def test_a_shard_replaced_by_a_fifo_a_link_or_a_directory_is_reported_not_read(shards, kind):
    """Each is a problem of its own shard, exit 1, and never read: a FIFO without a writer or
    /dev/zero would block or never end (the subprocess timeout is only a safety net)."""
    dst = shards(".tar")
    name = shard_names(dst)[1]
    what = _replace(dst / name, kind)
    result = subprocess.run(
        [sys.executable, "-m", "ishard", "verify", str(dst), "--deep"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_problems(
        result,
        [
            (
                f"{name}: is not a regular file ({what}) — verify reads only "
                "regular files; put the shard itself back"
            )
        ],
        1,
        6,
    )
    assert result.stderr == ""


@pytest.mark.parametrize("ext", FORMATS)
def test_an_appended_member_is_a_member_count_mismatch(shards, ext):
    dst = shards(ext)
    name = shard_names(dst)[3]
    path = dst / name
    files = files_of(dst, name)
    if ext in (".tar", ".zip"):  # appended in place, as a user's tool would
        if ext == ".zip":
            with zipfile.ZipFile(path, "a") as zf:
                zf.writestr("extra/notes.txt", b"hello")
        else:
            with tarfile.open(path, "a") as tar:
                info = tarfile.TarInfo("extra/notes.txt")
                info.size = 5
                tar.addfile(info, io.BytesIO(b"hello"))
    else:
        write_members(path, read_members(path) + [("extra/notes.txt", b"hello")])
    assert len(read_members(path)) == files + 1
    fix = entry(dst, name)
    assert_problems(
        check(dst),
        [
            f"{name}: size is {path.stat().st_size} bytes, the manifest says {fix['filesize']} bytes",
            checksum_line(name, path, fix),
            f"{name}: member count is {files + 1}, the manifest says {files}",
        ],
        1,
        6,
    )


@pytest.mark.parametrize("ext", FORMATS)
def test_a_member_moved_to_another_shard_splits_its_sample_under_deep(shards, ext):
    dst = shards(ext)
    first, second = shard_names(dst)[:2]
    members = read_members(dst / first)
    moved = next(m for m in members if m[0].endswith(".xml"))  # a sample's annotation
    key = stem(moved[0])
    assert sum(stem(m) == key for m, _ in members) == 2  # its image stays behind
    write_members(dst / first, [m for m in members if m != moved])
    write_members(dst / second, read_members(dst / second) + [moved])
    fix_manifest(dst, first, second)  # sizes, checksums and counts agree: only grouping is wrong
    assert_clean(check(dst), 6)
    assert_problems(
        check(dst, "--deep"),
        [
            f"{second}: sample {key!r} is split: {first!r} holds some of its members too",
        ],
        1,
        6,
    )


def test_members_of_a_sample_apart_within_a_shard_are_found_under_deep(shards):
    dst = shards(".tar")
    name = shard_names(dst)[0]
    members = read_members(dst / name)
    assert stem(members[0][0]) == stem(members[1][0]) != stem(members[2][0])
    members.append(members.pop(1))  # sample 0's second file now comes last
    write_members(dst / name, members)
    fix_manifest(dst, name)
    assert_clean(check(dst), 6)
    assert_problems(
        check(dst, "--deep"),
        [
            (
                f"{name}: members of sample {stem(members[0][0])!r} are not side by side: "
                f"{members[-1][0]!r} follows another sample's"
            ),
        ],
        1,
        6,
    )


def test_deep_finds_damaged_member_data_that_the_manifest_cannot(shards):
    dst = shards(".zip")
    name = shard_names(dst)[0]
    path = dst / name
    first = read_members(path)[0]
    data = path.read_bytes()
    at = data.index(first[1][:64]) + 10  # inside the first member's stored bytes
    path.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])
    fix_manifest_without_reading(dst, name)
    assert_clean(check(dst), 6)  # sizes and checksums agree, the central directory is intact
    assert_problems(
        check(dst, "--deep"),
        [
            f"{name}: cannot be read: member {first[0]!r}: Bad CRC-32 for file {first[0]!r}",
        ],
        1,
        6,
    )


def fix_manifest_without_reading(dst: Path, name: str) -> None:
    doc = manifest(dst)
    e = next(e for e in doc["shardlist"] if e["url"] == name)
    e.update(filesize=(dst / name).stat().st_size)
    refresh_checksum(e, dst / name)
    (dst / "manifest.json").write_text(json.dumps(doc))


# ---------------------------------------------------------------- no checksum, strays, options


def test_without_a_checksum_sizes_are_still_checked(tmp_path):
    dst = tmp_path / "out"
    done = invoke_ishard("shard", SOURCE, dst, "--shard-size", "256KiB", "--checksum", "none")
    assert done.returncode == 0, done.stderr
    assert all(recorded_checksum(e) is None for e in manifest(dst)["shardlist"])
    result = check(dst, "--deep")
    assert_clean(result, 6)
    assert "(no checksum recorded)" in result.stdout
    name = shard_names(dst)[4]
    size = (dst / name).stat().st_size
    with open(dst / name, "ab") as f:
        f.write(b"\0" * 512)
    assert_problems(
        check(dst),
        [
            f"{name}: size is {size + 512} bytes, the manifest says {size} bytes{CHANGED}",
        ],
        1,
        6,
    )


def strip_checksums(dst: Path, record: bool = True) -> None:
    """Take every shard's checksum out of the manifest (and its 'ishard' record, unless
    ``record``), as an edit would."""
    doc = manifest(dst)
    for e in doc["shardlist"]:
        e.pop("checksum", None)
        e.pop("md5sum", None)
    if not record:
        del doc["ishard"]
    (dst / "manifest.json").write_text(json.dumps(doc))


@pytest.mark.damaged_destination
def test_a_manifest_stripped_of_its_checksums_fails_when_its_options_recorded_them(shards):
    """The manifest says the run recorded an xxh128 checksum for every shard (--checksum): an
    entry without one is a problem, so a changed byte inside a member (which tar has no way to
    notice) cannot pass as "all ok", with or without --deep."""
    dst = shards(".tar")
    assert manifest(dst)["ishard"]["options"]["checksum"] == "xxh128"
    names = shard_names(dst)
    path = dst / names[1]
    members = read_members(path)
    data = bytearray(path.read_bytes())
    data[data.index(members[0][1][:64]) + 10] ^= 0xFF  # inside the first member's data
    path.write_bytes(bytes(data))
    strip_checksums(dst)
    for args in ((), ("--deep",)):
        result = check(dst, *args)
        assert_problems(result, [
            f"{name}: has no checksum in the manifest, though the run recorded one for every "
            "shard (--checksum xxh128) — the manifest was edited, so its bytes cannot be "
            "checked: restore the manifest the run wrote, or rewrite the shards"
            for name in names
        ], 6, 6)  # fmt: skip
    found = verify(dst, deep=True)
    assert [(p.name, p.kind, p.expected) for p in found.problems] == [
        (name, "checksum_missing", "xxh128") for name in names
    ]


@pytest.mark.damaged_destination
@pytest.mark.parametrize("ext", tuple(f.exts[0] for f in REGISTRY if f.container.name == "tar"))
def test_deep_finds_a_damaged_header_that_ends_tar_reading_early(shards, ext):
    """A damaged member header past the first makes tar readers stop there as if the archive
    ended. With the manifest's checksums and record gone, nothing recorded can tell; --deep
    still finds that data follows the point where reading stopped."""
    dst = shards(ext)
    name = shard_names(dst)[2]
    path = dst / name
    raw = path.read_bytes()
    compress, decompress = tar_codec(name)
    plain = decompress(raw)
    with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
        header = tar.getmembers()[3].offset
    damaged = bytearray(plain)
    damaged[header + 10] ^= 0x41  # a byte of the fourth member's name: its header sum fails
    path.write_bytes(compress(bytes(damaged)))
    strip_checksums(dst, record=False)
    doc = manifest(dst)
    entry_of = next(e for e in doc["shardlist"] if e["url"] == name)
    entry_of["filesize"] = path.stat().st_size  # recompressed: the size the manifest says too
    (dst / "manifest.json").write_text(json.dumps(doc))
    assert check(dst).returncode == 0  # nothing recorded to compare with
    result = check(dst, "--deep")
    assert result.returncode == 1, result.stdout
    lines = problem_lines(result)
    assert len(lines) == 1 and lines[0].startswith(
        f"{name}: cannot be read: the member header at byte {header} is damaged: tar readers "
        "stop there, and "
    ), lines


def test_unlisted_archives_are_problems_and_temp_files_warnings(shards):
    dst = shards(".tar")
    shutil.copy(dst / "shard-000000.tar", dst / "shard-000099.tar")
    (dst / "sub").mkdir()
    (dst / "sub" / "old.tgz").write_bytes(b"x")
    (dst / "notes.txt").write_text("not a shard")
    (dst / ".shard-000003.tar.4242.ishard-tmp").write_bytes(b"partial")
    result = check(dst)
    unlisted = (
        ": looks like a shard but the manifest does not list it (left by another run?) — "
        "readers that glob the shards would take it too: delete it, or move it out of the "
        "destination"
    )
    assert_problems(result, ["shard-000099.tar" + unlisted, "sub/old.tgz" + unlisted], 0, 6)
    assert result.stderr.splitlines() == [
        (
            "ishard: warning: leftover temp file '.shard-000003.tar.4242.ishard-tmp' from an "
            "interrupted run — safe to delete once no ishard run writes to this destination"
        )
    ]
    for stray in ("shard-000099.tar", "sub/old.tgz"):
        (dst / stray).unlink()
    only_temp = check(dst)
    assert only_temp.returncode == 0 and "warning: leftover temp file" in only_temp.stderr


def test_a_shard_of_an_unfinished_run_is_told_to_be_listed_by_resuming_it(tmp_path):
    """An ``--append`` that failed after writing some of its new shards leaves them beside
    the old manifest, unlisted: verify names each one and the resume that lists it; after
    that resume verify finds nothing."""
    args = ("--shard-size", "1", "--no-progress", "--jobs", "1")  # a sample a shard
    src = make_tree(tmp_path / "src", {f"old/s{i}.bin": 3000 for i in range(3)})
    dst = tmp_path / "out"
    assert invoke_ishard("shard", src, dst, *args).returncode == 0
    make_tree(src, {f"new/t{i}.bin": 3000 for i in range(3)}, mtime=1_700_000_500)
    last = src / "new" / "t2.bin"  # gone once the append has planned: its shard fails
    failed = subprocess.run(
        [sys.executable, "-c", VANISH, str(last), "shard", str(src), str(dst), *args, "--append"],
        capture_output=True,
        check=False,
        text=True,
    )
    assert failed.returncode == 1 and "cannot read" in failed.stderr, failed.stderr
    os.rename(f"{last}.away", last)
    listed = set(shard_names(dst))
    written = sorted(p.name for p in dst.glob("*.tar") if p.name not in listed)
    assert len(written) == 2 and len(listed) == 3
    fix = (
        ": looks like a shard but the manifest does not list it — a run into this destination "
        "has not finished (.ishard-run/ holds its records): resume it (the same ishard shard "
        "command with --resume) to list its shards, or, if this file is not one of them, "
        "delete it"
    )
    assert_problems(check(dst), [name + fix for name in written], 0, 3)
    resumed = invoke_ishard("shard", src, dst, *args, "--append", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert_clean(check(dst), 6)


@pytest.mark.parametrize(
    "options",
    [
        ("--ekm", str(FIXTURES / "ekm.json")),
        ("--sample-key-pattern", "full_name", "--collapse", "--shard-size", "100KiB"),
        ("--sample-key-pattern", r"(n\d+_\d+|ILSVRC2012_val_\d+)", "--sort", "shuffle:7"),
    ],
    ids=["ekm", "full-name-collapse", "regex-shuffle"],
)
def test_deep_uses_the_recorded_key_options(tmp_path, options):
    dst = tmp_path / "out"
    result = invoke_ishard("shard", SOURCE, dst, *options)
    assert result.returncode == 0, result.stderr
    n = len(shard_names(dst))
    assert_clean(check(dst, "--deep", "--jobs", "2"), n)


def test_json_output(written, shards):
    clean = check(written[".tgz"], "--json", "--deep")
    assert clean.returncode == 0 and clean.stderr == ""
    doc = json.loads(clean.stdout)
    assert doc["ok"] is True and doc["problems"] == [] and doc["deep"] is True
    assert doc["bytes_read"] == sum(p.stat().st_size for p in written[".tgz"].glob("*.tgz"))
    dst = shards(".tgz")
    name = shard_names(dst)[5]
    (dst / name).unlink()
    result = check(dst, "--json")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["shards"] == 6 and doc["shards_ok"] == 5
    assert doc["problems"] == [
        {
            "name": name,
            "kind": "missing",
            "detail": "is missing (the manifest lists it)",
            "expected": None,
            "found": None,
        }
    ]


def test_python_api_returns_problems_and_prints_nothing(shards, capsys):
    dst = shards(".tar.lz4")
    name = shard_names(dst)[1]
    os.truncate(dst / name, 100)
    result = verify(dst, deep=True)
    assert not result.ok and result.shards == 6 and result.shards_ok == 5
    assert [p.kind for p in result.problems] == ["size", "xxh128", "unreadable"]
    assert result.problems[0].expected == entry(dst, name)["filesize"]
    assert result.problems[0].found == 100
    assert capsys.readouterr() == ("", "")


def test_member_keys_follow_the_recorded_naming():
    original = member_key_function({"sample_key_pattern": "base_file_name"})
    assert original("Data/train/x/n01_1.JPEG") == "n01_1"
    assert member_key_function({"sample_key_pattern": "full_name"})("a/b.c.jpg") == "a/b.c"
    sample = member_key_function({"member_names": "sample", "sample_key_pattern": "base_file_name"})
    assert sample("Data/train/x/n01_1.JPEG") == "Data/train/x/n01_1"


def test_a_recorded_key_regex_that_re2_refuses_is_a_clear_error():
    # e.g. a lookahead recorded by an ishard before RE2: --deep cannot rebuild the keys
    with pytest.raises(DataError) as err:
        member_key_function({"sample_key_pattern": "^(.*)(?=_)"})
    assert str(err.value).startswith(
        "the manifest's sample_key_pattern '^(.*)(?=_)' is not a valid RE2 regex"
    )
    assert member_key_function({"sample_key_pattern": r"^(.*)_\d+"})("a/b_1.jpg") == "a/b"


# ---------------------------------------------------------------- errors


def test_errors_name_the_destination_and_the_fix(tmp_path, shards):
    assert_error(check(tmp_path / "nope"), 2, "'" + str(tmp_path / "nope") + "'", "does not exist")
    (tmp_path / "empty").mkdir()
    assert_error(check(tmp_path / "empty"), 1, "no manifest.json in", "run ishard shard again")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("{not json")
    assert_error(check(tmp_path / "bad"), 1, "is not an ishard manifest", "invalid JSON")
    (tmp_path / "bad" / "manifest.json").write_text(
        json.dumps({"shardlist": [{"url": "../elsewhere.tar", "filesize": 1, "nsamples": 1}]})
    )
    assert_error(check(tmp_path / "bad"), 1, "shardlist entry 0 needs a relative 'url'")
    (tmp_path / "file").write_text("x")
    assert_error(check(tmp_path / "file"), 2, "is a file", "manifest.json")
    assert_error(check(shards(".tar"), "--jobs", "-1"), 2, "--jobs '-1'")


# ---------------------------------------------------------------- S3


def test_s3_destination_with_a_damaged_and_a_missing_object(cli, client, s3_bucket):
    result = cli(
        "shard", SOURCE, f"s3://{s3_bucket}/out", "--shard-size", "256KiB", "--ext", ".tgz"
    )
    assert result.returncode == 0, result.stderr
    clean = cli("verify", f"s3://{s3_bucket}/out", "--deep")
    assert_clean(clean, 6)
    doc = json.loads(client.get_object(Bucket=s3_bucket, Key="out/manifest.json")["Body"].read())
    damaged, gone = doc["shardlist"][1], doc["shardlist"][4]
    body = client.get_object(Bucket=s3_bucket, Key=f"out/{damaged['url']}")["Body"].read()
    flipped = body[:100] + bytes([body[100] ^ 0xFF]) + body[101:]
    client.put_object(Bucket=s3_bucket, Key=f"out/{damaged['url']}", Body=flipped)
    client.delete_object(Bucket=s3_bucket, Key=f"out/{gone['url']}")
    result = cli("verify", f"s3://{s3_bucket}/out", "--deep")
    lines = problem_lines(result)
    assert result.returncode == 1
    algorithm, value = recorded_checksum(damaged)
    assert lines[0] == (
        f"{damaged['url']}: {algorithm} is {shard_checksum(flipped, algorithm)}, "
        f"the manifest says {value}{CHANGED}"
    )
    assert lines[1].startswith(f"{damaged['url']}: cannot be read: ")
    assert lines[2] == f"{gone['url']}: is missing (the manifest lists it)"
    assert len(lines) == 3
    assert result.stdout.rstrip().endswith("(2 of 6 listed shards affected)")
    missing = cli("verify", f"s3://{s3_bucket}/nothing-here")
    assert_error(missing, 2, "does not exist")


def test_sample_named_members_with_a_two_part_extension_verify_deep(tmp_path):
    """--member-names sample names members <key>.<extension>, the extension after the
    basename's first dot (``cat_0000.seg.png`` is sample ``cat_0000``, as WebDataset reads it):
    verify --deep must count the samples the run wrote, not split such members off."""
    src = tmp_path / "src"
    for i in range(6):
        for name, data in (
            (f"images/c_{i}.jpg", b"j" * (50 + i)),
            (f"masks/c_{i}.seg.png", b"m"),
            (f"captions/c_{i}.txt", b"t"),
        ):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes(data)
    done = invoke_ishard(
        "shard",
        src,
        tmp_path / "dst",
        "--member-names",
        "sample",
        "--no-progress",
        "--sample-key-pattern",
        r"^(?:.*/)?([^/.]+)\..*$",
        "--shard-size",
        "200B",
    )
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / "dst" / "shard-000000.tar") as tar:
        assert "c_0.seg.png" in tar.getnames()
    checked = invoke_ishard("verify", tmp_path / "dst", "--deep")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (
        json.loads((tmp_path / "dst" / "manifest.json").read_text())["ishard"]["totals"]["samples"]
        == 6
    )


def test_verbose_verify_logs_each_shard_with_its_problems(tmp_path):
    """``verify -v``: a line per shard on stderr, in manifest order, "ok" or its problem count;
    the summary still on stdout."""
    dst = tmp_path / "out"
    done = invoke_ishard("shard", FIXTURES / "imagenet", dst, "--shard-size", "256KiB")
    assert done.returncode == 0, done.stderr
    names = [e["url"] for e in json.loads((dst / "manifest.json").read_text())["shardlist"]]
    (dst / names[1]).write_bytes((dst / names[1]).read_bytes()[:1000])
    done = invoke_ishard("verify", dst, "-v")
    assert done.returncode == 1 and "\nverified 6 shards" in done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith("ishard: check")]
    assert lines[0] == f"ishard: checking 6 shards listed in {dst}"
    assert [line.split(":")[1].split()[-1] for line in lines[1:]] == names
    assert lines[1].endswith(", ok") and lines[2].endswith("problems")
    assert all(line.endswith(", ok") for line in lines[3:])
