"""Listings from inventory files (``--src-list``): CSV with a header, JSON Lines, S3 Inventory."""

from __future__ import annotations

import csv
import itertools
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


MAX_LINE = 1 << 20  # bytes in one inventory line: a file per line never needs more
MAX_FIELD = 128 << 10  # characters in one field (a name): csv's own default limit


def _open(url: str, fs=None, mode: str = "rb"):
    """Open a local path, or a URL through ``fs`` (the store's filesystem, with its endpoint and
    credentials); ``.gz`` and other compressions are undone. Bytes by default."""
    text = {"encoding": "utf-8", "newline": ""} if mode == "rt" else {}
    try:
        if fs is None:
            return fsspec.open(url, mode, compression="infer", **text).open()
        path = url.partition("://")[2] if "://" in url else url
        return fsspec.core.OpenFile(fs, path, mode=mode, compression=infer_compression(path),
                                    **text).open()
    except FileNotFoundError:
        raise UsageError(f"--src-list {url!r} does not exist — give an inventory file") from None
    except Exception as err:
        raise UsageError(f"--src-list {url!r} cannot be opened: {err}") from None


def _bad_row(where: str, number: int, what: str) -> UsageError:
    return UsageError(f"--src-list {where!r} line {number}: {what}")


def _lines(stream, where: str, first: int = 1) -> Iterator[tuple[int, str]]:
    """Numbered lines of a binary stream, each read with a length limit and decoded as UTF-8:
    an inventory without newlines (or with a huge line) fails at once instead of filling memory."""
    for number in itertools.count(first):
        try:
            raw = stream.readline(MAX_LINE + 1)
        except (OSError, EOFError, ValueError) as err:  # a damaged .gz, a failed store read
            raise UsageError(f"--src-list {where!r} cannot be read after line {number - 1}: "
                             f"{err}") from None
        if not raw:
            return
        if len(raw) > MAX_LINE:
            raise _bad_row(where, number, f"longer than {MAX_LINE >> 20} MiB (no end of line) — "
                           "an inventory has one file per line; check that this is one")
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise _bad_row(where, number, f"not UTF-8 (byte {raw[err.start]:#04x} at column "
                           f"{err.start + 1}) — write the inventory as UTF-8") from None


def _name(value, where: str, number: int) -> str:
    if not isinstance(value, str) or not value:
        shown = "missing" if value is None else f"a {type(value).__name__}, not a string"
        raise _bad_row(where, number, f"the name is {shown} — give each file's name as text, "
                       'e.g. {"name": "a/b.jpg", "size": 123}')
    if not value.isascii():
        try:
            value.encode("utf-8", "surrogateescape")  # as a local file name would be
        except UnicodeEncodeError as err:
            raise _bad_row(where, number, f"the name has a lone surrogate "
                           f"(\\u{ord(value[err.start]):04x}), which no file name can hold — "
                           "write names as UTF-8 text") from None
    if len(value) > MAX_FIELD:
        raise _bad_row(where, number, f"the name is longer than {MAX_FIELD >> 10} KiB — "
                       "an inventory names one file per line; check that this is one")
    return value


def _size(value, where: str, number: int) -> int:
    """A whole number of bytes, 0 or more (JSON integers or CSV digits; not 1.5, -3, true)."""
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    shown = "missing" if value is None else repr(value)[:40]
    raise _bad_row(where, number, f"the size is {shown}, not a whole number of bytes (0 or "
                   "more) — give each file's size in bytes, e.g. 123")


def _mtime(value) -> int:
    if value in (None, ""):
        return 0
    try:
        return int(float(value))
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


def _rows_jsonl(stream, where: str) -> Iterator[tuple[str, int, int]]:
    for number, line in _lines(stream, where):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise UsageError(
                f"--src-list {where!r} line {number} is not a JSON object with name and size "
                f"({err}) — write {{\"name\": \"a/b.jpg\", \"size\": 123}}"
            ) from None
        if not isinstance(row, dict):
            raise _bad_row(where, number, f"a JSON {type(row).__name__}, not an object — write "
                           '{"name": "a/b.jpg", "size": 123}')
        yield (_name(_pick(row, NAME_COLUMNS), where, number),
               _size(_pick(row, SIZE_COLUMNS), where, number), _mtime(_pick(row, MTIME_COLUMNS)))


def _column(fields: list[str], names: tuple[str, ...]) -> int | None:
    return next((fields.index(n) for n in names if n in fields), None)


def _csv_rows(stream, where: str) -> Iterator[tuple[int, list[str]]]:
    """CSV records with the number of the line each starts on; csv's field limit (128 KiB)
    bounds a quoted field that runs over many lines."""
    numbered = _lines(stream, where)
    at = [0]

    def text() -> Iterator[str]:
        for number, line in numbered:
            at[0] = number
            yield line

    reader = csv.reader(text())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            if "field limit" in str(err):
                raise _bad_row(where, at[0], f"a field is longer than {MAX_FIELD >> 10} KiB — "
                               "an inventory names one file per line; check that this is "
                               "one") from None
            raise _bad_row(where, at[0], f"not CSV ({err}) — write one 'name,size' record "
                           "per line") from None
        yield at[0], row


def _rows_csv(stream, where: str) -> Iterator[tuple[str, int, int]]:
    rows = _csv_rows(stream, where)
    fields = next(rows, (0, []))[1]
    name_at, size_at = _column(fields, NAME_COLUMNS), _column(fields, SIZE_COLUMNS)
    mtime_at = _column(fields, MTIME_COLUMNS)
    if name_at is None or size_at is None:
        raise UsageError(
            f"--src-list {where!r} has no header with a name (or key) and a size column — "
            "add a first line such as 'name,size'"
        )
    for number, row in rows:
        if not row:
            continue
        if len(row) <= max(name_at, size_at):
            raise UsageError(
                f"--src-list {where!r} line {number}: expected a name and a whole-number size"
            )
        yield (_name(row[name_at], where, number), _size(row[size_at], where, number),
               0 if mtime_at is None or len(row) <= mtime_at else _mtime(row[mtime_at]))


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
        label = f"{where}: data file {item['key']}"
        with _open(data, fs) as stream:
            for number, row in _csv_rows(stream, label):
                if not row:
                    continue
                try:
                    mtime = _mtime(row[mtime_at]) if mtime_at is not None else 0
                    size = int(row[size_at] or 0)
                    name = _name(unquote_plus(row[key_at]), label, number)
                    if size < 0:
                        raise ValueError(size)
                except (ValueError, IndexError):
                    raise UsageError(
                        f"--src-list {where!r}: data file {item['key']!r} line {number} does "
                        "not match the manifest's fileSchema (Key, Size) — use the inventory "
                        "as AWS wrote it"
                    ) from None
                yield name, size, mtime


def _manifest(text, where: str) -> dict:
    try:
        manifest = json.loads(text.read(MAX_LINE * 16))
    except ValueError as err:  # UnicodeDecodeError too
        manifest = f"{err}"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("fileSchema"), str):
        why = manifest if isinstance(manifest, str) else "no fileSchema"
        raise UsageError(f"--src-list {where!r} is not an S3 Inventory manifest ({why}) — use "
                         "the manifest.json AWS wrote")
    return manifest


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
    with _open(where, fs) as stream:
        head = stream.read(1 << 16).decode("utf-8", "replace")
    stripped = head.lstrip()
    stream = None
    if stripped.startswith("{") and '"fileSchema"' in head:
        with _open(where, fs, "rt") as text:
            rows = _s3_inventory(_manifest(text, where), where, fs)
    else:
        stream = _open(where, fs)  # read again, line by line: a big inventory is never held whole
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

