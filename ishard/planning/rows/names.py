"""A list of names alone (``--src-list names.txt``: a name a line, as ``find`` or ``rclone
lsf`` print them): told from the other inventories by its first line, read a line at a time,
and each name's size and mtime asked of the source, a batch of names at a time."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Sequence

from ...store.base import ObjectInfo
from ..rowrules import BOM, NAME_COLUMNS, NAME_FITS, checked_name

#: sizes of a batch of names, asked of the source: each name's size and mtime, in order
Sizes = Callable[[Sequence[str]], Sequence[ObjectInfo]]

BATCH = 1024  # names asked of the source at once (the store's requests run many at a time)
COMMENT = ("#", ";")  # lines rclone's --files-from skips


def names_only(head: str, where: str) -> bool:
    """Whether the inventory whose first bytes are ``head`` is a list of names alone: its
    first line that is not blank is no JSON object and, read as CSV, has no name column
    (``name``, ``key``, ``path`` …). A file named ``.csv`` (compressed or not) never is: a CSV
    inventory needs its header, and its refusal says so."""
    base = where.lower().rsplit("/", 1)[-1]
    for compressed in (".gz", ".bz2", ".xz", ".zst", ".lz4"):
        base = base.removesuffix(compressed)
    if base.endswith(".csv"):
        return False
    first = next((line for line in head.removeprefix(BOM).splitlines() if line.strip()), "")
    if first.lstrip().startswith("{"):
        return False
    try:
        fields = next(csv.reader([first]), [])
    except csv.Error:
        return True  # no CSV header either: a name with an odd quote
    return not any(field in NAME_COLUMNS for field in fields)


def name_rows(lines: Iterator[tuple[int, str]], where: str) -> Iterator[tuple[str, int, int, None]]:
    """Each line's name (its line end dropped, and a leading ``./``, as ``find .`` writes
    it), with a size of -1 — not known yet — and no mtime; blank lines and comments (``#``,
    ``;``, as rclone's ``--files-from``) skipped; no checksum. Nothing else of a line is touched: a name may
    begin or end with spaces."""
    for number, line in lines:
        name = line.removesuffix("\n").removesuffix("\r")
        if not name.strip() or name.startswith(COMMENT):
            continue
        name = name.removeprefix("./")
        if not name.isascii() or not NAME_FITS.python(name):
            name = checked_name(name, where, number)
        yield name, -1, 0, None


def sized(
    rows: Iterator[tuple[str, int, int, None]], sizes: Sizes
) -> Iterator[tuple[str, int, int, int]]:
    """The rows (names kept by the listing's rules) with the size, mtime and stamp the source
    gives each (as its listing would), asked ``BATCH`` names at a time."""
    batch: list[str] = []
    while True:
        batch.clear()
        for name, *_ in rows:
            batch.append(name)
            if len(batch) == BATCH:
                break
        if not batch:
            return
        for name, info in zip(batch, sizes(batch)):
            yield name, info.size, info.mtime, info.stamp
