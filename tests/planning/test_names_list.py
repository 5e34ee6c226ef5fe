"""``--src-list`` with a list of names alone (a name a line, as ``find`` or ``rclone lsf``
print them): each size and mtime read from the source, so it plans — and writes — what the
same names with their sizes do; and a size an inventory gives that the source contradicts is
worded as the inventory being stale."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from helpers import assert_error, invoke_ishard, make_tree, read_shard, shard_files, without_note

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imagenet"
WHEN = 1_700_000_000


@pytest.fixture
def src(tmp_path) -> Path:
    """The bundled ImageNet-shaped fixture (a hidden file among it), at one fixed time."""
    root = tmp_path / "src"
    shutil.copytree(FIXTURES, root)
    for path in root.rglob("*"):
        os.utime(path, (WHEN, WHEN), follow_symlinks=False)
    return root


def found(root: Path) -> list[str]:
    """The files under ``root`` as ``cd root && find . -type f`` prints them: ``./`` first,
    in no particular order."""
    names = [f"./{p.relative_to(root).as_posix()}" for p in root.rglob("*") if p.is_file()]
    random.Random(7).shuffle(names)
    return names


def with_sizes(root: Path, names: list[str], path: Path) -> Path:
    """The same names as a CSV inventory with their sizes and mtimes."""
    rows = [f"{n[2:]},{(root / n).stat().st_size},{WHEN}\n" for n in names]
    path.write_text("name,size,mtime\n" + "".join(rows))
    return path


def shards_of(dst: Path) -> tuple[dict[str, bytes], list]:
    manifest = json.loads((dst / "manifest.json").read_text())
    return {p.name: p.read_bytes() for p in shard_files(dst)}, manifest["shardlist"]


@pytest.mark.parametrize(
    "options",
    [
        ("--shard-size", "256KiB"),
        ("--shard-size", "64KiB", "--prefix", "Data/train/", "--sort", "shuffle:3"),
        ("--samples-per-shard", "5", "--sample-key-pattern", "base_filename", "--ext", ".zip"),
    ],
    ids=["default", "prefix-shuffled", "base-filename-zip"],
)
def test_a_names_only_list_plans_and_writes_what_names_with_sizes_do(src, tmp_path, options):
    names = found(src)
    listed = tmp_path / "names.txt"
    listed.write_text("".join(n + "\n" for n in names))
    sized = with_sizes(src, names, tmp_path / "sized.csv")
    plans = [
        invoke_ishard(
            "shard", src, tmp_path / "o", "--src-list", f, "--dry-run", "--json", *options
        )
        for f in (listed, sized)
    ]
    assert plans[0].returncode == plans[1].returncode == 0, plans
    assert json.loads(plans[0].stdout) == json.loads(plans[1].stdout)
    assert json.loads(plans[0].stdout)["skipped"][0]["examples"] == [
        "Data/train/n01443537/.DS_Store"
    ]  # the hidden file is left out of both, as a listing leaves it out
    for f, dst in ((listed, tmp_path / "from-names"), (sized, tmp_path / "from-sizes")):
        done = invoke_ishard("shard", src, dst, "--src-list", f, *options)
        assert done.returncode == 0, done
    # the same shards, byte for byte: the mtimes read from the source are the inventory's
    from_names, from_sizes = shards_of(tmp_path / "from-names"), shards_of(tmp_path / "from-sizes")
    assert from_names == from_sizes
    members = {m for shard in shard_files(tmp_path / "from-names") for m, _ in read_shard(shard)}
    assert members and all((src / m).is_file() for m in members if "/" in m)


def test_a_names_list_reads_find_and_rclone_lines_as_they_are_written(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10, "a/1.cls": 2, " b/2.jpg ": 30, "#c.jpg": 4})
    listed = tmp_path / "names.lst"
    listed.write_bytes(
        b"# written by hand\r\n./a/1.jpg\r\n\r\n; rclone's other comment\n"
        b"a/1.cls\n./ b/2.jpg \n./#c.jpg"  # no end of line after the last
    )
    done = invoke_ishard("shard", src, tmp_path / "o", "--src-list", listed, "--dry-run", "--json")
    plan = json.loads(done.stdout)
    assert (plan["files"], plan["bytes"], plan["samples"]) == (4, 46, 3)  # ' b/2.jpg ' kept whole


def test_a_name_the_source_does_not_hold_is_one_line_naming_it(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10})
    listed = tmp_path / "names.txt"
    listed.write_text("a/1.jpg\na/ghost.jpg\n")
    result = invoke_ishard("shard", src, tmp_path / "o", "--src-list", listed)
    assert_error(result, 1, "'a/ghost.jpg'", "No such file")
    assert not (tmp_path / "o").exists()


def test_a_names_list_never_opens_a_name_out_of_the_source_nor_follows_a_link(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10})
    (tmp_path / "secret.jpg").write_bytes(b"outside")
    (src / "a" / "link.jpg").symlink_to(tmp_path / "secret.jpg")
    listed = tmp_path / "names.txt"
    listed.write_text("a/1.jpg\n../secret.jpg\n")
    done = invoke_ishard("shard", src, tmp_path / "o", "--src-list", listed, "--dry-run", "--json")
    plan = json.loads(done.stdout)
    assert plan["files"] == 1  # '../secret.jpg' left out as unsafe, never asked its size
    assert plan["skipped"][0]["examples"] == ["../secret.jpg"]
    listed.write_text("a/1.jpg\na/link.jpg\n")
    result = invoke_ishard("shard", src, tmp_path / "o", "--src-list", listed)
    assert_error(result, 1, "'a/link.jpg' is a symbolic link", "--follow-symlinks")


def test_a_file_named_csv_still_needs_its_header(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10})
    listed = tmp_path / "names.csv"
    listed.write_text("a/1.jpg\n")
    result = invoke_ishard("shard", src, tmp_path / "o", "--src-list", listed)
    assert_error(result, 2, "has no header", "'name,size'", "a name a line")


def test_a_size_the_source_contradicts_is_worded_as_a_stale_inventory(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 10, "a/2.jpg": 20})
    inventory = tmp_path / "inv.csv"
    inventory.write_text("name,size\na/1.jpg,10\na/2.jpg,16\n")
    result = invoke_ishard("shard", src, tmp_path / "o", "--src-list", inventory)
    line = assert_error(result, 1, "'a/2.jpg' is 20 bytes in the source", "says 16")
    assert "the inventory is stale" in line and "the source is stable" not in line
    listed = tmp_path / "names.txt"  # the fix the line gives: the names alone
    listed.write_text("a/1.jpg\na/2.jpg\n")
    done = invoke_ishard("shard", src, tmp_path / "o", "--src-list", listed, "--overwrite")
    assert done.returncode == 0 and without_note(done.stderr) == "", done
