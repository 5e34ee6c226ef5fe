"""External key map: inline JSON or a file, // comments, validation, exactly-one-pattern lookup."""

from __future__ import annotations

import json
import time

import pytest
from conftest import make_tree, run_ishard
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.ekm import NO_MATCH, SEVERAL, parse_ekm, strip_comments
from ishard.errors import DataError, UsageError

FISH = '{"fish-%d.tar": ["^n01440764", "tench"], "dog-%d.tar": ["^n02"]}'


def test_inline_json_keeps_category_order():
    ekm = parse_ekm(FISH)
    assert [c.template.text for c in ekm.categories] == ["fish-%d.tar", "dog-%d.tar"]
    assert ekm.categories[0].template.name(2) == "fish-2.tar"
    assert [p.pattern for p in ekm.categories[0].patterns] == ["^n01440764", "tench"]
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
        '{\n'
        '  "fish-%d.tar": [\n'
        '    "n01440764.*", // tench\n'
        '    "n01443537.*"  // goldfish\n'
        '  ],\n'
        '  // a whole-line comment\n'
        '  "dog-%d.tar": ["n02085620.*"]\n'
        '}\n',
        encoding="utf-8",
    )
    ekm = parse_ekm(str(path))
    assert [p.pattern for p in ekm.categories[0].patterns] == ["n01440764.*", "n01443537.*"]
    assert [p.pattern for p in ekm.categories[1].patterns] == ["n02085620.*"]


def test_comment_markers_inside_strings_are_kept():
    ekm = parse_ekm('{"web-%d.tar": ["http://x", "a\\\\//b"]} // trailing')
    # the JSON text "a\\//b" decodes to a\//b: after an escaped backslash, // is still inside
    assert [p.pattern for p in ekm.categories[0].patterns] == ["http://x", "a\\//b"]


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
    assert [p.pattern for p in ekm.categories[0].patterns] == ["^a"]


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
    with pytest.raises(UsageError) as err:
        parse_ekm(value)
    assert words in str(err.value)


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


def test_category_backtracking_pattern_raises_data_error():
    ekm = parse_ekm('{"a-%d.tar": ["^n01", "(a+)+$"]}')
    with pytest.raises(DataError, match=r"--ekm pattern '\(a\+\)\+\$' of 'a-%d.tar' took over"):
        ekm.category("a" * 5000 + "b")


def test_cli_catastrophic_ekm_pattern_fails_in_bounded_time_naming_it(tmp_path):
    """Through the CLI: exit 1 after about a second, one line naming the regex, its category
    and the name, and no destination written."""
    hostile = "a/" + "a" * 200 + "b.jpg"  # (a+?)+$ backtracks on it for far longer than 1 s
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one", hostile: b"two"})
    dst = tmp_path / "out"
    ekm = '{"ok-%d.tar": ["1"], "a-%d.tar": ["(a+?)+$"]}'
    started = time.monotonic()
    done = run_ishard("shard", src, dst, "--ekm", ekm)
    assert time.monotonic() - started < 30  # gave up on the name instead of hanging
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"ishard: error: --ekm pattern '(a+?)+$' of 'a-%d.tar' took over 1s on {hostile!r} — "
        "simplify the regex (avoid nested repeats such as (a+)+)"
    ]
    assert not dst.exists() or [p.name for p in dst.iterdir()] == []
