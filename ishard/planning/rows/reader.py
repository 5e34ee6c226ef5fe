"""The row reader of CSV with a header and JSON Lines (and, through ``s3inventory``, of AWS S3
Inventory reports; through ``names``, of lists of names alone): an inventory read a line at a
time, each row checked by the rules of ``rowrules`` and filtered like a store's listing."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any

import orjson

from ...errors import UsageError
from ...model import Tally
from ...names import UNDER_PREFIX, keep_remote_name
from ..rowrules import (
    BOM,
    IDENTITY,
    MAX_SIZE,
    MTIME_COLUMNS,
    NAME_COLUMNS,
    NAME_FITS,
    SIZE_COLUMNS,
    SIZE_TEXT,
    InventoryRead,
    Row,
    Written,
    bad_row,
    checked_name,
    checked_size,
    columns_at,
    identity_column,
    mtime_seconds,
    open_inventory,
    read_manifest,
)
from ..table import FileTable, Identities
from .lines import csv_error, csv_reader, line_blocks, read_head
from .names import Sizes, name_rows, names_only, sized


def read_rows(read: InventoryRead, sizes: Sizes | None = None) -> FileTable:
    """The files the inventory ``read.where`` names under the prefix ``read.wanted``, in its
    order, kept by the object-store name rules (what is left out counted in ``read.tally``);
    ``read.on_file(size)`` called per file kept. A list of names alone (``names.names_only``)
    takes each kept name's size and mtime from ``sizes``.

    Raises:
        UsageError: a list of names alone, and no ``sizes`` to ask.
    """
    where, opener = read.where, read.opener
    head = read_head(where, opener, 1 << 16).decode("utf-8", "replace")
    stripped = head.removeprefix(BOM).lstrip()
    listed = names_only(head, where)
    if listed and sizes is None:
        raise UsageError(
            f"--src-list {where!r} lists names alone, and nothing here reads their sizes "
            "from a source — give a name and a size a line (CSV 'name,size')"
        )
    stream = None
    column: list[str] = []  # the checksum or ETag column, told by the rows' reader
    if stripped.startswith("{") and '"fileSchema"' in head:
        from .s3inventory import report_rows

        with open_inventory(where, opener, "rt") as text:
            rows = report_rows(read_manifest(text, where), where, opener, column)
    else:
        stream = open_inventory(
            where, opener
        )  # read again, line by line: a big inventory is never held whole
        if listed:
            rows = name_rows(_lines(stream, where), where)
        elif stripped.startswith("{"):
            rows = _rows_jsonl(stream, where, column)
        else:
            rows = _rows_csv(stream, where, column)
    kept: Iterator[tuple[Any, ...]] = _kept(rows, read.wanted, read.include_hidden, read.tally)
    if listed:
        assert sizes is not None  # refused above
        kept = sized(kept, sizes)  # only names the listing keeps are asked of the source
    entries = FileTable()
    identities: list[str | None] = []
    try:
        for row in kept:  # name, size, mtime, and a checksum (or a stamp, from a source)
            if listed:
                entries.add(*row)
            else:
                entries.add(row[0], row[1], row[2])
                identities.append(row[3])
            if read.on_file is not None:
                read.on_file(row[1])
    finally:
        if stream is not None:
            stream.close()
    if column:
        entries.identities = Identities(column[0], identities)
    return entries


def _kept(
    rows: Iterator[Row], wanted: str | None, include_hidden: bool, tally: Tally
) -> Iterator[Row]:
    """The rows whose names are under the prefix ``wanted`` (None: none can be) and kept by
    the object-store name rules (what is left out counted in ``tally``)."""
    for row in rows:
        name = row[0]
        if wanted is None or not UNDER_PREFIX.python(name, wanted):
            continue
        if keep_remote_name(name, include_hidden, tally):
            yield row


def _lines(stream, where: str) -> Iterator[tuple[int, str]]:
    """Numbered lines (see ``line_blocks``)."""
    for first, lines in line_blocks(stream, where):
        yield from enumerate(lines, first)


def _pick(row: dict, names: tuple[str, ...]):
    for n in names:
        if n in row:
            return row[n]
    return None


def _row_json(line: str, where: str, number: int) -> object:
    try:
        return json.loads(line)
    except ValueError as err:
        raise UsageError(
            f"--src-list {where!r} line {number} is not a JSON object with name and size "
            f'({err}) — write {{"name": "a/b.jpg", "size": 123}}'
        ) from None


def _rows_jsonl(stream, where: str, column: list[str]) -> Iterator[Row]:
    """Each line's row; the first checksum or ETag key a line has is put in ``column``."""
    for number, line in _lines(stream, where):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except ValueError:
            row = _row_json(line, where, number)  # json takes what orjson refuses (a lone
            # surrogate, which checked_name then names), and says what is wrong with the rest
        if not isinstance(row, dict):
            raise bad_row(
                where,
                number,
                f"a JSON {type(row).__name__}, not an object — write "
                '{"name": "a/b.jpg", "size": 123}',
            )
        name, size = _pick(row, NAME_COLUMNS), _pick(row, SIZE_COLUMNS)
        if type(name) is not str or not name.isascii() or not NAME_FITS.python(name):
            name = checked_name(name, where, number)
        if type(size) is float:  # a whole number past 64 bits too: shown as written
            size = _pick(json.loads(line, parse_float=Written), SIZE_COLUMNS)
        if type(size) is not int or not 0 <= size <= MAX_SIZE:  # not a bool, a string
            size = checked_size(size, where, number)
        if not column and (found := identity_column(row)) is not None:
            column.append(found)
        ident = IDENTITY.python(row.get(column[0])) if column else None
        yield name, size, mtime_seconds(_pick(row, MTIME_COLUMNS)), ident


def _rows_csv(stream, where: str, column: list[str]) -> Iterator[Row]:
    """Each line's row; the header's checksum or ETag column is put in ``column``."""
    reader = csv_reader(stream, where)
    try:
        fields: list[str] = next(reader, [])
        name_at, size_at, mtime_at = columns_at(fields)
        found = identity_column(fields)
        ident_at = None if found is None else fields.index(found)
        column += [found] if found is not None else []
        if name_at is None or size_at is None:
            raise UsageError(
                f"--src-list {where!r} has no header with a name (or key) and a size column — "
                "add a first line such as 'name,size' (a list of names alone, a name a line, "
                "is read from a file not named .csv)"
            )
        need = max(name_at, size_at)
        for row in reader:
            if not row:
                continue
            if len(row) <= need:
                raise UsageError(
                    f"--src-list {where!r} line {reader.line_num}: expected a name "
                    "and a whole-number size"
                )
            name = row[name_at]  # at most 128 KiB: csv's field limit
            if not name.isascii():
                name = checked_name(name, where, reader.line_num)
            size = SIZE_TEXT.python(row[size_at])
            if size is None:
                size = checked_size(row[size_at], where, reader.line_num)  # says why not
            yield (
                name,
                size,
                0 if mtime_at is None or len(row) <= mtime_at else mtime_seconds(row[mtime_at]),
                None
                if ident_at is None or len(row) <= ident_at
                else IDENTITY.python(row[ident_at]),
            )
    except csv.Error as err:
        raise csv_error(err, reader, where) from None
