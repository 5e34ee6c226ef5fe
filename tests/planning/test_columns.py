"""The column engine's inventory reader (``ishard.planning.engine.columns``) against the row
reader: the same listing, the same skipped names, or a hand-back to the row reader — never a
different answer.
Parquet inventories, which only the engine reads, against the same rows as CSV."""

from __future__ import annotations

import csv
import gc
import gzip
import io
import json
import os
import random
import subprocess
from collections import Counter
from dataclasses import replace
from unittest import mock

import duckdb
import numpy as np
import pytest
from helpers import (
    agree_or_hand_back,
    inventory_mtimes,
    inventory_names,
    inventory_sizes,
    invoke_ishard,
    joined_paths,
    open_files_in,
    same_listing,
    spoilt_sizes,
)
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import ishard
from ishard.errors import DataError, UsageError
from ishard.model import Tally
from ishard.planning import handover, inventory, namecolumn, samples
from ishard.planning.engine import columns
from ishard.planning.engine.columns import read_inventory
from ishard.planning.engine.connection import Fallback
from ishard.planning.engine.selects import inventory_kind
from ishard.planning.keys import BUILT_IN
from ishard.run.report import plan_summary
from ishard.sizes import parse_size


def row_listing(path, **kw):
    """The row reader's answer (the engine is not asked)."""
    tally = Tally()
    with mock.patch.dict(os.environ, {inventory.PLANNER: "rows"}):
        files = inventory.list_inventory(str(path), tally=tally, **kw)
    return files, tally.freeze()


def column_listing(path, prefix="", include_hidden=False):
    tally = Tally()
    files, total = read_inventory(
        str(path),
        inventory_kind(str(path)),
        wanted=prefix,
        include_hidden=include_hidden,
        tally=tally,
    )
    assert total == sum(files.sizes)
    return files, tally.freeze()


def csv_files(path, include_hidden: bool = False, **reading):
    """The engine's listing of the CSV inventory at ``path``, every name wanted."""
    files, _ = read_inventory(
        str(path), "csv", wanted="", include_hidden=include_hidden, tally=Tally(), **reading
    )
    return files


rows = st.lists(st.tuples(inventory_names, inventory_sizes, inventory_mtimes), max_size=12)


def write_csv(path, header, body, blank_lines=False, line_end="\n") -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=line_end)
    writer.writerow(header)
    for row in body:
        writer.writerow(row)
        if blank_lines:
            out.write(line_end)
    path.write_bytes(out.getvalue().encode())


@settings(
    max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=rows,
    header=st.sampled_from(
        [["name", "size", "mtime"], ["size", "key"], ["Key", "bytes", "LastModified", "extra"]]
    ),
    prefix=st.sampled_from(["", "", "", "a", "a/", "zz"]),
    hidden=st.booleans(),
    blank=st.booleans(),
    repeat=st.booleans(),
    spoil=spoilt_sizes,
    line_end=st.sampled_from(["\n", "\r\n"]),  # Python's csv module writes CRLF by default
)
def test_the_column_reader_agrees_with_the_row_reader_or_hands_back(
    tmp_path, engine_reads, body, header, prefix, hidden, blank, repeat, spoil, line_end
):
    if repeat and body:
        body = body + body[: len(body) // 2]  # the same names again, later
    if spoil is not None and body:
        body = body[:-1] + [(body[-1][0], spoil, body[-1][2])]
    order = {"name": 0, "key": 0, "Key": 0, "size": 1, "bytes": 1, "mtime": 2, "LastModified": 2}
    lines = [[row[order[h]] if h in order else "e" for h in header] for row in body]
    path = tmp_path / "inventory.csv"
    write_csv(path, header, lines, blank, line_end)
    agree_or_hand_back(
        lambda: row_listing(path, prefix=prefix, include_hidden=hidden),
        lambda: column_listing(path, prefix, hidden),
        engine_reads,
    )


KEY_PARTS = ["a", "b", "a.b", "x.jpg", ".c", "c.", "..d", "é.ü", "😀.x", "a\\b.c", "n"]


@settings(
    max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=joined_paths(KEY_PARTS, 14),
    pattern=st.sampled_from([*BUILT_IN, "base_name"]),
    repeat=st.booleans(),
    looked_at=st.sampled_from([(1, 1), (1, 2), (2, 3), (2048, 32)]),
    summed=st.sampled_from([1, 2, 5, 1 << 16]),
)
def test_the_engine_groups_files_into_the_samples_python_finds(
    tmp_path, monkeypatch, body, pattern, repeat, looked_at, summed
):
    """The engine's samples for a built-in key pattern (keys in order of first appearance,
    each one's files in listing order) are the ones the planner's own grouping finds in the
    same listing, and so are their sizes."""
    from ishard.planning.keys import key_function
    from ishard.planning.samples import _gather, _numbered, group_table

    if repeat:
        body = body + body[::2]  # repeated names: the engine groups what is left of them
    run, runs = looked_at  # the runs of files whose keys are looked at before a pass
    monkeypatch.setattr(columns, "SAMPLED_RUN", run)
    monkeypatch.setattr(columns, "SAMPLED_RUNS", runs)
    monkeypatch.setattr(samples, "CHUNK", summed)  # samples whose sizes are summed at a time
    path = tmp_path / "inventory.csv"
    write_csv(path, ["name", "size"], [[n, str(len(n) << 31 * (len(n) % 3 == 0))] for n in body])
    key = key_function(pattern)
    files = csv_files(path, include_hidden=True, key=key)
    assert files.handover.grouping is not None and files.handover.grouping.key is key
    keys, sample_of = _numbered(files, key)
    starts, members, sizes = _gather(sample_of, len(keys), files.sizes)
    assert files.handover.grouping.keys == keys
    assert files.handover.grouping.flat == (not any("/" in k for k in keys))
    assert list(files.handover.grouping.starts) == list(starts)
    assert list(files.handover.grouping.members) == list(members)
    assert list(group_table(files, key).sizes) == list(sizes)
    in_order = list(members) == list(range(len(files)))
    event("each sample's files in a row" if in_order else "a sample's files apart")


def samples_without(files, key, dropped):
    """The samples of ``files`` by ``key``, without the files at positions ``dropped`` (as
    --sample-exts may leave files out)."""
    from ishard.planning.samples import group_table
    from ishard.planning.table import SampleTable

    grouped = group_table(files, key)
    kept = SampleTable(files)
    for s in range(len(grouped)):
        members = [f for f in grouped.file_indices(s) if f not in dropped]
        if members:
            kept.add(grouped.keys[s], members)
    return kept


NFD_E = "e\u0301"
CLASH_FOLDERS = ["a", "A", "b", "\u00e9", NFD_E, "c", "."]
CLASH_FILES = [
    "x.jpg",
    "X.JPG",
    "x.png",
    "x.seg.png",
    "a",
    "A",
    "\u00e9.jpg",
    NFD_E + ".jpg",
    "\u212a.txt",
    "k.txt",
]
LONG_PARTS = ["L" * 251 + ".jpg", "\u00e9" * 128 + ".x", "ab" * 32 + ".jpg"]  # 255, 258, 68 bytes
clash_names = st.builds(
    lambda folders, file, slashes: slashes.join([*folders, file]),
    st.lists(st.sampled_from(CLASH_FOLDERS), max_size=2),
    st.sampled_from(CLASH_FILES * 8 + LONG_PARTS),
    st.sampled_from(["/"] * 6 + ["//"]),
)


def extraction_error(tables, rename):
    """The check's error, or its warning with look-alike names only warned about, each way."""
    from ishard.errors import DataError
    from ishard.planning.extraction import check_extraction_names

    found = []
    for lookalikes in ("refuse", "warn"):
        try:
            found.append(check_extraction_names(tables, rename, lookalikes))
        except DataError as error:
            found.append(str(error))
    return found if any(found) else None


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.lists(clash_names, min_size=1, max_size=14),
    pattern=st.sampled_from(BUILT_IN),
    rename=st.booleans(),
    dropped=st.sets(st.integers(0, 20)),
)
def test_the_extraction_check_narrowed_by_the_engine_finds_what_the_whole_check_finds(
    tmp_path, body, pattern, rename, dropped
):
    """Member names that clash on extraction (case, Unicode forms, './' and '//' parts, a file
    where another name needs a folder, a part over 255 bytes): the check over the files the
    engine marked gives the error the check over every member gives, or none when it gives
    none — also when some listed files are left out of the samples."""
    from ishard.planning.keys import key_function
    from ishard.planning.naming import sample_members

    path = tmp_path / "inventory.csv"
    write_csv(path, ["name", "size"], [[n, "1"] for n in body])
    key = key_function(pattern)
    files = csv_files(path, include_hidden=True, key=key, renamed=rename)
    assert files.handover.clashes is not None and files.handover.clashes.renamed == rename
    kept = samples_without(files, key, dropped)
    if rename:
        try:
            sample_members(kept)  # the planner's check before this one
        except DataError:
            event("refused before")
            return
    narrowed = extraction_error([kept], rename)
    clashes = files.handover.clashes
    files.handover = replace(files.handover, clashes=None)
    assert narrowed == extraction_error([kept], rename)
    event(f"{'refused' if narrowed else 'passed'}, {len(clashes.files)} of {len(files)} marked")


RENAME_FOLDERS = ["a", "b", "A.d", "", "."]
RENAME_FILES = [
    "x.jpg",
    "x.JPG",
    "x.png",
    "x.seg.png",
    "x",
    "x.",
    ".x",
    "y.\u00c9",
    "y.\u00e9",
    "y.\u0130",
    "y.i\u0307",
    "y.jpg",
    "z.tar.gz",
    "z.gz",
    "..jpg",  # İ: one case in SQL
    "c:x.jpg",
    "\\x.jpg",
    ".\\x.jpg",
    "..\\x.jpg",
]  # keys a drive, '\', a '..' part


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.lists(
        st.builds(
            lambda folder, file: f"{folder}/{file}".lstrip("/"),
            st.sampled_from(RENAME_FOLDERS),
            st.sampled_from(RENAME_FILES),
        ),
        min_size=1,
        max_size=10,
    ),
    pattern=st.sampled_from(BUILT_IN),
    dropped=st.sets(st.integers(0, 12)),
)
@example(body=["a/y.\u0130", "b/y.i\u0307"], pattern="base_file_name", dropped=set())
def test_member_names_found_fit_by_the_engine_are_what_the_planner_finds(
    tmp_path, body, pattern, dropped
):
    """``--member-names sample``: when the engine finds every listed file fit for a
    ``<sample key>.<extension>`` name, the planner's own check over the samples (some files
    left out, as --sample-exts may) finds nothing either; else the planner's check runs."""
    from ishard.planning.keys import key_function
    from ishard.planning.naming import sample_members

    path = tmp_path / "inventory.csv"
    write_csv(path, ["name", "size"], [[n, "1"] for n in body])
    key = key_function(pattern)
    files = csv_files(path, include_hidden=True, key=key, renamed=True)
    kept = samples_without(files, key, dropped)
    fit = files.handover.renamable_by
    files.handover = replace(files.handover, renamable_by=None)
    try:
        sample_members(kept)
        found = None
    except DataError as error:
        found = str(error)
    if fit is key:
        assert found is None
    event(f"engine: {'fit' if fit else 'not known'}; planner: {'refused' if found else 'fit'}")


READER_FOLDERS = ["a", "b", "x.d", ""]
READER_FILES = [
    "x.jpg",
    "x.png",
    "x.seg.png",
    "x",
    ".x",
    ".x.jpg",
    "x.",
    "y.jpg",
    "\u00e9.jpg",
    "x.d",
]


def test_the_key_check_over_the_engines_reader_keys_counts_what_the_planner_counts(
    tmp_path, monkeypatch
):
    """Original member names: the key check's counts and examples (dotted basenames, dotless
    or dot-leading ones, samples whose files readers key apart) from the engine's reader keys
    and flags, cut as the check asks, or from the findings the engine made itself where it
    sorted the files by sample key, are the ones the planner's own check finds in the names —
    also for a custom pattern, and with some files left out of the samples (the engine's
    findings are over its own samples: such a table is checked from the names). Both ways are
    taken many times."""
    from ishard.names import wds_split
    from ishard.planning.keys import key_function
    from ishard.planning.naming import key_check
    from ishard.planning.samples import group_table

    seen: Counter[str] = Counter()

    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        body=st.lists(
            st.builds(
                lambda folders, file: "/".join([*folders, file]),
                st.lists(st.sampled_from(READER_FOLDERS), max_size=2),
                st.sampled_from(READER_FILES),
            ),
            min_size=1,
            max_size=14,
        ),
        pattern=st.sampled_from([*BUILT_IN, r"^(?:.*/)?([^/]+)/[^/]*$"]),
        dropped=st.sets(st.integers(0, 16)),
        span=st.sampled_from([1, 1 << 16]),
        names_first=st.booleans(),
    )
    def same_check(body, pattern, dropped, span, names_first):
        path = tmp_path / "inventory.csv"
        write_csv(path, ["name", "size"], [[n, "1"] for n in body])
        key = key_function(pattern)
        files = csv_files(path, include_hidden=True, key=key)
        grouping, readers = files.handover.grouping, files.handover.readers
        found = grouping is not None and grouping.findings is not None
        assert (readers is None) == found  # the check done by the engine, or cut as it asks
        if found:
            table = group_table(files, key)
            assert table.findings is not None
            engine = key_check(table)
            table.findings = None  # the names tell
            planner = key_check(table)
            assert samples_without(files, key, dropped).findings is None
            seen["findings"] += 1
        else:
            monkeypatch.setattr(handover, "SPAN_LEAST", span)  # 1: all fetched if apart
            kept = samples_without(files, key, dropped)
            if names_first:  # the names read first: the reader keys come with them
                files.names[:1]
            engine = key_check(kept)  # else before any name is read: cut from the engine
            hashes = readers.rows(np.arange(len(files.sizes)))[0]
            by_name = {wds_split(n)[0] for n in files.names}
            assert len(set(hashes.tolist())) == len(by_name)  # one hash per reader key
            files.handover = replace(files.handover, readers=None)
            planner = key_check(kept)
            seen["reader keys"] += 1
        assert engine.counts == planner.counts and list(engine.counts) == list(planner.counts)
        assert engine.examples == planner.examples
        seen[", ".join(sorted(planner.counts)) or "nothing found"] += 1

    same_check()
    assert seen["findings"] > 25 and seen["reader keys"] > 25, dict(seen)
    assert seen["nothing found"] < 100, dict(seen)


def test_an_engine_failure_in_a_naming_hint_leaves_the_check_to_the_planner(tmp_path, monkeypatch):
    """Out of memory while marking clashes, checking names for renaming or cutting reader keys:
    the listing still comes from the engine (no hand-back to the row reader), without those
    hints, and the planner's checks then find what they always find."""
    from ishard.planning.engine import connection
    from ishard.planning.extraction import check_extraction_names
    from ishard.planning.keys import key_function
    from ishard.planning.naming import key_check, sample_members
    from ishard.planning.samples import group_table

    hints = ("CREATE TEMP TABLE members", "parse_dirpath(name", "count(DISTINCT hash(key")

    class HintsFail:  # the engine's connection, failing the hints' queries
        def __init__(self, con):
            self.con = con

        def execute(self, query, *args):
            if any(hint in query for hint in hints):
                raise duckdb.OutOfMemoryException("no room")
            return self.con.execute(query, *args)

        def close(self):
            self.con.close()

    connect = connection.connect
    monkeypatch.setattr(connection, "connect", lambda *args: HintsFail(connect(*args)))
    path = tmp_path / "inventory.csv"
    write_csv(path, ["name", "size"], [["a/x.jpg", "1"], ["A/x.jpg", "2"], ["b/y.png", "3"]])
    key = key_function("full_name")
    for renamed in (False, True):
        files = csv_files(path, key=key, renamed=renamed)
        assert files.handover.clashes is None and files.handover.renamable_by is None
        assert (
            files.handover.readers is None
        ) == renamed  # reader keys: cut when the key check asks
        table = group_table(files, key)
        if not renamed:  # asked before any name is read: the engine fails to cut them
            assert key_check(table).counts == {}
            assert files.handover.readers is None  # the names told
        assert files.names == ["A/x.jpg", "a/x.jpg", "b/y.png"]
        with pytest.raises(DataError, match="differ only in case"):
            check_extraction_names([table], renamed)
        if renamed:
            sample_members(table, key)  # nothing wrong with these names: it passes


def test_a_custom_key_pattern_is_grouped_by_the_planner_not_the_engine(tmp_path):
    from ishard.planning.keys import key_function

    path = tmp_path / "inventory.csv"
    write_csv(path, ["name", "size"], [["a/x.jpg", "1"], ["a/x.cls", "2"]])
    files = csv_files(path, key=key_function(r"^(.*)\.[^.]+$"))
    assert files.handover.grouping is None and files.names == ["a/x.cls", "a/x.jpg"]


def clean_inventory(path, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    body = []
    for i in range(count):
        folder = rng.choice(["train", "val", ".cache", "x/../y", "é/ü"])
        body.append(
            [
                f"{folder}/s{rng.randrange(count)}.{rng.choice(['jpg', 'cls'])}",
                str(rng.randrange(10**6)),
                rng.choice(["1700000000", "", "2024-05-06T07:08:09Z"]),
            ]
        )
    write_csv(path, ["name", "size", "mtime"], body)


def test_a_clean_inventory_is_read_by_columns_and_matches(tmp_path):
    path = tmp_path / "inv.csv"
    clean_inventory(path, 5000)
    answer = column_listing(path)  # no Fallback: the engine takes a clean inventory
    same_listing(answer, row_listing(path))
    files, skipped = answer
    assert len(files) > 1000 and {s.reason.split()[0] for s in skipped} == {"unsafe", "hidden"}
    assert files.names == sorted(files.names, key=lambda n: n.encode())
    assert len(set(files.names)) == len(files.names)


def test_the_command_plans_the_same_from_the_engine_and_the_row_reader(tmp_path):
    """An inventory over the engine's threshold and its .gz copy (read row by row) give the
    same dry run."""
    path = tmp_path / "big.csv"
    clean_inventory(path, 250_000)
    assert path.stat().st_size >= inventory.ENGINE_FROM
    packed = tmp_path / "big.csv.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    common = ["--dry-run=summary", "--shard-size", "64MiB", "--member-names", "original"]
    by_columns = invoke_ishard("shard", source(tmp_path), "--src-list", path, *common)
    by_rows = invoke_ishard("shard", source(tmp_path), "--src-list", packed, *common)
    assert by_columns.returncode == 0, by_columns.stderr
    assert by_columns.stdout == by_rows.stdout and "would write" in by_columns.stdout
    assert by_columns.stderr.replace(str(path), "INV") == by_rows.stderr.replace(str(packed), "INV")


def source(tmp_path):
    """The folder the inventory describes (a dry run reads nothing from it)."""
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    return folder


def parquet_from_csv(csv_path, parquet_path, select: str) -> None:
    duckdb.execute(
        f"COPY (SELECT {select} FROM read_csv('{csv_path}', header = true, "
        "all_varchar = true)) TO '" + str(parquet_path) + "' (FORMAT parquet)"
    )


def test_a_parquet_inventory_lists_what_the_same_csv_lists(tmp_path):
    path = tmp_path / "inv.csv"
    clean_inventory(path, 3000)
    parquet = tmp_path / "inv.parquet"
    parquet_from_csv(
        path,
        parquet,
        "name AS key, CAST(size AS BIGINT) AS size, CASE WHEN "
        "mtime = '' THEN NULL ELSE CAST(CASE WHEN mtime LIKE '%Z' THEN mtime ELSE "
        "'1970-01-01T00:00:00Z' END AS TIMESTAMPTZ) + to_seconds(CASE WHEN mtime "
        "LIKE '%Z' OR mtime = '' THEN 0 ELSE CAST(mtime AS BIGINT) END) END "
        "AS last_modified",
    )
    assert inventory_kind(str(parquet)) == "parquet"
    same_listing(row_listing(parquet), row_listing(path))  # through list_inventory, any size
    common = ["--dry-run=summary", "--member-names", "original"]
    result = invoke_ishard("shard", source(tmp_path), "--src-list", parquet, *common)
    assert result.returncode == 0, result.stderr
    assert "would write" in result.stdout
    assert (
        result.stdout
        == invoke_ishard("shard", source(tmp_path), "--src-list", path, *common).stdout
    )


def test_a_parquet_inventory_without_a_size_is_one_line_exit_2(tmp_path):
    path = tmp_path / "inv.csv"
    clean_inventory(path, 10)
    parquet = tmp_path / "inv.parquet"
    parquet_from_csv(path, parquet, "name")
    result = invoke_ishard("shard", source(tmp_path), "--src-list", parquet, "--dry-run")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("ishard: error: --src-list") and "size" in result.stderr
    assert len(result.stderr.splitlines()) == 1


# id: (the SELECT written as the Parquet file, or its bytes; the line after "--src-list 'P' ")
BAD_PARQUET = {
    "name-struct": (
        "SELECT {'k': 'a/1.jpg'} AS name, 3 AS size",
        "row 1: the name is a dict, not a string — give each file's name as text (a string column)",
    ),
    "name-list": (
        "SELECT ['a/1.jpg'] AS key, 3 AS size",
        "row 1: the name is a list, not a string",
    ),
    "name-number": ("SELECT 7 AS name, 3 AS size", "row 1: the name is a int, not a string"),
    "name-not-utf8": (
        "SELECT * FROM (VALUES ('a/1.jpg'::BLOB, 3), ('a/\\xFF\\xFE.jpg'::BLOB, 3)) t(name, size)",
        "row 2: the name is not UTF-8 (byte 0xff at byte 3) — write names as UTF-8 text",
    ),
    "name-null": (
        "SELECT * FROM (VALUES ('a/1.jpg', 3), (NULL, 4)) t(name, size)",
        "row 2: the name is missing — give each file's name as text (a string column)",
    ),
    "name-over-128KiB": (
        f"SELECT repeat('n', {129 << 10}) AS name, 3 AS size",
        (
            "row 1: the name is longer than 128 KiB — an inventory names one file per "
            "row; check that this is one"
        ),
    ),
    "size-float": (
        "SELECT 'a/1.jpg' AS name, 2.5::DOUBLE AS size",
        (
            "row 1: the size is 2.5, not a whole number of bytes (0 or more) — give each "
            "file's size in bytes (an integer column)"
        ),
    ),
    "size-decimal": (
        "SELECT 'a/1.jpg' AS name, 2.5 AS size",
        "row 1: the size is 2.5, not a whole",
    ),
    "size-struct": (
        "SELECT 'a/1.jpg' AS name, {'b': 3} AS size",
        "row 1: the size is {'b': 3}, not a whole number of bytes",
    ),
    "size-negative": (
        "SELECT * FROM (VALUES ('a/1.jpg', 3), ('a/2.jpg', -3)) t(name, size)",
        "row 2: the size is -3, not a whole number of bytes (0 or more)",
    ),
    "size-null": (
        "SELECT * FROM (VALUES ('a/1.jpg', 3), ('a/2.jpg', NULL)) t(name, size)",
        "row 2: the size is missing, not a whole number of bytes (0 or more)",
    ),
    "size-text": (
        "SELECT 'a/1.jpg' AS name, '3x' AS size",
        "row 1: the size is '3x', not a whole number of bytes (0 or more)",
    ),
    "size-2^63": (
        (
            "SELECT * FROM (VALUES ('a/1.jpg', 3::UBIGINT), ('a/2.jpg', 9223372036854775808)) "
            "t(name, size)"
        ),
        (
            "row 2: the size is 9223372036854775808, over 9223372036854775807 (2^63-1), "
            "the most bytes a file can have — give each file's size in bytes (an integer "
            "column)"
        ),
    ),
    "size-2^63-text": (
        "SELECT 'a/1.jpg' AS name, '9223372036854775808' AS size",
        "row 1: the size is 9223372036854775808, over 9223372036854775807",
    ),
    "no-rows": (
        "SELECT 'a/1.jpg' AS name, 3 AS size LIMIT 0",
        "has no rows — give an inventory of the files to shard, one row per file",
    ),
    "damaged": (
        b"PAR1" + bytes(100),
        "is not a Parquet file or is damaged (No magic bytes found at end of file",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PARQUET))
def test_parquet_rows_that_break_the_format_are_one_line_naming_the_row(case, tmp_path):
    """Finding: a struct or list name was read as its text ("{'k': a/1.jpg}"), bytes that are
    not UTF-8 as the text 'a/\\xFF\\xFE.jpg', a NULL name dropped unsaid; a size of 2^63 was an
    'unexpected OverflowError'; a damaged, empty or over-long file a line that said none of
    this. Each is now one line naming the file, the row and what is wrong, exit 2, as the
    CSV and JSON Lines readers say it."""
    made, message = BAD_PARQUET[case]
    parquet = tmp_path / "inv.parquet"
    if isinstance(made, bytes):
        parquet.write_bytes(made)
    else:
        duckdb.execute(f"COPY ({made}) TO '{parquet}' (FORMAT parquet)")
    for prefix in ([], ["--prefix", "zz"]):  # a row no name of which is kept is refused too
        done = invoke_ishard("shard", source(tmp_path), tmp_path / "out", "--src-list", parquet,
                             "--member-names", "original", *prefix)  # fmt: skip
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr.startswith(f"ishard: error: --src-list '{parquet}' {message}"), (
            done.stderr
        )
        assert done.stderr.count("\n") == 1 and "unexpected" not in done.stderr
        assert not (tmp_path / "out").exists()


def test_a_parquet_inventory_of_utf8_bytes_and_digit_text_is_read_as_text(tmp_path):
    """A name column in bytes that are UTF-8, sizes as digits (as in CSV) or of 19 digits
    up to 2^63-1: read as the same rows written as text and integers."""
    typed = tmp_path / "typed.parquet"
    plain = tmp_path / "plain.parquet"
    rows = "(VALUES ('a/1.jpg', '003'), ('é/2.jpg', '9223372036854775807'))"
    duckdb.execute(
        f"COPY (SELECT encode(n) AS name, s AS size FROM {rows} t(n, s)) "
        f"TO '{typed}' (FORMAT parquet)"
    )
    duckdb.execute(
        f"COPY (SELECT n AS name, CAST(s AS BIGINT) AS size FROM {rows} t(n, s)) "
        f"TO '{plain}' (FORMAT parquet)"
    )
    listed = column_listing(typed)
    same_listing(listed, column_listing(plain))
    assert list(listed[0].names) == ["a/1.jpg", "é/2.jpg"]
    assert list(listed[0].sizes) == [3, (1 << 63) - 1]


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_size_past_2_63_read_by_the_engine_is_one_line_naming_the_line(
    tmp_path, monkeypatch, kind
):
    """Finding: a size of 2^63 or more was an 'unexpected OverflowError' from the engine's
    path as from the row reader's. 2^63-1 (19 digits) is read by the engine; one more is one
    line naming the line and the number, exit 2."""
    monkeypatch.setenv(inventory.PLANNER, "engine")  # the engine reads even a small file
    path = tmp_path / f"inv.{kind}"
    rows = [("a/1.jpg", "9223372036854775807"), ("a/2.jpg", "9223372036854775808")]
    if kind == "csv":
        path.write_text("name,size\n" + "".join(f"{n},{s}\n" for n, s in rows))
    else:
        path.write_text("".join(f'{{"name": "{n}", "size": {s}}}\n' for n, s in rows))
    head = path.with_name(f"head.{kind}")
    head.write_text("\n".join(path.read_text().splitlines()[:-1]) + "\n")
    files, _ = column_listing(head)  # the engine takes 2^63-1 as it is: no hand-back
    assert list(files.sizes) == [(1 << 63) - 1]
    done = invoke_ishard("shard", source(tmp_path), "--src-list", path, "--dry-run")
    line = 3 if kind == "csv" else 2
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"ishard: error: --src-list '{path}' line {line}: the size is "
        "9223372036854775808, over 9223372036854775807 (2^63-1), the most bytes "
        "a file can have — give each file's size in bytes, e.g. 123\n"
    )


@pytest.mark.parametrize("reader", ["row", "engine", "parquet"])
def test_sizes_that_add_up_past_2_63_are_one_line(tmp_path, monkeypatch, reader):
    """Finding: two sizes of 2^63-1 planned shards of a negative size (the sum wrapped). A
    listing whose sizes add up past 2^63-1 is one line saying so, exit 2, from either reader;
    one file of 2^63-1 is planned."""
    if reader == "engine":
        monkeypatch.setenv(inventory.PLANNER, "engine")
    path = tmp_path / "inv.csv"
    path.write_text("name,size\na/1.jpg,9223372036854775807\na/2.jpg,2\n")
    if reader == "parquet":
        path = tmp_path / "inv.parquet"
        parquet_from_csv(tmp_path / "inv.csv", path, "name, CAST(size AS BIGINT) AS size")
    done = invoke_ishard("shard", source(tmp_path), "--src-list", path, "--dry-run=json",
                         "--member-names", "original")  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == (
        f"ishard: error: --src-list '{path}': its files' sizes add up to "
        "9223372036854775809 bytes, over 9223372036854775807 (2^63-1), the most "
        "ishard counts — check the size column; exabytes are a mistake\n"
    )
    done = invoke_ishard("shard", source(tmp_path), "--src-list", path, "--dry-run=json",
                         "--member-names", "original", "--prefix", "a/1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["largest_shard"] == (1 << 63) - 1


def test_the_engine_spills_under_its_memory_limit(tmp_path):
    path = tmp_path / "inv.csv"
    clean_inventory(path, 20000)
    tally = Tally()
    spill = tmp_path / "spill"
    spill.mkdir()
    files, _ = read_inventory(
        str(path),
        "csv",
        wanted="",
        include_hidden=False,
        tally=tally,
        tmp_dir=str(spill),
        memory_limit=64 << 20,
    )
    same_listing((files, tally.freeze()), row_listing(path))
    assert list(spill.iterdir()) == []  # its private spill folder is gone


def test_gnu_sort_orders_the_listing_the_same(tmp_path):
    """The engine's order is bytewise: GNU sort in the C locale agrees."""
    path = tmp_path / "inv.csv"
    clean_inventory(path, 2000)
    files, _ = column_listing(path, include_hidden=True)
    sorted_by_sort = subprocess.run(
        ["sort", "-u"],
        input="\n".join(files.names).encode(),
        capture_output=True,
        env={"LC_ALL": "C"},
        check=True,
    )
    assert sorted_by_sort.stdout.decode().splitlines() == files.names


def test_what_the_engine_cannot_decode_goes_to_the_row_reader(tmp_path):
    """Not UTF-8 (in the header or a row): the engine hands back, the row reader names the
    line."""
    for body in (b"n\xffame,size\na,1\n", b"name,size\na,1\nb\xff,2\n"):
        path = tmp_path / "bad.csv"
        path.write_bytes(body)
        with pytest.raises(Fallback):
            column_listing(path)
        with pytest.raises(UsageError, match="not UTF-8"):
            row_listing(path)


def test_tmp_dir_is_where_the_engine_spills_and_is_left_empty(tmp_path, monkeypatch):
    """``--tmp-dir``: the engine's private spill folder is made inside it and removed after;
    a folder that does not exist is one line, exit 2, before anything is read."""
    import ishard.planning.engine.columns

    path = tmp_path / "inv.csv"
    clean_inventory(path, 3000)
    parquet = tmp_path / "inv.parquet"
    parquet_from_csv(path, parquet, "name, CAST(size AS BIGINT) AS size")
    made = []
    real = ishard.planning.engine.columns.tempfile.mkdtemp
    monkeypatch.setattr(ishard.planning.engine.columns.tempfile, "mkdtemp",
                        lambda **kw: made.append(kw.get("dir")) or real(**kw))  # fmt: skip
    spill = tmp_path / "spill"
    spill.mkdir()
    done = invoke_ishard("shard", source(tmp_path), "--src-list", parquet, "--dry-run=summary",
                         "--member-names", "original", "--tmp-dir", spill)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert made == [str(spill)] and list(spill.iterdir()) == []
    missing = invoke_ishard("shard", source(tmp_path), "--src-list", parquet, "--dry-run",
                            "--tmp-dir", tmp_path / "nope")  # fmt: skip
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith(f"ishard: error: --tmp-dir '{tmp_path / 'nope'}' is not a")
    assert len(missing.stderr.splitlines()) == 1


def long_names_parquet(path, count: int, row_group: int = 16_384) -> None:
    """``count`` files of ~300-byte names, an image and a label a sample, in a Parquet file."""
    duckdb.execute(
        "COPY (SELECT 'folder-' || (i // 2 % 97) || '/' || repeat('abcdefghi/', 28) || 's-' || "
        "(i // 2) || CASE WHEN i % 2 = 0 THEN '.jpg' ELSE '.cls' END AS name, "
        f"i % 100000 AS size FROM range({count}) t(i)) TO '{path}' "
        f"(FORMAT parquet, ROW_GROUP_SIZE {row_group})"
    )


def test_memory_limit_bounds_the_engine_and_the_summary_tells_the_spill(tmp_path):
    """``--memory-limit``: under 128MiB, sorting 400,000 names of ~300 bytes (the listing and
    its sorted copy are about twice the limit) succeeds by spilling to ``--tmp-dir``; the
    summary says it spilled, the spill folder is empty afterwards, and the plan is the one a
    roomy limit makes. (How many bytes DuckDB spills is its own affair and varies by machine:
    only that it spilled is checked.)"""
    parquet = tmp_path / "inv.parquet"
    long_names_parquet(parquet, 400_000)
    spill = tmp_path / "spill"
    spill.mkdir()
    common = ["--dry-run=summary", "--shard-size", "64MiB", "--tmp-dir", spill]

    def planned_under(limit: str) -> tuple[int, str]:
        done = invoke_ishard("shard", source(tmp_path), "--src-list", parquet, *common,
                             "--memory-limit", limit)  # fmt: skip
        assert done.returncode == 0, done.stderr
        told = [line for line in done.stdout.splitlines() if line.startswith("planning spilled")]
        assert len(told) <= 1 and all("--tmp-dir" in line for line in told), done.stdout
        size = parse_size(told[0].split("up to ")[1].split()[0], option="x") if told else 0
        assert list(spill.iterdir()) == []  # the engine's temporary files are gone
        return size, done.stdout.replace(told[0] + "\n", "") if told else done.stdout

    tight, plan = planned_under("128MiB")
    _, same_plan = planned_under("1GiB")
    assert tight > 0  # past the limit: it spilled, and said so
    assert plan == same_plan and ": 200000 samples, 400000 files" in plan
    planned = ishard.plan(source(tmp_path), src_list=str(parquet), shard_size="64MiB",
                          memory_limit=128 << 20, tmp_dir=spill)  # fmt: skip
    assert planned.spilled > 0 and plan_summary(planned)["spilled"] == planned.spilled
    del planned  # the plan keeps its names in the engine until it goes (the docstring's word)
    gc.collect()
    assert list(spill.iterdir()) == []


def test_an_engine_out_of_memory_is_one_line_naming_the_limit(tmp_path):
    """A Parquet file of one 1,000,000-row group needs one 128 MiB buffer: under
    ``--memory-limit 128MiB`` that is an error naming the option (exit 1), not a fall back to
    the row reader (which would take far more); 512MiB reads it."""
    parquet = tmp_path / "one-group.parquet"
    duckdb.execute(
        "COPY (SELECT md5(i::VARCHAR) || md5((i + 1)::VARCHAR) || '/' || i || '.jpg' AS name, "
        f"i AS size FROM range(1000000) t(i)) TO '{parquet}' (FORMAT parquet, "
        "ROW_GROUP_SIZE 2000000)"
    )
    common = ["--dry-run=summary", "--member-names", "original"]
    tight = invoke_ishard("shard", source(tmp_path), "--src-list", parquet, *common,
                          "--memory-limit", "128MiB")  # fmt: skip
    assert tight.returncode == 1 and tight.stdout == ""
    assert tight.stderr == (
        f"ishard: error: --src-list {str(parquet)!r} needs more memory than the column engine's "
        "128MiB (--memory-limit) to be read — give it more, e.g. --memory-limit 1GiB\n"
    )
    files, _ = read_inventory(str(parquet), "parquet", wanted="", include_hidden=False,
                              tally=Tally(), memory_limit=512 << 20)  # fmt: skip
    assert len(files) == 1_000_000


def test_a_spill_folder_out_of_room_is_one_line_naming_tmp_dir(tmp_path, monkeypatch):
    """When the disk under --tmp-dir has no room left for the engine's spill (here DuckDB's own
    bound on it, which is that disk's free space, set to 1 MiB), the run stops with one line
    naming --tmp-dir — not a fall back to the row reader."""
    from ishard.planning.engine import connection

    parquet = tmp_path / "inv.parquet"
    long_names_parquet(parquet, 400_000)
    real = connection.connect

    def cramped(spill, memory_limit):
        con = real(spill, memory_limit)
        con.execute("SET max_temp_directory_size = '1MiB'")
        return con

    monkeypatch.setattr(connection, "connect", cramped)
    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(DataError) as error:
        ishard.plan(source(tmp_path), src_list=str(parquet), memory_limit="128MiB",
                    tmp_dir=str(spill))  # fmt: skip
    assert str(error.value) == (
        f"--src-list {str(parquet)!r} needs more room for the column engine's temporary files "
        f"than the disk of {str(spill)!r} has left — give --tmp-dir a folder on a disk with "
        "more room"
    )
    assert list(spill.iterdir()) == []


@pytest.mark.parametrize(("given", "says"), [
    ("100MiB", ("--memory-limit '100MiB' is below 128MiB, the least the column engine reads an "
               "inventory in — give more, e.g. 512MiB")),
    ("lots", "--memory-limit 'lots' is not a size"),
])  # fmt: skip
def test_a_bad_memory_limit_is_one_line_exit_2(tmp_path, given, says):
    path = tmp_path / "inv.csv"
    clean_inventory(path, 10)
    result = invoke_ishard("shard", source(tmp_path), "--src-list", path, "--dry-run",
                           "--memory-limit", given)  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"ishard: error: {says}")
    assert len(result.stderr.splitlines()) == 1
    with pytest.raises(UsageError, match="memory_limit="):
        ishard.plan(source(tmp_path), src_list=str(path), memory_limit=given)


JSON_ODD = [None, True, 1.5, -3, "", " 7", "12", {}, [1], float("nan"), 10**20]


@st.composite
def json_lines(draw) -> str:
    """A JSON Lines inventory as text: mostly what an inventory holds, one key of each kind in
    the row reader's lists, sizes as numbers or digit strings; sometimes a line the row reader
    refuses or reads in its own way (a key twice, a JSON null before another key of its kind,
    a value of another type, no object at all, blank lines)."""
    from ishard.planning.rowrules import MTIME_COLUMNS, NAME_COLUMNS, SIZE_COLUMNS

    name_key = draw(st.sampled_from(["name"] * 4 + list(NAME_COLUMNS)))
    size_key = draw(st.sampled_from(["size"] * 4 + list(SIZE_COLUMNS)))
    mtime_key = draw(st.sampled_from(["mtime", None, *MTIME_COLUMNS]))
    ascii_only = draw(st.booleans())
    mixed_times = draw(st.integers(0, 5)) == 0
    odd_time = draw(
        st.sampled_from([None] * 16 + [True, False, None, 1.5e9, {}, [1], float("inf"), 10**20, -7])
    )  # another type
    lines = []
    for name, size, mtime in draw(rows):
        pairs: list[tuple[str, object]] = [(name_key, name)]
        pairs.append((size_key, int(size) if draw(st.integers(0, 3)) else size))
        if mixed_times:  # mtimes under another key on some lines
            mtime_key = draw(st.sampled_from(MTIME_COLUMNS))
        if mtime_key is not None:
            pairs.append(
                (mtime_key, int(mtime) if mtime.isdigit() and draw(st.booleans()) else mtime)
            )
        if odd_time is not None and mtime_key is not None and draw(st.booleans()):
            pairs[0] = (name_key, f"a/odd{len(lines)}.jpg")  # listed, whatever the options
            pairs[2] = (mtime_key, odd_time)
        odd = draw(st.integers(0, 100))
        if odd == 1:
            pairs.insert(0, (draw(st.sampled_from(NAME_COLUMNS)), None))
        elif odd == 2:
            pairs.append(
                (
                    draw(st.sampled_from(NAME_COLUMNS + SIZE_COLUMNS + MTIME_COLUMNS)),
                    draw(st.sampled_from(JSON_ODD + ["b/other.jpg", 5])),
                )
            )
        elif odd == 3:
            at = draw(st.integers(0, len(pairs) - 1))
            pairs[at] = (pairs[at][0], draw(st.sampled_from(JSON_ODD)))
        elif odd == 4:
            pairs.append(pairs[0])  # a key twice
        line = (
            "{"
            + ", ".join(
                f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=ascii_only)}" for k, v in pairs
            )
            + "}"
        )
        if odd == 5:
            line = draw(st.sampled_from(["", "   ", "[1]", "5", line + " x", line[:-1]]))
        lines.append(line)
    end = draw(st.sampled_from(["\n", "\r\n"]))  # CRLF ends too (a Windows editor's)
    return end.join(lines) + draw(st.sampled_from([end, "", end + end]))


def test_json_lines_read_by_the_engine_list_what_the_row_reader_lists(tmp_path):
    """Random JSON Lines inventories: the engine lists what the row reader lists (and skips
    what it skips), or hands the file back; where the row reader refuses one, the engine
    never answers. Most examples are read by the engine, not handed back."""
    seen: Counter[str] = Counter()

    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(text=json_lines(), prefix=st.sampled_from(["", "", "a", "a/"]), hidden=st.booleans())
    def engine_lists_alike(text, prefix, hidden):
        path = tmp_path / "inventory.jsonl"
        path.write_text(text, encoding="utf-8")
        if inventory_kind(str(path)) != "jsonl":  # blank first lines only: nothing to list
            seen["not json"] += 1
            return
        try:
            rows_answer = row_listing(path, prefix=prefix, include_hidden=hidden)
        except UsageError:
            with pytest.raises((Fallback, UsageError)):
                column_listing(path, prefix, hidden)
            seen["both refuse"] += 1
            return
        try:
            columns_answer = column_listing(path, prefix, hidden)
        except Fallback:
            seen["handed back"] += 1
            return
        same_listing(columns_answer, rows_answer)
        seen["same" if len(columns_answer[0]) else "same, empty"] += 1

    engine_lists_alike()
    assert seen["same"] > seen["handed back"] and seen["same"] > 25, seen
    assert seen["both refuse"] > 5, seen


@pytest.mark.parametrize("planner", ["engine", "rows"])
def test_an_mtime_past_64_bits_is_read_as_no_time(tmp_path, monkeypatch, planner):
    """An inventory mtime no 64-bit number holds (10**20 s) is no time (0), as an unreadable
    one is — not a crash — in CSV and in JSON Lines, through the engine and the row reader;
    one of 18 digits is kept as the row reader reads it (through a float)."""
    monkeypatch.setenv(inventory.PLANNER, planner)
    csv_path = tmp_path / "inv.csv"
    write_csv(csv_path, ["name", "size", "mtime"],
              [["a/x.jpg", "1", "100000000000000000000"], ["a/y.jpg", "2", "123456789012345678"],
               ["a/z.jpg", "3", "1700000000"]])  # fmt: skip
    jsonl_path = tmp_path / "inv.jsonl"
    jsonl_path.write_text("".join(json.dumps({"name": n, "size": s, "mtime": m}) + "\n" for n, s, m in
                                  [("a/x.jpg", 1, 10**20), ("a/y.jpg", 2, 123456789012345678),
                                   ("a/z.jpg", 3, "1700000000")]))  # fmt: skip
    for path in (csv_path, jsonl_path):
        files = inventory.list_inventory(str(path))
        assert list(files.mtimes) == [0, 123456789012345680, 1700000000]
        done = invoke_ishard("shard", source(tmp_path), "--src-list", path,
                             "--dry-run=summary", "--member-names", "original")  # fmt: skip
        assert done.returncode == 0 and "3 files" in done.stdout, done.stderr


def test_a_plan_reads_the_names_from_the_engine_only_when_a_shard_is_read(tmp_path, monkeypatch):
    """Over an inventory the engine read, planning (a dry run's summary) never fetches the
    listing's names, its mtimes or the samples' keys: they wait in the engine, its spill
    folder kept; reading a shard's files fetches them all (the same as the row reader's
    listing) and closes the engine, its folder gone; a plan dropped unread closes it too."""
    import gc

    from ishard.planning.engine import connection

    path = tmp_path / "inv.csv"
    rng = random.Random(5)
    body = [[f"{folder}/s{i}.{ext}", str(rng.randrange(10**5)), str(1700000000 + i)]
            for i in rng.sample(range(10**6), 1500) for folder, ext in (("img", "jpg"), ("cls", "cls"))]  # fmt: skip
    write_csv(path, ["name", "size", "mtime"], body)
    monkeypatch.setenv(inventory.PLANNER, "engine")
    fetched = []
    real, real_ints = connection.fetched, connection.int_fetched
    monkeypatch.setattr(
        connection,
        "fetched",
        lambda con, column, table, start: (
            (fetched.append((column, start))) or real(con, column, table, start)
        ),
    )
    monkeypatch.setattr(
        connection,
        "int_fetched",
        lambda con, column, folder, table="files", bounds=None: (
            (fetched.append((column, 0))) or real_ints(con, column, folder, table, bounds)
        ),
    )
    spill = tmp_path / "spill"
    spill.mkdir()
    common = {"src_list": str(path), "tmp_dir": str(spill), "shard_size": "10MiB"}
    planned = ishard.plan(source(tmp_path), **common)  # keys without '/': no tree to build
    assert fetched == [("size", 0)] and len(list(spill.iterdir())) == 1
    listed = row_listing(path)[0]
    assert planned.file_count == len(listed.names) and len(planned.shards) > 3
    members = [f for shard in planned.shards for f in shard.members()]
    assert sorted(fetched) == [("key", 0), ("mtime", 0), ("name", 0), ("size", 0)]
    assert list(spill.iterdir()) == []
    # the names and keys wait in nameless files on the --tmp-dir disk, read a shard at a
    # time, each with where its names start in another (4); so do the int columns: the
    # files' sizes and mtimes, the samples' starts, files (apart here) and bytes (5)
    assert open_files_in(spill) == ["(deleted)"] * 9
    assert sorted((f.name, f.mtime) for f in members) == list(zip(listed.names, listed.mtimes))
    unread = ishard.plan(source(tmp_path), **common)
    assert len(list(spill.iterdir())) == 1
    del unread, planned
    gc.collect()
    assert list(spill.iterdir()) == [] and open_files_in(spill) == []


def test_names_duckdbs_own_hash_gives_one_value_are_not_clash_suspects(tmp_path):
    """Two ImageNet-like names to which DuckDB's string hash gives the same value (found among
    100 million such names: 400 pairs): the engine's hashes tell them apart, so neither is a
    clash suspect — a dry run over 100 million names then never fetches them all to look."""
    from ishard.planning.keys import key_function

    pair = [
        "train/n00015740/n00015740_20462824.JPEG",
        "train/n00015760/n00015760_20489124.JPEG",
    ]
    plain = duckdb.sql(f"SELECT count(DISTINCT hash(lower(n))) FROM (VALUES ('{pair[0]}'), "
                       f"('{pair[1]}')) t(n)").fetchall()  # fmt: skip
    assert plain == [(1,)]  # the hash the engine does not use alone
    path = tmp_path / "inventory.csv"
    write_csv(path, ["name", "size"], [[pair[0], "1"], ["a/0.jpg", "2"], [pair[1], "3"]])
    for renamed in (False, True):
        files = csv_files(path, key=key_function("full_name"), renamed=renamed)
        assert files.handover.clashes is not None and list(files.handover.clashes.files) == []


def test_a_tmp_dir_with_no_room_for_the_names_is_one_line_naming_it(tmp_path, monkeypatch):
    """A run reads the names the engine kept into a file in --tmp-dir; when its disk is full,
    the run stops with one line naming --tmp-dir, before any shard is written."""
    import errno
    import tempfile

    nameless = tempfile.TemporaryFile

    path = tmp_path / "inv.csv"
    clean_inventory(path, 50)
    monkeypatch.setenv(inventory.PLANNER, "engine")

    class Full:
        def __init__(self, *args, **kwargs) -> None:
            self.file = nameless(*args, **kwargs)

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.file, name)

    monkeypatch.setattr(namecolumn.tempfile, "TemporaryFile", Full)
    spill = tmp_path / "spill"
    spill.mkdir()
    result = invoke_ishard("shard", source(tmp_path), tmp_path / "out", "--src-list", path,
                           "--tmp-dir", spill, "--shard-size", "1KiB")  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        f"ishard: error: the listing could not be written to a temporary file in "
        f"{str(spill)!r} (No space left on device) — give --tmp-dir a folder on a disk with "
        "room for it (about a byte a character of the names, and 30 a file)\n"
    )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("*.tar"))
    assert list(spill.iterdir()) == []


@pytest.mark.parametrize("apart", [False, True])
def test_a_dry_runs_key_check_reads_only_what_it_needs_from_the_engine(
    tmp_path, monkeypatch, apart
):
    """``--member-names original`` over an inventory the engine read, some samples holding a
    file that readers key apart (a second dot in its basename): the plan warns with the same
    counts and example keys as over the row reader's listing, and fetches from the engine only
    those keys — not the listing's names, the samples' keys or the mtimes — and the files'
    reader keys a span at a time where each sample's files are in a row; where they are apart
    (an image and its label in two trees) nothing at all: the engine did the check as it
    sorted the files by sample key."""
    from ishard.planning import naming
    from ishard.planning.engine import connection

    path = tmp_path / "inv.csv"
    rng = random.Random(7)
    numbers = rng.sample(range(10**6), 3000)
    exts = {i: ("jpg", "seg.png") if i % 7 == 0 else ("jpg", "cls") for i in numbers}
    body = [[f"{e if apart else 'd'}/s{i:06}.{e}", str(rng.randrange(10**5)), "1700000000"]
            for i in numbers for e in exts[i]]  # fmt: skip
    write_csv(path, ["name", "size", "mtime"], body)
    common = {
        "tmp_dir": str(tmp_path),
        "shard_size": "10MiB",
        "member_names": "original",
        "sample_key_pattern": "base_file_name",
    }
    gz = tmp_path / "inv.csv.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    by_rows = ishard.plan(source(tmp_path), src_list=str(gz), **common)  # gzip: the row reader
    monkeypatch.setenv(inventory.PLANNER, "engine")
    monkeypatch.setattr(naming, "CHUNK", 256)  # samples key-checked at a time
    monkeypatch.setattr(handover, "SPAN_LEAST", 1024)  # reader keys cut over a short span only
    asked = []
    for name in ("fetched", "int_fetched"):
        real = getattr(connection, name)
        monkeypatch.setattr(
            connection,
            name,
            lambda *a, real=real, name=name, **k: (asked.append(name)) or real(*a, **k),
        )
    for name in ("picked", "_reader_span", "_readers_fetched"):
        real = getattr(connection.Waiting, name)
        monkeypatch.setattr(
            connection.Waiting,
            name,
            lambda self, *a, real=real, name=name: (asked.append(name)) or real(self, *a),
        )
    planned = ishard.plan(source(tmp_path), src_list=str(path), **common)
    dotted = f"{sum(i % 7 == 0 for i in numbers)} samples with a dot"
    assert any(w.startswith(dotted) for w in planned.warnings)
    assert planned.warnings == by_rows.warnings
    keys = {name.rsplit("/", 1)[1].rsplit(".", 1)[0] for name, *_ in body}  # base_file_name
    if apart:  # the engine found the counts and examples as it sorted the files by key
        reads = {}
    else:
        reads = {"_reader_span": -(-len(keys) // 256), "picked": 1}
    assert Counter(asked) == {"int_fetched": 1, **reads}  # the sizes, the reader keys, examples


def test_the_planner_is_chosen_in_one_place_by_name(tmp_path, monkeypatch, caplog):
    """``inventory.choose_planner`` names the planner and why: the row reader for a small CSV
    file, the engine for Parquet whatever ``$ISHARD_PLANNER`` says, the one it names otherwise;
    a name it does not know is one line; the choice is logged (``ishard -v``), and a hand-back
    from the engine logged as the row reader's."""
    import logging

    path = tmp_path / "inv.csv"
    write_csv(path, ["name", "size"], [["a/x.jpg", "1"]])
    parquet = tmp_path / "inv.parquet"
    parquet_from_csv(path, parquet, "name, CAST(size AS BIGINT) AS size")
    assert inventory.choose_planner(str(path), "")[::2] == ("rows", None)
    planner, _, found = inventory.choose_planner(str(parquet), "")
    assert (planner, found.kind, found.files) == ("engine", "parquet", (str(parquet),))
    monkeypatch.setenv(inventory.PLANNER, "engine")
    planner, _, found = inventory.choose_planner(str(path), "")
    assert (planner, found.kind, found.compression) == ("engine", "csv", "none")
    assert inventory.choose_planner(str(path), None)[0] == "rows"  # no name has the prefix
    monkeypatch.setenv(inventory.PLANNER, "rows")
    assert inventory.choose_planner(str(path), "") == ("rows", "ISHARD_PLANNER=rows", None)
    assert inventory.choose_planner(str(parquet), "")[0] == "engine"
    monkeypatch.setenv(inventory.PLANNER, "duckdb")
    with pytest.raises(UsageError, match="ISHARD_PLANNER='duckdb' names no planner"):
        inventory.choose_planner(str(path), "")
    monkeypatch.setenv(inventory.PLANNER, "engine")
    path.write_text("name,size\na/x.jpg,1\rb/y.jpg,2\n")  # a lone carriage return: handed back
    with caplog.at_level(logging.INFO, logger="ishard"):
        inventory.list_inventory(str(parquet))
        inventory.list_inventory(str(path))
    told = [r.getMessage() for r in caplog.records if r.getMessage().startswith("planner: ")]
    assert told == [
        "planner: engine (a Parquet file, which only the column engine reads)",
        "planner: rows (the column engine handed it back: it does not take it as it is)",
    ]
