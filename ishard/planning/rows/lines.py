"""An inventory read as lines (a MiB at a time, each line at most ``MAX_LINE`` bytes of UTF-8)
and as CSV records, each failure one line naming the line; its first bytes, to tell its form."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable, Iterator
from typing import BinaryIO

from ...errors import IshardError, UsageError
from ...store.urls import redacted
from ..rowrules import BOM, MAX_FIELD, MAX_LINE, bad_row, open_inventory

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
