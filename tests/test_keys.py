"""Sample keys: the reference §3 table, Go ReplaceAll semantics, aliases, regex errors, timeouts."""

from __future__ import annotations

import time

import pytest
from conftest import make_tree, run_ishard
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.errors import DataError, UsageError
from ishard.keys import extension, key_function, sample_key

CUSTOM = r".*/([^/]+)/[^/]+$"

# object -> (ext, base_file_name, full_name, collapse_all_dir, CUSTOM or None), from §3
TABLE = [
    ("a/b/c.jpg", ".jpg", "c", "a/b/c", "abc", "b"),
    ("c.jpg", ".jpg", "c", "c", "c", "c"),
    ("x/a.tar.gz", ".gz", "a.tar", "x/a.tar", "xa.tar", None),
    ("x/name.with.dots.jpg", ".jpg", "name.with.dots", "x/name.with.dots", "xname.with.dots", None),
    ("x/.hidden", ".hidden", "", "x/", "x", None),
    ("d.v2/README", "", "README", "d.v2/README", "d.v2README", None),
]


@pytest.mark.parametrize(("name", "ext", "base", "full", "collapse", "custom"), TABLE)
def test_reference_table(name, ext, base, full, collapse, custom):
    assert extension(name) == ext
    assert sample_key(name, key_function("base_file_name")) == base
    assert sample_key(name, key_function("full_name")) == full
    assert sample_key(name, key_function("collapse_all_dir")) == collapse
    if custom is not None:
        assert sample_key(name, key_function(CUSTOM)) == custom


@pytest.mark.parametrize(
    ("name", "ext"),
    [("a", ""), ("a.", "."), ("dir.d/file", ""), ("a/b.c/d.e", ".e"), (".bashrc", ".bashrc"),
     ("a/b..c", ".c"), ("x/y.tar.lz4", ".lz4")],
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


def test_custom_empty_match_right_after_a_match_is_skipped():
    # Go: "empty matches abutting a preceding match are ignored". With a lookahead (a
    # Python-regex extension) the skipped empty match would otherwise insert its group:
    # matches at 0..0 (g1 'a'), 1..1 (g1 'b'), 2..3 'x' (g1 'd'), [3..3 skipped], 4..4 (g1 '').
    assert key_function(r"x*(?=(.?))")("abxd") == "aabbdd"


def test_custom_key_with_slash_keeps_directories():
    key = key_function(r"^(.*)_\d+$")
    assert sample_key("a/b/img_001.jpg", key) == "a/b/img_001"  # "$" fails before ".jpg"
    key = key_function(r"^(.*)_\d+\.\w+$")
    assert sample_key("a/b/img_001.jpg", key) == "a/b/img"


@pytest.mark.parametrize("bad", ["(.*", "[a-", "*x", "(?P<1>x)"])
def test_invalid_regex_is_usage_error_naming_it(bad):
    with pytest.raises(UsageError) as err:
        key_function(bad)
    assert repr(bad) in str(err.value)
    assert "--sample-key-pattern" in str(err.value)


def test_catastrophic_backtracking_raises_data_error_not_hang():
    key = key_function(r"(a+)+$")
    name = "a" * 5000 + "b"
    started = time.monotonic()
    with pytest.raises(DataError) as err:
        key(name)
    assert time.monotonic() - started < 30  # bounded: it gave up instead of hanging
    assert "(a+)+$" in str(err.value)


# A name (under 255 bytes) on which (a+?)+$ backtracks for far longer than the 1 s allowed
# (already ~10 s at 25 'a's); the regex module cuts (a+)+$ short at this length, not this one.
HOSTILE_NAME = "a/" + "a" * 200 + "b.jpg"


def test_cli_catastrophic_key_regex_fails_in_bounded_time_naming_it(tmp_path):
    """Through the CLI: exit 1 after about a second, one line naming the regex and the name,
    and no destination written."""
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one", HOSTILE_NAME: b"two"})
    dst = tmp_path / "out"
    started = time.monotonic()
    done = run_ishard("shard", src, dst, "--sample-key-pattern", "(a+?)+$")
    assert time.monotonic() - started < 30  # gave up on the name instead of hanging
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"ishard: error: --sample-key-pattern '(a+?)+$' took over 1s on {HOSTILE_NAME!r} — "
        "simplify the regex (avoid nested repeats such as (a+)+)"
    ]
    assert not dst.exists() or [p.name for p in dst.iterdir()] == []  # no shard, no manifest


_component = st.text("abcXY_-0123456789", min_size=1, max_size=6)
_ext = st.sampled_from(["", ".jpg", ".tar.gz", ".x"])


@settings(max_examples=200, deadline=None)
@given(dirs=st.lists(_component, max_size=3), stem=_component, ext=_ext)
def test_builtins_model(dirs, stem, ext):
    name = "/".join([*dirs, stem + ext])
    want_ext = ext[ext.rfind("."):] if ext else ""
    assert extension(name) == want_ext
    trim = (lambda s: s[: -len(want_ext)]) if want_ext else (lambda s: s)
    assert sample_key(name, key_function("base_file_name")) == trim(stem + ext)
    assert sample_key(name, key_function("full_name")) == trim(name)
    assert sample_key(name, key_function("collapse_all_dir")) == trim("".join(dirs) + stem + ext)
