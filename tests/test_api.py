"""The Python API: typed keyword-only options that help() shows; wrong types and values refused
with a UsageError naming the keyword; ekm= as a dict, JSON text or a path."""

from __future__ import annotations

import dataclasses
import inspect
import json
import pydoc
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import ishard
from ishard.options.record import Options
from ishard.options.table import WRITING_ONLY

FIELDS = [f.name for f in dataclasses.fields(Options)]
NOT_OPTIONS = ("src", "dst", "progress")


def test_the_option_table_holds_every_field_once():
    """``options.table``'s records of a run's options (those with a group) are ``Options``'
    fields, each once; the rest are the command's own; the command's options are the table's,
    in its order."""
    from ishard.cli import cli
    from ishard.options.table import SHARD_OPTIONS

    names = [o.name for o in SHARD_OPTIONS]
    assert len(names) == len(set(names))
    assert sorted(o.name for o in SHARD_OPTIONS if o.group) == sorted(FIELDS)
    assert {o.name for o in SHARD_OPTIONS if not o.group} == {
        "dry_run",
        "progress",
        "as_json",
        "quiet",
        "verbose",
        "debug",
    }
    options = [p.name for p in cli.commands["shard"].params if p.param_type_name == "option"]
    assert options == names


def test_the_command_s_defaults_are_the_api_s():
    """Each option's default on the command line (``options.table``), checked, is the
    API's (``Options()``)."""
    from ishard.options.record import make_options
    from ishard.options.table import SHARD_OPTIONS

    given = {o.name: o.default for o in SHARD_OPTIONS if o.group and o.kind != "repeated"}
    assert make_options(**given) == make_options()


def options_of(function) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(function).parameters.items() if n not in NOT_OPTIONS}


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (ishard.shard, set(FIELDS)),
        (ishard.plan, set(FIELDS) - set(WRITING_ONLY)),
    ],
)
def test_signature_lists_the_options(function, expected):
    params = options_of(function)
    assert set(params) == expected, (
        f"{function.__name__}() lacks {sorted(expected - set(params))}, "
        f"has extra {sorted(set(params) - expected)}"
    )
    defaults = Options()
    for name, param in params.items():
        assert param.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert param.annotation is not inspect.Parameter.empty, name
        assert param.default == getattr(defaults, name), name
    assert not any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        for p in inspect.signature(function).parameters.values()
    )


@pytest.mark.parametrize("function", [ishard.shard, ishard.plan])
def test_help_shows_every_option(function):
    text = pydoc.render_doc(function, renderer=pydoc.plaintext)  # what help() prints
    signature, doc = text.split(f"\n{function.__name__}(", 1)[1].split("\n", 1)
    assert "**options" not in text
    for name, param in options_of(function).items():
        assert f"{name}: " in signature and f"= {param.default!r}" in signature, name
        assert f"\n        {name}: " in doc, f"{name} is not described under Args"
    assert "collapse: 'bool' = False" in signature
    assert "shard_template: 'str' = 'shard-%06d'" in signature


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    for group in ("fish", "bird"):
        for i in range(3):
            (src / group).mkdir(parents=True, exist_ok=True)
            (src / group / f"{group}{i}.jpg").write_bytes(bytes([i]) * 100)
            (src / group / f"{group}{i}.cls").write_text(group)
    return src


# (keyword, value, words the message must hold besides the keyword)
WRONG = [
    ("collapse", "false", "must be True or False, not 'false'"),
    ("collapse", 1, "True or False"),
    ("include_hidden", "yes", "True or False"),
    ("follow_symlinks", "no", "True or False"),
    ("samples_per_shard", "3", "an int"),
    ("samples_per_shard", True, "an int"),
    ("num_shards", 2.0, "an int"),
    ("shards_multiple_of", 0, "at least 1"),
    ("compress_level", "5", "an int"),
    ("compress_level", 23, "0 to 22"),
    ("shard_size", 1.5, "whole number of bytes"),
    ("shard_size", False, "bytes as an int"),
    ("shard_size", "1.5", "fraction of a byte"),
    ("shard_size", "12XB", "neither a size nor a sample count"),
    ("sample_key_pattern", 3, "a string"),
    ("sample_key_pattern", "basename", "did you mean base_file_name"),
    ("sample_exts", 5, "a list of extensions"),
    ("sample_exts", [".jpg", 5], "a list of extensions"),
    ("sample_exts", ".jpg,xml", "must start with a dot"),
    ("missing_extension_action", "skip", "not an action"),
    ("ekm", 5, "a dict"),
    ("ekm", {"fish-%d.tar": [1]}, "list of regex strings"),
    ("ekm", {"fish.tar": ["^fish/"]}, "no number range"),
    ("ekm", {"fish-%d.tar": {"^fish/"}}, "a dict"),  # a set is no JSON
    ("ekm", "no-such-map.json", "nor an existing file"),
    ("ext", ".rar", "not supported"),
    ("ext", [".tar"], "a string"),
    ("shard_template", "shard-%x", "template"),
    ("sort", "random", "not a sort order"),
    ("sort", 7, "a string or None"),
    ("prefix", b"fish/", "a string"),
    ("zip_compression", "lzma", "stored or deflated"),
    ("src_list", 3, "a path"),
    ("endpoint_url", 8333, "a string"),
    ("storage_options", 5, "a dict"),
    ("storage_options", ["anon"], "KEY=VALUE"),
    ("gzip_library", "zstd", "must be one of"),
    ("member_names", "samples", "original or sample"),
    ("index", "lmdb", "give none, dali, energon or dali,energon"),
]


@pytest.mark.parametrize(
    ("keyword", "value", "words"), WRONG, ids=[f"{k}={v!r}" for k, v, _ in WRONG]
)
def test_plan_refuses_wrong_values_naming_the_keyword(tmp_path, keyword, value, words):
    missing = tmp_path / "not-listed"  # a bad option is refused before anything is listed
    with pytest.raises(ishard.UsageError) as err:
        ishard.plan(missing, **{keyword: value})
    message = str(err.value)
    assert re.search(rf"(^|inline ){keyword}\b", message), message
    assert words in message and "--" not in message, message


# shard() only: the destination must stay untouched
WRONG_RUN = [
    ("jobs", "4", "an int"),
    ("jobs", -1, "at least 1"),
    ("overwrite", "true", "True or False"),
    ("resume", 1, "True or False"),
    ("retries", -1, "at least 0"),
    ("retries", 2.5, "an int"),
    ("part_size", "1MiB", "minimum part"),
    ("read_buffer", [1], "an int or a string"),
    ("checksum", "sha1", "use one of xxh128, blake3, sha256, md5, none"),
    ("executor", "ray", "local or dask"),
    ("scheduler", 8786, "a string or None"),
]


@pytest.mark.parametrize(
    ("keyword", "value", "words"), WRONG_RUN, ids=[f"{k}={v!r}" for k, v, _ in WRONG_RUN]
)
def test_shard_refuses_wrong_values_naming_the_keyword(tree, tmp_path, keyword, value, words):
    dst = tmp_path / "dst"
    with pytest.raises(ishard.UsageError) as err:
        ishard.shard(tree, dst, **{keyword: value})
    message = str(err.value)
    assert message.startswith(keyword) and words in message, message
    assert not dst.exists()


def test_cross_option_messages_name_keywords(tree, tmp_path):
    with pytest.raises(ishard.UsageError) as err:
        ishard.shard(tree, tmp_path / "dst", overwrite=True, resume=True)
    assert str(err.value).startswith("overwrite and resume cannot be used together")
    with pytest.raises(ishard.UsageError) as err:
        ishard.plan(tree, num_shards=2, samples_per_shard=3)
    assert str(err.value) == "num_shards fixes the samples per shard — leave out samples_per_shard"


def test_unknown_keyword_is_a_type_error(tree):
    """A keyword the function does not take is refused as Python refuses one: a misspelt
    option, and an option of a run given to ``plan``."""
    with pytest.raises(TypeError) as err:
        ishard.plan(tree, shard_sise="1KiB")
    assert str(err.value) == "plan() got an unexpected keyword argument 'shard_sise'"
    with pytest.raises(TypeError) as err:
        ishard.plan(tree, jobs=2)
    assert str(err.value) == "plan() got an unexpected keyword argument 'jobs'"
    with pytest.raises(TypeError, match=r"^shard\(\) got an unexpected keyword argument 'dest'$"):
        ishard.shard(tree, tree.parent / "out", dest="x")
    assert not (tree.parent / "out").exists()


def test_the_command_still_names_flags(tree):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ishard",
            "shard",
            str(tree),
            "--dry-run",
            "--collapse",
            "--ext",
            ".rar",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("ishard: error: --ext '.rar' is not supported"), run.stderr


def layout(the_plan) -> list[tuple[str, list[str]]]:
    return [(s.name, [m.name for m in s.members()]) for s in the_plan.shards]


def test_ekm_as_dict_json_text_and_path(tree, tmp_path):
    ekm = {"fish-%d.tar": ["^fish/"], "bird-%d.tar": "^bird/"}
    by_dict = layout(ishard.plan(tree, ekm=ekm, shard_size="150B"))
    path = tmp_path / "map.json"
    path.write_text(json.dumps(ekm))
    assert layout(ishard.plan(tree, ekm=json.dumps(ekm), shard_size="150B")) == by_dict
    assert layout(ishard.plan(tree, ekm=path, shard_size="150B")) == by_dict
    assert layout(ishard.plan(tree, ekm=str(path), shard_size="150B")) == by_dict
    names = [name for name, _ in by_dict]
    assert names == ["fish-0.tar", "fish-1.tar", "bird-0.tar", "bird-1.tar"]
    for name, members in by_dict:
        group = name.split("-")[0]
        assert members and all(m.startswith(f"{group}/{group}") for m in members)


def test_python_values_shard(tree, tmp_path):
    dst = tmp_path / "out"
    report = ishard.shard(
        tree,
        dst,
        ekm={"fish-%d.tar": ["^fish/"], "bird-%d.tar": ["^bird/"]},
        sample_exts=[".jpg", ".cls"],
        missing_extension_action="abort",
        collapse=False,
        jobs=1,
        shard_size=10_000,
        storage_options={},
        sort="alpha:dec",
        member_names="original",
    )
    assert [r.name for r in report.results] == ["fish-0.tar", "bird-0.tar"]
    for group in ("fish", "bird"):
        with tarfile.open(dst / f"{group}-0.tar") as tar:
            names = tar.getnames()
            assert names == [
                f"{group}/{group}{i}.{ext}" for i in (2, 1, 0) for ext in ("cls", "jpg")
            ]
            assert tar.extractfile(f"{group}/{group}1.cls").read() == group.encode()
    manifest = json.loads((dst / "manifest.json").read_text())
    assert json.loads(manifest["ishard"]["options"]["ekm"]) == {
        "fish-%d.tar": ["^fish/"],
        "bird-%d.tar": ["^bird/"],
    }


# ---------------------------------------------------------------- verify, ls, split; reprs


@pytest.fixture
def written(tree, tmp_path):
    """``tree`` sharded into ``out`` through the API: (report, dst)."""
    dst = tmp_path / "out"
    return ishard.shard(tree, dst, shard_size="60B", jobs=1), dst


def test_verify_through_the_api_returns_the_verification(written):
    report, dst = written
    found = ishard.verify(dst, deep=True)
    assert isinstance(found, ishard.Verification)
    assert found.ok and found.deep and found.shards == len(report.results) == found.shards_ok
    first = report.results[0].name
    data = bytearray((dst / first).read_bytes())
    data[len(data) // 2] ^= 0x01
    (dst / first).write_bytes(bytes(data))
    damaged = ishard.verify(str(dst), jobs=1)
    assert not damaged.ok
    assert [(p.name, p.kind) for p in damaged.problems] == [(first, "xxh128")]
    assert repr(damaged) == (
        f"Verification(ok=False, shards={found.shards}, shards_ok={found.shards - 1}, "
        f"problems=1, deep=False, dst={str(dst)!r})"
    )
    with pytest.raises(ishard.UsageError, match="--jobs|jobs"):
        ishard.verify(dst, jobs=-1)


def test_ls_through_the_api_lists_members_as_tarfile_reads_them(written):
    report, dst = written
    path = dst / report.results[0].name
    with tarfile.open(path) as tar:
        expected = [(m.name, m.size) for m in tar.getmembers() if m.isfile()]
    assert [(m.name, m.size) for m in ishard.ls(path)] == expected
    grouped = ishard.ls(str(path), samples=True)
    assert [m.name for _, members in grouped.samples for m in members] == [n for n, _ in expected]
    assert [key for key, _ in grouped.samples] == list(
        dict.fromkeys(n.split(".", 1)[0] for n, _ in expected)
    )
    with pytest.raises(ishard.UsageError, match="is a directory"):
        ishard.ls(dst)


def test_split_through_the_api_divides_the_manifests_samples(written):
    report, dst = written
    counts = [r.samples for r in report.results]
    doc = ishard.split(dst / "manifest.json", nodes=2, policy="torch", drop_last=True)
    assert doc["policy"] == "torch" and doc["shards"] == len(counts)
    ranks = doc["epochs"][0]["ranks"]
    assert len(ranks) == 2 and sum(r["samples"] for r in ranks) <= sum(counts)
    assert ishard.split(shard_sizes=counts, nodes=2, policy="torch", drop_last=True) == doc
    assert (
        ishard.split(
            shard_sizes=",".join(map(str, counts)), nodes=2, policy="torch", drop_last=True
        )
        == doc
    )
    with pytest.raises(ishard.UsageError, match="does not apply to --policy torch"):
        ishard.split(shard_sizes=counts, shuffle="py1s", policy="torch")
    with pytest.raises(ishard.UsageError, match="one of them"):
        ishard.split()


def test_reprs_are_one_short_line_of_totals(written, tree):
    report, dst = written
    plan = report.plan
    assert repr(report) == (
        f"Report(shards={len(report.results)}, samples={plan.sample_count}, "
        f"files={plan.file_count}, bytes={plan.size}, kept=0, dst={str(dst)!r})"
    )
    assert repr(ishard.plan(tree, shard_size="60B")) == (
        f"Plan(shards={len(plan.shards)}, samples={plan.sample_count}, "
        f"files={plan.file_count}, bytes={plan.size}, source={plan.source!r})"
    )
    assert " object at 0x" not in repr(report) + repr(plan)


def test_choice_options_are_typed_as_their_choices(tmp_path):
    """Options with a fixed set of values take exactly those values, as ``typing.Literal``
    types a type checker reads: the signature lists what the run accepts. The extension is
    a string (formats are a registry), refused at run time unless the registry has it."""
    from typing import get_args, get_type_hints

    from ishard.checksums import ALGORITHMS
    from ishard.formats import ARCHIVE_EXTS
    from ishard.formats.indexes import CHOICES as INDEXES
    from ishard.options.checks import EXECUTORS
    from ishard.options.record import GZIP_CHOICES, ZIP_METHODS, make_options
    from ishard.planning.naming import MEMBER_NAMES
    from ishard.planning.samples import ACTIONS
    from ishard.split import POLICIES

    accepted = {
        "checksum": (*ALGORITHMS, "none"),
        "missing_extension_action": ACTIONS,
        "member_names": MEMBER_NAMES,
        "executor": EXECUTORS,
        "zip_compression": ZIP_METHODS,
        "gzip_library": GZIP_CHOICES,
        "index": INDEXES,
    }
    hints = get_type_hints(ishard.shard)
    assert hints["ext"] is str
    for ext in ARCHIVE_EXTS:
        assert make_options(ext=ext).ext == ext
    with pytest.raises(ishard.UsageError) as err:
        ishard.plan(tmp_path / "none", ext=".tra")
    assert str(err.value).startswith("ext='.tra' is not supported — use one of .tar, .tgz")
    for name, values in accepted.items():
        assert get_args(hints[name]) == tuple(values), name
    assert get_args(get_type_hints(ishard.split)["policy"]) == POLICIES


def test_dir_shows_the_public_api_and_the_guide_lists_each_function():
    """``dir(ishard)`` is what ``__all__`` exports (no submodule, no ``annotations``), each
    of it there; the user guide's Python API list names every public function."""
    assert dir(ishard) == sorted(ishard.__all__)
    assert all(hasattr(ishard, name) for name in ishard.__all__)
    assert ishard.api.shard is ishard.shard  # submodules stay reachable, only unlisted
    guide = (Path(__file__).resolve().parent.parent / "docs" / "user-guide.md").read_text()
    listing = guide.split("## Python API", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    functions = {n for n in ishard.__all__ if inspect.isfunction(getattr(ishard, n))}
    assert set(re.findall(r"^ishard\.(\w+)\(", listing, re.MULTILINE)) == functions


def test_split_and_verify_stay_functions_once_their_modules_are_imported():
    """``ishard.split`` and ``ishard.verify`` name the functions, also after a program
    imports the modules behind them (``ishard.split.world``, ``ishard.readback.verify``)."""
    code = (
        "import ishard, ishard.split.world, ishard.split.streaming, ishard.readback.verify\n"
        "from ishard.readback.verify import verify\n"
        "assert callable(ishard.split) and callable(ishard.verify), (ishard.split, ishard.verify)\n"
        "assert ishard.split(shard_sizes=[2, 2], nodes=2)['shards'] == 2\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def test_a_resumed_runs_speed_counts_only_what_it_wrote(written, tree):
    """The summary's speed is this run's: the shards a --resume kept were not written again,
    so they are not in its bytes per second (through the API and the command)."""
    from helpers import invoke_ishard

    report, dst = written
    assert len(report.results) >= 4
    gone = report.results[1]
    (dst / gone.name).unlink()
    resumed = ishard.shard(tree, dst, shard_size="60B", jobs=1, resume=True)
    assert resumed.kept == len(report.results) - 1
    assert resumed.bytes_per_second * resumed.seconds == pytest.approx(gone.payload)
    gone = report.results[2]
    (dst / gone.name).unlink()
    ran = invoke_ishard("shard", tree, dst, "--shard-size", "60B", "--resume", "--json")
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout)
    assert (summary["kept_shards"], summary["written_shards"]) == (len(report.results) - 1, 1)
    speed, seconds = summary["bytes_per_second"], summary["seconds"]
    # the JSON holds seconds to the millisecond and a whole number of bytes a second: their
    # product is the payload within what that rounding allows (a run of a few ms: over 10 %)
    assert abs(speed * seconds - gone.payload) <= speed * 0.0005 + seconds * 0.5 + 0.001
