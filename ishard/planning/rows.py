"""An inventory row's rules, which every reader of ``--src-list`` shares (the row readers, the
column engine, S3 Inventory reports): the columns that name a file, its size and mtime, the
limits of a line, a field and a size, an inventory opened and read a line at a time, a name
and a size checked and an mtime read, and the one line that names a row it refuses."""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Callable, Iterator
from typing import BinaryIO

from ..errors import IshardError, UsageError
from ..store import Location
from ..store.urls import redacted

NAME_COLUMNS = ("name", "key", "Key", "path", "object")
SIZE_COLUMNS = ("size", "Size", "bytes")
MTIME_COLUMNS = ("mtime", "last_modified", "LastModifiedDate", "LastModified")


MAX_LINE = 1 << 20  # bytes in one inventory line: a file per line never needs more
MAX_FIELD = 128 << 10  # characters in one field (a name): csv's own default limit
MAX_SIZE = (1 << 63) - 1  # bytes of one file, at most: what a size (a signed 64-bit int) holds
NAME_HINT = 'give each file\'s name as text, e.g. {"name": "a/b.jpg", "size": 123}'
SIZE_HINT = "give each file's size in bytes, e.g. 123"
BOM = "\ufeff"


def open_inventory(url: str, opener: Callable[[str], BinaryIO] | None = None, mode: str = "rb"):
    """Open a local path, or a store URL through ``opener`` (the store's reader, with its
    endpoint and credentials); ``.gz`` and other compressions are undone. Bytes by default."""
    import fsspec  # here, not at the top: its import costs a tenth of a second
    from fsspec.compression import compr
    from fsspec.utils import infer_compression

    text = {"encoding": "utf-8", "newline": ""} if mode == "rt" else {}
    try:
        if opener is None or Location.local_path(url) is not None:
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


_CODECS = {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd", "lz4": "lz4"}


def read_head(url: str, opener: Callable[[str], BinaryIO] | None, size: int) -> bytes:
    """The first ``size`` bytes of the inventory ``url``, its compression undone.

    Raises:
        UsageError: it is empty, or its compression cannot be undone (named with the file).
    """
    try:
        with open_inventory(url, opener) as stream:
            head = stream.read(size)
    except (OSError, EOFError, ValueError) as err:  # not gzip, cut short, damaged
        if isinstance(err, IshardError):
            raise
        ext = url.rpartition(".")[2]
        raise UsageError(
            f"--src-list {redacted(url)!r} is not {_CODECS.get(ext, ext)} or is damaged "
            f"({err or type(err).__name__}) — give the inventory itself, or compress it whole "
            f"(its name's .{ext} says it is)"
        ) from None
    if not head:
        kind = "a Parquet file" if ".parquet" in url.lower() else "an inventory"
        raise UsageError(
            f"--src-list {redacted(url)!r} is empty (0 bytes), not {kind} — give an inventory: "
            "CSV with a header such as 'name,size', JSON Lines or Parquet"
        )
    return head


def bad_row(where: str, number: int, what: str, unit: str = "line") -> UsageError:
    return UsageError(f"--src-list {where!r} {unit} {number}: {what}")


def line_blocks(stream, where: str) -> Iterator[tuple[int, list[str]]]:
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
            raise bad_row(
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
            raise bad_row(
                where,
                number + i,
                f"not UTF-8 (byte {raw[err.start]:#04x} at column "
                f"{err.start + 1}) — write the inventory as UTF-8",
            ) from None


def checked_name(value, where: str, number: int, unit: str = "line", hint: str = NAME_HINT) -> str:
    if not isinstance(value, str) or not value:
        shown = (
            "missing"
            if value is None
            else "empty"
            if value == ""
            else f"a {type(value).__name__}, not a string"
        )
        raise bad_row(where, number, f"the name is {shown} — {hint}", unit)
    if not value.isascii():
        try:
            value.encode("utf-8", "surrogateescape")  # as a local file name would be
        except UnicodeEncodeError as err:
            raise bad_row(
                where,
                number,
                f"the name has a lone surrogate "
                f"(\\u{ord(value[err.start]):04x}), which no file name can hold — "
                "write names as UTF-8 text",
                unit,
            ) from None
    if len(value) > MAX_FIELD:
        raise bad_row(
            where,
            number,
            f"the name is longer than {MAX_FIELD >> 10} KiB — "
            f"an inventory names one file per {unit}; check that this is one",
            unit,
        )
    return value


def checked_size(value, where: str, number: int, unit: str = "line", hint: str = SIZE_HINT) -> int:
    """A whole number of bytes from 0 to ``MAX_SIZE`` (JSON integers or CSV digits; not 1.5,
    -3, true, 2**63)."""
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SIZE:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SIZE:
        digits = str(value) if value < 10**40 else f"{str(value)[:20]}… ({len(str(value))} digits)"
        what = f"the size is {digits}, over {MAX_SIZE} (2^63-1), the most bytes a file can have"
        raise bad_row(where, number, f"{what} — {hint}", unit)
    shown = "missing" if value is None else repr(value)[:40]
    what = f"the size is {shown}, not a whole number of bytes (0 or more)"
    raise bad_row(where, number, f"{what} — {hint}", unit)


class Written:
    """A JSON number as written: orjson reads 2**70 (and 1e400) as a float, whose text would
    not be the inventory's."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def mtime_seconds(value) -> int:
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


def found_columns(present) -> tuple[str | None, str | None, str | None]:
    """The name, size and mtime columns among ``present`` (a header, a table's columns): of
    each kind, the first of its names there, or None."""
    name, size, mtime = (
        next((n for n in names if n in present), None)
        for names in (NAME_COLUMNS, SIZE_COLUMNS, MTIME_COLUMNS)
    )
    return name, size, mtime


def columns_at(fields: list[str]) -> tuple[int | None, int | None, int | None]:
    """Where in the header ``fields`` the name, size and mtime columns stand, or None."""
    name, size, mtime = (None if c is None else fields.index(c) for c in found_columns(fields))
    return name, size, mtime


def csv_reader(stream, where: str):
    """A csv reader over the stream's lines (see ``line_blocks``); csv's own field limit
    (128 KiB) bounds a quoted field that runs over many lines. ``reader.line_num`` is the
    number of the line a record ends on."""
    return csv.reader(
        itertools.chain.from_iterable(lines for _, lines in line_blocks(stream, where))
    )


def csv_error(err: csv.Error, reader, where: str) -> UsageError:
    if "field limit" in str(err):
        return bad_row(
            where,
            reader.line_num,
            f"a field is longer than {MAX_FIELD >> 10} KiB "
            "— an inventory names one file per line; check that this is one",
        )
    return bad_row(
        where, reader.line_num, f"not CSV ({err}) — write one 'name,size' record per line"
    )
