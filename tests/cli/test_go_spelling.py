"""Go ishard's meanings: a shard size without a unit counts samples (bytes carry a unit), the
plan and summary say which, both buckets are required in Go's spelling, and ``-sort`` is as
strict as Go's. Shards are read back with tarfile and webdataset."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import webdataset as wds
from helpers import assert_error, few_shards_note, invoke_ishard, make_tree, run_losing
from hypothesis import given, settings
from hypothesis import strategies as st

import ishard
from ishard.errors import UsageError
from ishard.options.record import parse_sort
from ishard.planning.cut import Bounds, Order, cut_indices

# 25 samples of 60 payload bytes each (a 59-byte .jpg and a 1-byte .cls)
TREE = {**{f"d/s{i:03d}.jpg": 59 for i in range(25)}, **{f"d/s{i:03d}.cls": 1 for i in range(25)}}


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    return make_tree(tmp_path_factory.mktemp("go") / "src", TREE)


def samples_per_shard(dst: Path, exts: tuple[str, ...] = ("jpg", "cls")) -> list[int]:
    """Samples in each shard, as webdataset groups them; tarfile agrees (a member per ext)."""
    counts = []
    for shard in sorted(dst.glob("shard-*.tar")):
        with tarfile.open(shard) as tar:
            members = tar.getnames()
        read = list(wds.WebDataset(str(shard), shardshuffle=False, empty_check=False))
        assert len(members) == len(exts) * len(read), shard.name
        assert all(set(s) >= set(exts) for s in read), shard.name
        counts.append(len(read))
    return counts


@pytest.mark.parametrize(
    ("args", "counts", "line"),
    [
        # Go's -shard_size: an int32 is a count (exactly N, without Go's wait for 100 KiB)
        (["-shard_size=10"], [10, 10, 5], "cut by count: 10 samples per shard"),
        (["-shard_size=+10"], [10, 10, 5], "cut by count: 10 samples per shard"),
        # ... and so is a number without a unit in our spelling
        (["--shard-size", "10"], [10, 10, 5], "cut by count: 10 samples per shard"),
        # bytes carry a unit: 300 B = 5 samples of 60 B
        (["--shard-size", "300B"], [5] * 5, "cut by size: 300B per shard"),
        # Go: a number over int32 is bytes; the older -max_shard_size read every number as bytes
        (["-shard_size=3000000000"], [25], "cut by size: 3GB per shard"),
        (["-max_shard_size=300"], [5] * 5, "cut by size: 300B per shard"),
    ],
)
def test_a_number_without_a_unit_counts_samples(src, tmp_path, args, counts, line):
    dst = tmp_path / "out"
    go = not args[0].startswith("--")
    done = invoke_ishard(
        *([f"-src_bck={src}", f"-dst_bck={dst}"] if go else ["shard", src, dst]), *args
    )
    assert done.returncode == 0, done.stderr
    assert samples_per_shard(dst) == counts
    assert line in done.stdout.splitlines()
    assert done.stderr.splitlines() == [few_shards_note(len(counts), 25)]  # no warning
    manifest = json.loads((dst / "manifest.json").read_text())["ishard"]["options"]
    by_count = line.startswith("cut by count")
    assert (manifest["shard_size"] is None) == by_count  # the manifest records the choice
    assert manifest["samples_per_shard"] == (int(line.split()[3]) if by_count else None)


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 10**9), min_size=1, max_size=60),
    count=st.integers(1, 12),
    dirs=st.integers(1, 4),
)
def test_count_alone_cuts_at_exactly_n_samples_whatever_their_bytes(sizes, count, dirs):
    """No byte bound with a count alone: flat, every shard but the last holds exactly N; with
    --collapse in tree mode too (remainders move up one sample at a time)."""
    flat = cut_indices(
        [f"k{i}" for i in range(len(sizes))], sizes, Bounds(None, count), Order(), collapse=False
    )
    assert [len(c) for c in flat[:-1]] == [count] * (len(flat) - 1) and 0 < len(flat[-1]) <= count
    assert [i for c in flat for i in c] == list(range(len(sizes)))
    keys = [f"d{i % dirs}/k{i}" for i in range(len(sizes))]
    tree = cut_indices(keys, sizes, Bounds(None, count), Order(), collapse=True)
    assert [len(c) for c in tree[:-1]] == [count] * (len(tree) - 1)
    assert sorted(i for c in tree for i in c) == list(range(len(sizes)))


def test_dry_run_json_and_text_say_count_or_size(src):
    """A count no shard reaches is also said, with the spelling for bytes."""
    done = invoke_ishard("shard", src, "--dry-run=json", "--shard-size", "100")
    doc = json.loads(done.stdout)
    assert doc["summary"]["cut"] == {"by": "count", "shard_size": None, "samples_per_shard": 100}
    assert [len(s["samples"]) for s in doc["shards"]] == [25]
    warning = (
        "--shard-size 100 counts samples (a number without a unit), and no shard reached "
        "100 samples — if you meant bytes, write 100B"
    )
    assert doc["summary"]["warnings"] == [warning]
    assert done.stderr == f"ishard: warning: {warning}\n"
    both = invoke_ishard(
        "shard", src, "--dry-run=summary", "--shard-size", "256KiB", "--samples-per-shard", "7"
    )
    assert both.returncode == 0, both.stderr
    assert (
        "cut by size or count: 256KiB or 7 samples per shard, whichever comes first"
        in both.stdout.splitlines()
    )


def test_go_spelling_count_below_one_is_refused(src, tmp_path):
    """Go would take -1 as a count that never binds; a count over int32 in our spelling is
    refused too (docs/bad-inputs.md, shard-size-count-too-big)."""
    assert_error(
        invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'b'}", "-shard_size=-1"),
        2,
        "--shard-size '-1' must be at least 1 sample",
    )
    assert not (tmp_path / "b").exists()


def test_python_api_int_and_float_are_bytes_strings_follow_the_cli(src, tmp_path):
    def counts(**options) -> list[int]:
        return [len(s.samples) for s in ishard.plan(src, **options).shards]

    assert counts(shard_size=10) == [1] * 25  # an int is bytes (webdataset's maxsize)
    assert counts(shard_size=300) == [5] * 5
    assert counts(shard_size=3e2) == [5] * 5  # a whole float too
    assert counts(shard_size="300B") == [5] * 5
    assert counts(shard_size="10") == [10, 10, 5]  # text without a unit counts samples
    assert counts(shard_size=" +10 ") == [10, 10, 5]
    for bad, words in [(2.5, "2.5"), (True, "True"), ("0", "'0'"), ("2147483648", "2GiB")]:
        with pytest.raises(UsageError, match=words):
            ishard.plan(src, shard_size=bad)
    with pytest.raises(UsageError, match="samples_per_shard=5 is one too"):
        ishard.plan(src, shard_size="10", samples_per_shard=5)
    with pytest.raises(UsageError, match="leave out the sample count shard_size=.10."):
        ishard.plan(src, shard_size="10", num_shards=3)
    ishard.shard(src, tmp_path / "api", shard_size="10")
    assert samples_per_shard(tmp_path / "api") == [10, 10, 5]


def test_resume_sees_a_change_from_count_to_size(tmp_path):
    """10 samples of 100 B: a count of 3 and a size of 300B plan the same shards, but the run
    records which it was, so --resume refuses the other one."""
    src = make_tree(tmp_path / "src", {f"s{i:02d}.bin": 100 for i in range(10)})
    dst = tmp_path / "out"
    common = ["--jobs", "1", "--no-progress"]
    stopped = run_losing(src / "s09.bin", "shard", src, dst, "--shard-size", "3", *common)
    assert stopped.returncode == 1, stopped.stderr
    assert len(list(dst.glob("shard-*.tar"))) == 3  # the fourth shard failed
    other = invoke_ishard("shard", src, dst, "--shard-size", "300B", "--resume", *common)
    assert other.returncode == 1 and "--shard-size 3 samples → 300B" in other.stderr
    same = invoke_ishard("shard", src, dst, "--shard-size", "3", "--resume", *common)
    assert same.returncode == 0, same.stderr
    assert "kept 3 shards from the earlier run (checked), wrote 1" in same.stdout
    assert samples_per_shard(dst, ("bin",)) == [3, 3, 3, 1]


@pytest.mark.parametrize("given", ["-src_bck", "-dst_bck"])
def test_go_spelling_needs_both_buckets(src, tmp_path, given):
    """Go: "src_bck and dst_bck are required parameters" — dry runs included; the other one
    is not taken as the source."""
    other = "-dst_bck" if given == "-src_bck" else "-src_bck"
    done = invoke_ishard(f"{given}={src}", "-dry_run")
    assert_error(done, 2, f"{given} needs {other} too", f"add {other}=")
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("sort", "order"),
    [
        ("alpha", Order("alpha")),
        ("alpha:inc", Order("alpha")),
        ("alphanumeric:dec", Order("alpha", descending=True)),
        ("shuffle", Order("shuffle")),
        ("shuffle:+7", Order("shuffle", seed=7)),  # Go's ParseInt takes the '+'
        ("shuffle:9223372036854775807", Order("shuffle", seed=(1 << 63) - 1)),
        # refused, as by Go's -sort
        ("", None),
        ("Alpha", None),
        ("alpha:INC", None),
        (" alpha", None),
        ("alpha:", None),
        ("SHUFFLE", None),
        ("shuffle:", None),
        ("shuffle:9223372036854775808", None),
        ("shuffle:1e3", None),
        # refused, though Go accepts them (see docs/differences.md)
        ("shuffle:-1", None),
        ("alpha:inc:x", None),
    ],
)
def test_sort_is_as_strict_as_gos(sort, order):
    if order is not None:
        assert parse_sort(sort) == order
        return
    with pytest.raises(UsageError, match="--sort"):
        parse_sort(sort)


def test_go_spelling_sort_error_exits_2(src, tmp_path):
    """(Our spelling's `--sort ''` and `--sort Alpha`: docs/bad-inputs.md.)"""
    assert_error(
        invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'out'}", "-sort="),
        2,
        "--sort '' is not a sort order",
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("typo", "line"),
    [
        (
            ["-shard_sise=1MiB"],
            "flag provided but not defined: -shard_sise — did you mean -shard_size?",
        ),
        (
            ["-sample_ext", ".jpg"],
            "flag provided but not defined: -sample_ext — did you mean -sample_exts?",
        ),
        (
            ["-member_names=sample"],
            "flag provided but not defined: -member_names — did you mean --member-names?",
        ),
        (
            ["-shard-size=1MiB"],
            "flag provided but not defined: -shard-size — did you mean --shard-size?",
        ),
    ],
)
def test_a_mistyped_go_flag_is_go_s_one_line_with_the_closest_flag(src, tmp_path, typo, line):
    """Finding: ``-shard_sise`` gave click's "No such option '-s'". Go says the flag is not
    defined; here that line also names the flag meant. Exit 2, nothing written."""
    done = invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'out'}", *typo)
    assert_error(done, 2)
    assert done.stderr == f"ishard: error: {line}\n"
    assert not (tmp_path / "out").exists()


def test_our_short_flags_and_dash_values_are_no_go_typos(src):
    """-q and a value that starts with a dash are not taken for a Go flag."""
    done = invoke_ishard("shard", src, "--dry-run=summary", "-q", "--prefix", "-no_such")
    assert done.returncode == 1 and "with prefix '-no_such'" in done.stderr


@pytest.mark.parametrize("args", [["-ekm="], ["-ekm", ""], ["-ekm=  "]])
def test_an_empty_ekm_is_refused_in_go_s_spelling_as_go_refuses_it(src, tmp_path, args):
    """Finding: ``-ekm=`` silently turned the key map off; Go's flag refuses it (exit 2)."""
    done = invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'out'}", *args)
    value = args[0].partition("=")[2] if len(args) == 1 else args[1]
    line = assert_error(
        done,
        2,
        f"-ekm={value!r} is empty (Go ishard refuses it too)",
        "give a JSON file (-ekm=map.json)",
        "or leave -ekm out",
    )
    assert "--ekm" not in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("words", "fix"),
    [
        (["-dry_run", "show_keys"], "-dry_run=show_keys"),
        (["-dry_run", "json"], "-dry_run=json"),
        (["-dry_run", "false"], "-dry_run=false"),
        (["-collapse", "true"], "-collapse=true"),
        (["-progress", "FALSE"], "-progress=FALSE"),
    ],
)
def test_a_go_bool_flag_with_its_value_as_the_next_word_is_refused(src, tmp_path, words, fix):
    """Finding: ``-dry_run show_keys`` meant show_keys here, though Go's bool flag takes no
    separate value (the word is an argument, and Go reads no flag after it). Refused, naming
    the spelling that means it; nothing listed or written."""
    done = invoke_ishard(
        f"-src_bck={src}", f"-dst_bck={tmp_path / 'out'}", *words, "-shard_size=1GiB"
    )
    line = assert_error(
        done, 2, f"{words[0]} {words[1]}: Go's {words[0]} is a bool flag", f"— write {fix}"
    )
    assert line.endswith(fix)
    assert not (tmp_path / "out").exists()
    joined = invoke_ishard(
        f"-src_bck={src}",
        f"-dst_bck={tmp_path / 'out'}",
        fix,
        "-dry_run=show_keys",
        "-shard_size=1GiB",
    )
    assert joined.returncode == 0, joined.stderr


LOOK_ALIKE = {
    "A.jpg": b"upper",
    "a.jpg": b"lower",
    "u/caf\u00e9.jpg": b"composed",
    "u/cafe\u0301.jpg": b"decomposed",
    "v/x.jpg": b"plain",
}


def test_the_go_spelling_shards_look_alike_names_with_a_warning(tmp_path):
    """Finding: names that differ only in case or Unicode form are distinct files on Linux and
    Go ishard shards them, but the Go spelling refused them. It writes them all now, after one
    warning before writing; --strict still refuses; the native spelling keeps refusing."""
    src = make_tree(tmp_path / "src", LOOK_ALIKE)
    dst = tmp_path / "out"
    done = invoke_ishard(f"-src_bck={src}", f"-dst_bck={dst}", "-progress=false")
    assert done.returncode == 0, done.stderr
    warned = [ln for ln in done.stderr.splitlines() if ln.startswith("ishard: warning: ")]
    assert warned == [
        (
            "ishard: warning: 2 pairs of member names differ only in case or Unicode form (e.g. "
            "'A.jpg' and 'a.jpg'; 'u/cafe\\u0301.jpg' and 'u/caf\\xe9.jpg'): distinct files on "
            "Linux, but one on macOS and Windows, where extracting the shards into one folder "
            "keeps one of each pair — rename one of each pair to extract them anywhere "
            "(--lookalike-names refuse stops such runs)"
        )
    ]
    written = {}
    for shard in sorted(dst.glob("shard-*.tar")):
        with tarfile.open(shard) as tar:
            written.update({m.name: tar.extractfile(m).read() for m in tar if m.isfile()})
    assert written == LOOK_ALIKE
    for strict_flag in ("--strict", "-strict"):
        strict = invoke_ishard(f"-src_bck={src}", f"-dst_bck={tmp_path / 'strict'}", strict_flag)
        assert strict.returncode == 1 and "--strict and the plan has 1 warning" in strict.stderr
        assert not list((tmp_path / "strict").glob("*.tar"))
    native = invoke_ishard("shard", src, tmp_path / "native", "--member-names", "original")
    assert_error(
        native,
        1,
        "member names 'A.jpg' and 'a.jpg' would extract to one file",
        "--lookalike-names warn",
    )
    asked = invoke_ishard(
        "shard", src, "--dry-run=summary", "--member-names", "original", "--lookalike-names", "warn"
    )
    assert asked.returncode == 0 and "2 pairs of member names" in asked.stderr
