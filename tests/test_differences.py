"""Where ishard differs from Go ishard (docs/differences.md): each row shown through the command
or the API, and the table's Test column checked to name tests that exist."""

from __future__ import annotations

import json
import re
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

import pytest
from helpers import few_shards_note, invoke_ishard, make_tree

import ishard

DOC = Path(__file__).resolve().parent.parent / "docs" / "differences.md"
KIB = 1024


def members(plan: ishard.Plan) -> list[list[str]]:
    """Source names per shard, in plan order."""
    return [[f.name for f in s.members()] for s in plan.shards]


def json_plan(result) -> dict[str, str]:
    """{file name: sample key} from a ``--dry-run=json`` run."""
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    return {
        f["name"]: smp["key"] for s in doc["shards"] for smp in s["samples"] for f in smp["files"]
    }


def stems(tar_path: Path) -> list[str]:
    """Each member's basename without its extension, in archive order (read with tarfile)."""
    with tarfile.open(tar_path) as tar:
        return [PurePosixPath(n).name.split(".")[0] for n in tar.getnames()]


# ---------------------------------------------------------------- sizes


def test_default_shard_size_is_one_mib_in_go_spelling_and_256_mib_native(tmp_path):
    # Five 600 KiB samples (3 MiB): Go's documented 1 MiB cuts after two samples (1.2 MiB),
    # the native 256 MiB keeps all five in one shard, in a real run and through the API.
    src = make_tree(tmp_path / "src", {f"d/{i}.bin": 600 * KIB for i in range(5)})
    go = invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'go'}", "-dry_run=json")
    assert go.returncode == 0, go.stderr
    assert [s["size"] for s in json.loads(go.stdout)["shards"]] == [1200 * KIB] * 2 + [600 * KIB]
    go_run = invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'go'}")
    assert go_run.returncode == 0, go_run.stderr
    assert len(list((tmp_path / "go").glob("*.tar"))) == 3
    native = invoke_ishard("shard", src, tmp_path / "native")
    assert native.returncode == 0, native.stderr
    assert "cut by size: 256MiB per shard" in native.stdout
    shards = list((tmp_path / "native").glob("*.tar"))
    assert len(shards) == 1
    with tarfile.open(shards[0]) as tar:
        assert len(tar.getmembers()) == 5
    assert ishard.plan(src).shard_sizes == [3000 * KIB]
    assert ishard.plan(src, shard_size="1MiB").shard_sizes == [1200 * KIB] * 2 + [600 * KIB]


def test_kb_is_decimal_kib_and_bare_k_are_binary(tmp_path):
    # Six 500 B samples: a 1000 B target cuts after two, a 1024 B target after three.
    src = make_tree(tmp_path / "src", {f"d/{i}.bin": 500 for i in range(6)})
    counts = {
        size: ishard.plan(src, shard_size=size).shard_sample_counts
        for size in ("1KB", "1kb", "1KiB", "1K")
    }
    assert counts == {"1KB": [2, 2, 2], "1kb": [2, 2, 2], "1KiB": [3, 3], "1K": [3, 3]}


# Values Go accepts (or finds wrong only later) that are refused before the source is looked at:
# the source does not exist, yet the option is what the error names.
REFUSED = [
    ("shard-size-empty", "shard_size", ""),
    ("shard-size-negative", "shard_size", "-5MiB"),
    ("shard-size-fraction", "shard_size", "1.5"),
    ("sort-extra-part", "sort", "alpha:inc:x"),
    ("shuffle-negative-seed", "sort", "shuffle:-1"),
    ("sample-exts-no-dot", "sample_exts", "jpg"),
    ("sample-exts-space", "sample_exts", ".jpg, .xml"),
    ("template-slash", "shard_template", "a/%d"),
    ("template-dotdot", "shard_template", ".."),
    ("template-leading-dot", "shard_template", ".x-%d"),
    ("template-control", "shard_template", "x\x01-%d"),
    ("template-drive", "shard_template", "C:x%d"),
    ("ext-without-dot", "ext", "tar"),
    ("ext-upper-case", "ext", ".TAR"),
]


@pytest.mark.parametrize(("option", "value"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_values_go_accepts_are_refused_before_listing(tmp_path, option, value):
    with pytest.raises(ishard.UsageError) as err:
        ishard.plan(tmp_path / "no-such-source", **{option: value})
    assert err.value.exit_code == 2
    message = str(err.value)
    assert message.startswith((f"{option}=", f"{option} item ")), message  # names the keyword
    assert "no-such-source" not in message, message
    if option == "sample_exts":  # the fix it names is the item without the space
        assert message.endswith(f"write e.g. .{value.rpartition(',')[2].strip().lstrip('.')}")


# ---------------------------------------------------------------- keys and samples


def test_base_filename_and_base_name_mean_base_file_name(tmp_path):
    # Go compiles base_filename as a regex that does not match: keys would be a/1 and b/1.
    src = make_tree(tmp_path / "src", {"a/1.jpg": 5, "b/1.xml": 5})
    go = invoke_ishard(
        f"-src_bck={src}",
        f"-dst_bck={tmp_path / 'out'}",
        "-sample_key_pattern=base_filename",
        "-dry_run=json",
    )
    assert json_plan(go) == {"a/1.jpg": "1", "b/1.xml": "1"}
    for alias in ("base_filename", "base_name"):
        plan = ishard.plan(src, sample_key_pattern=alias)
        assert [[s.key for s in shard.samples] for shard in plan.shards] == [["1"]]


def test_a_key_equal_to_a_directory_name_is_kept(tmp_path):
    # Keys 'a/b' (listed first, so directory 'a' exists) and 'a': Go drops the second file.
    src = make_tree(tmp_path / "src", {"a/b.jpg": 5, "z/a.jpg": 5})
    plan = ishard.plan(src, sample_key_pattern=r"^(?:z/)?(.*)$", shard_size="1KiB")
    keys = sorted(s.key for shard in plan.shards for s in shard.samples)
    assert keys == ["a", "a/b"]
    assert sorted(n for shard in members(plan) for n in shard) == ["a/b.jpg", "z/a.jpg"]


# ---------------------------------------------------------------- cutting


def test_tree_mode_packs_on_per_directory_totals_in_sorted_order(tmp_path):
    # The reference's model run: d0..d5, three 30 B files each, 200 B target, full_name keys.
    files = {f"d{d}/f{f}.bin": 30 for d in range(6) for f in range(3)}
    src = make_tree(tmp_path / "src", files)
    apart = ishard.plan(src, sample_key_pattern="full_name", shard_size="200B")
    # Go: [d0]=90 | [d1/f0]=30 | [d1/f1,f2]=60 | ... ; here every directory is one shard.
    assert members(apart) == [[f"d{d}/f{f}.bin" for f in range(3)] for d in range(6)]
    assert apart.shard_sizes == [90] * 6
    joined = ishard.plan(src, sample_key_pattern="full_name", shard_size="200B", collapse=True)
    # Go: [d1/f0]=30, [d2]=90, [d4/f0]=30, [d5]=90, then 300 B; here only the last is short.
    assert joined.shard_sizes == [210, 210, 120]
    assert [n for shard in members(joined) for n in shard] == sorted(files)


def test_sort_orders_samples_before_packing_into_dst_itself(tmp_path):
    # Samples '1' and '2' have files in two directories: they stay whole and together.
    src = make_tree(
        tmp_path / "src",
        {"a/1.jpg": 60, "b/1.xml": 60, "a/2.jpg": 60, "b/2.xml": 60, "a/3.jpg": 60},
    )
    dst = tmp_path / "out"
    ishard.shard(src, dst, sort="alpha:dec", shard_size="100B", member_names="original")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]  # no out-sorted
    assert sorted(p.name for p in dst.iterdir()) == [
        "manifest.json",
        "samples.parquet",
        "shard-000000.tar",
        "shard-000001.tar",
    ]
    assert stems(dst / "shard-000000.tar") == ["3", "2", "2"]
    assert stems(dst / "shard-000001.tar") == ["1", "1"]
    # With a count bound too (Go's dsort refuses count-based shard sizes).
    counted = ishard.plan(src, sort="alpha:inc", samples_per_shard=2, shard_size="1GiB")
    assert [[s.key for s in shard.samples] for shard in counted.shards] == [["1", "2"], ["3"]]


# ---------------------------------------------------------------- missing extensions


def test_exclude_keeps_the_first_file_of_a_repeated_extension(tmp_path):
    # Sample '1' has two .jpg files; Go removes the first (a/1.jpg), ishard the later one.
    src = make_tree(tmp_path / "src", {"a/1.jpg": 5, "a/1.xml": 5, "b/1.jpg": 7})
    plan = ishard.plan(src, sample_exts=".jpg,.xml", missing_extension_action="exclude")
    assert members(plan) == [["a/1.jpg", "a/1.xml"]]
    assert [(s.count, s.examples) for s in plan.skipped] == [(1, ("b/1.jpg",))]


def test_warn_prints_ten_lines_on_stderr_then_a_count(tmp_path):
    src = make_tree(tmp_path / "src", {f"{i:02d}.jpg": 1 for i in range(12)})
    done = invoke_ishard(
        "shard",
        src,
        "--dry-run=summary",
        "--sample-exts",
        ".jpg,.xml",
        "--missing-extension-action",
        "warn",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[:10] == [f"ishard: warning: sample '{i:02d}': no '.xml' file" for i in range(10)]
    assert len(lines) == 12 and lines[10].startswith("ishard: warning: ... and 2 more"), lines
    assert lines[11] == few_shards_note(1, 12)
    assert "[Warning]" not in done.stdout  # the summary repeats them, bounded the same way
    assert done.stdout.count("no '.xml' file") == 10 and "... and 2 more" in done.stdout


# ---------------------------------------------------------------- external key map


def test_ekm_file_is_any_value_not_starting_with_a_brace_and_may_have_comments(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 5, "b/2.jpg": 5})
    ekm = tmp_path / "routes.txt"  # Go reads only a value ending in .json as a file
    ekm.write_text('{\n  // the a pictures\n  "a-%d.tar": ["^a/"],\n  "b-%d.tar": ["^b/"]\n}\n')
    plan = ishard.plan(src, ekm=str(ekm))
    assert dict(zip(plan.shard_names, members(plan))) == {
        "a-0.tar": ["a/1.jpg"],
        "b-0.tar": ["b/2.jpg"],
    }


def test_ekm_files_matching_no_or_several_patterns_are_reported(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 5, "a/2.xml": 5, "c/x.png": 5})
    plan = ishard.plan(src, ekm='{"a-%d.tar": ["^a/"], "j-%d.tar": ["jpg$"]}')
    assert members(plan) == [["a/2.xml"]]
    assert {s.reason: (s.count, s.examples) for s in plan.skipped} == {
        "matches more than one --ekm pattern": (1, ("a/1.jpg",)),
        "matches no --ekm pattern": (1, ("c/x.png",)),
    }


def test_ekm_shards_are_written_per_format_into_dst(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 5, "c/2.jpg": 5})
    dst = tmp_path / "out"
    ishard.shard(
        src, dst, ekm='{"fish-%d": ["^a/"], "cats-%d.zip": ["^c/"]}', member_names="original"
    )
    # Go: shards named fish-0 (no extension added) in <dst>-sorted, the map uploaded to dst.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]
    assert sorted(p.name for p in dst.iterdir()) == [
        "cats-0.zip",
        "fish-0.tar",
        "manifest.json",
        "samples.parquet",
    ]
    with tarfile.open(dst / "fish-0.tar") as tar:
        assert tar.getnames() == ["a/1.jpg"]
    with zipfile.ZipFile(dst / "cats-0.zip") as zf:
        assert zf.namelist() == ["c/2.jpg"]


# ---------------------------------------------------------------- names


def test_bash_range_pads_like_bash(tmp_path):
    # Go pads {0000..50..8} to the narrower bound: pre-00-suf, pre-08-suf, ...
    src = make_tree(tmp_path / "src", {f"d/{i}.bin": 5 for i in range(3)})
    plan = ishard.plan(src, shard_template="pre-{0000..50..8}-suf", shard_size="1B")
    assert plan.shard_names == ["pre-0000-suf.tar", "pre-0008-suf.tar", "pre-0016-suf.tar"]


def test_plain_text_template_names_exactly_one_shard(tmp_path):
    one = make_tree(tmp_path / "one", {"d/0.bin": 5})
    assert ishard.plan(one, shard_template="only").shard_names == ["only.tar"]
    two = make_tree(tmp_path / "two", {"d/0.bin": 5, "d/1.bin": 5})
    with pytest.raises(ishard.UsageError) as err:
        ishard.plan(two, shard_template="only", shard_size="1B")
    assert err.value.exit_code == 2 and "'only'" in str(err.value)


# ---------------------------------------------------------------- output


def test_go_spelling_unknown_dry_run_mode_is_refused(tmp_path):
    src = make_tree(tmp_path / "src", {"d/0.bin": 5})
    done = invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'out'}", "-dry_run=yes")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("ishard: error: --dry-run='yes' is not a dry-run mode")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- the document itself

NODE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)(?:\[([^\]`]+)\])?`")


def table_rows() -> list[list[str]]:
    """The cells of every row of the document's one table (header and rule left out)."""
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("|")]
    header, rule, *body = rows
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Go ishard",
        "ishard",
        "Why",
        "Test",
    ], header
    assert set(rule.replace("|", "").strip()) <= {"-", ":", " "}, rule
    return [[c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))] for row in body]


def test_every_row_names_tests_that_exist():
    """A row without a test (or with TODO) is a defect: the difference is not shown."""
    rows = table_rows()
    assert len(rows) >= 25
    todo, problems = [], []
    for row in rows:
        assert len(row) == 4, row
        go, ours, why, test = row
        assert go and ours and why, row
        if "TODO" in test:
            todo.append(go[:60])
        nodes = NODE.findall(test)
        if not nodes and "TODO" not in test:
            problems.append(f"no test named in row {go[:60]!r}")
        for path, name, param in nodes:
            file = DOC.parent.parent / path
            text = file.read_text() if file.is_file() else ""
            if not re.search(rf"^(async )?def {name}\(", text, re.MULTILINE):
                problems.append(f"{path}::{name} does not exist")
            elif param and param not in text:
                problems.append(f"{path}::{name}[{param}]: no such parameter id")
    assert not problems, problems
    assert not todo, f"rows whose Test cell still says TODO: {todo}"
