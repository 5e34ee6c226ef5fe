"""Listings from inventory files (``--src-list``): CSV with a header, JSON Lines, S3 Inventory."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import unquote_plus

import fsspec
from fsspec.utils import infer_compression

from .errors import UsageError
from .listing import combined_prefix, keep_remote_name
from .model import Tally
from .table import FileTable

NAME_COLUMNS = ("name", "key", "Key", "path", "object")
SIZE_COLUMNS = ("size", "Size", "bytes")
MTIME_COLUMNS = ("mtime", "last_modified", "LastModifiedDate", "LastModified")


def _open_text(url: str, fs=None) -> io.TextIOBase:
    """Open a local path, or a URL through ``fs`` (the store's filesystem, with its endpoint and
    credentials), as text; ``.gz`` and other compressions are undone."""
    try:
        if fs is None:
            return fsspec.open(url, "rt", encoding="utf-8", newline="", compression="infer").open()
        path = url.partition("://")[2] if "://" in url else url
        return fsspec.core.OpenFile(fs, path, mode="rt", encoding="utf-8", newline="",
                                    compression=infer_compression(path)).open()
    except FileNotFoundError:
        raise UsageError(f"--src-list {url!r} does not exist — give an inventory file") from None
    except Exception as err:
        raise UsageError(f"--src-list {url!r} cannot be opened: {err}") from None


def _mtime(value) -> int:
    if value in (None, ""):
        return 0
    try:
        return int(float(value))
    except (TypeError, ValueError):
        from datetime import datetime

        try:
            return int(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp())
        except ValueError:
            return 0


def _pick(row: dict, names: tuple[str, ...]):
    for n in names:
        if n in row:
            return row[n]
    return None


def _rows_jsonl(text: io.TextIOBase, where: str) -> Iterator[tuple[str, int, int]]:
    for number, line in enumerate(text, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            yield str(_pick(row, NAME_COLUMNS)), int(_pick(row, SIZE_COLUMNS)), _mtime(
                _pick(row, MTIME_COLUMNS)
            )
        except (ValueError, TypeError) as err:
            raise UsageError(
                f"--src-list {where!r} line {number} is not a JSON object with name and size "
                f"({err}) — write {{\"name\": \"a/b.jpg\", \"size\": 123}}"
            ) from None


def _column(fields: list[str], names: tuple[str, ...]) -> int | None:
    return next((fields.index(n) for n in names if n in fields), None)


def _rows_csv(text: io.TextIOBase, where: str) -> Iterator[tuple[str, int, int]]:
    reader = csv.reader(text)
    fields = next(reader, [])
    name_at, size_at = _column(fields, NAME_COLUMNS), _column(fields, SIZE_COLUMNS)
    mtime_at = _column(fields, MTIME_COLUMNS)
    if name_at is None or size_at is None:
        raise UsageError(
            f"--src-list {where!r} has no header with a name (or key) and a size column — "
            "add a first line such as 'name,size'"
        )
    number = 1
    try:
        for number, row in enumerate(reader, 2):  # noqa: B007 - kept for the error message
            if row:
                yield row[name_at], int(row[size_at]), 0 if mtime_at is None else _mtime(row[mtime_at])
    except (ValueError, IndexError):
        raise UsageError(
            f"--src-list {where!r} line {number}: expected a name and a whole-number size"
        ) from None


def _s3_inventory(manifest: dict, where: str, fs=None) -> Iterator[tuple[str, int, int]]:
    """AWS S3 Inventory: manifest.json names headerless CSV files and their column schema."""
    if manifest.get("fileFormat", "CSV").upper() != "CSV":
        raise UsageError(f"--src-list {where!r}: only CSV S3 Inventory reports are supported")
    schema = [c.strip() for c in manifest["fileSchema"].split(",")]
    if "Key" not in schema or "Size" not in schema:
        raise UsageError(f"--src-list {where!r}: the inventory must include the Key and Size fields")
    key_at, size_at = schema.index("Key"), schema.index("Size")
    mtime_at = schema.index("LastModifiedDate") if "LastModifiedDate" in schema else None
    for item in manifest.get("files", []):
        data = _data_file(where, manifest, item["key"])
        with _open_text(data, fs) as text:
            for number, row in enumerate(csv.reader(text), 1):
                if not row:
                    continue
                try:
                    mtime = _mtime(row[mtime_at]) if mtime_at is not None else 0
                    size = int(row[size_at] or 0)
                except (ValueError, IndexError):
                    raise UsageError(
                        f"--src-list {where!r}: data file {item['key']!r} line {number} does "
                        "not match the manifest's fileSchema (Key, Size) — use the inventory "
                        "as AWS wrote it"
                    ) from None
                yield unquote_plus(row[key_at]), size, mtime


def _data_file(where: str, manifest: dict, key: str) -> str:
    if "://" in where:
        bucket = manifest.get("destinationBucket", "").rpartition(":")[2]
        return f"{where.partition('://')[0]}://{bucket}/{key}"
    here = Path(where).parent
    for candidate in (here / Path(key).name, here / key, here.parent / "data" / Path(key).name):
        if candidate.exists():
            return str(candidate)
    raise UsageError(
        f"--src-list {where!r} names data file {key!r}, which is not beside it — copy the "
        "inventory's data/ files next to manifest.json"
    )


def list_inventory(
    where: str,
    *,
    list_prefix: str = "",
    prefix: str = "",
    include_hidden: bool = False,
    tally: Tally | None = None,
    on_file: Callable[[int], None] | None = None,
    fs=None,
) -> FileTable:
    """The entries an inventory file names, filtered like a listing, sorted bytewise.

    ``fs`` opens a ``where`` that is a store URL (and an S3 Inventory's data files there).

    Raises:
        UsageError: the file is missing or malformed.
    """
    tally = tally if tally is not None else Tally()
    wanted = combined_prefix(list_prefix, prefix)
    with _open_text(where, fs) as text:
        head = text.read(1 << 16)
    stripped = head.lstrip()
    stream = None
    if stripped.startswith("{") and '"fileSchema"' in head:
        with _open_text(where, fs) as text:
            rows = _s3_inventory(json.load(text), where, fs)
    else:
        stream = _open_text(where, fs)  # read again, row by row: a big inventory is never held whole
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
    entries.sort()
    return entries

