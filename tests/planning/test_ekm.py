"""External key map: inline JSON or a file, // comments, validation, exactly-one-pattern lookup."""

from __future__ import annotations

import json
import re

import pytest
from helpers import invoke_ishard, make_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.errors import UsageError
from ishard.planning.ekm import (
    MAX_EKM_BYTES,
    MAX_EKM_PATTERNS,
    MAX_SETS,
    NO_MATCH,
    SEVERAL,
    parse_ekm,
    strip_comments,
)

FISH = '{"fish-%d.tar": ["^n01440764", "tench"], "dog-%d.tar": ["^n02"]}'


def test_inline_json_keeps_category_order():
    ekm = parse_ekm(FISH)
    assert [c.template.text for c in ekm.categories] == ["fish-%d.tar", "dog-%d.tar"]
    assert ekm.categories[0].template.name(2) == "fish-2.tar"
    assert list(ekm.categories[0].patterns) == ["^n01440764", "tench"]
    assert "inline" in ekm.source


def test_inline_json_with_surrounding_whitespace():
    assert len(parse_ekm("  \n" + FISH + "\n ").categories) == 2


def test_file_path(tmp_path):
    path = tmp_path / "map.json"
    path.write_text(FISH, encoding="utf-8")
    ekm = parse_ekm(str(path))
    assert len(ekm.categories) == 2
    assert str(path) in ekm.source


def test_file_with_line_comments_like_the_public_example(tmp_path):
    path = tmp_path / "ekm.json"
    path.write_text(
        "{\n"
        '  "fish-%d.tar": [\n'
        '    "n01440764.*", // tench\n'
        '    "n01443537.*"  // goldfish\n'
        "  ],\n"
        "  // a whole-line comment\n"
        '  "dog-%d.tar": ["n02085620.*"]\n'
        "}\n",
        encoding="utf-8",
    )
    ekm = parse_ekm(str(path))
    assert list(ekm.categories[0].patterns) == ["n01440764.*", "n01443537.*"]
    assert list(ekm.categories[1].patterns) == ["n02085620.*"]


def test_comment_markers_inside_strings_are_kept():
    ekm = parse_ekm('{"web-%d.tar": ["http://x", "a\\\\//b"]} // trailing')
    # the JSON text "a\\//b" decodes to a\//b: after an escaped backslash, // is still inside
    assert list(ekm.categories[0].patterns) == ["http://x", "a\\//b"]


def test_strip_comments_cases():
    assert strip_comments('{"a": 1} // c') == '{"a": 1} '
    assert strip_comments('// only\n{"a": 1}') == '\n{"a": 1}'
    assert strip_comments('{"u": "http://x"}') == '{"u": "http://x"}'
    # escaped quote does not end the string, so // after it is still inside
    assert strip_comments('{"q": "a\\"//b"} // c') == '{"q": "a\\"//b"} '
    # a single slash is not a comment
    assert strip_comments('{"p": 1} / 2') == '{"p": 1} / 2'
    assert strip_comments("x // a\ny // b\nz") == "x \ny \nz"


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.lists(st.text(max_size=8), max_size=3), max_size=4))
def test_strip_comments_never_changes_comment_free_json(doc):
    text = json.dumps(doc)
    assert strip_comments(text) == text
    assert json.loads(strip_comments(text + " // tail")) == doc


def test_single_string_value_is_one_pattern():
    ekm = parse_ekm('{"a-%d.tar": "^a"}')
    assert list(ekm.categories[0].patterns) == ["^a"]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ('{"a-%d.tar": ["x"]', "not valid JSON"),
        ('{"a-%d.tar": ["x"],}', "not valid JSON"),
        ("{}", "must be a JSON object"),
        ('{"a.tar": ["x"]}', "no number range"),
        ('{"a-%d.tar": ["x"], "b-%d.tar": ["x"]}', "more than once"),
        ('{"a-%d.tar": ["x", "x"]}', "more than once"),
        ('{"a-%d.tar": ["(x"]}', "not a valid regex"),
        ('{"a-%d.tar": [1]}', "list of regex strings"),
        ('{"a-%d.tar": []}', "list of regex strings"),
        ('{"a-%d.tar": {"x": 1}}', "list of regex strings"),
        ('{"a-%d.tar": null}', "list of regex strings"),
        ('{"a-%x.tar": ["x"]}', "fmt template"),
        ('{"a/b-%d.tar": ["x"]}', "path separator"),
    ],
)
def test_inline_errors(value, words):
    with pytest.raises(UsageError, match=re.escape(words)):
        parse_ekm(value)


@pytest.mark.parametrize("value", ["", "   ", "[1, 2]", '"x"', "no-such-ekm.json"])
def test_not_an_object_or_missing_file(value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as err:
        parse_ekm(value)
    assert repr(value.strip()) in str(err.value)


def test_file_holding_a_json_array_is_rejected(tmp_path):
    path = tmp_path / "arr.json"
    path.write_text('[{"a-%d.tar": ["x"]}]', encoding="utf-8")
    with pytest.raises(UsageError, match="must be a JSON object"):
        parse_ekm(str(path))


def test_file_with_bad_json_names_the_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"a-%d.tar": ', encoding="utf-8")
    with pytest.raises(UsageError) as err:
        parse_ekm(str(path))
    assert str(path) in str(err.value)
    assert "not valid JSON" in str(err.value)


def test_file_not_utf8(tmp_path):
    path = tmp_path / "latin.json"
    path.write_bytes(b'{"a-%d.tar": ["\xe9"]}')
    with pytest.raises(UsageError, match="cannot be read"):
        parse_ekm(str(path))


def test_category_exactly_one_none_several():
    ekm = parse_ekm(FISH)
    assert ekm.category("n01440764/x.jpg") == 0
    assert ekm.category("a/tench.jpg") == 0
    assert ekm.category("n02085620/y.jpg") == 1
    assert ekm.category("n03/z.jpg") == NO_MATCH
    assert ekm.category("n02/tench.jpg") == SEVERAL  # two categories


def test_category_two_patterns_of_one_category_is_several():
    # Decision 8 and Go's Lookup: an object must match exactly one *pattern*.
    ekm = parse_ekm(FISH)
    assert ekm.category("n01440764/tench.jpg") == SEVERAL


def test_category_search_is_unanchored():
    ekm = parse_ekm('{"a-%d.tar": ["cat"]}')
    assert ekm.category("x/concatenate.jpg") == 0
    assert ekm.category("x/dog.jpg") == NO_MATCH


def test_category_reasons_are_readable():
    assert "no" in NO_MATCH and "--ekm" in NO_MATCH
    assert "more than one" in SEVERAL


def test_category_formerly_backtracking_pattern_is_linear():
    ekm = parse_ekm('{"n-%d.tar": ["^n01"], "a-%d.tar": ["(a+)+$"]}')
    assert ekm.category("a" * 5000 + "b") == NO_MATCH
    assert ekm.category("x/" + "a" * 5000) == 1


@pytest.mark.parametrize("bad", [r"(a)\1", "x(?=y)", "(?<!a)b", r"\Z"])
def test_patterns_outside_re2_are_refused(bad):
    with pytest.raises(UsageError) as err:
        parse_ekm(json.dumps({"a-%d.tar": [bad]}))
    assert f"{bad!r} is not a valid regex" in str(err.value)


def test_category_uses_go_re2_semantics():
    ekm = parse_ekm(r'{"w-%d.tar": ["^\\w+$"], "l-%d.tar": ["^\\pL+\\.jpg$"]}')
    assert ekm.category("abc") == 0
    assert ekm.category("été.jpg") == 1  # é is a letter (\pL) but not \w in RE2 and Go
    assert ekm.category("caf\udce9/x") == NO_MATCH  # a name that is not UTF-8 does not crash


def test_category_many_patterns_in_several_sets():
    # enough pattern text for several RE2 sets; every pattern still routes to its category
    doc = {
        f"c{c:03d}-%d.tar": [f"^c{c:03d}/p{j:03d}[.]" + "x?" * 20 for j in range(100)]
        for c in range(300)
    }
    ekm = parse_ekm(json.dumps(doc))
    assert len(ekm._matcher._sets) > 1
    for c in range(0, 300, 7):
        assert ekm.category(f"c{c:03d}/p{c % 100:03d}.jpg") == c
    assert ekm.category("c001/p001.jpg/c002/p002.jpg") == 1  # "^": only the first
    assert ekm.category("zzz/p001.jpg") == NO_MATCH


def test_heavy_patterns_split_into_smaller_sets_quietly(capfd):
    # a set of 3,000 \\pL+ patterns is over RE2's memory limit: smaller sets are built instead,
    # and RE2's own complaint never reaches stderr
    doc = {f"c{c}-%d.tar": [f"^\\pL+{c * 1000 + j}/" for j in range(1000)] for c in range(3)}
    ekm = parse_ekm(json.dumps(doc))
    assert len(ekm._matcher._sets) > 1
    assert ekm.category("été1234/x.jpg") == 1
    assert ekm.category("ab2999/x.jpg") == 2
    assert ekm.category("12/x.jpg") == NO_MATCH
    assert capfd.readouterr().err == ""


def test_patterns_too_heavy_to_search_together_are_refused(capfd):
    doc = {f"c{c}-%d.tar": [f"^\\pL+{c * 1000 + j}/" for j in range(1000)] for c in range(60)}
    with pytest.raises(UsageError) as err:
        parse_ekm(json.dumps(doc))
    assert str(err.value).startswith(
        f"inline --ekm JSON has patterns too heavy to search together (more than {MAX_SETS} RE2 "
        "sets; e.g. thousands of \\pL or long counted repeats) — route by fewer"
    )
    assert capfd.readouterr().err == ""


def test_cli_formerly_catastrophic_ekm_pattern_runs_over_many_hostile_names(tmp_path):
    """Through the CLI: 200 names on which (a+?)+$ used to backtrack for seconds each are
    matched in linear time (none matches: left out and counted), the others routed."""
    files = {f"h{i:03d}/" + "a" * 200 + "b.jpg": b"x" for i in range(200)}
    files.update({f"k{i:02d}/aaaa": b"y" for i in range(20)})
    files["a/1.jpg"] = b"one"
    src = make_tree(tmp_path / "src", files)
    ekm = '{"ok-%d.tar": ["/1[.]jpg$"], "a-%d.tar": ["(a+?)+$"]}'
    # 'k00/aaaa' has no extension: source paths as member names
    done = invoke_ishard("shard", src, "--dry-run=json", "--ekm", ekm, "--member-names", "original")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    routed = {
        shard["name"]: sorted(f["name"] for s in shard["samples"] for f in s["files"])
        for shard in plan["shards"]
    }
    assert routed == {
        "ok-0.tar": ["a/1.jpg"],
        "a-0.tar": sorted(n for n in files if n.startswith("k")),
    }
    assert [(s["reason"], s["count"]) for s in plan["summary"]["skipped"]] == [(NO_MATCH, 200)]


def _big_map(categories: int, per: int) -> dict:
    return {
        f"c{c:04d}-%d.tar": [f"^c{c:04d}/p{j:03d}\\." for j in range(per)]
        for c in range(categories)
    }


@pytest.mark.parametrize("over", ["size", "patterns"])
def test_cli_ekm_over_a_limit_is_refused_before_reading(tmp_path, over):
    """A map of about 16 MiB (over the size limit), or of 100,100 patterns in under 2 MiB."""
    path = tmp_path / {"size": "huge.json", "patterns": "many.json"}[over]
    if over == "size":
        path.write_text(json.dumps(_big_map(2000, 250), indent=8))
        size = path.stat().st_size
        assert size > MAX_EKM_BYTES
        has = f"{size / (1 << 20):.1f} MiB, over the limit of {MAX_EKM_BYTES >> 20} MiB"
    else:
        path.write_text(json.dumps(_big_map(1001, 100)))
        assert path.stat().st_size < MAX_EKM_BYTES
        has = f"100100 patterns, over the limit of {MAX_EKM_PATTERNS}"
    src = make_tree(tmp_path / "src", {"c0001/p001.jpg": b"x"})
    done = invoke_ishard("shard", src, tmp_path / "out", "--ekm", path)
    assert done.returncode == 2, done.stderr
    refused = (
        f"ishard: error: --ekm file {str(path)!r} has {has} — route by fewer, broader patterns "
        "(e.g. one per class directory, such as '^train/n01440764/'), or shard the dataset in parts"
    )
    assert done.stderr.splitlines() == [refused]
    assert not (tmp_path / "out").exists()


def test_cli_ekm_at_the_pattern_limit_routes_every_file(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(_big_map(1000, 100)))  # exactly MAX_EKM_PATTERNS
    files = {f"c{c:04d}/p{c % 100:03d}.jpg": b"x" * 10 for c in range(0, 1000, 97)}
    files["other/p001.jpg"] = b"y"
    src = make_tree(tmp_path / "src", files)
    dst = tmp_path / "out"
    done = invoke_ishard("shard", src, dst, "--ekm", path)
    assert done.returncode == 0, done.stderr
    shards = sorted(p.name for p in dst.glob("*.tar"))
    assert shards == sorted(f"c{c:04d}-0.tar" for c in range(0, 1000, 97))
    skipped = json.loads((dst / "manifest.json").read_text())["ishard"]["skipped"]
    assert [(s["reason"], s["count"]) for s in skipped] == [(NO_MATCH, 1)]
