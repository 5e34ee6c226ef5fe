"""Shards as WebDataset readers see them, read back with webdataset, wids and tarfile."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path, PurePosixPath

import pytest
import webdataset as wds
from helpers import (
    FIXTURES,
    assert_error,
    few_shards_note,
    import_wids,
    invoke_ishard,
    make_tree,
    run_ishard,
    snapshot,
)

import ishard
from ishard.cli import cli

# Every finished destination a test here leaves must pass `ishard verify --deep`.
pytestmark = pytest.mark.usefixtures("every_destination_verifies")

FIRST_DOT = r"^(?:.*/)?([^/.]+)\..*$"  # keys end at the basename's first dot, directories dropped


def reader_ext(name: str) -> str:
    """The extension as the test reads it: after the basename's first dot, lower-cased."""
    base = PurePosixPath(name).name
    return base.split(".", 1)[1].lower()


@pytest.fixture
def generated(tmp_path) -> Path:
    """Each sample's files in three directories; one file has a two-part extension."""
    files = {}
    for i in range(40):
        cls = ("cat", "dog")[i % 2]
        files[f"images/{cls}/{cls}_{i:04d}.jpg"] = 300 + 37 * i
        files[f"captions/{cls}_{i:04d}.txt"] = f"a {cls} number {i}".encode()
        if i % 3 == 0:
            files[f"masks/{cls}/{cls}_{i:04d}.seg.png"] = 100 + i
    return make_tree(tmp_path / "gen", files)


def planned(src: Path, **options) -> dict[str, dict[str, bytes]]:
    """key → {reader extension: source bytes} for every planned sample (bytes read here)."""
    out = {}
    for shard in ishard.plan(src, **options).shards:
        for s in shard.samples:
            out[s.key] = {reader_ext(f.arcname): (src / f.name).read_bytes() for f in s.files}
    return out


def read_webdataset(urls: list[str]) -> dict[str, dict[str, bytes]]:
    out = {}
    for sample in wds.WebDataset(urls, shardshuffle=False):
        assert sample["__key__"] not in out, sample["__key__"]
        out[sample["__key__"]] = {k: v for k, v in sample.items() if not k.startswith("__")}
    return out


CASES = [
    ("fixture", {"shard_size": "40KiB"}),
    ("generated", {"shard_size": "8KiB", "sample_key_pattern": FIRST_DOT}),
]


@pytest.mark.parametrize("ext", [".tar", ".tgz"])
@pytest.mark.parametrize("which,options", CASES)
def test_webdataset_reads_exactly_the_planned_samples(which, options, ext, generated, tmp_path):
    src = FIXTURES / "imagenet" if which == "fixture" else generated
    options = {**options, "ext": ext, "member_names": "sample"}
    dst = tmp_path / "dst"
    report = ishard.shard(src, dst, **options)
    assert len(report.results) > 2
    expected = planned(src, **options)
    assert read_webdataset([str(dst / r.name) for r in report.results]) == expected
    if which == "generated":
        assert len(expected) == 40 and expected["cat_0000"].keys() == {"jpg", "txt", "seg.png"}


@pytest.mark.parametrize("which,options", CASES)
def test_wids_reads_every_sample_through_the_manifest(which, options, generated, tmp_path):
    wids = import_wids()
    src = FIXTURES / "imagenet" if which == "fixture" else generated
    options = {**options, "member_names": "sample"}
    report = ishard.shard(src, tmp_path / "dst", **options)
    assert len(report.results) > 2
    expected = planned(src, **options)
    dataset = wids.ShardListDataset(
        str(tmp_path / "dst" / "manifest.json"),
        cache_dir=str(tmp_path / "cache"),
        transformations=[],
    )
    assert len(dataset) == len(expected) == report.plan.sample_count
    got = {}
    for i in range(len(dataset)):
        sample = dataset[i]
        got[sample["__key__"]] = {
            k[1:].lower(): v.read() for k, v in sample.items() if not k.startswith("__")
        }
    assert got == expected


def read_idx(path: Path) -> list[list[tuple[str, int, int, str]]]:
    """A DALI index parsed as DALI parses it: whitespace-separated tokens, four per member."""
    lines = path.read_text().splitlines()
    version, count = lines[0].split()
    assert version == "v1.2" and int(count) == len(lines) - 1
    samples = []
    for line in lines[1:]:
        tokens = line.split()
        assert len(tokens) % 4 == 0, line
        samples.append(
            [
                (tokens[i], int(tokens[i + 1]), int(tokens[i + 2]), tokens[i + 3])
                for i in range(0, len(tokens), 4)
            ]
        )
    return samples


def check_dali_indexes(dst: Path, report) -> dict[str, tarfile.TarInfo]:
    """Compare each shard's ``.idx`` with the tar as tarfile reads it: every entry's offset and
    size are the member's ``offset_data`` and ``size``, each member is indexed at most once,
    and the lines are the samples webdataset reads. Returns the members no line names."""
    unindexed = {}
    for result in report.results:
        tar_path = dst / result.name
        idx = dst / result.name.replace(".tar", ".idx")
        assert result.index == idx.name
        with tarfile.open(tar_path) as tar:
            where = {m.name: m for m in tar.getmembers() if m.isfile()}
        entries = read_idx(idx)
        for sample in entries:
            for ext, offset, size, name in sample:
                member = where.pop(name)
                assert (offset, size) == (member.offset_data, member.size)
                assert offset % 512 == 0 and ext == PurePosixPath(name).name.split(".", 1)[1]
        unindexed.update(where)
        # one index line per sample as webdataset groups the same tar
        read = wds.WebDataset(str(tar_path), shardshuffle=False, empty_check=False)
        keys = [s["__key__"] for s in read]  # (empty_check: a shard may hold only skipped names)
        assert [PurePosixPath(s[0][3]).as_posix().split(".")[0] for s in entries] == keys
    manifest = json.loads((dst / "manifest.json").read_text())
    assert [s["dali_index"] for s in manifest["ishard"]["shards"]] == [
        r.name.replace(".tar", ".idx") for r in report.results
    ]
    assert all(s["url"].endswith(".tar") for s in manifest["shardlist"])
    return unindexed


@pytest.mark.parametrize("member_names", ["sample", "original"])
def test_dali_index_matches_the_tar_as_tarfile_reads_it(member_names, tmp_path):
    src, dst = FIXTURES / "imagenet", tmp_path / "dst"
    report = ishard.shard(src, dst, shard_size="60KiB", index="dali", member_names=member_names)
    assert check_dali_indexes(dst, report) == {}  # every member is indexed once


LONG = "cat_" + "l" * 110  # a basename over tar's 100-byte name field: needs a pax header


@pytest.mark.parametrize("member_names", ["sample", "original"])
def test_dali_index_of_the_generated_dataset_with_long_and_dotless_names(
    member_names, generated, tmp_path
):
    extra = {f"images/cat/{LONG}.jpg": 900, f"captions/{LONG}.txt": b"a long name"}
    if member_names == "original":  # (--member-names sample refuses a file with no extension)
        extra["captions/NOTES"] = 50  # no dot: readers skip it, so the index leaves it out
    src, dst = make_tree(generated, extra), tmp_path / "dst"
    report = ishard.shard(
        src,
        dst,
        shard_size="8KiB",
        sample_key_pattern=FIRST_DOT,
        index="dali",
        member_names=member_names,
    )
    assert len(report.results) > 2
    unindexed = check_dali_indexes(dst, report)
    assert list(unindexed) == (["captions/NOTES"] if member_names == "original" else [])
    long_names = (
        {f"{LONG}.jpg", f"{LONG}.txt"}
        if member_names == "sample"
        else {f"images/cat/{LONG}.jpg", f"captions/{LONG}.txt"}
    )
    found = set()
    for result in report.results:  # (check_dali_indexes matched their offsets and sizes)
        with tarfile.open(dst / result.name) as tar:
            for m in tar.getmembers():
                if m.name in long_names:
                    assert m.pax_headers["path"] == m.name  # the name came from a pax header
                    assert m.offset_data - m.offset > 512  # pax header blocks before the member's
                    found.add(m.name)
    assert found == long_names


def test_dry_run_shows_the_member_names_the_archive_will_have(tmp_path):
    src = make_tree(tmp_path / "src", {"a/x.jpg": 10, "b/x.json": 5, "a/y.jpg": 7})
    dry = invoke_ishard("shard", src, "--dry-run=files", "--member-names", "sample")
    assert dry.returncode == 0, dry.stderr
    members = [line.split()[0] for line in dry.stdout.splitlines() if line.startswith("    ")]
    invoke_ishard("shard", src, tmp_path / "dst", "--member-names", "sample")
    with tarfile.open(tmp_path / "dst" / "shard-000000.tar") as tar:
        assert members == tar.getnames() == ["x.jpg", "x.json", "y.jpg"]
    doc = json.loads(
        invoke_ishard("shard", src, "--dry-run=json", "--member-names", "sample").stdout
    )
    files = doc["shards"][0]["samples"][0]["files"]
    assert files == [
        {"name": "a/x.jpg", "size": 10, "member": "x.jpg"},
        {"name": "b/x.json", "size": 5, "member": "x.json"},
    ]


NAMING_ERRORS = [  # files, extra options, the message's what-part, an option the fix names
    ({"a.b.jpg": 3}, [], "sample 'a.b' has a dot in its key", "--sample-key-pattern"),
    (
        {"x/a.jpg": 3, "y/a.jpg": 4},
        [],
        "sample 'a' has two files with the same extension ('x/a.jpg' and 'y/a.jpg')",
        "--sample-key-pattern",
    ),
    (
        {"a.JPG": 3, "a.jpg": 4},
        [],
        "sample 'a' has two files with extensions that differ only in case ('a.JPG' and 'a.jpg')",
        "--sample-exts",
    ),
    (
        {".DS_Store": 3},
        ["--include-hidden"],
        "sample '' has an empty key (file '.DS_Store')",
        "--sample-key-pattern",
    ),
    (
        {"README": 3, "a.jpg": 2},
        ["--sample-key-pattern", "full_name"],
        "file 'README' of sample 'README' has no extension",
        "--missing-extension-action",
    ),
    # keys a regex cuts out of a directory named 'x..': '../foo' and '/bar' would climb out
    (
        {"x../foo.jpg": 3, "x/bar.jpg": 2},
        ["--sample-key-pattern", r"^x(.*)\.jpg$"],
        (
            "sample '../foo' would give member '../foo.jpg' (file 'x../foo.jpg') under "
            "--member-names sample, which could extract outside the target folder"
        ),
        "--sample-key-pattern",
    ),
    (
        {"x/bar.jpg": 2, "x/bar.txt": 1},
        ["--sample-key-pattern", r"^x(.*)\.[a-z]+$"],
        "sample '/bar' would give member '/bar.jpg' (file 'x/bar.jpg')",
        "--member-names",
    ),
]
SHARD_OPTIONS = {o for p in cli.commands["shard"].params for o in p.opts}


@pytest.mark.parametrize("files,extra,needle,fix_option", NAMING_ERRORS)
def test_sample_names_that_cannot_hold_stop_before_writing(
    files, extra, needle, fix_option, tmp_path
):
    src = make_tree(tmp_path / "src", files)
    for args in (["--dry-run"], [tmp_path / "dst"]):
        result = invoke_ishard("shard", src, *args, "--member-names", "sample", *extra)
        line = assert_error(result, 1, needle)
        assert line.count(" — ") == 1
        named = re.findall(r"--[a-z][a-z-]*", line.split(" — ")[1])
        assert fix_option in named and set(named) <= SHARD_OPTIONS, named  # real options only
    assert snapshot(tmp_path / "dst") == {}


@pytest.mark.parametrize(
    "files,args,code,needle",
    [
        ({"a b.jpg": 3}, ["--index", "dali"], 1, "member name 'a b.jpg' has whitespace"),
        (
            {"d/a b.jpg": 3},
            ["--index", "dali", "--member-names", "sample"],
            1,
            "member name 'a b.jpg' has whitespace",
        ),  # (a tab is a control character: left out)
        (
            {"a.jpg": 3},
            ["--index", "dali", "--ext", ".tgz"],
            2,
            "--index dali indexes plain tar shards, not '.tgz'",
        ),
        ({"a.jpg": 3}, ["--index", "csv"], 2, "--index 'csv' names 'csv', which is no index"),
        (
            {"a.jpg": 3},
            ["--member-names", "key"],
            2,
            "--member-names 'key' must be original or sample",
        ),
    ],
)
def test_index_and_option_errors_write_nothing(files, args, code, needle, tmp_path):
    src = make_tree(tmp_path / "src", files)
    assert_error(invoke_ishard("shard", src, tmp_path / "dst", *args), code, needle)
    assert snapshot(tmp_path / "dst") == {}


def test_key_check_warns_with_counts_and_examples_in_runs_and_dry_runs(tmp_path):
    src = make_tree(
        tmp_path / "src",
        {
            "img/a.jpg": 3,
            "ann/a.xml": 3,  # split across directories
            "img/b.jpg": 3,
            "ann/b.xml": 3,
            "c.seg.png": 3,  # dotted basename
            "d": 3,  # no dot: skipped by readers
            "x/.c.jpg": 3,  # leading dot: DALI skips it, webdataset keys it by its directory
        },
    )
    original = ("--include-hidden", "--member-names", "original")
    dry = invoke_ishard("shard", src, "--dry-run", *original)
    run = invoke_ishard("shard", src, tmp_path / "dst", *original)
    for result in (dry, run):
        assert result.returncode == 0, result.stderr
        warnings = [w for w in result.stderr.splitlines() if w.startswith("ishard: warning: ")]
        assert len(warnings) == 4, warnings
        joined = "\n".join(warnings)
        assert (
            "2 samples that WebDataset readers take as several" in joined and "'a', 'b'" in joined
        )
        assert "1 sample with a dot inside a file's basename" in joined and "'c.seg'" in joined
        assert "2 samples with files readers skip or mis-key" in joined
        assert "(e.g. 'd', '.c')" in joined  # in file-name order: 'd' < 'x/.c.jpg'
        assert "--member-names sample" in warnings[-1]
    summary = json.loads(invoke_ishard("shard", src, "--dry-run=json", *original).stdout)
    assert summary["summary"]["warnings"] == [w.removeprefix("ishard: warning: ") for w in warnings]


def test_a_file_under_a_folder_named_like_its_key_and_a_dot_is_counted_split(tmp_path):
    """``img/a.jpg`` and ``img/a.x/a.xml`` are one ishard sample (``a``) but two WebDataset
    samples (keys ``img/a`` and ``img/a.x/a``), which the warning counts (the column engine's
    reader keys agree with this check: tests/planning/test_columns.py)."""
    src = make_tree(tmp_path / "src", {"img/a.jpg": 3, "img/a.x/a.xml": 4, "img/b.jpg": 5})
    out = tmp_path / "out"
    run = invoke_ishard("shard", src, out, "--member-names", "original")
    assert run.returncode == 0, run.stderr
    assert "ishard: warning: 1 sample that WebDataset readers take as several" in run.stderr
    assert "(e.g. 'a')" in run.stderr
    urls = [
        str(out / e["url"]) for e in json.loads((out / "manifest.json").read_bytes())["shardlist"]
    ]
    assert sorted(k for keys in webdataset_keys(urls) for k in keys) == [
        "img/a",
        "img/a.x/a",
        "img/b",
    ]


def test_clean_names_give_no_warning(tmp_path):
    src = make_tree(tmp_path / "src", {"d/a.jpg": 3, "d/a.json": 3, "d/b.jpg": 4})
    result = invoke_ishard("shard", src, "--dry-run")
    assert result.returncode == 0 and "warning" not in result.stderr


def test_ls_samples_groups_as_webdataset_does(tmp_path):
    src = make_tree(tmp_path / "src", {"x/a.jpg": 3, "y/a.xml": 4, "x/b.jpg": 5, "x/.c.jpg": 1})
    invoke_ishard("shard", src, tmp_path / "dst", "--include-hidden", "--member-names", "original")
    tar_path = tmp_path / "dst" / "shard-000000.tar"
    result = invoke_ishard("ls", tar_path, "--samples", "--json")
    doc = json.loads(result.stdout)
    keys = [s["__key__"] for s in wds.WebDataset(str(tar_path), shardshuffle=False)]
    # webdataset keys a dot-leading basename by its directory ('x/'); DALI skips it
    assert keys == ["x/", "x/a", "y/a", "x/b"]
    assert [s["key"] for s in doc["samples"]] == keys[1:]
    assert doc["skipped"] == [{"name": "x/.c.jpg", "size": 1}]
    assert "'x/.c.jpg' has a leading dot" in result.stderr
    text = invoke_ishard("ls", tar_path, "--samples").stdout
    assert (
        text.splitlines()[0] == "[x/a]" and text.splitlines()[-1] == "3 samples, 1 skipped member"
    )


def test_ls_samples_warns_of_dotless_members_and_one_extension_twice(tmp_path):
    files = {"d/README": 2, "e.JPG": 4, "e.jpg": 3, "f.jpg": 5}
    src = make_tree(tmp_path / "src", files)
    refused = invoke_ishard("shard", src, tmp_path / "dst", "--member-names", "original")
    # ishard writes no case-only twins
    assert_error(refused, 1, "member names 'e.JPG' and 'e.jpg' would extract to one file")
    tar_path = tmp_path / "other.tar"  # but another tool may
    with tarfile.open(tar_path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name in files:
            tar.add(src / name, arcname=name)
    with tarfile.open(tar_path) as tar:
        assert tar.getnames() == ["d/README", "e.JPG", "e.jpg", "f.jpg"]
    with pytest.raises(ValueError, match="duplicate"):  # what the warning says webdataset does
        list(wds.WebDataset(str(tar_path), shardshuffle=False))
    for args in ([], ["--json"]):
        result = invoke_ishard("ls", tar_path, "--samples", *args)
        assert result.returncode == 0, result.stderr
        assert result.stderr.splitlines() == [
            (
                "ishard: warning: member 'd/README' has no dot in its basename: WebDataset readers "
                "skip it"
            ),
            (
                "ishard: warning: sample 'e' has one extension twice (ignoring case): webdataset "
                "stops with a duplicate-file error"
            ),
        ]
    doc = json.loads(result.stdout)
    assert doc["skipped"] == [{"name": "d/README", "size": 2}]
    assert [(s["key"], [f["name"] for f in s["files"]]) for s in doc["samples"]] == [
        ("e", ["e.JPG", "e.jpg"]),
        ("f", ["f.jpg"]),
    ]
    text = invoke_ishard("ls", tar_path, "--samples").stdout.splitlines()
    assert text[0] == "[e]" and text[-1] == "2 samples, 1 skipped member"


def test_sample_member_names_extract_inside_the_target_folder(tmp_path):
    """Keys with odd but safe directory parts ('x..', 'a...') make members that tarfile's
    'data' filter and GNU tar both extract inside the target folder, every one of them."""
    import subprocess

    files = {"x../foo.jpg": 3, "x../foo.txt": 1, "a.../b.jpg": 2, "y../z../w.txt": 4}
    src = make_tree(tmp_path / "src", files)
    result = invoke_ishard(
        "shard",
        src,
        tmp_path / "dst",
        "--member-names",
        "sample",
        "--sample-key-pattern",
        r"^(.*)\.[a-z]+$",
    )
    assert result.returncode == 0, result.stderr
    shards = sorted((tmp_path / "dst").glob("*.tar"))
    for tool in ("tarfile", "gnu"):
        top = tmp_path / f"x-{tool}"
        target = top / "inside"
        target.mkdir(parents=True)
        for shard in shards:
            if tool == "tarfile":
                with tarfile.open(shard) as tar:
                    tar.extractall(target, filter="data")
            else:
                subprocess.run(["tar", "-xf", str(shard), "-C", str(target)], check=True)
        assert [p.name for p in top.iterdir()] == ["inside"]
        got = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
        assert got == sorted(files), got


ROOT = FIXTURES.parent  # the repository root, where the README's commands run


def webdataset_keys(urls: list[str]) -> list[list[str]]:
    """Per shard, the keys of the samples webdataset reads from it."""
    return [[s["__key__"] for s in wds.WebDataset(url, shardshuffle=False)] for url in urls]


def test_the_readmes_first_command_writes_what_webdataset_reads_as_planned(tmp_path):
    """`ishard shard fixtures/imagenet out --shard-size 256KiB --overwrite`, exactly: no warning,
    and webdataset reads each shard as the plan's samples, as many as the manifest says."""
    out = tmp_path / "out"
    args = ("shard", "fixtures/imagenet", out, "--shard-size", "256KiB", "--overwrite")
    run = run_ishard(*args, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == [few_shards_note(6, 44)] and "warning" not in run.stdout
    dry = run_ishard(*args[:2], "--dry-run=json", *args[3:], cwd=ROOT)
    plan = json.loads(dry.stdout)
    manifest = json.loads((out / "manifest.json").read_bytes())
    urls = [str(out / e["url"]) for e in manifest["shardlist"]]
    assert [PurePosixPath(u).name for u in urls] == [s["name"] for s in plan["shards"]]
    read = webdataset_keys(urls)
    assert [len(keys) for keys in read] == [e["nsamples"] for e in manifest["shardlist"]]
    assert read == [[s["key"] for s in shard["samples"]] for shard in plan["shards"]]
    assert sum(map(len, read)) == plan["summary"]["samples"] > 40


def test_the_go_spelling_keeps_source_paths_and_warns_before_writing(tmp_path):
    """Go ishard's spelling writes Go's member names (the source paths); readers split the
    fixture's samples, and the warning, given before writing, counts them."""
    out = tmp_path / "out"
    run = run_ishard(
        "-src_bck=fixtures/imagenet", f"-dst_bck={out}", "-shard_size=256KiB", cwd=ROOT
    )
    assert run.returncode == 0, run.stderr
    split = re.search(
        r"^ishard: warning: (\d+) samples that WebDataset readers take as several",
        run.stderr,
        re.MULTILINE,
    )
    assert split, run.stderr
    manifest = json.loads((out / "manifest.json").read_bytes())
    urls = [str(out / e["url"]) for e in manifest["shardlist"]]
    with tarfile.open(urls[0]) as tar:
        assert all(n.startswith(("Data/", "Annotations/")) for n in tar.getnames())
    planned_count = sum(e["nsamples"] for e in manifest["shardlist"])
    # each split sample of the fixture is an image and an annotation in two directories
    assert sum(map(len, webdataset_keys(urls))) == planned_count + int(split.group(1))


@pytest.mark.parametrize("extra,renamed", [((), False), (("--member-names", "sample"), True)])
def test_the_go_spelling_takes_member_names_sample_when_given(extra, renamed, tmp_path):
    dry = run_ishard(
        "-src_bck=fixtures/imagenet",
        f"-dst_bck={tmp_path / 'out'}",
        "-dry_run=json",
        *extra,
        cwd=ROOT,
    )
    assert dry.returncode == 0, dry.stderr
    files = [
        f
        for shard in json.loads(dry.stdout)["shards"]
        for s in shard["samples"]
        for f in s["files"]
    ]
    assert all(("member" in f) == renamed for f in files)
    assert ("ishard: warning:" in dry.stderr) != renamed  # the key check, under source paths
