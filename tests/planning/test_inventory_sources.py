"""Every inventory source the column engine reads besides a plain local CSV, JSON Lines or
Parquet file — gzip'ed CSV and JSON Lines, AWS S3 Inventory reports in CSV (headerless,
gzip'ed, URL-encoded keys) and in Parquet — against the row reader: the same listing, the
same skipped names, or a hand-back to the row reader, never a different answer."""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import os
import random
from pathlib import Path
from unittest import mock
from urllib.parse import quote_plus

import pytest
from helpers import (
    agree_or_hand_back,
    inventory_mtimes,
    inventory_names,
    inventory_sizes,
    s3_csv_report,
    s3_orc_report,
    s3_parquet_report,
    spoilt_sizes,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ishard.errors import UsageError
from ishard.model import Tally
from ishard.planning import inventory, selects
from ishard.planning.columns import read_inventory


def row_listing(where: Path, prefix: str = "", include_hidden: bool = False):
    """The row reader's answer."""
    tally = Tally()
    with mock.patch.dict(os.environ, {inventory.PLANNER: "rows"}):
        files = inventory.list_inventory(
            str(where), prefix=prefix, include_hidden=include_hidden, tally=tally
        )
    return files, tally.freeze()


def engine_listing(where: Path, prefix: str = "", include_hidden: bool = False):
    """The engine's answer, as ``selects.describe`` finds the inventory (Fallback: handed back)."""
    found = selects.describe(str(where))
    assert found is not None, f"the engine does not read {where}"
    tally = Tally()
    files, total = read_inventory(
        str(where), found, wanted=prefix, include_hidden=include_hidden, tally=tally
    )
    assert total == sum(files.sizes)
    return files, tally.freeze()


def agree(seen, where: Path, prefix: str = "", include_hidden: bool = False) -> None:
    """Both readers refuse, or the engine hands back, or both list the same (counted in
    ``seen``, the ``engine_reads`` fixture)."""
    agree_or_hand_back(
        lambda: row_listing(where, prefix, include_hidden),
        lambda: engine_listing(where, prefix, include_hidden),
        seen,
    )


# pieces of keys: plain, escapes of other text, of bytes that are not UTF-8, broken escapes
KEY_PIECES = ["a", "b/", "%2F", "%41", "+", "%2B", "%", "%z", "%4", "%FF", "%C3%A9", "%00", "%0A",
              "%E2%82", " ", "é", ".h", "%2E%2E/"]  # fmt: skip
# keys as a report holds them: encoded as AWS encodes them, or any text with escapes that
# decode to other text, to bytes that are not UTF-8, or to nothing a decoder reads
raw_keys = st.one_of(
    st.just(""),  # the row reader refuses an empty key: the engine must not leave it out
    inventory_names.map(lambda n: quote_plus(n, safe="/")),
    inventory_names.map(lambda n: quote_plus(n, safe="")),
    st.lists(st.sampled_from(KEY_PIECES), min_size=1, max_size=6).map("".join),
)
aws_times = st.sampled_from(
    [
        "2024-01-01T00:00:05.000Z",
        "2023-12-31T23:59:59.999Z",
        "1970-01-01T00:00:00.000Z",
        "2024-02-30T00:00:00.000Z",
        "2024-01-01T00:00:05.123456Z",
        "2024-01-01T00:00:05.5Z",
        "2024-01-01T00:00:05Z",
        "1969-12-31T23:59:59.500Z",
        "2024-01-01T23:59:60.000Z",
        "2024-01-01T24:00:00.000Z",
        "2024-01-01T23:60:00.000Z",
        "2024-13-01T00:00:00.000Z",
        "2024-00-10T00:00:00.000Z",
        "2024-04-31T00:00:00.000Z",
        "9999-12-31T23:59:59.999Z",
        "",
        "1700000000",
        "garbage",
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.lists(st.tuples(raw_keys, inventory_sizes | st.just(""), aws_times), max_size=12),
    prefix=st.sampled_from(["", "", "a", "a/", "zz"]),
    hidden=st.booleans(),
    repeat=st.booleans(),
    spoil=spoilt_sizes,
    parts=st.sampled_from([1, 2, 3]),
)
def test_an_s3_csv_report_reads_as_the_row_reader_reads_it(
    tmp_path_factory, engine_reads, body, prefix, hidden, repeat, spoil, parts
):
    if repeat and body:
        body = body + body[: len(body) // 2]  # the same keys again, later (in other files)
    if spoil is not None and body:
        body = body[:-1] + [(body[-1][0], spoil, body[-1][2])]
    lines = [["src-bucket", key, size, when, "STANDARD"] for key, size, when in body]
    agree(engine_reads, s3_csv_report(tmp_path_factory.mktemp("r"), lines, parts), prefix, hidden)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.lists(
        st.tuples(
            inventory_names | st.none() | st.just(""),
            st.integers(-2, 10**12) | st.none(),
            st.sampled_from(["2024-01-01 00:00:05.999", "1969-12-31 23:59:59.5", None]),
        ),
        max_size=10,
    ),
    prefix=st.sampled_from(["", "a", "zz"]),
    hidden=st.booleans(),
    parts=st.sampled_from([1, 2]),
    form=st.sampled_from(["parquet", "orc"]),
)
def test_an_s3_parquet_or_orc_report_reads_as_the_row_reader_reads_it(
    tmp_path_factory, engine_reads, body, prefix, hidden, parts, form
):
    write = s3_parquet_report if form == "parquet" else s3_orc_report
    agree(engine_reads, write(tmp_path_factory.mktemp("r"), body, parts), prefix, hidden)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.lists(st.tuples(inventory_names, inventory_sizes, inventory_mtimes), max_size=12),
    kind=st.sampled_from(["csv", "jsonl"]),
    prefix=st.sampled_from(["", "", "a", "a/", "zz"]),
    hidden=st.booleans(),
    spoil=spoilt_sizes,
)
def test_a_gzipped_inventory_reads_as_the_row_reader_reads_it(
    tmp_path_factory, engine_reads, body, kind, prefix, hidden, spoil
):
    if spoil is not None and body:
        body = body[:-1] + [(body[-1][0], spoil, body[-1][2])]
    text = io.StringIO()
    if kind == "csv":
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(["name", "size", "mtime"])
        writer.writerows(body)
    else:
        for name, size, when in body:
            size_value = int(size) if size is not None and size.isdigit() else size
            text.write(json.dumps({"name": name, "size": size_value, "mtime": when}) + "\n")
    path = tmp_path_factory.mktemp("g") / f"inventory.{kind}.gz"
    path.write_bytes(gzip.compress(text.getvalue().encode()))
    if selects.describe(str(path)) is None:  # nothing but blank lines: no kind to tell
        event("no kind")
        return
    agree(engine_reads, path, prefix, hidden)


def test_big_gzipped_inventories_and_reports_go_to_the_engine(tmp_path, caplog):
    """From 1 MiB of gzip'ed data on (a report's data files, a ``.csv.gz``), the engine reads
    the inventory; below, the row reader; both plan the same, and ``-v`` says which read it."""
    rng = random.Random(7)
    body = [(f"ds/{i % 97}/{rng.getrandbits(64):016x}.jpg", str(i), "2024-01-01T00:00:05.000Z")
            for i in range(120_000)]  # fmt: skip
    report = s3_csv_report(
        tmp_path / "big", [["b", quote_plus(k, safe="/"), s, t, "S"] for k, s, t in body]
    )
    small = s3_csv_report(tmp_path / "small", [["b", "ds/a.jpg", "1", "", "S"]])
    text = "name,size\n" + "".join(f"{k},{s}\n" for k, s, _ in body)
    csv_gz = tmp_path / "list.csv.gz"
    csv_gz.write_bytes(gzip.compress(text.encode(), 9))
    assert csv_gz.stat().st_size >= inventory.ENGINE_FROM_COMPRESSED
    assert inventory.choose_planner(str(report), "")[0] == "engine"
    assert inventory.choose_planner(str(csv_gz), "")[0] == "engine"
    assert inventory.choose_planner(str(small), "")[0] == "rows"
    with caplog.at_level(logging.INFO, logger="ishard"):
        by_engine = inventory.list_inventory(str(report), tally=Tally())
    assert "planner: engine (" in caplog.text and "handed it back" not in caplog.text
    by_rows = row_listing(report)[0]
    assert by_engine.names == by_rows.names and len(by_rows.names) == len(body)
    assert list(by_engine.mtimes) == list(by_rows.mtimes) == [1704067205] * len(body)
    assert inventory.list_inventory(str(csv_gz)).names == by_rows.names


def test_another_compression_or_orc_without_pyarrow_stays_with_the_row_reader(tmp_path):
    """What the engine does not read is the row reader's: a ``.bz2`` inventory, and a report
    in ORC where pyarrow (the ``orc`` extra) is not installed — the row reader then says what
    to install."""
    import bz2

    path = tmp_path / "list.csv.bz2"
    path.write_bytes(bz2.compress(b"name,size\nds/a.jpg,1\n"))
    assert selects.describe(str(path)) is None
    assert inventory.list_inventory(str(path)).names == ["ds/a.jpg"]
    report = s3_orc_report(tmp_path / "orc", [("ds/a.jpg", 1, None), ("ds/b.jpg", 2, None)])
    assert selects.describe(str(report)).kind == "s3-orc"
    with mock.patch.dict("sys.modules", {"pyarrow": None}):
        assert selects.describe(str(report)) is None
        with pytest.raises(UsageError, match=r"pip install 'ishard\[orc\]'"):
            inventory.list_inventory(str(report))


@pytest.mark.parametrize("form", ["s3-csv", "s3-parquet", "s3-orc", "csv.gz", "jsonl.gz"])
def test_each_source_of_plain_rows_is_read_by_the_engine_itself(tmp_path, form):
    """The property tests above pass on a hand-back too; here rows any reader takes are read
    by the engine itself (no ``Fallback``), as the row reader reads them."""
    body = [(f"ds/{c}/{i}.jpg", i * 7, "2024-01-01T00:00:05.000Z") for c in "ba" for i in range(5)]
    if form == "s3-csv":
        where = s3_csv_report(tmp_path, [["b", k, str(s), t, "S"] for k, s, t in body])
    elif form in ("s3-parquet", "s3-orc"):
        write = s3_parquet_report if form == "s3-parquet" else s3_orc_report
        where = write(tmp_path, [(k, s, t[:-1]) for k, s, t in body])
    else:
        where = tmp_path / f"list.{form}"
        lines = (
            ["name,size,mtime\n", *(f"{k},{s},1704067205\n" for k, s, _ in body)]
            if form == "csv.gz"
            else [
                json.dumps({"name": k, "size": s, "mtime": 1704067205}) + "\n" for k, s, _ in body
            ]
        )
        where.write_bytes(gzip.compress("".join(lines).encode()))
    by_engine, by_rows = engine_listing(where), row_listing(where)
    assert by_engine[0].names == sorted(k for k, _, _ in body) == by_rows[0].names
    assert list(by_engine[0].mtimes) == [1704067205] * len(body) == list(by_rows[0].mtimes)
    assert list(by_engine[0].sizes) == list(by_rows[0].sizes)
