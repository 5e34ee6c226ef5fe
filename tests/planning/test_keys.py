"""Sample keys: the reference §3 table, Go ReplaceAll semantics in RE2, aliases, regex errors."""

from __future__ import annotations

import json

import pytest
from helpers import invoke_ishard, make_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.errors import UsageError
from ishard.planning.keys import (
    ALIASES,
    BUILT_IN,
    PATTERNS,
    _searcher,
    compile_re2,
    extension,
    key_function,
    sample_key,
)

CUSTOM = r".*/([^/]+)/[^/]+$"

# object -> (ext, base_file_name, full_name, collapse_all_dir, mirrored_dirs, CUSTOM or None),
# from §3 (mirrored_dirs is ishard's own)
COLUMNS = {"base_file_name": 2, "full_name": 3, "collapse_all_dir": 4, "mirrored_dirs": 5}
TABLE = [
    ("a/b/c.jpg", ".jpg", "c", "a/b/c", "abc", "b/c", "b"),
    ("c.jpg", ".jpg", "c", "c", "c", "c", "c"),
    ("x/a.tar.gz", ".gz", "a.tar", "x/a.tar", "xa.tar", "a.tar", None),
    (
        "x/name.with.dots.jpg",
        ".jpg",
        "name.with.dots",
        "x/name.with.dots",
        "xname.with.dots",
        "name.with.dots",
        None,
    ),
    ("x/.hidden", ".hidden", "", "x/", "x", "", None),
    ("d.v2/README", "", "README", "d.v2/README", "d.v2README", "README", None),
    ("images/train/01.jpg", ".jpg", "01", "images/train/01", "imagestrain01", "train/01", "train"),
]


@pytest.mark.parametrize("row", TABLE)
def test_reference_table(row):
    name, ext, custom = row[0], row[1], row[-1]
    assert extension(name) == ext
    for pattern in BUILT_IN:  # a built-in pattern without its column in TABLE fails here
        assert sample_key(name, key_function(pattern)) == row[COLUMNS[pattern]], pattern
    if custom is not None:
        assert sample_key(name, key_function(CUSTOM)) == custom


@pytest.mark.parametrize(
    ("name", "ext"),
    [
        ("a", ""),
        ("a.", "."),
        ("dir.d/file", ""),
        ("a/b.c/d.e", ".e"),
        (".bashrc", ".bashrc"),
        ("a/b..c", ".c"),
        ("x/y.tar.lz4", ".lz4"),
    ],
)
def test_extension_is_gos_filepath_ext(name, ext):
    assert extension(name) == ext


@pytest.mark.parametrize("alias", ["base_filename", "base_name", ""])
def test_aliases_mean_base_file_name(alias):
    key = key_function(alias)
    assert sample_key("train/x/0001.jpg", key) == "0001"
    assert sample_key("0001.cls", key) == "0001"


def test_custom_no_match_leaves_name_then_ext_trimmed():
    key = key_function(r"^zzz(.*)$")
    assert key("a/b/c.jpg") == "a/b/c.jpg"
    assert sample_key("a/b/c.jpg", key) == "a/b/c"


def test_custom_without_group_replaces_by_empty():
    assert key_function("x*")("abxd") == "abd"
    assert key_function("/")("a/b/c") == "abc"
    assert key_function(r"\d+")("img12_v3.jpg") == "img_v.jpg"


def test_custom_replaces_all_non_overlapping_matches_by_group_one():
    # Go: regexp.MustCompile(`(\w)\d`).ReplaceAllString("a1b2c", "$1") == "abc"
    assert key_function(r"(\w)\d")("a1b2c") == "abc"
    # unanchored: only the matching part is replaced
    assert key_function(r"_(v)\d+")("img_v12.jpg") == "imgv.jpg"


def test_custom_unmatched_group_one_expands_to_empty():
    # group 1 does not take part in the match on "b" -> "" (Go's $1 of an unmatched group)
    assert key_function(r"(a)|b")("xaybz") == "xayz"


def test_custom_after_an_empty_match_the_search_moves_on_one_character_like_go():
    # Go's ReplaceAll: an empty match at 0 ("" for $1), then the search restarts at 1, where
    # (b)? takes "b". Python's re would instead retry at 0 for a non-empty match, "ab" -> "b".
    assert key_function(r"a*?(b)?")("ab") == "ab"
    # empty matches (one abutting the "aa" match is skipped) replace nothing
    assert key_function(r"(a*)")("baac") == "baac"
    assert key_function(r"x*")("abxd") == "abd"


def test_custom_anchors_and_word_boundaries_see_the_text_before_the_search_position():
    # after the match "a" at 0, "^" must not match again at 1 (Go: the text is context)
    assert key_function(r"^(a)")("aab") == "aab"
    assert key_function(r"^a")("aab") == "ab"
    assert key_function(r"\bb")("ab b") == "ab "


def test_custom_regex_has_go_re2_semantics():
    # \d \w \s \b are ASCII-only, \pL is Unicode, \Q...\E quotes, (?U) swaps greediness
    assert key_function(r"\d+")("x\u0661\u06622") == "x\u0661\u0662"  # Arabic digits stay
    assert key_function(r"^\w+")("éa.jpg") == "éa.jpg"  # é is no \w: no match
    assert key_function(r"^(\pL+).*")("éa1.jpg") == "éa"
    assert key_function(r"^\Qa.b\E(.*)$")("a.bc") == "c"
    assert key_function(r"^\Qa.b\E(.*)$")("axbc") == "axbc"
    assert key_function(r"(?U)^(a+)a*$")("aaa") == "a"
    assert key_function(r"^(a+)a*$")("aaa") == "aaa"
    assert key_function(r"^(?P<stem>[^.]+).*")("x.y") == "x"  # a named group 1 is still $1
    # "$" is the end of the name (Python's "$" would also match before a final newline)
    assert key_function(r"(a)$")("a\n") == "a\n"


def test_custom_name_that_is_not_utf8_matches_like_go():
    # a listed name with bytes that are not UTF-8 (surrogate-escaped): Go sees each such byte
    # as one character that "." and "[^/]" match; the key keeps the original bytes
    name = "d/caf\udce9.jpg"
    assert key_function(r".*/([^/]+)$")(name) == "caf\udce9.jpg"
    assert key_function(r"^(.)")("\udcff/x") == "\udcff/x"
    assert sample_key(name, key_function(r"^d/(...).*")) == "caf"


def test_the_binding_fast_path_and_the_public_api_find_the_same_matches():
    """keys.py calls RE2's compiled object directly; if a release renames it, the wrapper's
    public ``search`` is used instead and must give the same (start, end, group 1)."""

    class Public:  # what a compiled pattern without the private attribute offers
        def __init__(self, pattern):
            self._pattern, self.groups = pattern, pattern.groups

        def search(self, data, pos):
            return self._pattern.search(data, pos)

    for text in [r"^(.*)_\d+\.\w+$", r"(a)|b", "x*", r"a*?(b)?", r"^(a)", r"(é)"]:
        pattern = compile_re2(text)
        fast, public = _searcher(pattern), _searcher(Public(pattern))
        for name in ["img_12.jpg", "xaybz", "abxd", "ab", "aab", "", "éé"]:
            data = name.encode()
            for pos in range(len(data) + 1):
                assert fast(data, pos) == public(data, pos), (text, name, pos)


def test_custom_key_with_slash_keeps_directories():
    key = key_function(r"^(.*)_\d+$")
    assert sample_key("a/b/img_001.jpg", key) == "a/b/img_001"  # "$" fails before ".jpg"
    key = key_function(r"^(.*)_\d+\.\w+$")
    assert sample_key("a/b/img_001.jpg", key) == "a/b/img"


@pytest.mark.parametrize("bad", ["(.*", "[a-", "*x", r"(a)\1", "x(?=y)", "(?<=a)b", r"\Z", "(?P<x"])
def test_invalid_regex_is_usage_error_naming_it(bad):
    with pytest.raises(UsageError) as err:
        key_function(bad)
    assert repr(bad) in str(err.value)
    assert "--sample-key-pattern" in str(err.value)


def test_formerly_catastrophic_pattern_gives_gos_key():
    # (a+)+$ backtracks exponentially in Python's re; RE2 is linear in the name
    key = key_function(r"(a+)+$")
    assert key("a" * 5000 + "b") == "a" * 5000 + "b"  # no match: the name is the key
    assert key("x/" + "a" * 5000) == "x/" + "a" * 5000  # group 1 is the whole run of a's


# A name (under 255 bytes) on which (a+?)+$ backtracks for far longer than a second in a
# backtracking engine (already ~10 s at 25 'a's in Python's regex module).
HOSTILE_NAME = "a/" + "a" * 200 + "b.jpg"


def test_cli_formerly_catastrophic_key_regex_runs_over_many_hostile_names(tmp_path):
    """Through the CLI: 200 hostile names and 20 matching ones; the run completes with Go's
    keys (no match: the name less its extension; a match: the last lazy group, one 'a')."""
    files = {f"h{i:03d}/" + "a" * 200 + "b.jpg": b"x" for i in range(200)}
    files.update({f"k{i:02d}/aaaa": b"y" for i in range(20)})
    src = make_tree(tmp_path / "src", files)
    go = ("--sample-key-pattern", "(a+?)+$", "--member-names", "original")  # 'aaaa': no extension
    done = invoke_ishard("shard", src, "--dry-run=json", *go)
    assert done.returncode == 0, done.stderr
    keys = sorted(s["key"] for shard in json.loads(done.stdout)["shards"] for s in shard["samples"])
    assert keys == sorted(
        [name[: -len(".jpg")] for name in files if name.endswith(".jpg")]
        + [f"k{i:02d}/a" for i in range(20)]
    )
    dst = tmp_path / "out"
    done = invoke_ishard("shard", src, dst, *go)
    assert done.returncode == 0, done.stderr
    assert json.loads((dst / "manifest.json").read_text())["ishard"]["totals"]["files"] == 220


_component = st.text("abcXY_-0123456789", min_size=1, max_size=6)
_ext = st.sampled_from(["", ".jpg", ".tar.gz", ".x"])


@settings(max_examples=200, deadline=None)
@given(dirs=st.lists(_component, max_size=3), stem=_component, ext=_ext)
def test_builtins_model(dirs, stem, ext):
    name = "/".join([*dirs, stem + ext])
    want_ext = ext[ext.rfind(".") :] if ext else ""
    assert extension(name) == want_ext
    trim = (lambda s: s[: -len(want_ext)]) if want_ext else (lambda s: s)
    model = {
        "base_file_name": trim(stem + ext),
        "full_name": trim(name),
        "collapse_all_dir": trim("".join(dirs) + stem + ext),
        "mirrored_dirs": trim("/".join([*dirs[1:], stem + ext])),
    }
    for pattern in BUILT_IN:  # a built-in pattern without its model fails here
        assert sample_key(name, key_function(pattern)) == model[pattern], pattern


def test_every_built_in_pattern_and_alias_is_named_in_the_user_guide_and_the_help():
    """The user guide's table of patterns has a row per built-in (with its aliases) that says
    what the registry's help says; ``--help`` and the not-a-regex message name each one."""
    from pathlib import Path

    from ishard.cli import cli

    guide = (Path(__file__).parents[2] / "docs" / "user-guide.md").read_text()
    rows = {line.split("`")[1]: line for line in guide.splitlines() if line.startswith("| `")}
    help_text = next(p.help for p in cli.commands["shard"].params if p.name == "sample_key_pattern")
    with pytest.raises(UsageError) as refused:
        key_function("([")
    for pattern in PATTERNS:
        row = rows[pattern.name]
        assert row.split(" | ")[-1].rstrip(" |") == pattern.help, row
        assert all(f"`{a}`" in row for a in filter(None, pattern.aliases)), row
        assert pattern.name in help_text and pattern.name in str(refused.value)
    assert set(ALIASES.values()) <= set(BUILT_IN)


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("basename", "did you mean base_file_name?"),
        ("full", "did you mean full_name?"),
        ("collapse", "did you mean collapse_all_dir?"),
        ("a.*b", "has no capture group"),
        ("(?:x)y", "has no capture group"),
    ],
)
def test_typos_are_refused_by_the_library_too(pattern, fragment):
    from ishard.options.record import make_options

    with pytest.raises(UsageError) as err:
        make_options(sample_key_pattern=pattern)
    assert fragment in str(err.value) and " — " in str(err.value)


@pytest.mark.parametrize("pattern", ["base_name", "base_filename", "", "full_name", r"^(.*)\.jpg$"])
def test_built_ins_aliases_and_grouped_regexes_still_pass(pattern):
    from ishard.options.record import make_options

    make_options(sample_key_pattern=pattern)


@pytest.mark.parametrize("pattern", ["jpg", "a.*b", "basename"])
def test_go_pattern_gives_gos_keys_with_a_group(pattern):
    from ishard.planning.keys import go_pattern

    names = ["a/1.jpg", "x/a-b.jpg", "basename.txt", "zzz"]
    rewritten = go_pattern(pattern)
    assert compile_re2(rewritten).groups == 1
    assert [key_function(rewritten)(n) for n in names] == [key_function(pattern)(n) for n in names]
    assert go_pattern("full_name") == "full_name" and go_pattern("(a)") == "(a)"
