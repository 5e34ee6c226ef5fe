"""Shard-name templates: bash ranges (padded like bash), at ranges from 0, fmt; errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.errors import UsageError
from ishard.planning.templates import parse_template


def names(text: str) -> list[str]:
    t = parse_template(text)
    return [t.name(i) for i in range(t.count)]


def test_bash_prefix_0000_9999_suffix():
    t = parse_template("prefix{0000..9999}-suffix")
    assert t.count == 10000
    assert t.name(0) == "prefix0000-suffix"
    assert t.name(7) == "prefix0007-suffix"
    assert t.name(9999) == "prefix9999-suffix"
    assert t.literal_prefix == "prefix"


@pytest.mark.parametrize(("text", "count", "first", "last"), [
    ("prefix-{0000..4096..8}-suffix", 513,
     ["prefix-0000-suffix", "prefix-0008-suffix", "prefix-0016-suffix"], "prefix-4096-suffix"),
    ("{0..100}", 101, ["0", "1", "2"], "100"),  # no padding without a leading zero
])  # fmt: skip
def test_bash_ranges_with_and_without_padding(text, count, first, last):
    got = names(text)
    assert len(got) == count
    assert got[:3] == first
    assert got[-1] == last


def test_bash_padding_to_wider_bound_like_bash():
    # Our decision: bash pads to the wider bound (Go pads to the narrower: pre-00-suf).
    assert names("pre-{0000..50..8}-suf") == [
        "pre-0000-suf",
        "pre-0008-suf",
        "pre-0016-suf",
        "pre-0024-suf",
        "pre-0032-suf",
        "pre-0040-suf",
        "pre-0048-suf",
    ]


def test_bash_padding_when_only_end_has_leading_zero():
    assert names("{1..010..3}") == ["001", "004", "007", "010"]


def test_bash_single_zero_does_not_pad():
    assert names("s{0..10..5}") == ["s0", "s5", "s10"]


def test_bash_step_not_landing_on_end():
    assert names("{1..10..4}") == ["1", "5", "9"]


def test_bash_two_ranges_odometer():
    assert names("a{0..1}b{00..02}c") == [
        "a0b00c",
        "a0b01c",
        "a0b02c",
        "a1b00c",
        "a1b01c",
        "a1b02c",
    ]


def test_at_starts_at_zero_and_odometer_order():
    t = parse_template("prefix-@00001-gap-@100-suffix")
    assert t.count == 202
    got = [t.name(i) for i in range(t.count)]
    assert got[0] == "prefix-00000-gap-000-suffix"
    assert got[1] == "prefix-00000-gap-001-suffix"
    assert got[100] == "prefix-00000-gap-100-suffix"
    assert got[101] == "prefix-00001-gap-000-suffix"
    assert got[-1] == "prefix-00001-gap-100-suffix"
    assert len(set(got)) == 202


def test_at_single_digit():
    assert names("s@3") == ["s0", "s1", "s2", "s3"]


def test_fmt_plain_d():
    t = parse_template("shard-%d")
    got = [t.name(i) for i in (0, 1, 10, 12345)]
    assert got == ["shard-0", "shard-1", "shard-10", "shard-12345"]
    assert t.count >= 2**62  # never runs out in practice


def test_fmt_zero_padded():
    t = parse_template("prefix-%06d-suffix")
    assert t.name(0) == "prefix-000000-suffix"
    assert t.name(42) == "prefix-000042-suffix"
    assert t.name(1234567) == "prefix-1234567-suffix"  # wider than 6: not truncated
    assert t.literal_prefix == "prefix-"


def test_fmt_suffix_with_dots():
    assert parse_template("fish-%d.tar").name(3) == "fish-3.tar"


def test_plain_template_names_one_shard():
    t = parse_template("shard")
    assert t.count == 1
    assert t.name(0) == "shard"
    with pytest.raises(IndexError):
        t.name(1)


def test_whitespace_trimmed():
    assert parse_template("  shard-%d \n").name(2) == "shard-2"


def test_name_out_of_range():
    t = parse_template("{0..3}")
    with pytest.raises(IndexError):
        t.name(4)
    with pytest.raises(IndexError):
        t.name(-1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "*",
        "shard-%6d",
        "shard-%0d",
        "shard-%x",
        "shard-%d-%d",
        "100%-%06d",
        "shard-%",
        "{5..1}",
        "{0..10..0}",
        "{-1..5}",
        "{a..z}",
        "{0..5",
        "0..5}",
        "{0..5}}",
        "{{0..5}",
        "{}",
        "{0...5}",
        "@",
        "a@b",
        "a@1@",
        "dir/shard-%d",
        "dir\\shard-%d",
        "a{0..3}/b",
    ],
)
def test_template_errors(text):
    with pytest.raises(UsageError) as err:
        parse_template(text)
    assert "--shard-template" in str(err.value)
    assert repr(text.strip()) in str(err.value)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a\nb-%d", "a control character"),
        ("shard-%d\t.x", "a control character"),
        ("s\x7f{0..3}", "a control character"),
        ("x\x1b[31m-@9", "a control character"),
        ("..", "'..' part"),
        ("C:shard-%d", "drive name"),
        (".shard-%d", "starting with '.'"),
        ("..%d", "starting with '.'"),
    ],
)
def test_templates_making_unsafe_names_are_refused(text, why):
    with pytest.raises(UsageError) as err:
        parse_template(text)
    message = str(err.value)
    assert message.startswith(f"--shard-template {text!r} would make unsafe shard names (")
    assert why in message and message.endswith("e.g. 'shard-%06d'")
    assert "\n" not in message  # one line, the template shown escaped


@pytest.mark.parametrize("text", ["shard-{0..9}..tar", "a..b-%d", "s.%06d", "x-@99.d"])
def test_dots_inside_a_name_are_fine(text):
    t = parse_template(text)
    assert t.name(0) and not t.name(0).startswith(".")


def test_template_error_uses_given_option():
    with pytest.raises(UsageError, match="--ekm format"):
        parse_template("x-%x", "--ekm format")


def _bash_expand(lo: str, hi: str, step: int) -> list[str]:
    """Bash's own rule: zero-pad to the wider bound when a bound has a leading zero."""
    pad = any(len(b) > 1 and b[0] == "0" for b in (lo, hi))
    width = max(len(lo), len(hi)) if pad else 0
    out, v = [], int(lo)
    while v <= int(hi):
        out.append(str(v).zfill(width))
        v += step
    return out


@settings(max_examples=200, deadline=None)
@given(
    lo=st.integers(0, 300),
    span=st.integers(0, 300),
    step=st.integers(1, 50),
    lo_pad=st.integers(0, 3),
    hi_pad=st.integers(0, 3),
)
def test_bash_range_matches_bash_model(lo, span, step, lo_pad, hi_pad):
    lo_text = "0" * lo_pad + str(lo)
    hi_text = "0" * hi_pad + str(lo + span)
    t = parse_template(f"p{{{lo_text}..{hi_text}..{step}}}s")
    got = [t.name(i) for i in range(t.count)]
    assert got == [f"p{x}s" for x in _bash_expand(lo_text, hi_text, step)]


@settings(max_examples=200, deadline=None)
@given(
    digits=st.text("0123456789", min_size=1, max_size=3),
    second=st.text("0123456789", min_size=1, max_size=2),
)
def test_at_odometer_model(digits, second):
    t = parse_template(f"x@{digits}-@{second}y")
    want = [
        f"x{a:0{len(digits)}d}-{b:0{len(second)}d}y"
        for a in range(int(digits) + 1)
        for b in range(int(second) + 1)
    ]
    assert [t.name(i) for i in range(t.count)] == want
