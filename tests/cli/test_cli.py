"""The `ishard` command as a user runs it: exit codes, streams and messages — in this process
through `ishard.cli.main` (what the installed command runs), and as a subprocess where the
process itself is the point (the environment, shell completion)."""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath

import pytest
from helpers import (
    DATASET_RECORDS,
    FIXTURES,
    assert_error,
    few_shards_note,
    invoke_ishard,
    make_tree,
    run_ishard,
    snapshot,
    stem,
    tar_codec,
)

import ishard
from ishard.formats import ARCHIVE_EXTS

HIDDEN_REASON = "hidden (name starts with '.'; --include-hidden keeps it)"


# ---------------------------------------------------------------- helpers


def tar_names(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return tar.getnames()


def shard_files(dst: Path, ext: str = ".tar") -> list[Path]:
    return sorted(p for p in dst.iterdir() if p.name.endswith(ext))


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """Four samples in two directories (one lacks .xml, one has awkward characters), .DS_Store."""
    return make_tree(
        tmp_path / "src",
        {
            "a/1.jpg": 300,
            "a/1.xml": 300,
            "a/2.jpg": 300,
            "a/a&b'c.jpg": 300,
            "b/3.jpg": 300,
            "b/3.xml": 300,
            ".DS_Store": 10,
        },
    )


VISIBLE = ["a/1.jpg", "a/1.xml", "a/2.jpg", "a/a&b'c.jpg", "b/3.jpg", "b/3.xml"]


# ---------------------------------------------------------------- bad invocations: exit 2

BAD_OPTIONS = [
    (["--shard-size", "abc"], ["--shard-size", "'abc'"]),
    (["--shard-size", "0"], ["--shard-size", "'0'"]),
    (["--shard-size", "1e6"], ["--shard-size", "'1e6'"]),
    (["--sample-key-pattern", "(.*"], ["--sample-key-pattern", "'(.*'", "regular expression"]),
    (["--shard-template", "%6d"], ["--shard-template", "'%6d'"]),
    (["--shard-template", "{5..1}"], ["--shard-template", "'{5..1}'"]),
    (["--shard-template", "*"], ["--shard-template", "'*'"]),
    (["--ext", "tar"], ["--ext", "'tar'", ".tar.lz4"]),
    (["--ext", ".rar"], ["--ext", "'.rar'"]),
    (
        ["--missing-extension-action", "explode"],
        ["--missing-extension-action", "'explode'", "abort"],
    ),
    (["--sample-exts", ".jpg,"], ["--sample-exts", "'.jpg,'", "empty item"]),
    (["--ekm", '{"a-%d.tar": ['], ["--ekm", "not valid JSON"]),
    (["--sort", "bogus"], ["--sort", "'bogus'", "shuffle"]),
    (["--dry-run=bogus"], ["--dry-run", "bogus", "show_keys"]),
    (["--samples-per-shard", "0"], ["--samples-per-shard '0'", "at least 1"]),
    (
        ["--checksum", "sha1"],
        ["--checksum", "'sha1'", "use one of xxh128, blake3, sha256, md5, none"],
    ),
    (["--bogus"], ["--bogus"]),
]


@pytest.mark.parametrize("args, needles", BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS])
def test_bad_option_value_exits_2_and_writes_nothing(src, tmp_path, args, needles):
    dst = tmp_path / "out"
    before = snapshot(src)
    result = invoke_ishard("shard", src, dst, *args)
    assert_error(result, 2, *needles)
    assert not dst.exists()
    assert snapshot(src) == before


def test_missing_ekm_file_exits_2_naming_it(src, tmp_path):
    dst = tmp_path / "out"
    result = invoke_ishard("shard", src, dst, "--ekm", tmp_path / "nothere.json")
    assert_error(result, 2, "--ekm", "nothere.json")
    assert not dst.exists()


def test_option_errors_come_before_looking_at_the_source(tmp_path):
    # The source does not exist, yet the bad option is what gets reported: validation first.
    for args, needle in (
        (["--shard-size", "abc"], "--shard-size"),
        (["--shard-template", "%6d", "--dry-run"], "--shard-template"),
    ):
        result = invoke_ishard("shard", tmp_path / "no-such-src", tmp_path / "out", *args)
        assert_error(result, 2, needle)


def test_missing_source_exits_2(tmp_path):
    result = invoke_ishard("shard", tmp_path / "no-such-src", tmp_path / "out")
    assert_error(result, 2, "source", "no-such-src", "does not exist")
    assert not (tmp_path / "out").exists()


def test_source_that_is_a_file_exits_2(src, tmp_path):
    result = invoke_ishard("shard", src / "a/1.jpg", tmp_path / "out")
    assert_error(result, 2, "source", "1.jpg", "not a directory")
    assert not (tmp_path / "out").exists()


def test_destination_inside_source_exits_2(src):
    before = snapshot(src)
    result = invoke_ishard("shard", src, src / "shards")
    assert_error(result, 2, "destination", "shards", "inside the source")
    assert snapshot(src) == before
    assert not (src / "shards").exists()


def test_non_empty_destination_exits_2_unless_overwrite(src, tmp_path):
    dst = make_tree(tmp_path / "out", {"keep.txt": b"mine"})
    result = invoke_ishard("shard", src, dst)
    assert_error(result, 2, "destination", "out", "not empty", "--overwrite")
    assert snapshot(dst) == {"keep.txt": b"mine"}
    # The advertised fix works.
    result = invoke_ishard("shard", src, dst, "--overwrite")
    assert result.returncode == 0, result.stderr
    assert (dst / "keep.txt").read_bytes() == b"mine"
    assert (dst / "shard-000000.tar").is_file()


def test_destination_that_is_a_file_exits_2(src, tmp_path):
    dst = tmp_path / "out.tar"
    dst.write_bytes(b"not a dir")
    result = invoke_ishard("shard", src, dst)
    assert_error(result, 2, "destination", "out.tar", "is a file")
    assert dst.read_bytes() == b"not a dir"


def test_missing_destination_without_dry_run_exits_2(src, tmp_path):
    before = snapshot(tmp_path)
    result = invoke_ishard("shard", src)
    assert_error(result, 2, "DST", "ishard shard SRC DST")
    assert snapshot(tmp_path) == before


def test_error_message_has_one_fix_clause(src, tmp_path):
    # "<what> — <fix>": click's own errors get a hint, but not a second "— ..." clause.
    for args in (["shard", src], ["shard", src, "--dry-run=bogus"], ["shard", src, "--jobs", "x"]):
        line = assert_error(invoke_ishard(*args), 2)
        assert line.count(" — ") == 1, line


@pytest.mark.parametrize(
    "args, needles",
    [
        ([], ["no command", "ishard shard SRC DST", "'ishard --help'"]),
        (["frob"], ["'frob'", "'ishard --help'"]),
        (["--bogus"], ["'--bogus'", "'ishard --help'"]),
        (["shard"], ["'SRC'", "'ishard shard --help'"]),
        (["ls"], ["'ARCHIVE'", "'ishard ls --help'"]),
    ],
    ids=["none", "unknown-command", "unknown-top-option", "shard-no-src", "ls-no-archive"],
)
def test_bad_command_line_points_at_the_right_help(args, needles):
    line = assert_error(invoke_ishard(*args), 2, *needles)
    assert "--bogus --help" not in line and "frob --help" not in line


# ---------------------------------------------------------------- runtime failures: exit 1


def test_empty_source_exits_1_nothing_to_shard(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = invoke_ishard("shard", empty, tmp_path / "out")
    assert_error(result, 1, "nothing to shard", "empty", "no files")
    assert not (tmp_path / "out").exists()


def test_only_hidden_files_says_why_nothing_was_sharded(tmp_path):
    only = make_tree(tmp_path / "only", {".DS_Store": 5})
    result = invoke_ishard("shard", only, "--dry-run")
    assert_error(result, 1, "nothing to shard", "1 hidden")


def test_abort_on_missing_extension_exits_1_naming_sample_and_extension(src, tmp_path):
    dst = tmp_path / "out"
    result = invoke_ishard(
        "shard", src, dst, "--sample-exts", ".jpg,.xml", "--missing-extension-action", "abort"
    )
    line = assert_error(result, 1, "'.xml'", "abort")
    # The first offender in listing order is sample '2' (a/2.jpg has no .xml).
    assert "sample '2'" in line
    assert snapshot(dst) == {}


def test_template_running_out_of_names_is_refused_before_writing(src, tmp_path):
    # Each of the 4 samples is its own shard, but the template has only 2 names. The check
    # raises UsageError (exit 2: a bad option value) after listing, before any shard is written.
    dst = tmp_path / "out"
    result = invoke_ishard("shard", src, dst, "--shard-size", "1", "--shard-template", "x-{0..1}")
    assert_error(result, 2, "'x-{0..1}'", "2 name", "4 shards", "--shard-size")
    assert snapshot(dst) == {}
    # A dry run reports the same problem.
    result = invoke_ishard(
        "shard", src, "--dry-run", "--shard-size", "1", "--shard-template", "x-{0..1}"
    )
    assert_error(result, 2, "'x-{0..1}'")


def test_ekm_splitting_a_sample_exits_1_naming_it(src, tmp_path):
    dst = tmp_path / "out"
    ekm = '{"pics-%d.tar": ["jpg$"], "notes-%d.tar": ["xml$"]}'
    result = invoke_ishard("shard", src, dst, "--ekm", ekm)
    assert_error(result, 1, "sample '1'", "a/1.jpg", "a/1.xml", "pics-%d.tar", "notes-%d.tar")
    assert snapshot(dst) == {}


def test_ekm_from_a_file_routes_samples(src, tmp_path):
    ekm = tmp_path / "map.json"
    ekm.write_text('{"a-%d.tar": ["^a/"], "b-%d.tar": ["^b/"]}')
    dst = tmp_path / "out"
    result = invoke_ishard(
        "shard", src, dst, "--ekm", ekm, "--shard-size", "1GiB", "--member-names", "original"
    )
    assert result.returncode == 0, result.stderr
    assert tar_names(dst / "a-0.tar") == ["a/1.jpg", "a/1.xml", "a/2.jpg", "a/a&b'c.jpg"]
    assert tar_names(dst / "b-0.tar") == ["b/3.jpg", "b/3.xml"]


def test_debug_shows_traceback_and_keeps_exit_code(src, tmp_path):
    result = invoke_ishard("shard", src, tmp_path / "out", "--shard-size", "abc", "--debug")
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert "UsageError" in result.stderr
    assert "ishard: error: --shard-size 'abc'" in result.stderr
    result = invoke_ishard("shard", tmp_path / "empty-none", tmp_path / "out", "--debug")
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- Go ishard's spelling


def test_go_spelling_writes_the_same_shards_as_gnu_spelling(src, tmp_path):
    go_dst, gnu_dst = tmp_path / "go", tmp_path / "gnu"
    go = invoke_ishard(
        f"-src_bck={src}",
        f"-dst_bck={go_dst}",
        "-shard_size=1KiB",
        "-sample_key_pattern=full_name",
        "-collapse",
        "-ext=.tar",
        "-shard_template=prefix-%04d",
    )
    gnu = invoke_ishard(
        "shard", src, gnu_dst,
        "--shard-size", "1KiB",
        "--sample-key-pattern", "full_name",
        "--collapse",
        "--ext", ".tar",
        "--shard-template", "prefix-%04d",
    )  # fmt: skip
    assert go.returncode == 0, go.stderr
    assert gnu.returncode == 0, gnu.stderr
    go_files, gnu_files = snapshot(go_dst), snapshot(gnu_dst)
    assert sorted(go_files) == [
        "manifest.json",
        "prefix-0000.tar",
        "prefix-0001.tar",
        "samples.parquet",
    ]
    assert sorted(go_files) == sorted(gnu_files)
    for name in go_files:
        if name.endswith(".tar"):
            assert go_files[name] == gnu_files[name], name
    # full_name keys + collapse: a/ (3 samples, 1200 B) fills the first shard; b/ (600 B) stays
    # below 1 KiB, moves up to the root and is the last shard.
    assert [tar_names(s) for s in shard_files(go_dst)] == [VISIBLE[:4], VISIBLE[4:]]


def test_go_dry_run_show_keys_and_plain(src, tmp_path):
    dst = tmp_path / "out"
    keys = invoke_ishard(
        f"-src_bck={src}", f"-dst_bck={dst}", "-dry_run=show_keys", "-shard_size=1GiB"
    )
    assert keys.returncode == 0, keys.stderr
    assert "  [1]" in keys.stdout.splitlines()
    assert "  [a&b'c]" in keys.stdout.splitlines()
    plain = invoke_ishard(f"-src_bck={src}", f"-dst_bck={dst}", "-dry_run", "-shard_size=1GiB")
    assert plain.returncode == 0, plain.stderr
    assert not any(line.lstrip().startswith("[") for line in plain.stdout.splitlines())
    assert plain.stdout.startswith("shard-000000.tar  1.76KiB\n")
    # The same plan, with and without the key lines.
    without_keys = [ln for ln in keys.stdout.splitlines() if not ln.startswith("  [")]
    assert without_keys == plain.stdout.splitlines()
    assert not dst.exists()


def test_go_dry_run_false_collapse_false_spaces_max_size_and_exclude(tmp_path):
    src = make_tree(
        tmp_path / "src",
        {"a/1.jpg": 100, "a/1.xml": 10, "a/2.jpg": 100},
    )
    make_tree(src, {"b/3.jpg": 100, "b/3.xml": 10, "b/3.txt": 1})
    common = ["-sample_key_pattern=full_name", "-max_shard_size=1KiB"]
    split = tmp_path / "split"
    result = invoke_ishard(
        "-src_bck", src, "-dst_bck", split, "-dry_run=false", "-collapse=false", *common,
        "-sample_exts=.jpg,.xml", "-missing_extension_action=exclude",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # Without collapse each directory is its own shard; exclude dropped the incomplete sample
    # a/2 and the unwanted b/3.txt.
    assert [tar_names(s) for s in shard_files(split)] == [
        ["a/1.jpg", "a/1.xml"],
        ["b/3.jpg", "b/3.xml"],
    ]
    assert "left out 1: extension not in --sample-exts" in result.stdout
    assert "left out 1: file of a sample that lacks an extension of --sample-exts" in result.stdout
    # With -collapse both directories' remainders share one shard.
    joined = tmp_path / "joined"
    result = invoke_ishard(f"-src_bck={src}", f"-dst_bck={joined}", "-collapse", *common)
    assert result.returncode == 0, result.stderr
    assert [tar_names(s) for s in shard_files(joined)] == [
        ["a/1.jpg", "a/1.xml", "a/2.jpg", "b/3.jpg", "b/3.txt", "b/3.xml"]
    ]


def test_go_spelling_bad_value_is_reported_in_our_terms(src, tmp_path):
    result = invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'out'}", "-shard_size=abc")
    assert_error(result, 2, "--shard-size", "'abc'")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("pattern", ["jpg", "[a-z]+[.]jpg$"])
def test_go_spelling_keeps_gos_meaning_for_a_pattern_without_group(tmp_path, pattern):
    """Go compiles any non-built-in word as a regex and expands $1 to "" when it has no group;
    our spelling refuses such a pattern (test_bad_inputs), Go's keeps Go's keys."""
    from ishard.planning.keys import key_function, sample_key

    src = make_tree(tmp_path / "src", {"a/1.jpg": 2, "a/1.xml": 2, "b/x.jpg": 2})
    done = invoke_ishard(
        f"-src_bck={src}",
        f"-dst_bck={tmp_path / 'out'}",
        f"-sample_key_pattern={pattern}",
        "-dry_run=json",
    )
    assert done.returncode == 0, done.stderr
    keys = {
        f["name"]: s["key"]
        for shard in json.loads(done.stdout)["shards"]
        for s in shard["samples"]
        for f in s["files"]
    }
    go_key = key_function(pattern)  # the library's Go-exact $1 replacement
    assert keys == {n: sample_key(n, go_key) for n in ("a/1.jpg", "a/1.xml", "b/x.jpg")}
    assert keys["b/x.jpg"] == ("b/x." if pattern == "jpg" else "b/")
    assert keys["a/1.jpg"] == ("a/1." if pattern == "jpg" else "a/1")  # 'jpg' replaced by ""
    native = invoke_ishard("shard", src, "--dry-run=json", "--sample-key-pattern", pattern)
    assert_error(native, 2, f"--sample-key-pattern {pattern!r}")


@pytest.mark.parametrize(
    ("extra", "hint"),
    [
        (
            ["--shard-template", "s-00.tar", "s-02.tar", "s-04.tar"],
            "quote it, e.g. --shard-template 's-{00..04..2}.tar'",
        ),
        (["--shard-template", "a", "b"], None),  # not a counting sequence: click's own line
        (["--shard-template", "a-3", "a-2", "a-1"], None),  # counts down: no template does that
    ],
)
def test_extra_arguments_get_the_brace_hint_only_for_a_sequence(src, tmp_path, extra, hint):
    done = invoke_ishard("shard", src, tmp_path / "out", *extra)
    line = assert_error(done, 2, "xtra argument")
    if hint:
        assert line.endswith(hint), line
    else:
        assert "brace template" not in line and "Got unexpected extra argument" in line, line
    assert not (tmp_path / "out").exists()


def test_go_spelling_gets_the_brace_hint_too(src, tmp_path):
    done = invoke_ishard(
        f"-src_bck={src}",
        f"-dst_bck={tmp_path / 'out'}",
        "-shard_template",
        "shard-0",
        "shard-1",
        "shard-2",
        "shard-3",
    )
    assert_error(
        done,
        2,
        "got unexpected extra arguments 'shard-1 shard-2 shard-3' — they look "
        "like a brace template the shell expanded: quote it, e.g. --shard-template "
        "'shard-{0..3}'",
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("template", "ext"),
    [("shard-%06d.tar", ".tar"), ("part-{0..9}.tgz", ".tgz"), ("s-%d.tar.lz4", ".tar.lz4")],
)
def test_template_ending_in_the_extension_does_not_double_it(src, tmp_path, template, ext):
    dst = tmp_path / "out"
    done = invoke_ishard(
        "shard", src, dst, "--shard-template", template, "--ext", ext, "--shard-size", "1KiB"
    )
    assert done.returncode == 0, done.stderr
    made = sorted(p.name for p in dst.iterdir() if p.name not in DATASET_RECORDS)
    first = template.replace("%06d", "000000").replace("{0..9}", "0").replace("%d", "0")
    assert made[0] == first and len(made) > 1, made
    assert all(n.endswith(ext) and not n.endswith(ext + ext) for n in made), made
    manifest = json.loads((dst / "manifest.json").read_text())
    assert sorted(s["url"] for s in manifest["shardlist"]) == made
    assert invoke_ishard("verify", dst).returncode == 0


@pytest.mark.parametrize(
    ("args", "warned"),
    [
        (["--compress-level", "3"], ["--compress-level 3 has no effect"]),
        (["--ext", ".zip", "--compress-level", "3"], ["--compress-level 3 has no effect"]),
        (["--zip-compression", "deflated"], ["--zip-compression deflated has no effect"]),
        (["--ext", ".zip", "--gzip-library", "zlib"], ["--gzip-library zlib has no effect"]),
        (["--ext", ".tgz", "--compress-level", "3", "--gzip-library", "zlib"], []),
        (["--ext", ".tar.lz4", "--compress-level", "3"], []),
        (["--ext", ".zip", "--zip-compression", "deflated", "--compress-level", "3"], []),
    ],
)
def test_options_without_effect_are_warned_about(src, tmp_path, args, warned):
    for dry in ([], ["--dry-run=summary"]):
        dst = tmp_path / ("plan" if dry else "out")
        done = invoke_ishard("shard", src, dst, *args, *dry)
        assert done.returncode == 0, done.stderr
        lines = [ln for ln in done.stderr.splitlines() if "has no effect" in ln]
        assert len(lines) == len(warned), done.stderr
        for line, text in zip(lines, warned):
            assert line.startswith("ishard: warning: " + text), line


# ---------------------------------------------------------------- dry run


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    return make_tree(
        tmp_path / "mixed",
        {
            "a/1.jpg": 100,
            "a/1.xml": 50,
            "a/a&b'c.jpg": 70,
            "a/a&b'c.xml": 7,
            "b/3.jpg": 300,
            "b/3.xml": 30,
            "b/3.txt": 5,
            "c/4.jpg": 2000,
            ".DS_Store": 10,
        },
    )


def test_dry_run_show_keys_text_is_exact(mixed, tmp_path):
    result = invoke_ishard(
        "shard", mixed, "--dry-run=show_keys", "--shard-size", "200B",
        "--sample-exts", ".jpg,.xml", "--missing-extension-action", "exclude",
        "--member-names", "original",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [few_shards_note(2, 3)]
    assert result.stdout == (
        "shard-000000.tar  227B\n"
        "  [1]\n"
        "    a/1.jpg       100B\n"
        "    a/1.xml       50B\n"
        "  [a&b'c]\n"
        "    a/a&b'c.jpg   70B\n"
        "    a/a&b'c.xml   7B\n"
        "shard-000001.tar  330B\n"
        "  [3]\n"
        "    b/3.jpg       300B\n"
        "    b/3.xml       30B\n"
        "would write 2 shards: 3 samples, 6 files, 557B payload\n"
        "cut by size: 200B per shard\n"
        "shard payload: smallest 227B, median 227B, largest 330B\n"
        f"left out 1: {HIDDEN_REASON} (e.g. '.DS_Store')\n"
        "left out 1: extension not in --sample-exts (--missing-extension-action exclude)"
        " (e.g. 'b/3.txt')\n"
        "left out 1: file of a sample that lacks an extension of --sample-exts (--missing-extension-action"
        " exclude) (e.g. 'c/4.jpg')\n"
    )
    assert "&amp;" not in result.stdout and "&#39;" not in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mixed"]


def test_dry_run_writes_nothing_into_an_existing_non_empty_destination(mixed, tmp_path):
    """(Without --overwrite the dry run refuses it as the run does: tests/cli/test_dry_run.py.)"""
    dst = make_tree(tmp_path / "out", {"old.tar": b"x"})
    before_src, before_dst = snapshot(mixed), snapshot(dst)
    result = invoke_ishard(
        "shard", mixed, dst, "--dry-run=files", "--shard-size", "200B", "--member-names",
        "original", "--overwrite",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["shard-000000.tar  227B", "    a/1.jpg       100B"]
    assert "would write 3 shards: 4 samples, 8 files, 2.50KiB payload" in lines
    assert "shard payload: smallest 227B, median 335B, largest 1.95KiB" in lines
    assert not any(ln.startswith("  [") for ln in lines)
    assert snapshot(dst) == before_dst
    assert snapshot(mixed) == before_src


def test_dry_run_json_equals_what_a_real_run_writes(mixed, tmp_path):
    opts = ["--shard-size", "150B", "--samples-per-shard", "2", "--shard-template", "p-{00..99}"]
    plan = invoke_ishard("shard", mixed, "--dry-run=json", *opts)
    assert plan.returncode == 0, plan.stderr
    assert plan.stderr == ""
    doc = json.loads(plan.stdout)  # the whole of stdout is one JSON document
    assert set(doc) == {"shards", "summary"}
    summary = doc["summary"]
    assert summary["shards"] == len(doc["shards"]) >= 3
    assert summary["samples"] == 4
    assert summary["files"] == 8
    assert summary["bytes"] == 100 + 50 + 70 + 7 + 300 + 30 + 5 + 2000
    assert summary["skipped"] == [{"reason": HIDDEN_REASON, "count": 1, "examples": [".DS_Store"]}]
    for shard in doc["shards"]:
        assert set(shard) == {"name", "size", "samples"}
        assert shard["size"] == sum(f["size"] for s in shard["samples"] for f in s["files"])
        for sample in shard["samples"]:
            assert set(sample) == {"key", "files"}
            for f in sample["files"]:  # by default each member is <key>.<extension>
                extension = PurePosixPath(f["name"]).name.split(".", 1)[1]
                assert f == {**f, "member": f"{sample['key']}.{extension}"}
                assert set(f) == {"name", "size", "member"}

    dst = tmp_path / "out"
    real = invoke_ishard("shard", mixed, dst, *opts)
    assert real.returncode == 0, real.stderr
    written = sorted(p.name for p in shard_files(dst))
    assert written == sorted(s["name"] for s in doc["shards"])
    for shard in doc["shards"]:
        with tarfile.open(dst / shard["name"]) as tar:
            got = [(m.name, m.size) for m in tar.getmembers()]
        want = [(f["member"], f["size"]) for s in shard["samples"] for f in s["files"]]
        assert got == want, shard["name"]


def test_dry_run_json_with_warnings_keeps_stdout_pure_json(src):
    result = invoke_ishard(
        "shard", src, "--dry-run=json",
        "--sample-exts", ".jpg,.xml", "--missing-extension-action", "warn",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert len(doc["summary"]["warnings"]) == 2
    assert [ln.split(":")[1] for ln in result.stderr.splitlines()] == [" warning"] * 2


# ---------------------------------------------------------------- --json, --progress


def test_json_summary_of_a_real_run(src, tmp_path):
    dst = tmp_path / "out"
    result = invoke_ishard("shard", src, dst, "--json", "--shard-size", "400B")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [few_shards_note(3, 4)]  # not in the JSON
    summary = json.loads(result.stdout)
    assert isinstance(summary, dict)
    shards = shard_files(dst)
    assert summary["shards"] == len(shards) == 3
    assert summary["samples"] == 4
    assert summary["files"] == 6
    assert summary["bytes"] == 1800
    assert summary["archive_bytes"] == sum(p.stat().st_size for p in shards)
    assert Path(summary["manifest"]) == dst / "manifest.json"
    assert (dst / "manifest.json").is_file()
    assert summary["skipped"][0]["examples"] == [".DS_Store"]


def test_progress_without_terminal_is_plain_lines_on_stderr(src, tmp_path):
    dst = tmp_path / "out"
    result = invoke_ishard("shard", src, dst, "--progress", "--json", "--shard-size", "400B")
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)  # progress does not touch stdout
    lines = result.stderr.splitlines()
    assert "ishard: planned 3 shards, 1.76KiB" in lines
    assert all(ln.startswith("ishard: ") for ln in lines), lines
    assert "\x1b" not in result.stderr and "\r" not in result.stderr


def test_no_progress_and_default_without_terminal_print_none(src, tmp_path):
    quiet = invoke_ishard("shard", src, tmp_path / "o1", "--no-progress")
    default = invoke_ishard("shard", src, tmp_path / "o2")
    for result in (quiet, default):
        assert result.returncode == 0, result.stderr
        assert result.stderr.splitlines() == [few_shards_note(1, 4)]  # no progress
        assert result.stdout.startswith("wrote 1 shard: 4 samples, 6 files")


# ---------------------------------------------------------------- ishard ls

LS_MEMBERS = [("a/1.jpg", 300), ("dir with space/x.cls", 3), ("a&b'c.txt", 0)]


def _tar_bytes(mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, size in LS_MEMBERS:
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(b"z" * size))
    return buf.getvalue()


def _make_archive(path: Path) -> Path:
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as zf:
            for name, size in LS_MEMBERS:
                zf.writestr(name, b"z" * size)
    else:
        path.write_bytes(tar_codec(path.name)[0](_tar_bytes("w")))
    return path


@pytest.mark.parametrize("name", [f"x{e}" for e in ARCHIVE_EXTS])
def test_ls_lists_members_with_sizes(tmp_path, name):
    archive = _make_archive(tmp_path / name)
    result = invoke_ishard("ls", archive)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = [line.split(None, 2) for line in result.stdout.splitlines()]
    assert [(r[2], int(r[0])) for r in rows] == LS_MEMBERS
    assert [r[1] for r in rows] == ["300B", "3B", "0B"]
    js = invoke_ishard("ls", "--json", archive)
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout) == {"members": [{"name": n, "size": s} for n, s in LS_MEMBERS]}


def test_ls_reads_what_shard_wrote(src, tmp_path):
    dst = tmp_path / "out"
    done = invoke_ishard("shard", src, dst, "--ext", ".tar.lz4", "--member-names", "original")
    assert done.returncode == 0, done.stderr
    result = invoke_ishard("ls", dst / "shard-000000.tar.lz4")
    assert result.returncode == 0, result.stderr
    assert [ln.split(None, 2)[2] for ln in result.stdout.splitlines()] == VISIBLE


def test_ls_errors(tmp_path):
    assert_error(invoke_ishard("ls", tmp_path / "nope.tar"), 2, "nope.tar", "does not exist")
    (tmp_path / "notes.txt").write_text("hi")
    assert_error(invoke_ishard("ls", tmp_path / "notes.txt"), 2, "notes.txt", ".tar")
    (tmp_path / "broken.tar").write_bytes(b"this is not a tar archive" * 40)
    assert_error(invoke_ishard("ls", tmp_path / "broken.tar"), 1, "broken.tar", "cannot read")
    (tmp_path / "out").mkdir()
    assert_error(
        invoke_ishard("ls", tmp_path / "out"),
        2,
        f"{str(tmp_path / 'out')!r} is a directory — give a shard file (e.g. "
        f"{tmp_path / 'out'}/shard-000000.tar), or use ishard verify {tmp_path / 'out'}",
    )


# ---------------------------------------------------------------- version and help


def test_version_and_help():
    version = invoke_ishard("--version")
    assert version.returncode == 0
    assert ishard.__version__ in version.stdout and "ishard" in version.stdout
    top = invoke_ishard("--help")
    assert top.returncode == 0
    assert "shard" in top.stdout and "ls" in top.stdout
    sub = invoke_ishard("shard", "--help")
    assert sub.returncode == 0
    for option in (
        "--shard-size", "--samples-per-shard", "--sample-key-pattern", "--sample-exts",
        "--missing-extension-action", "--collapse", "--ekm", "--ext", "--shard-template",
        "--sort", "--dry-run", "--progress", "--no-progress", "--jobs", "--include-hidden",
        "--overwrite", "--prefix", "--json", "--debug",
    ):  # fmt: skip
        assert option in sub.stdout, option
    assert sub.stderr == ""


# ---------------------------------------------------------------- selection and counts


def test_samples_per_shard_caps_each_shard(tmp_path):
    files = {f"d/{i:02d}.jpg": 10 for i in range(10)} | {f"d/{i:02d}.cls": 1 for i in range(10)}
    src = make_tree(tmp_path / "src", files)
    dst = tmp_path / "out"
    result = invoke_ishard("shard", src, dst, "--samples-per-shard", "3", "--shard-size", "1GiB")
    assert result.returncode == 0, result.stderr
    per_shard = [Counter(stem(m) for m in tar_names(s)) for s in shard_files(dst)]
    assert [len(c) for c in per_shard] == [3, 3, 3, 1]
    assert all(set(c.values()) == {2} for c in per_shard)  # both files of a sample together
    assert sorted(k for c in per_shard for k in c) == [f"{i:02d}" for i in range(10)]


def test_prefix_keeps_names_relative_to_source(src, tmp_path):
    dst = tmp_path / "out"
    result = invoke_ishard("shard", src, dst, "--prefix", "b/", "--member-names", "original")
    assert result.returncode == 0, result.stderr
    assert [tar_names(s) for s in shard_files(dst)] == [["b/3.jpg", "b/3.xml"]]


def test_include_hidden_keeps_ds_store(src, tmp_path):
    dst = tmp_path / "out"
    result = invoke_ishard("shard", src, dst, "--include-hidden", "--member-names", "original")
    assert result.returncode == 0, result.stderr
    assert tar_names(dst / "shard-000000.tar") == [".DS_Store", *VISIBLE]
    assert "left out" not in result.stdout
    plain = invoke_ishard("shard", src, tmp_path / "plain", "--member-names", "original")
    assert tar_names(tmp_path / "plain" / "shard-000000.tar") == VISIBLE
    assert f"left out 1: {HIDDEN_REASON} (e.g. '.DS_Store')" in plain.stdout.splitlines()


def test_warn_action_names_offenders_and_keeps_every_file(src, tmp_path):
    dst = tmp_path / "out"
    result = invoke_ishard(
        "shard",
        src,
        dst,
        "--sample-exts",
        ".jpg,.xml",
        "--missing-extension-action",
        "warn",
        "--member-names",
        "original",
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "ishard: warning: sample '2': no '.xml' file",
        "ishard: warning: sample \"a&b'c\": no '.xml' file",
        few_shards_note(1, 4),
    ]
    assert result.stdout.splitlines()[-3:] == [  # the summary repeats them
        "2 warnings (on stderr too, before writing):",
        "  sample '2': no '.xml' file",
        "  sample \"a&b'c\": no '.xml' file",
    ]
    assert tar_names(dst / "shard-000000.tar") == VISIBLE


def test_go_style_checksum_flag_turns_md5_off(src, tmp_path):
    dst = tmp_path / "out"
    result = invoke_ishard(
        f"-src_bck={src}",
        f"-dst_bck={dst}",
        "-checksum",
        "none",
        "-shard_size=1KiB",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    entries = json.loads((dst / "manifest.json").read_text())["shardlist"]
    assert entries and all("md5sum" not in e and e["filesize"] > 0 for e in entries)


def test_every_option_can_come_from_the_environment_and_the_command_line_wins(tmp_path):
    env = {**os.environ, "ISHARD_SHARD_SIZE": "128KiB", "ISHARD_SORT": "alpha"}
    from_env = run_ishard("shard", FIXTURES / "imagenet", "--dry-run=summary", env=env)
    given = invoke_ishard(
        "shard",
        FIXTURES / "imagenet",
        "--dry-run=summary",
        "--shard-size",
        "128KiB",
        "--sort",
        "alpha",
    )
    assert from_env.returncode == 0, from_env.stderr
    assert from_env.stdout == given.stdout and "128KiB per shard" in given.stdout
    overridden = run_ishard(
        "shard", FIXTURES / "imagenet", "--dry-run=summary", "--shard-size", "1MiB", env=env
    )
    assert "1MiB per shard" in overridden.stdout
    bad = run_ishard(
        "shard", FIXTURES / "imagenet", tmp_path / "out", env={**env, "ISHARD_JOBS": "x"}
    )
    assert bad.returncode == 2 and bad.stdout == "" and not (tmp_path / "out").exists()
    assert (
        bad.stderr.startswith("ishard: error: ")
        and "Invalid value for ISHARD_JOBS: 'x'" in bad.stderr
    )
    assert len(bad.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        (
            "ISHARD_DRY_RUN",
            "1",
            (
                "ISHARD_DRY_RUN='1' is not a dry-run mode — set it to shards, files, "
                "show_keys, json or summary, or unset it"
            ),
        ),
        (
            "ISHARD_SHARD_SIZE",
            "abc",
            "ISHARD_SHARD_SIZE='abc' is neither a size nor a sample count — write a size",
        ),
        (
            "ISHARD_STORAGE_OPTION",
            "novalue",
            "ISHARD_STORAGE_OPTION='novalue' is not KEY=VALUE — write e.g.",
        ),
        (
            "ISHARD_LOOKALIKE_NAMES",
            "maybe",
            "ISHARD_LOOKALIKE_NAMES='maybe' must be refuse or warn",
        ),
    ],
)
def test_a_refused_environment_value_names_its_variable(tmp_path, variable, value, line):
    """Findings: ISHARD_DRY_RUN=1 was refused as '--dry-run' without the variable, the
    library's refusals never named it, and ISHARD_STORAGE_OPTION was not read at all."""
    done = invoke_ishard("shard", FIXTURES / "imagenet", tmp_path / "out", env={variable: value})
    assert_error(done, 2, line)
    assert not (tmp_path / "out").exists()


def test_json_comes_from_ishard_json_as_its_flag_is_named(tmp_path):
    """--json is ISHARD_JSON (the option's name), not the parameter's ISHARD_AS_JSON."""
    done = invoke_ishard(
        "shard", FIXTURES / "imagenet", "--dry-run=summary", "-q", env={"ISHARD_JSON": "1"}
    )
    assert done.returncode == 0
    done = invoke_ishard(
        "shard", FIXTURES / "imagenet", tmp_path / "out", "--no-progress", env={"ISHARD_JSON": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["shards"] > 0


@pytest.mark.parametrize("command", ["shard", "verify", "ls", "split"])
def test_help_shows_each_option_s_environment_variable(command):
    """--help names ISHARD_<OPTION> beside every option (its long name, dashes as '_')."""
    import click

    from ishard.cli import cli

    shown = " ".join(invoke_ishard(command, "--help").stdout.split())
    for param in cli.commands[command].params:
        if isinstance(param, click.Option):
            long = next(o for o in param.opts if o.startswith("--"))
            variable = "ISHARD_" + long[2:].replace("-", "_").upper()
            assert f"env var: {variable}" in shown, variable


def test_quiet_prints_nothing_and_verbose_logs_each_step(tmp_path):
    source = FIXTURES / "imagenet"
    quiet = invoke_ishard("shard", source, tmp_path / "q", "--shard-size", "256KiB", "-q")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    shards = sorted(p.name for p in (tmp_path / "q").glob("shard-*.tar"))
    assert len(shards) == 6
    loud = invoke_ishard(
        "shard", source, tmp_path / "v", "--shard-size", "256KiB", "-v", "--no-progress"
    )
    assert loud.returncode == 0 and "wrote 6 shards" in loud.stdout
    lines = loud.stderr.splitlines()
    assert lines[0].startswith("ishard: listed ") and lines[1].startswith("ishard: planned 6 ")
    assert sorted(line.split()[2].rstrip(":") for line in lines[2:8]) == shards  # as they end
    assert all("xxh128:" in line for line in lines[2:8])
    assert lines[8] == f"ishard: wrote the manifest {tmp_path / 'v' / 'manifest.json'}"
    (tmp_path / "q" / shards[1]).write_bytes(b"damaged")
    checked = invoke_ishard("verify", tmp_path / "q", "-q")
    assert checked.returncode == 1 and checked.stdout == ""
    both = invoke_ishard("shard", source, tmp_path / "b", "-q", "-v")
    assert both.returncode == 2 and both.stdout == "" and not (tmp_path / "b").exists()
    assert both.stderr == (
        "ishard: error: -q/--quiet and -v/--verbose cannot be used together — choose one\n"
    )


def test_the_library_logs_to_the_ishard_logger(tmp_path, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="ishard"):
        ishard.shard(FIXTURES / "imagenet", tmp_path / "out", shard_size="256KiB", jobs=1)
    messages = [r.getMessage() for r in caplog.records if r.name == "ishard"]
    assert messages[0].startswith("listed ") and messages[-1].startswith("wrote the manifest ")
    assert messages[1].startswith("planned 6 shards: 44 samples, ")
    assert sum(m.startswith("wrote shard-") for m in messages) == 6


@pytest.mark.parametrize(
    "words, cword",
    [
        ("ishard shard ima", 2),
        ("ishard shard src ou", 3),
        ("ishard ls sha", 2),
        ("ishard verify ou", 2),
        ("ishard split man", 2),
    ],
)
def test_shell_completion_completes_file_names_for_paths(words, cword):
    """With bash completion on (documented in the user guide), SRC, DST, ARCHIVE and MANIFEST
    complete as file names (click answers 'file', bash then lists the files)."""
    env = {
        **os.environ,
        "_ISHARD_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
    }
    result = run_ishard(env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"file,{words.split()[-1]}"]


def test_the_completion_script_is_printed_for_bash_zsh_and_fish():
    for shell, marker in (
        ("bash", "complete -o nosort -F _ishard_completion ishard"),
        ("zsh", "compdef _ishard_completion ishard"),
        ("fish", "complete --no-files --command ishard"),
    ):
        result = run_ishard(env={**os.environ, "_ISHARD_COMPLETE": f"{shell}_source"})
        assert result.returncode == 0 and marker in result.stdout, (shell, result.stdout[-300:])


def test_bare_dry_run_prints_a_row_per_shard_and_a_histogram(mixed):
    """Native spelling: one row per shard (name, samples, files, payload), the summary, and
    shards counted by payload range; no member lines (those are --dry-run=files)."""
    result = invoke_ishard("shard", mixed, "--dry-run", "--shard-size", "200B",
                        "--member-names", "original")  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["shard", "samples", "files", "payload"]
    rows = [line.split() for line in lines[1:4]]
    assert [r[0] for r in rows] == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    assert sum(int(r[1]) for r in rows) == 4 and sum(int(r[2]) for r in rows) == 8
    assert "a/1.jpg" not in result.stdout
    assert "would write 3 shards: 4 samples, 8 files, 2.50KiB payload" in lines
    at = lines.index("shards by payload:")
    bins = [line.split() for line in lines[at + 1 :]]
    assert bins[0][:3] == ["227B", "-", bins[0][2]] and bins[-1][2] == "1.95KiB"
    assert sum(int(b[3]) for b in bins) == 3  # every shard counted once


def test_go_spelling_dry_run_keeps_go_listing_of_members(mixed, tmp_path):
    result = invoke_ishard(f"-src_bck={mixed}", f"-dst_bck={tmp_path / 'out'}", "-dry_run",
                        "-shard_size=200B")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["shard-000000.tar  227B", "    a/1.jpg       100B"]
    assert "shards by payload:" not in result.stdout
    assert not (tmp_path / "out").exists()


def test_help_groups_options_shows_choices_and_examples():
    sub = invoke_ishard("shard", "-h")
    assert sub.returncode == 0 and sub.stderr == ""
    text = sub.stdout
    for heading in ("What to shard:", "Grouping files into samples:", "Cutting and naming shards:",
                    "Archives:", "Reader compatibility:", "Object stores:", "Running:",
                    "  Examples:"):  # fmt: skip
        assert f"\n{heading}" in text, heading
    assert "Other options" not in text  # every option has its group
    assert "--ext [.tar|.tgz|.tar.gz|.zip|.tar.lz4|.tar.zst]" in text
    assert "--dry-run [=files|show_keys|json|summary]" in text
    assert "[env var: ISHARD_CHECKSUM; default: xxh128]" in " ".join(text.split())
    assert text.index("What to shard:") < text.index("--prefix") < text.index("Grouping")
