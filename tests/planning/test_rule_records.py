"""Each rule record (``ishard.rules.Rule``, and the key patterns' ``KeyPattern``): its Python
form and its SQL form, run in DuckDB, give one answer on generated inputs — names with dots,
leading dots, slashes, backslashes, Unicode, control characters, empty ones — wherever the
record says its SQL form answers (``where``). Every record made has its test here."""

from __future__ import annotations

import importlib
import itertools
import pkgutil
from collections.abc import Callable
from datetime import datetime
from urllib.parse import quote_plus

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ishard
from ishard import names
from ishard.planning import cut, extraction, keys, naming, rowrules
from ishard.planning.engine import growth, parquet
from ishard.rules import RULES, Rule

for _module in pkgutil.walk_packages(ishard.__path__, "ishard."):  # every record made
    if not _module.name.endswith("__main__"):
        importlib.import_module(_module.name)

CON = duckdb.connect(config={"threads": 1})  # small queries: one thread is quicker
EXAMPLES = settings(max_examples=200, deadline=None)
TESTED: dict[str, Callable] = {}  # each rule's name: its test

# characters that make names awkward: dots, separators, a drive's colon, case and Unicode
# forms, characters of 2, 3 and 4 bytes, control characters, URL escapes
AWKWARD = "aB.Z./\\:_- é\u0301ÉßİǅΣ😀\x00\x01\x1f\x7f%+9"
SPECIAL = ["", ".", "..", "/", "a/", "/a", "../a", "a/../b", "a/..", "a//b", "./a", "a/.", "C:x",
           ".hidden", "a/.b", "a.b.c", "a/b.c/d", "a..b", "..a", "a\\..\\b", "\\x", "A.JPG"]  # fmt: skip
texts = st.text(alphabet=AWKWARD, max_size=12) | st.sampled_from(SPECIAL)
parts = st.text(alphabet="aB.é😀 _-", min_size=1, max_size=6) | st.sampled_from([".", "..", ""])
paths = st.lists(parts, min_size=1, max_size=4).map("/".join)
names_ = texts | paths
batches = st.lists(names_, max_size=20)


def covers(rule: Rule):
    """Mark the test below as ``rule``'s."""

    def mark(test: Callable) -> Callable:
        TESTED[rule.name] = test
        return test

    return mark


def rows(sql: str, **columns: tuple[str, list]) -> list[tuple]:
    """The SELECT list ``sql`` over rows whose columns (name: (SQL type, values), all of one
    length) are given, a tuple a row, in their order."""
    select = ", ".join(
        f"unnest(${at}::{kind}[]) AS {column}"
        for at, (column, (kind, _)) in enumerate(columns.items(), 1)
    )
    values = [values for _, values in columns.values()]
    return CON.execute(f"SELECT {sql} FROM (SELECT {select})", values).fetchall()


def evaluated(sql: str, **columns: tuple[str, list]) -> list:
    """``sql`` over such rows, a value a row."""
    return [row[0] for row in rows(sql, **columns)]


def answered(rule: Rule, **columns: tuple[str, list]) -> list[tuple[bool, object]]:
    """(whether the SQL form answers, its answer where it does) of each row."""
    inputs = {column: column for column in columns}
    where, value = rule.answered(**inputs), rule.over(**inputs)
    return rows(f"{where}, CASE WHEN {where} THEN {value} END", **columns)


def agree(rule: Rule, inputs: list, kind: str = "VARCHAR", column: str = "name") -> int:
    """``rule``'s forms agree on each of ``inputs`` its SQL form answers; how many it did."""
    found = answered(rule, **{column: (kind, inputs)})
    for value, (taken, sql) in zip(inputs, found):
        if taken:
            assert sql == rule.python(value), (rule.name, value)
    return sum(taken for taken, _ in found)


def agree_with(rule: Rule, column: str, kind: str, values: list, **constants: tuple) -> None:
    """``rule``'s forms give one answer on each of ``values`` (its input ``column``, of SQL
    type ``kind``), each other input a constant: (its SQL text, its Python value)."""
    sql = rule.over(**{column: column}, **{name: text for name, (text, _) in constants.items()})
    found = evaluated(sql, **{column: (kind, values)})
    assert found == [rule.python(value, *(v for _, v in constants.values())) for value in values]


def test_every_rule_record_has_its_differential_test():
    """A record made without a test here (or a test of a record that is gone) fails."""
    made = [rule.name for rule in RULES]
    assert len(made) == len(set(made)), "two records of one name"
    assert sorted(made) == sorted(TESTED)


@pytest.mark.parametrize("pattern", keys.PATTERNS, ids=lambda p: p.name)
@EXAMPLES
@given(batch=batches)
def test_a_key_patterns_sql_gives_its_sample_keys(pattern, batch):
    assert evaluated(pattern.sql, name=("VARCHAR", batch)) == list(pattern.sample_keys(batch))


@covers(names.FOLDER_MARKER)
@covers(names.UNSAFE_NAME)
@covers(names.HIDDEN_NAME)
@EXAMPLES
@given(batch=batches)
def test_the_listing_rules_of_a_name(batch):
    for rule in (names.FOLDER_MARKER, names.UNSAFE_NAME, names.HIDDEN_NAME):
        assert agree(rule, batch) == len(batch)


@covers(names.SKIP_REASON)
@EXAMPLES
@given(batch=batches, include_hidden=st.booleans())
def test_why_a_file_is_left_out(batch, include_hidden):
    """Unsafe before hidden, as the tally counts a name that is both."""
    hidden = (str(include_hidden), include_hidden)
    agree_with(names.SKIP_REASON, "name", "VARCHAR", batch, include_hidden=hidden)


@covers(names.UNDER_PREFIX)
@EXAMPLES
@given(batch=batches, prefix=texts)
def test_under_a_prefix(batch, prefix):
    found = evaluated(
        names.UNDER_PREFIX.over(name="name", prefix="prefix"),
        name=("VARCHAR", batch),
        prefix=("VARCHAR", [prefix] * len(batch)),
    )
    assert found == [names.UNDER_PREFIX.python(n, prefix) for n in batch]


@covers(names.NAME_ORDER)
@EXAMPLES
@given(batch=batches)
def test_the_engine_sorts_names_bytewise(batch):
    order = names.NAME_ORDER.over(name="name")
    found = CON.execute(
        f"SELECT name FROM (SELECT unnest($1::VARCHAR[]) AS name) ORDER BY {order}", [batch]
    ).fetchall()
    assert [name for (name,) in found] == sorted(batch, key=names.NAME_ORDER.python)


@covers(names.EXTENSION)
@covers(names.MEMBER_NAME)
@EXAMPLES
@given(batch=batches, key=texts)
def test_a_members_name_of_its_samples(batch, key):
    assert agree(names.EXTENSION, batch) == sum("." in n.rpartition("/")[2] for n in batch)
    found = answered(
        names.MEMBER_NAME, key=("VARCHAR", [key] * len(batch)), name=("VARCHAR", batch)
    )
    for name, (taken, sql) in zip(batch, found):
        assert taken == ("." in name.rpartition("/")[2])
        if taken:
            assert sql == names.MEMBER_NAME.python(key, name)


@covers(rowrules.NAMED)
@EXAMPLES
@given(batch=st.lists(st.none() | texts, max_size=30))
def test_a_row_names_a_file(batch):
    assert agree(rowrules.NAMED, batch) == len(batch)


@covers(rowrules.NAME_FITS)
@settings(max_examples=50, deadline=None)
@given(
    lengths=st.lists(st.integers(rowrules.MAX_FIELD - 2, rowrules.MAX_FIELD + 2), max_size=4),
    char=st.sampled_from(["a", "é", "😀", "e\u0301"]),
    batch=batches,
)
def test_a_name_fits_a_field(lengths, char, batch):
    long = [(char * n)[:n] for n in lengths]  # characters, not bytes nor glyphs
    assert agree(rowrules.NAME_FITS, long + batch) == len(long) + len(batch)


digits = st.text(alphabet="0123456789", min_size=1, max_size=21)
sizes = (
    digits
    | st.integers(0, 2**64).map(str)
    | st.sampled_from(["9223372036854775807", "9223372036854775808", "0" * 19 + "1"])
    | st.text(alphabet="0123456789 +-_\t.e٣x", max_size=8)
)


@covers(rowrules.SIZE_TEXT)
@EXAMPLES
@given(batch=st.lists(sizes, max_size=30))
def test_a_size_as_text(batch):
    """Where the engine takes a size itself, the row reader takes it too, as the same number."""
    assert agree(rowrules.SIZE_TEXT, batch, column="size") >= sum(
        len(s) < 19 and s.isascii() and s.isdigit() for s in batch
    )


@covers(rowrules.SIZE_DIGITS)
@EXAMPLES
@given(batch=st.lists(sizes.map(str.strip) | sizes.map(lambda s: f" {s} "), max_size=30))
def test_a_size_as_digits(batch):
    found = answered(rowrules.SIZE_DIGITS, size=("VARCHAR", batch))
    for text, (taken, sql) in zip(batch, found):
        if taken:  # the SQL form gives the number as text
            assert int(sql) == rowrules.SIZE_DIGITS.python(text), text


@covers(rowrules.MTIME_TEXT)
@EXAMPLES
@given(batch=st.lists(st.none() | digits | sizes | st.sampled_from(["", "1.5", "2024-01-01T00:00:05Z"]), max_size=30))  # fmt: skip
def test_an_mtime_as_text(batch):
    assert agree(rowrules.MTIME_TEXT, batch, column="mtime") >= sum(
        s is None or s == "" or (s.isascii() and s.isdigit() and len(s) <= 15) for s in batch
    )


@covers(rowrules.S3_KEY)
@EXAMPLES
@given(batch=st.lists(names_.map(quote_plus) | names_, max_size=20))
def test_an_s3_inventory_key(batch):
    """URL-decoded as ``unquote_plus`` decodes it; a key that is not UTF-8 once decoded fails
    in SQL (the engine hands the listing back), where Python puts U+FFFD in its place."""
    decoded = rowrules.S3_KEY.over(key="key")
    try:
        found = [[sql] for sql in evaluated(decoded, key=("VARCHAR", batch))]
    except duckdb.InvalidInputException:  # one of them: each on its own
        found = [[] for _ in batch]
        for key, out in zip(batch, found):
            try:
                out += evaluated(decoded, key=("VARCHAR", [key]))
            except duckdb.InvalidInputException:
                assert "\ufffd" in rowrules.S3_KEY.python(key), key
    for key, out in zip(batch, found):
        assert out in ([], [rowrules.S3_KEY.python(key)]), key


@covers(rowrules.S3_SIZE)
@EXAMPLES
@given(batch=st.lists(sizes | st.just(""), max_size=30))
def test_an_s3_inventory_size(batch):
    assert agree(rowrules.S3_SIZE, batch, column="size") == len(batch)


checksums = st.text(alphabet=' "0123456789abcdefABCDEF-é\t', max_size=12) | st.sampled_from(
    ['"9e107d9d372bb6826bd81d3542a419d6"', "d41d8cd98f00b204e9800998ecf8427e-2", '""', " ", ""]
)


@covers(rowrules.IDENTITY)
@EXAMPLES
@given(batch=st.lists(checksums | st.none(), max_size=30))
def test_a_checksum_or_etag_as_compared(batch):
    """Spaces and double quotes around it go (S3 quotes an ETag in a listing, not in its
    inventory); nothing left, or none given, is no checksum."""
    assert agree(rowrules.IDENTITY, batch, column="value") == len(batch)


moments = st.datetimes(datetime(1970, 1, 1), datetime(9999, 12, 31))


def aws(when: datetime, fraction: int) -> str:
    """``when`` as AWS writes a LastModifiedDate, with 0, 3 or 6 digits of its fraction."""
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{when.microsecond:06d}"[: fraction + 1] if fraction else "") + "Z"


@covers(rowrules.AWS_TIME)
@EXAMPLES
@given(batch=st.lists(st.builds(aws, moments, st.sampled_from([0, 3, 6])) | texts, max_size=20))
def test_an_aws_time(batch):
    found = answered(rowrules.AWS_TIME, time=("VARCHAR", batch))
    assert sum(taken for taken, _ in found) >= sum(t.endswith("Z") and len(t) >= 20 for t in batch)
    for text, (taken, sql) in zip(batch, found):
        if taken:
            assert sql == rowrules.AWS_TIME.python(text), text


@covers(rowrules.REPORT_SIZE)
@EXAMPLES
@given(batch=st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=30))
def test_an_s3_inventory_reports_size(batch):
    assert agree(rowrules.REPORT_SIZE, batch, "BIGINT", "size") == len(batch)


# DuckDB's epoch() is seconds in a double: to the microsecond from 1900 to 2100
times = st.datetimes(datetime(1900, 1, 1), datetime(2100, 12, 31))


@covers(rowrules.REPORT_TIME)
@covers(parquet.PARQUET_TIME)
@EXAMPLES
@given(batch=st.lists(times, max_size=30))
def test_timestamps_in_whole_seconds(batch):
    for rule in (rowrules.REPORT_TIME, parquet.PARQUET_TIME):
        assert agree(rule, batch, "TIMESTAMP", "time") == len(batch)


@covers(rowrules.ORC_TIME)
@EXAMPLES
@given(
    ticks=st.lists(st.integers(-(2**63) + 1, 2**63 - 1), max_size=30),
    per_second=st.sampled_from([1, 10**3, 10**6, 10**9]),
)
def test_an_orc_time_toward_zero(ticks, per_second):
    per = (str(per_second), per_second)
    agree_with(rowrules.ORC_TIME, "ticks", "BIGINT", ticks, per_second=per)


@covers(naming.READER_KEY)
@EXAMPLES
@given(batch=batches)
def test_a_reader_key(batch):
    """The engine's reader key (its folder and stem) is one where WebDataset's is one, and
    its flags are the key check's."""
    listed = [n for n in batch if not n.startswith("/")]  # READER_KEY's where: no absolute name
    rows = naming.READER_KEY.over(rows="SELECT unnest($1::VARCHAR[]) AS name")
    found = CON.execute(f"SELECT folder, stem, flags FROM {rows}", [listed]).fetchall()
    python = [naming.READER_KEY.python(n) for n in listed]
    assert [flags for *_, flags in found] == [flags for _, flags in python]
    for a, b in itertools.combinations(range(len(listed)), 2):
        assert (found[a][:2] == found[b][:2]) == (python[a][0] == python[b][0])
    for (folder, stem, _), (key, _) in zip(found, python):
        assert key == (f"{folder}/{stem}" if folder else stem)


@covers(naming.MEMBER_KEY)
@EXAMPLES
@given(batch=batches)
def test_a_key_that_names_no_member(batch):
    answers = agree(naming.MEMBER_KEY, batch, column="key")
    assert answers >= sum(n.isascii() and n.isalnum() for n in batch)


@covers(naming.EXT_FOLD)
@EXAMPLES
@given(batch=batches)
def test_an_extension_folded(batch):
    assert agree(naming.EXT_FOLD, batch, column="ext") >= sum(map(str.isascii, batch))


@covers(cut.IN_A_FOLDER)
@EXAMPLES
@given(batch=batches)
def test_a_key_in_a_folder(batch):
    assert agree(cut.IN_A_FOLDER, batch, column="key") == len(batch)


@covers(extraction.FOLD)
@EXAMPLES
@given(batch=batches)
def test_a_member_name_folded(batch):
    assert agree(extraction.FOLD, batch) >= sum(
        n.isascii() and "/" not in n and n != "." for n in batch
    )


long_parts = st.builds(
    lambda char, n: char * n, st.sampled_from(["a", "é", "😀", "."]), st.integers(50, 300)
)


@covers(extraction.LONG_PART)
@EXAMPLES
@given(batch=st.lists(st.lists(long_parts | parts, min_size=1, max_size=3).map("/".join), max_size=6))  # fmt: skip
def test_a_part_too_long(batch):
    found = evaluated(extraction.LONG_PART.over(name="name"), name=("VARCHAR", batch))
    assert found == [bool(extraction.LONG_PART.python(n)) for n in batch]


@covers(extraction.FOLDER)
@covers(extraction.FOLDERS)
@EXAMPLES
@given(batch=batches)
def test_a_names_folders(batch):
    assert agree(extraction.FOLDER, batch) == sum(not n.startswith("/") for n in batch)
    found = answered(extraction.FOLDERS, folder=("VARCHAR", batch))
    for folder, (taken, sql) in zip(batch, found):
        assert taken == (folder != "" and not folder.startswith("/"))
        if taken:
            assert sorted(sql) == sorted(extraction.FOLDERS.python(folder)), folder


@covers(extraction.BELOW)
@EXAMPLES
@given(batch=batches, folder=paths)
def test_a_name_below_a_folder(batch, folder):
    below = [f"{folder}/{n}" for n in batch[::2]] + batch  # some below it, some not
    found = answered(
        extraction.BELOW, name=("VARCHAR", below), folder=("VARCHAR", [folder] * len(below))
    )
    for name, (taken, sql) in zip(below, found):
        if taken:
            assert sql == extraction.BELOW.python(name, folder), (name, folder)


# files (name, size, mtime) that differ in one of the three, or in more
FILES = [
    (name, size, mtime) for name in ("a", "b/c", "é", "") for size in (0, 3) for mtime in (0, 2)
]
files = st.frozensets(st.sampled_from(FILES), min_size=1, max_size=4)
sides = st.tuples(st.none() | files, st.none() | files).filter(lambda s: s != (None, None))


@covers(growth.VERDICT)
@EXAMPLES
@given(samples=st.dictionaries(st.sampled_from("pqrs"), sides, max_size=4))
def test_a_samples_growth_verdict(samples):
    """Each side's files (name, size, mtime) summed by ``SAMPLE_FILES``, then the verdict in
    SQL, as Python compares the two sets."""
    sides, values = [], []
    for number, side in enumerate(("planned", "held")):
        found = [(key, *file) for key, both in samples.items() for file in both[number] or ()]
        columns = list(zip(*found)) or [(), (), (), ()]
        at = len(values)
        sides.append(
            f"{side} AS (SELECT unnest(${at + 1}::VARCHAR[]) AS key, unnest(${at + 2}::VARCHAR[]) "
            f"AS source, unnest(${at + 3}::BIGINT[]) AS size, unnest(${at + 4}::BIGINT[]) AS mtime)"
        )
        values += [list(c) for c in columns]
    verdicts = CON.execute(
        f"WITH {', '.join(sides)} SELECT coalesce(p.key, h.key), "
        f"{growth.VERDICT.over(planned='p', held='h')} FROM "
        f"(SELECT key, {growth.SAMPLE_FILES} FROM planned GROUP BY key) p FULL OUTER JOIN "
        f"(SELECT key, {growth.SAMPLE_FILES} FROM held GROUP BY key) h ON p.key = h.key",
        values,
    ).fetchall()
    assert dict(verdicts) == {k: growth.VERDICT.python(*both) for k, both in samples.items()}
