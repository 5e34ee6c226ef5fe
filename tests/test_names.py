"""Names from anywhere: unsafe names are left out and reported (no archive can extract outside
its folder), awkward but safe names round-trip exactly, symbolic links are followed only on
request and never out of the source or round in circles."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import unicodedata
import zipfile
from pathlib import Path

import pytest
from helpers import DATASET_RECORDS, invoke_ishard, joined_paths, make_tree
from hypothesis import HealthCheck, given, settings

# Every finished destination a test here leaves must pass `ishard verify --deep`.
pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# Members are checked against the source tree by path: these runs keep source paths.
ORIGINAL = ("--member-names", "original")
UNSAFE = "unsafe name"


def members(dst: Path) -> list[str]:
    """Every member name of every shard in ``dst``, read with tarfile/zipfile."""
    names = []
    for path in sorted(dst.iterdir()):
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                names += zf.namelist()
        elif path.name not in DATASET_RECORDS:
            with tarfile.open(path, encoding="utf-8", errors="surrogateescape") as tar:
                names += tar.getnames()
    return names


def shard_json(src: Path, dst: Path, *args: str) -> dict:
    done = invoke_ishard("shard", *ORIGINAL, src, dst, "--json", "--no-progress", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def skipped(summary: dict, reason_start: str) -> dict:
    found = [s for s in summary["skipped"] if s["reason"].startswith(reason_start)]
    assert len(found) == 1, summary["skipped"]
    return found[0]


def test_inventory_names_that_would_escape_are_left_out_and_reported(tmp_path):
    """An inventory (--src-list) may name anything; names with '..' parts, absolute names and
    control characters are never read or written, and the summary says so."""
    outside = make_tree(tmp_path / "secret", {"key.txt": b"do not ship"})
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one", "a/2.jpg": b"two"})
    bad = [
        "../secret/key.txt",
        "a/../../secret/key.txt",
        "/etc/hostname",
        "a\\..\\..\\secret\\key.txt",
        "a/bell\x07.jpg",
        "C:\\windows\\x.jpg",
    ]
    inventory = tmp_path / "list.jsonl"
    inventory.write_text(
        "".join(json.dumps({"name": n, "size": 3}) + "\n" for n in ["a/1.jpg", "a/2.jpg", *bad])
    )
    summary = shard_json(src, tmp_path / "out", "--src-list", inventory)
    assert sorted(members(tmp_path / "out")) == ["a/1.jpg", "a/2.jpg"]
    left = skipped(summary, UNSAFE)
    assert left["count"] == len(bad)
    assert set(left["examples"]) <= set(bad) and left["examples"]
    assert outside.joinpath("key.txt").read_bytes() == b"do not ship"


def test_inventory_name_with_a_nul_is_left_out_and_reported_escaped(tmp_path):
    """No local file name can hold a NUL, but an inventory line can ("\\u0000" in JSON). Such a
    name is left out like any control character, and the report shows it escaped: no raw NUL
    reaches the terminal or the JSON summary's text."""
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one", "a/2.jpg": b"two"})
    nul = "a/2.jpg\x00.png"  # cut at the NUL, a C string would name a/2.jpg
    inventory = tmp_path / "list.jsonl"
    inventory.write_text(
        "".join(
            json.dumps({"name": n, "size": 3}) + "\n"
            for n in ["a/1.jpg", "a/2.jpg", "a/nul\x00.jpg", nul]
        )
    )
    assert "\\u0000" in inventory.read_text() and "\x00" not in inventory.read_text()
    summary = shard_json(src, tmp_path / "out", "--src-list", inventory)
    assert sorted(members(tmp_path / "out")) == ["a/1.jpg", "a/2.jpg"]
    left = skipped(summary, UNSAFE)
    assert left["count"] == 2 and sorted(left["examples"]) == sorted(["a/nul\x00.jpg", nul])
    done = invoke_ishard(
        "shard", *ORIGINAL, src, tmp_path / "out2", "--no-progress", "--src-list", inventory
    )
    assert done.returncode == 0, done.stderr
    assert "\x00" not in done.stdout + done.stderr
    assert f"left out 2: {UNSAFE}" in done.stdout and "'a/nul\\x00.jpg'" in done.stdout
    assert sorted(members(tmp_path / "out2")) == ["a/1.jpg", "a/2.jpg"]


def test_local_names_with_control_characters_or_escaping_backslashes_are_left_out(tmp_path):
    src = make_tree(
        tmp_path / "src",
        {
            "ok/1.jpg": b"1",
            "ok/new\nline.jpg": b"2",
            "ok/tab\t.jpg": b"3",
            "ok\\..\\..\\up.jpg": b"4",  # one name on Linux; a path that climbs on Windows
            "ok/back\\slash.jpg": b"5",  # a backslash alone is kept: it climbs nowhere
        },
    )
    for ext in (".tar", ".zip"):
        summary = shard_json(src, tmp_path / f"out{ext}", "--ext", ext)
        assert sorted(members(tmp_path / f"out{ext}")) == ["ok/1.jpg", "ok/back\\slash.jpg"]
        assert skipped(summary, UNSAFE)["count"] == 3
    dry = invoke_ishard("shard", *ORIGINAL, src, "--dry-run")
    assert "left out 3: unsafe name" in dry.stdout


PARTS = ["a", "b.jpg", ".h", "t\tab", "n\nl", "b\\s", "x\\..", "C:d", "..x", "e\x1b", "z.cls"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(paths=joined_paths(PARTS, 12))
def test_a_local_walk_leaves_out_exactly_the_unsafe_and_hidden_names(tmp_path_factory, paths):
    """Trees whose folders and files have control characters, backslashes (one climbing as
    a Windows path), drive-like and hidden names: the walk lists exactly the files no hidden
    folder hides whose whole path is safe and whose name is not hidden, in bytewise order,
    and counts as unsafe exactly the visited files whose whole path is not safe — whether the
    check is made for each file or once for a folder's names."""
    from ishard.model import Tally
    from ishard.names import HIDDEN, UNSAFE, unsafe_name
    from ishard.store.base import SourceListing
    from ishard.store.local.walk import Rows, list_local
    from ishard.store.retry import Retrier

    root = tmp_path_factory.mktemp("tree")
    files = set()
    for path in paths:
        parts = path.split("/")
        if any("/".join(parts[: i + 1]) in files for i in range(len(parts) - 1)):
            continue  # a file where this path needs a folder
        if any(f.startswith(path + "/") for f in files):
            continue  # a folder where this path needs a file
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"x")
        files.add(path)
    visited = [f for f in files if not any(p.startswith(".") for p in f.split("/")[:-1])]
    unsafe = [f for f in visited if unsafe_name(f)]
    hidden = [f for f in visited if f not in unsafe and f.rsplit("/", 1)[-1].startswith(".")]
    wanted = sorted(set(visited) - set(unsafe) - set(hidden), key=lambda n: n.encode())
    rows, tally = Rows(), Tally()
    list_local(str(root), rows, SourceListing("", False, tally, None, Retrier()))
    assert rows.names == wanted
    counts = {s.reason: s.count for s in tally.freeze()}
    assert counts.get(UNSAFE, 0) == len(unsafe) and counts.get(HIDDEN, 0) == len(hidden)


def test_gnu_tar_extracts_every_shard_inside_its_folder(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"1", "a/b/2.jpg": b"2", "c.jpg": b"3"})
    inventory = tmp_path / "list.csv"
    inventory.write_text("name,size\na/1.jpg,1\na/b/2.jpg,1\nc.jpg,1\n../x.jpg,1\n")
    shard_json(src, tmp_path / "out", "--src-list", inventory, "--collapse")
    target = tmp_path / "extract" / "inside"
    target.mkdir(parents=True)
    for shard in (tmp_path / "out").glob("*.tar"):
        subprocess.run(["tar", "-xf", str(shard), "-C", str(target)], check=True)
    assert sorted(p.name for p in (tmp_path / "extract").iterdir()) == ["inside"]
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == [
        "a/1.jpg",
        "a/b/2.jpg",
        "c.jpg",
    ]


def test_unicode_normalisation_variants_spaces_and_long_names_round_trip(tmp_path):
    nfc = unicodedata.normalize("NFC", "caf\u00e9")
    nfd = unicodedata.normalize("NFD", "caf\u00e9")
    assert nfc != nfd
    long_dir = "d" * 120
    files = {  # one of each in its own directory: twins in one folder are refused (below)
        f"u/{nfc}.jpg": b"composed",
        f"v/{nfd}.jpg": b"decomposed",
        "u/with space.jpg": b"space",
        f"{long_dir}/{'n' * 200}.jpg": b"long",  # over 255 bytes in all
    }
    src = make_tree(tmp_path / "src", files)
    for ext in (".tar", ".zip", ".tgz"):
        shard_json(src, tmp_path / f"out{ext}", "--ext", ext, "--collapse")
        assert sorted(members(tmp_path / f"out{ext}")) == sorted(files)
    extracted = tmp_path / "x"
    extracted.mkdir()
    for shard in (tmp_path / "out.tar").glob("*.tar"):
        subprocess.run(["tar", "-xf", str(shard), "-C", str(extracted)], check=True)
    for name, data in files.items():
        assert (extracted / name).read_bytes() == data


# ---------------------------------------------------------------- symbolic links


@pytest.fixture
def linked(tmp_path) -> Path:
    """A source with a file link, a directory link inside the source, a link out of it, a
    loop back to the top, and a dangling link."""
    src = make_tree(tmp_path / "src", {"real/1.jpg": b"one", "real/sub/2.jpg": b"two"})
    make_tree(tmp_path / "elsewhere", {"3.jpg": b"three"})
    os.symlink("real/1.jpg", src / "file-link.jpg")
    os.symlink("real/sub", src / "dir-link")
    os.symlink(tmp_path / "elsewhere", src / "out-link")
    os.symlink("..", src / "real" / "loop")
    os.symlink("nowhere.jpg", src / "dangling.jpg")
    return src


def test_symlinks_are_not_followed_by_default_and_are_reported(linked, tmp_path):
    summary = shard_json(linked, tmp_path / "out", "--collapse")
    assert sorted(members(tmp_path / "out")) == ["real/1.jpg", "real/sub/2.jpg"]
    assert skipped(summary, "symbolic link")["count"] == 5


def test_follow_symlinks_stays_inside_the_source_and_never_loops(linked, tmp_path):
    summary = shard_json(linked, tmp_path / "out", "--collapse", "--follow-symlinks")
    got = members(tmp_path / "out")
    assert sorted(got) == ["file-link.jpg", "real/1.jpg", "real/sub/2.jpg"]
    reasons = {s["reason"].split(" (")[0]: s for s in summary["skipped"]}
    assert reasons["symbolic link leading outside the source"]["examples"] == ["out-link"]
    assert reasons["symbolic link to a directory already listed"]["count"] == 2  # dir-link, loop
    assert reasons["dangling symbolic link"]["examples"] == ["dangling.jpg"]
    with tarfile.open(next((tmp_path / "out").glob("*.tar"))) as tar:
        assert tar.extractfile("file-link.jpg").read() == b"one"  # the file, not a link
        assert all(m.isfile() for m in tar.getmembers())
