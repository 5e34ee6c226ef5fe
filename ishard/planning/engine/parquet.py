"""Parquet inventories (``--src-list x.parquet``), which only the column engine reads: the
columns that hold each file's name, size and mtime, checked and selected as text; and one
line naming the row the engine will not take, as the row reader names a line of CSV or JSON
Lines (a name that is no text, not UTF-8, missing or over 128 KiB; a size that is no whole
number of bytes, missing or over 2^63-1)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import NamedTuple

from ...errors import UsageError
from ...rules import Rule
from ..rowrules import (
    SIZE_DIGITS,
    Written,
    bad_row,
    checked_name,
    checked_size,
    found_columns,
    identity_column,
    since_1970,
    whole_seconds,
)
from .connection import Fallback, Source, identity_sql, sql_text

NAME_HINT = "give each file's name as text (a string column)"
SIZE_HINT = "give each file's size in bytes (an integer column)"
# a size column's types: integers, or text of digits (as a CSV inventory's); 2.5 is no size
_WHOLE = re.compile(r"U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT)|DECIMAL\(\d+,0\)|VARCHAR")


# A Parquet inventory's timestamp as whole seconds, toward zero (no row reader reads Parquet:
# the Python form is the rule's statement, which the differential test holds the SQL to)
PARQUET_TIME = Rule(
    "a Parquet timestamp",
    lambda when: whole_seconds(since_1970(when), 10**6),
    "CAST(trunc(epoch({time})) AS BIGINT)",
)


class Columns(NamedTuple):
    """The inventory's columns of each kind (its mtime may be missing) and all their types."""

    name: str
    size: str
    mtime: str | None
    types: dict[str, str]


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def damaged(path: str, error: BaseException) -> UsageError:
    """What DuckDB said of a file that is no Parquet, or a damaged one, in one line."""
    said = re.sub(r"^[\w ]*Error: ", "", str(error).strip().splitlines()[0] if str(error) else "")
    return UsageError(
        f"--src-list {path!r} is not a Parquet file or is damaged ({said or type(error).__name__})"
        " — give the inventory as it was written, or write it again"
    )


def columns(con, path: str) -> Columns:
    """The name, size and mtime columns of ``path``, whose name and size must be there.

    Raises:
        UsageError: not a Parquet file, no name or size column, or no rows.
    """
    import duckdb

    try:
        described = con.execute(f"DESCRIBE SELECT * FROM read_parquet({sql_text(path)})")
        types = {row[0]: str(row[1]) for row in described.fetchall()}
        rows = con.execute(f"SELECT count(*) FROM read_parquet({sql_text(path)})").fetchone()[0]
    except duckdb.Error as error:
        raise damaged(path, error) from None

    name, size, mtime = found_columns(types)
    if name is None or size is None:
        raise UsageError(
            f"--src-list {path!r} has no name (or key) and size columns — "
            f"its columns are {', '.join(types) or 'none'}"
        )
    if not rows:
        raise UsageError(
            f"--src-list {path!r} has no rows — give an inventory of the files to shard, "
            "one row per file"
        )
    return Columns(name, size, mtime, types)


def source(con, path: str) -> Source:
    """The SELECT of name, size, mtime and checksum, as text; a size NULL where it is no whole
    number (``refusal`` then names the row); a checksum column of text or whole numbers.

    Raises:
        UsageError: ``columns``' reasons; a name column that holds no text, or a size column
            no whole numbers (naming its first row); a missing name, or one in bytes that
            are not UTF-8 (naming the first such row).
    """
    found = columns(con, path)
    name, size, mtime = (c and _quoted(c) for c in found[:3])
    if found.types[found.name] not in ("VARCHAR", "BLOB"):  # a struct, a list, a number
        raise _row_refused(con, path, found, f"{name} IS NOT NULL")
    if not _WHOLE.fullmatch(found.types[found.size]):  # a float, a struct, a list
        raise _row_refused(con, path, found, f"{size} IS NOT NULL")
    if _has_nulls(con, path, found.name):  # each row group's statistics say: mostly no scan
        _refuse_first(con, path, found, f"{name} IS NULL")
    if found.types[found.name] == "BLOB":  # text only if it is UTF-8: no \xFF escapes
        _refuse_first(con, path, found, f"try(decode({name})) IS NULL")
        name = f"decode({name})"
    if found.types[found.size] == "VARCHAR":  # digits, as a CSV inventory's, written plainly
        text = _quoted(found.size)
        size = f"CASE WHEN {SIZE_DIGITS.answered(size=text)} THEN {SIZE_DIGITS.over(size=text)} END"
    if mtime is None:
        when = "NULL"
    elif found.types[found.mtime or ""].startswith("TIMESTAMP"):
        when = f"CAST({PARQUET_TIME.over(time=mtime)} AS VARCHAR)"
    else:
        when = f"CAST({mtime} AS VARCHAR)"
    column = identity_column(found.types)
    kind = found.types.get(column or "", "")
    if kind != "VARCHAR" and not _WHOLE.fullmatch(kind):  # a checksum of no other type
        column = None
    ident = identity_sql(column, column and f"CAST({_quoted(column)} AS VARCHAR)")
    return Source(
        f"SELECT {name} AS name, CAST({size} AS VARCHAR) AS size, {when} AS mtime, "
        f"{ident} AS ident FROM read_parquet({sql_text(path)})",
        column,
    )


def refusal(con, path: str, error: BaseException, bad_row: str) -> UsageError:
    """One line for what the engine would not take: the first row of ``raw`` (the listing as
    read, in file order) that ``bad_row`` (SQL) finds, checked as the row reader checks a row;
    or what DuckDB said (``error``), which is of the file itself."""
    import duckdb

    if not isinstance(error, Fallback):
        return damaged(path, error)
    try:
        first = con.execute(f"SELECT min(rowid) FROM raw WHERE {bad_row}").fetchone()[0]
        if first is not None:
            return _row_refused(con, path, columns(con, path), f"file_row_number = {first}")
    except duckdb.Error as failed:
        return damaged(path, failed)
    return UsageError(  # no bad row: the engine's bound on mtimes it converts one by one
        f"--src-list {path!r} has too many distinct mtimes that are neither timestamps nor "
        "whole seconds — write them as timestamps, or as whole seconds since 1970"
    )


def _has_nulls(con, path: str, column: str) -> bool:
    """Whether ``column`` may hold a NULL: a row group's statistics count one, or have none."""
    return con.execute(
        "SELECT coalesce(bool_or(stats_null_count IS NULL OR stats_null_count > 0), false) "
        f"FROM parquet_metadata({sql_text(path)}) WHERE path_in_schema = ?",
        [column],
    ).fetchone()[0]


def _first(con, path: str, found: Columns, where: str) -> tuple | None:
    """(row index, name, size) of the first row ``where`` (SQL over the file's columns and
    ``file_row_number``) picks, or None."""
    name, size = _quoted(found.name), _quoted(found.size)
    return con.execute(
        f"SELECT file_row_number, {name}, {size} FROM read_parquet({sql_text(path)}, "
        f"file_row_number = true) WHERE {where} ORDER BY file_row_number LIMIT 1"
    ).fetchone()


def _refuse_first(con, path: str, found: Columns, where: str) -> None:
    """Refuse the first row ``where`` picks (``_first``), if any."""
    if _first(con, path, found, where) is not None:
        raise _row_refused(con, path, found, where)


def _row_refused(con, path: str, found: Columns, where: str) -> UsageError:
    """The first row ``where`` picks (``_first``) — row 1 if none does — checked by the row
    reader's rules, naming its number."""
    picked = _first(con, path, found, where) or _first(con, path, found, "true")
    number, value, given = picked or (0, None, None)  # (no rows: refused before)
    try:
        _check(value, given, path, number + 1)
    except UsageError as refused:
        return refused
    return UsageError(f"--src-list {path!r} row {number + 1} cannot be read as a listing")


def _check(name, size, where: str, number: int) -> None:
    """A row's name and size as the row reader checks them (a name in bytes must be UTF-8)."""
    if isinstance(name, bytes):
        try:
            name = name.decode("utf-8")
        except UnicodeDecodeError as err:
            raise bad_row(
                where,
                number,
                f"the name is not UTF-8 (byte {name[err.start]:#04x} at byte {err.start + 1}) "
                "— write names as UTF-8 text",
                "row",
            ) from None
    checked_name(name, where, number, "row", NAME_HINT)
    if isinstance(size, Decimal):  # DECIMAL(p, 0) is whole; 2.5 is shown as written
        size = int(size) if size == size.to_integral_value() else Written(str(size))
    checked_size(size, where, number, "row", SIZE_HINT)
