"""Listings from inventory files (``--src-list``): CSV with a header, JSON Lines, S3 Inventory."""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson

from ..errors import IshardError, UsageError
from ..model import Tally
from ..names import combined_prefix, keep_remote_name
from ..store.urls import redacted
from .keys import KeyFunction
from .table import FileTable

NAME_COLUMNS = ("name", "key", "Key", "path", "object")
SIZE_COLUMNS = ("size", "Size", "bytes")
MTIME_COLUMNS = ("mtime", "last_modified", "LastModifiedDate", "LastModified")


MAX_LINE = 1 << 20  # bytes in one inventory line: a file per line never needs more
MAX_FIELD = 128 << 10  # characters in one field (a name): csv's own default limit
MAX_SIZE = (1 << 63) - 1  # bytes of one file, at most: what a size (a signed 64-bit int) holds
NAME_HINT = 'give each file\'s name as text, e.g. {"name": "a/b.jpg", "size": 123}'
SIZE_HINT = "give each file's size in bytes, e.g. 123"
BOM = "\ufeff"


def _open(url: str, opener: Callable[[str], BinaryIO] | None = None, mode: str = "rb"):
    """Open a local path, or a store URL through ``opener`` (the store's reader, with its
    endpoint and credentials); ``.gz`` and other compressions are undone. Bytes by default."""
    import fsspec  # here, not at the top: its import costs a tenth of a second
    from fsspec.compression import compr
    from fsspec.utils import infer_compression

    text = {"encoding": "utf-8", "newline": ""} if mode == "rt" else {}
    try:
        if opener is None or "://" not in url:
            return fsspec.open(url, mode, compression="infer", **text).open()
        stream = opener(url)
        compression = infer_compression(url)
        if compression is not None:
            stream = compr[compression](stream, mode="rb")
        if mode == "rt":  # a manifest.json: small; a store's reader is no buffered stream
            with stream:
                return io.StringIO(stream.read(MAX_LINE * 16).decode("utf-8"), newline="")
        return stream
    except FileNotFoundError:
        raise UsageError(
            f"--src-list {redacted(url)!r} does not exist — give an inventory file"
        ) from None
    except IshardError:
        raise  # the store's own message (a URL or setting it refused) says it all
    except Exception as err:  # noqa: BLE001 - whatever the opener raises: one line
        raise UsageError(f"--src-list {redacted(url)!r} cannot be opened: {err}") from None


def _bad_row(where: str, number: int, what: str, unit: str = "line") -> UsageError:
    return UsageError(f"--src-list {where!r} {unit} {number}: {what}")


def _line_blocks(stream, where: str) -> Iterator[tuple[int, list[str]]]:
    """Lines of a binary stream in blocks (with the number of each block's first line), read
    a MiB at a time and split and decoded in C; a line over ``MAX_LINE`` bytes (an inventory
    without newlines) or one that is not UTF-8 stops the run at once, naming its number."""
    number, tail = 1, b""
    while True:
        try:
            data = stream.read(MAX_LINE)
        except (OSError, EOFError, ValueError) as err:  # a damaged .gz, a failed store read
            raise UsageError(
                f"--src-list {where!r} cannot be read after line {number - 1}: {err}"
            ) from None
        lines = (tail + data).splitlines(keepends=True)
        tail = b""
        if data and lines and not lines[-1].endswith(b"\n"):  # it may go on in the next block
            tail = lines.pop()
        if len(tail) > MAX_LINE or max(map(len, lines), default=0) > MAX_LINE:
            long = next((i for i, x in enumerate(lines) if len(x) > MAX_LINE), len(lines))
            raise _bad_row(
                where,
                number + long,
                f"longer than {MAX_LINE >> 20} MiB (no end of "
                "line) — an inventory has one file per line; check that this is one",
            )
        try:
            text = list(map(bytes.decode, lines))
        except UnicodeDecodeError:
            _not_utf8(lines, where, number)
            raise
        if text:
            if number == 1:  # a byte order mark (Excel's "CSV UTF-8") is no part of line 1
                text[0] = text[0].removeprefix(BOM)
            yield number, text
            number += len(text)
        if not data:
            return


def _not_utf8(lines: list[bytes], where: str, number: int) -> None:
    for i, raw in enumerate(lines):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise _bad_row(
                where,
                number + i,
                f"not UTF-8 (byte {raw[err.start]:#04x} at column "
                f"{err.start + 1}) — write the inventory as UTF-8",
            ) from None


def _lines(stream, where: str) -> Iterator[tuple[int, str]]:
    """Numbered lines (see ``_line_blocks``)."""
    for first, lines in _line_blocks(stream, where):
        yield from enumerate(lines, first)


def _name(value, where: str, number: int, unit: str = "line", hint: str = NAME_HINT) -> str:
    if not isinstance(value, str) or not value:
        shown = (
            "missing"
            if value is None
            else "empty"
            if value == ""
            else f"a {type(value).__name__}, not a string"
        )
        raise _bad_row(where, number, f"the name is {shown} — {hint}", unit)
    if not value.isascii():
        try:
            value.encode("utf-8", "surrogateescape")  # as a local file name would be
        except UnicodeEncodeError as err:
            raise _bad_row(
                where,
                number,
                f"the name has a lone surrogate "
                f"(\\u{ord(value[err.start]):04x}), which no file name can hold — "
                "write names as UTF-8 text",
                unit,
            ) from None
    if len(value) > MAX_FIELD:
        raise _bad_row(
            where,
            number,
            f"the name is longer than {MAX_FIELD >> 10} KiB — "
            f"an inventory names one file per {unit}; check that this is one",
            unit,
        )
    return value


def _size(value, where: str, number: int, unit: str = "line", hint: str = SIZE_HINT) -> int:
    """A whole number of bytes from 0 to ``MAX_SIZE`` (JSON integers or CSV digits; not 1.5,
    -3, true, 2**63)."""
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SIZE:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SIZE:
        digits = str(value) if value < 10**40 else f"{str(value)[:20]}… ({len(str(value))} digits)"
        what = f"the size is {digits}, over {MAX_SIZE} (2^63-1), the most bytes a file can have"
        raise _bad_row(where, number, f"{what} — {hint}", unit)
    shown = "missing" if value is None else repr(value)[:40]
    what = f"the size is {shown}, not a whole number of bytes (0 or more)"
    raise _bad_row(where, number, f"{what} — {hint}", unit)


class _Written:
    """A JSON number as written: orjson reads 2**70 (and 1e400) as a float, whose text would
    not be the inventory's."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _mtime(value) -> int:
    """Whole seconds since the epoch; 0 for no time, one it cannot read, or one past what a
    64-bit signed number holds (no file's)."""
    if value in (None, ""):
        return 0
    try:
        seconds = int(float(value))
        return seconds if -(1 << 63) <= seconds < 1 << 63 else 0
    except (TypeError, ValueError, OverflowError):
        from datetime import datetime

        try:
            return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp())
        except (ValueError, OverflowError, OSError):
            return 0


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


def _rows_jsonl(stream, where: str) -> Iterator[tuple[str, int, int]]:
    for number, line in _lines(stream, where):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except ValueError:
            row = _row_json(line, where, number)  # json takes what orjson refuses (a lone
            # surrogate, which _name then names), and says what is wrong with the rest
        if not isinstance(row, dict):
            raise _bad_row(
                where,
                number,
                f"a JSON {type(row).__name__}, not an object — write "
                '{"name": "a/b.jpg", "size": 123}',
            )
        name, size = _pick(row, NAME_COLUMNS), _pick(row, SIZE_COLUMNS)
        if type(name) is not str or not name.isascii() or len(name) > MAX_FIELD:
            name = _name(name, where, number)
        if type(size) is float:  # a whole number past 64 bits too: shown as written
            size = _pick(json.loads(line, parse_float=_Written), SIZE_COLUMNS)
        if type(size) is not int or not 0 <= size <= MAX_SIZE:  # not a bool, a string
            size = _size(size, where, number)
        yield name, size, _mtime(_pick(row, MTIME_COLUMNS))


def _column(fields: list[str], names: tuple[str, ...]) -> int | None:
    return next((fields.index(n) for n in names if n in fields), None)


def _csv_reader(stream, where: str):
    """A csv reader over the stream's lines (see ``_line_blocks``); csv's own field limit
    (128 KiB) bounds a quoted field that runs over many lines. ``reader.line_num`` is the
    number of the line a record ends on."""
    return csv.reader(
        itertools.chain.from_iterable(lines for _, lines in _line_blocks(stream, where))
    )


def _csv_error(err: csv.Error, reader, where: str) -> UsageError:
    if "field limit" in str(err):
        return _bad_row(
            where,
            reader.line_num,
            f"a field is longer than {MAX_FIELD >> 10} KiB "
            "— an inventory names one file per line; check that this is one",
        )
    return _bad_row(
        where, reader.line_num, f"not CSV ({err}) — write one 'name,size' record per line"
    )


def _rows_csv(stream, where: str) -> Iterator[tuple[str, int, int]]:
    reader = _csv_reader(stream, where)
    try:
        fields: list[str] = next(reader, [])
        name_at, size_at = _column(fields, NAME_COLUMNS), _column(fields, SIZE_COLUMNS)
        mtime_at = _column(fields, MTIME_COLUMNS)
        if name_at is None or size_at is None:
            raise UsageError(
                f"--src-list {where!r} has no header with a name (or key) and a size column — "
                "add a first line such as 'name,size'"
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
                name = _name(name, where, reader.line_num)
            try:
                size = int(row[size_at])
            except ValueError:
                size = -1
            if not 0 <= size <= MAX_SIZE:
                _size(row[size_at], where, reader.line_num)
            yield (
                name,
                size,
                0 if mtime_at is None or len(row) <= mtime_at else _mtime(row[mtime_at]),
            )
    except csv.Error as err:
        raise _csv_error(err, reader, where) from None


ENGINE_FROM = 8 << 20  # inventory bytes from which the column engine reads a local file


def _by_columns(
    where: str,
    wanted: str | None,
    include_hidden: bool,
    tally: Tally,
    on_file: Callable[..., None] | None,
    tmp_dir: str | None = None,
    memory_limit: int | None = None,
    key: KeyFunction | None = None,
    renamed: bool = False,
) -> FileTable | None:
    """The listing read by the column engine (``columns``), or None: the row reader reads it
    (a small file, or one the engine does not take as it is)."""
    from .columns import Fallback, inventory_kind, read_inventory

    path = where.removeprefix("file://")
    kind = inventory_kind(path)
    if kind is None or (wanted is None and kind != "parquet"):  # Parquet: the engine's alone
        return None
    try:
        if kind != "parquet" and os.path.getsize(path) < ENGINE_FROM:
            return None
    except OSError:
        return None
    try:
        files, nbytes = read_inventory(
            path,
            kind,
            wanted=wanted,
            include_hidden=include_hidden,
            tally=tally,
            tmp_dir=tmp_dir,
            memory_limit=memory_limit,
            key=key,
            renamed=renamed,
        )
    except Fallback:  # never for Parquet: the engine names what is wrong
        return None
    _total_fits(where, nbytes)
    if on_file is not None:
        on_file(nbytes, len(files))
    return files


def _total_fits(where: str, total: int) -> None:
    """The listing's bytes fit a 64-bit count (shard totals, the plan's, are such sums)."""
    if total > MAX_SIZE:
        raise UsageError(
            f"--src-list {where!r}: its files' sizes add up to {total} bytes, over {MAX_SIZE} "
            "(2^63-1), the most ishard counts — check the size column; exabytes are a mistake"
        )


def _sizes_fit(where: str, sizes) -> None:
    """``_total_fits`` for a row reader's listing: summed only when its largest size times its
    count may not fit."""
    import numpy as np

    from .table import int_view

    if len(sizes) and int(np.max(int_view(sizes))) > MAX_SIZE // len(sizes):
        _total_fits(where, sum(sizes))


def list_inventory(
    where: str,
    *,
    list_prefix: str = "",
    prefix: str = "",
    include_hidden: bool = False,
    tally: Tally | None = None,
    on_file: Callable[..., None] | None = None,
    opener: Callable[[str], BinaryIO] | None = None,
    tmp_dir: str | None = None,
    memory_limit: int | None = None,
    key: KeyFunction | None = None,
    renamed: bool = False,
) -> FileTable:
    """The entries an inventory file names, filtered like a listing, sorted bytewise.

    ``opener`` opens a ``where`` that is a store URL (and an S3 Inventory's data files there).
    ``key``: the run's key function; the column engine also groups the files by it when it
    is a built-in pattern (the table's ``grouping``), and finds the files whose member names
    (``<key>.<extension>`` when ``renamed``) may clash on extraction (its ``clashes``).
    ``on_file(size)`` is called per file, or ``on_file(total, count)`` once for a listing
    read by the column engine. ``tmp_dir`` and ``memory_limit``: where the column engine
    spills and past how many bytes (``columns.MEMORY_LIMIT`` when None); the table's
    ``spilled`` says how much it wrote there.

    Raises:
        UsageError: the file is missing or malformed.
    """
    tally = tally if tally is not None else Tally()
    wanted = combined_prefix(list_prefix, prefix)
    fast = _by_columns(
        where, wanted, include_hidden, tally, on_file, tmp_dir, memory_limit, key, renamed
    )
    if fast is not None:
        return fast
    with _open(where, opener) as stream:
        head = stream.read(1 << 16).decode("utf-8", "replace")
    if head.startswith("PAR1"):  # a store's: the engine read a local one
        raise UsageError(
            f"--src-list {where!r} is a Parquet file in a store, which ishard reads only from a "
            "local path — copy it to a local file and give that"
        )
    stripped = head.removeprefix(BOM).lstrip()
    stream = None
    if stripped.startswith("{") and '"fileSchema"' in head:
        from .s3inventory import read_manifest, report_rows

        with _open(where, opener, "rt") as text:
            rows = report_rows(read_manifest(text, where), where, opener)
    else:
        stream = _open(
            where, opener
        )  # read again, line by line: a big inventory is never held whole
        rows = _rows_jsonl(stream, where) if stripped.startswith("{") else _rows_csv(stream, where)
    entries = FileTable()
    try:
        for name, size, mtime in rows:
            if wanted is None or not name.startswith(wanted):
                continue
            if not keep_remote_name(name, include_hidden, tally):
                continue
            entries.add(name, size, mtime)
            if on_file is not None:
                on_file(size)
    finally:
        if stream is not None:
            stream.close()
    _sizes_fit(where, entries.sizes)
    entries.sort()
    return entries
