"""Sizes: binary and decimal units, bare bytes, fractions; errors name the value; IEC display."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.errors import UsageError
from ishard.sizes import ShardSize, describe_size, format_size, parse_shard_size, parse_size

KI, MI, GI, TI = 1024, 1024**2, 1024**3, 1024**4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16MiB", 16 * MI),
        ("16mib", 16 * MI),
        ("16M", 16 * MI),
        ("16Mi", 16 * MI),
        ("16MB", 16_000_000),  # decimal: our decision, unlike Go's IEC-forced 16777216
        ("1.5GiB", 1_610_612_736),
        ("4KB", 4000),  # decimal (Go says 4096)
        ("4kb", 4000),
        ("4KiB", 4096),
        ("4K", 4096),
        ("2GB", 2_000_000_000),
        ("1TiB", TI),
        ("3TB", 3 * 10**12),
        ("100B", 100),
        ("100b", 100),
        ("1048576", 1_048_576),
        ("2147483648", 2_147_483_648),  # more than int32: still bytes, not a count
        ("0.5KiB", 512),
        (".5KiB", 512),
        ("1.KiB", 1024),
        ("  512MiB  ", 512 * MI),  # outer whitespace trimmed
        ("1 MiB", MI),  # inner space between number and unit: accepted, unambiguous
        ("10", 10),
    ],
)
def test_parse_size_values(text, expected):
    assert parse_size(text) == expected


def test_parse_size_int_is_bytes():
    assert parse_size(4096) == 4096


def test_fraction_with_unit_truncates_to_whole_bytes():
    # 1.0001 KiB = 1024.1024 bytes -> 1024
    assert parse_size("1.0001KiB") == 1024


@pytest.mark.parametrize(
    "text",
    [
        "1e6",
        "abc",
        "0",
        "-5MiB",
        "1.5",
        "1.5B",
        "",
        "   ",
        "MiB",
        "5 M iB",
        "5XB",
        "1,000",
        "0KiB",
        "0.0001KiB",
        "+5",
        "5MiBs",
        "1/2MiB",
    ],
)
def test_parse_size_errors_name_the_value(text):
    with pytest.raises(UsageError) as err:
        parse_size(text)
    assert repr(text) in str(err.value)
    assert "--shard-size" in str(err.value)


def test_parse_size_error_uses_given_option_name():
    with pytest.raises(UsageError, match="--max-size 'abc'"):
        parse_size("abc", option="--max-size")


@pytest.mark.parametrize("value", [0, -1, True, False])
def test_parse_size_rejects_non_positive_and_bool(value):
    with pytest.raises(UsageError):
        parse_size(value)


def test_usage_error_is_a_value_error_with_exit_code_2():
    with pytest.raises(ValueError) as err:
        parse_size("abc")
    assert err.value.exit_code == 2


_UNITS = {
    "KiB": KI,
    "MiB": MI,
    "GiB": GI,
    "TiB": TI,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "K": KI,
    "M": MI,
    "G": GI,
    "T": TI,
    "B": 1,
    "": 1,
}


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=10**6),
    unit=st.sampled_from(sorted(_UNITS)),
    lower=st.booleans(),
)
def test_parse_size_integer_times_unit(n, unit, lower):
    text = f"{n}{unit.lower() if lower else unit}"
    assert parse_size(text) == n * _UNITS[unit]


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (100, "100B"),  # §2.2
        (30 * 1024, "30.00KiB"),  # §2.2
        (1_080_000, "1.03MiB"),  # §2.2: 1080000 / 1048576 = 1.0299...
        (0, "0B"),
        (1023, "1023B"),
        (1024, "1.00KiB"),
        (MI, "1.00MiB"),
        (int(1.5 * GI), "1.50GiB"),
        (2 * TI, "2.00TiB"),
        (5000 * TI, "5000.00TiB"),
    ],
)
def test_format_size(n, expected):
    assert format_size(n) == expected


# --- shard sizes: a number without a unit counts samples (Go's -shard_size) ----------------


@pytest.mark.parametrize(
    ("value", "size", "count"),
    [
        ("10", None, 10),
        ("+10", None, 10),  # Go's strconv.ParseInt takes the sign
        ("010", None, 10),
        (" 7 ", None, 7),
        ("2147483647", None, 2_147_483_647),  # the largest int32
        ("10B", 10, None),
        ("64MiB", 64 * MI, None),
        ("1.5GiB", 1_610_612_736, None),
        (10, 10, None),  # a Python int is bytes, as webdataset's maxsize
        (3e9, 3_000_000_000, None),  # a whole float too
    ],
)
def test_parse_shard_size(value, size, count):
    assert parse_shard_size(value) == ShardSize(size=size, count=count)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("0", "must be at least 1 sample"),
        ("-1", "must be at least 1 sample"),
        ("2147483648", "for bytes write 2147483648B or 2GiB"),
        ("3000000000", "for bytes write 3000000000B or 3GB"),
        ("12345678901", "for bytes write 12345678901B"),
        ("abc", "neither a size nor a sample count"),
        ("1e6", "neither a size nor a sample count"),
        ("1.5", "fraction of a byte"),
        (2.5, "whole number of bytes"),
        (0.0, "whole number of bytes"),
        (float("inf"), "whole number of bytes"),
        (True, "True"),
        (0, "more than 0 bytes"),
    ],
)
def test_parse_shard_size_errors(value, words):
    with pytest.raises(UsageError) as err:
        parse_shard_size(value)
    assert words in str(err.value) and "--shard-size" in str(err.value)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1, "1B"),
        (1001, "1001B"),
        (1024, "1KiB"),
        (262144, "256KiB"),
        (300_000, "300KB"),
        (3 * 10**9, "3GB"),
        (2 * GI, "2GiB"),
        (5 * TI, "5TiB"),
        (10**12, "1TB"),
        (1_024_000, "1000KiB"),
        (1000, "1KB"),
        (MI, "1MiB"),
    ],
)
def test_describe_size_is_exact(n, text):
    assert describe_size(n) == text
