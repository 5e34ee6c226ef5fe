"""``ishard diff OLD NEW``: two destinations compared through the command, against what the
sources say changed and what the shards hold read back with tarfile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_error, invoke_ishard, make_tree, read_members

# a dataset: samples s00..s11, an image and a label each, in two folders (samples apart)
FILES: dict[str, bytes | int] = {}
for i in range(12):
    FILES[f"img/s{i:02d}.jpg"] = bytes([i]) * (3000 + 37 * i)
    FILES[f"lbl/s{i:02d}.cls"] = f"label {i % 3}\n".encode()


def shard(src: Path, dst: Path, *extra: str) -> None:
    done = invoke_ishard("shard", src, dst, "--shard-size", "8KiB", *extra)
    assert done.returncode == 0, done.stderr


def held(dst: Path) -> dict[str, tuple[str, list[tuple[str, bytes]]]]:
    """Each sample (``<key>.<ext>`` members) with its shard and members, read with tarfile."""
    found: dict[str, tuple[str, list[tuple[str, bytes]]]] = {}
    for entry in json.loads((dst / "manifest.json").read_text())["shardlist"]:
        name = entry["url"]
        for member, data in read_members(name, (dst / name).read_bytes()):
            key = member.split(".", 1)[0]
            found.setdefault(key, (name, []))[1].append((member, data))
    return found


def test_a_destination_is_the_same_as_itself_and_as_a_second_run(tmp_path):
    src = make_tree(tmp_path / "src", FILES)
    shard(src, tmp_path / "a")
    shard(src, tmp_path / "b")
    shards = len(list((tmp_path / "a").glob("*.tar")))
    for old, new in (("a", "a"), ("a", "b"), ("a/manifest.json", "b")):
        done = invoke_ishard("diff", tmp_path / old, tmp_path / new)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"no differences: {shards} shards hold the same samples\n"
    done = invoke_ishard("diff", tmp_path / "a", tmp_path / "b", "--json")
    found = json.loads(done.stdout)
    assert done.returncode == 0 and found["same"] and found["shards"]["same"] == shards


def test_samples_added_removed_changed_and_moved_are_told_as_the_sources_changed(tmp_path):
    """A sample added, one removed whole, one whose label changed in place (same size), one
    whose image is gone: the JSON names exactly those, each with its shards; every sample told
    as moved holds the same members in another shard; every shard whose bytes differ is
    rewritten; exit 1."""
    old_src = make_tree(tmp_path / "old", FILES)
    files = dict(FILES)
    files["img/s12.jpg"] = b"\xee" * 3100  # added
    files["lbl/s12.cls"] = b"label 0\n"
    del files["img/s03.jpg"], files["lbl/s03.cls"]  # removed
    files["lbl/s07.cls"] = b"label 9\n"  # changed in place, the same size
    del files["img/s09.jpg"]  # changed: a member gone
    new_src = make_tree(tmp_path / "new", files)
    shard(old_src, tmp_path / "a")
    shard(new_src, tmp_path / "b")
    done = invoke_ishard("diff", tmp_path / "a", tmp_path / "b", "--json")
    assert done.returncode == 1, done.stderr
    found = json.loads(done.stdout)
    before, after = held(tmp_path / "a"), held(tmp_path / "b")
    samples = found["samples"]
    assert [(c["key"], c["old_shard"], c["new_shard"]) for c in samples["added"]] == [
        ("s12", None, after["s12"][0])
    ]
    assert [(c["key"], c["old_shard"], c["new_shard"]) for c in samples["removed"]] == [
        ("s03", before["s03"][0], None)
    ]
    assert sorted((c["key"], c["old_shard"], c["new_shard"]) for c in samples["changed"]) == [
        (k, before[k][0], after[k][0]) for k in ("s07", "s09")
    ]
    unchanged = set(before) - {"s03", "s07", "s09"}
    moved = {k for k in unchanged if before[k][0] != after[k][0]}
    assert moved  # the removed sample shifted the boundaries after it
    assert {c["key"] for c in samples["moved"]} == moved
    assert all(sorted(before[k][1]) == sorted(after[k][1]) for k in moved)
    differ = {
        n
        for n in {p.name for p in (tmp_path / "a").glob("*.tar")}
        & {p.name for p in (tmp_path / "b").glob("*.tar")}
        if (tmp_path / "a" / n).read_bytes() != (tmp_path / "b" / n).read_bytes()
    }
    assert set(found["shards"]["rewritten"]) == differ
    text = invoke_ishard("diff", tmp_path / "a", tmp_path / "b", "--samples")
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[1] == f"samples: 1 added, 1 removed, 2 changed, {len(moved)} moved"
    assert f"+ sample 's12' in {after['s12'][0]}" in lines
    assert f"- sample 's03' in {before['s03'][0]}" in lines


def test_a_shard_both_manifests_promise_alike_is_not_read(tmp_path):
    """Shards listed under one name with one checksum and size hold the same bytes: diff
    does not read them (here one of them is damaged on one side and still not read), and
    reads the rest."""
    src = make_tree(tmp_path / "src", FILES)
    shard(src, tmp_path / "a")
    shard(src, tmp_path / "b")
    first = min((tmp_path / "b").glob("*.tar"))
    first.write_bytes(b"x" * first.stat().st_size)  # damaged: not what its manifest promises
    done = invoke_ishard("diff", tmp_path / "a", tmp_path / "b")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    manifest["shardlist"][0]["checksum"] = "xxh128:" + "0" * 32  # now it is read, and differs
    manifest["shardlist"][0].pop("md5sum", None)
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(manifest))
    done = invoke_ishard("diff", tmp_path / "a", tmp_path / "b")
    assert_error(done, 1, first.name)  # a damaged archive: one line naming it


@pytest.mark.parametrize("which", ["old", "new"])
def test_a_destination_that_is_not_there_is_one_line(tmp_path, which):
    src = make_tree(tmp_path / "src", FILES)
    shard(src, tmp_path / "a")
    args = {"old": tmp_path / "a", "new": tmp_path / "a"}
    args[which] = tmp_path / "nothing"
    assert_error(invoke_ishard("diff", args["old"], args["new"]), 2, "nothing")


def test_a_shard_the_manifest_lists_that_is_not_there_is_one_line(tmp_path):
    src = make_tree(tmp_path / "src", FILES)
    shard(src, tmp_path / "a")
    shard(src, tmp_path / "b", "--shard-size", "16KiB")  # other shards: each one is read
    gone = min((tmp_path / "b").glob("*.tar"))
    gone.unlink()
    done = invoke_ishard("diff", tmp_path / "a", tmp_path / "b")
    assert_error(done, 1, f"shard {gone.name!r}", "is not there", "ishard verify")


@pytest.mark.parametrize("side", ["old", "new"])
def test_a_listed_shard_deleted_on_one_side_is_reported_though_both_promise_it_alike(
    tmp_path, side
):
    """Finding: a shard both manifests promise alike was never looked at, so diff said "no
    differences" when it had been deleted on one side."""
    src = make_tree(tmp_path / "src", FILES)
    shard(src, tmp_path / "old")
    shard(src, tmp_path / "new")
    gone = sorted((tmp_path / side).glob("*.tar"))[1]
    gone.unlink()
    done = invoke_ishard("diff", tmp_path / "old", tmp_path / "new")
    assert_error(
        done, 1, f"shard {gone.name!r}", "is not there", f"ishard verify {tmp_path / side}"
    )
    done = invoke_ishard("diff", tmp_path / "old", tmp_path / "new", "--json")
    assert_error(done, 1, f"shard {gone.name!r}")


def test_diff_prints_counts_by_default_and_each_sample_with_samples(tmp_path):
    """Finding: a re-cut printed a line per moved sample (25,074 lines for 25,000 samples):
    the default is the counts; --samples lists each shard and sample that differs; --json
    keeps every detail."""
    src = make_tree(tmp_path / "src", FILES)
    shard(src, tmp_path / "a")
    shard(src, tmp_path / "b", "--shard-size", "16KiB")
    done = invoke_ishard("diff", tmp_path / "a", tmp_path / "b")
    assert done.returncode == 1, done.stderr
    found = json.loads(invoke_ishard("diff", tmp_path / "a", tmp_path / "b", "--json").stdout)
    moved, shards = found["samples"]["moved"], found["shards"]
    assert len(moved) > 5
    counts = (
        f"shards: 0 added, {len(shards['removed'])} removed, {len(shards['rewritten'])} "
        f"rewritten, {shards['same']} the same"
    )
    assert done.stdout.splitlines() == [
        counts,
        f"samples: 0 added, 0 removed, 0 changed, {len(moved)} moved",
    ]
    listed = invoke_ishard("diff", tmp_path / "a", tmp_path / "b", "--samples")
    assert listed.returncode == 1, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[:2] == done.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("> sample ")] == [
        f"> sample {c['key']!r} {c['old_shard']} -> {c['new_shard']}" for c in moved
    ]
    assert [ln for ln in lines if ln.startswith("- shard ")] == [
        f"- shard {n}" for n in shards["removed"]
    ]


def test_the_api_returns_each_difference_and_its_repr_is_the_counts(tmp_path):
    """``ishard.diff`` returns every sample that moved (as tarfile reads the shards) and its
    repr is one line of counts, as the command's default text: a re-cut moves them all."""
    import ishard

    src = make_tree(tmp_path / "src", FILES)
    shard(src, tmp_path / "a")
    shard(src, tmp_path / "b", "--shard-size", "16KiB")
    before, after = held(tmp_path / "a"), held(tmp_path / "b")
    old = {p.name: p.read_bytes() for p in (tmp_path / "a").glob("*.tar")}
    new = {p.name: p.read_bytes() for p in (tmp_path / "b").glob("*.tar")}
    removed = sorted(set(old) - set(new))
    both = set(old) & set(new)
    rewritten = [n for n in sorted(both) if old[n] != new[n]]
    found = ishard.diff(tmp_path / "a", tmp_path / "b")
    moved = {k for k in before if before[k][0] != after[k][0]}
    assert {(c.key, c.old, c.new) for c in found.samples_moved} == {
        (k, before[k][0], after[k][0]) for k in moved
    }
    assert sorted(found.shards_removed) == removed and sorted(found.shards_rewritten) == rewritten
    assert repr(found) == (
        f"Difference(same=False, shards_added=0, shards_removed={len(removed)}, "
        f"shards_rewritten={len(rewritten)}, shards_same={len(both) - len(rewritten)}, "
        f"samples_added=0, samples_removed=0, samples_changed=0, samples_moved={len(moved)}, "
        f"old={str(tmp_path / 'a')!r}, new={str(tmp_path / 'b')!r})"
    )
