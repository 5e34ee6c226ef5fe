"""An inventory as the column engine reads it: its kind (a local CSV file with a header, JSON
Lines or Parquet) and the SELECT of each row's name, size and mtime, as text; what it would read
otherwise than the row reader does raises ``Fallback``."""

from __future__ import annotations

import csv

from . import parquet
from .engine import Fallback, sql_text
from .rows import MAX_LINE, MTIME_COLUMNS, NAME_COLUMNS, SIZE_COLUMNS, columns_at

SCAN_BLOCK = 8 << 20
HEAD = 1 << 16  # bytes read to tell an inventory's format (as the row reader does)
HEADER_MAX = 1 << 20  # characters of a CSV header line read (the row reader's line limit)
KEY_SHAPES = 256  # distinct key lists of a JSON Lines inventory's lines, at most


def _scan_ok(path: str, kind: str) -> bool:
    """No carriage return and no NUL byte: the two the row reader splits lines at (or reads)
    otherwise; in JSON Lines no escaped NUL either (``\\u0000``, which it reads as text)."""
    odd = (b"\r", b"\x00", b"\\u0000") if kind == "jsonl" else (b"\r", b"\x00")
    tail = b""
    with open(path, "rb") as stream:
        while block := stream.read(SCAN_BLOCK):
            looked = tail + block
            if any(o in looked for o in odd):
                return False
            tail = block[-5:]  # an escape may begin in one block and end in the next
    return True


def _csv_header(path: str) -> list[str]:
    with open(path, encoding="utf-8-sig", newline="") as stream:
        return next(csv.reader([stream.readline(HEADER_MAX)]), [])


def _source_csv(path: str, header: list[str], columns: dict[str, int | None]) -> str:
    """The SELECT of name, size and mtime (all text) from a CSV file with a header."""
    fields = ", ".join(f"'f{i}': 'VARCHAR'" for i in range(len(header)))
    pick = {what: f"f{at}" if at is not None else "NULL" for what, at in columns.items()}
    return (
        f"SELECT {pick['name']} AS name, {pick['size']} AS size, {pick['mtime']} AS mtime "
        f"FROM read_csv({sql_text(path)}, header = true, auto_detect = false, "
        f"delim = ',', quote = '\"', escape = '\"', strict_mode = true, "
        f"null_padding = false, compression = 'none', columns = {{{fields}}})"
    )


def _json_keys(con, path: str) -> dict[str, str | None]:
    """The key of each kind (name, size, mtime) that the row reader's ``_pick`` takes on every
    line, found from the lines' distinct key lists (``KEY_SHAPES`` at most; a key whose value
    is JSON null is still there); no mtime key: None. A name or size key that differs from
    line to line, or is missing, hands the listing back."""
    kinds = {"name": NAME_COLUMNS, "size": SIZE_COLUMNS, "mtime": MTIME_COLUMNS}
    shapes = con.execute(  # the lines' key lists, all of them: intersecting each took 4x as long
        f"SELECT DISTINCT json_keys(json) FROM read_ndjson_objects({sql_text(path)}, "
        f"maximum_object_size = {MAX_LINE - 1}) LIMIT {KEY_SHAPES + 1}"
    ).fetchall()
    if len(shapes) > KEY_SHAPES:
        raise Fallback
    picked: dict[str, str | None] = {}
    for kind, keys in kinds.items():
        found = {next((k for k in keys if k in (shape or ())), None) for (shape,) in shapes}
        if kind == "mtime":
            found.discard(None)  # a line without one: no time, as a JSON null is
        if len(found) > 1:  # keys that differ from line to line, or a line without any
            raise Fallback
        picked[kind] = next(iter(found), None)
    if picked["name"] is None or picked["size"] is None:
        raise Fallback  # the row reader names the line that has no name or no size
    return picked


def _source_jsonl(con, path: str) -> str:
    """The SELECT of name, size and mtime (as text) from JSON Lines, each line read as an
    object of the keys the row reader takes (``_json_keys``; a repeated key, a line that is
    no object or not JSON, a line over 1 MiB are errors). Whatever it would refuse or read
    otherwise — a name that is not a string, a size that is not an integer or a string, an
    mtime that is no number or string — makes the size NULL, which hands the listing back."""
    keys = _json_keys(con, path)
    fields = ", ".join(f"{sql_text(k)}: 'JSON'" for k in keys.values() if k is not None)
    n, s = (f'"{keys[kind]}"' for kind in ("name", "size"))
    t = "NULL" if keys["mtime"] is None else f'"{keys["mtime"]}"'
    types = (
        f"json_type({n}) = 'VARCHAR' AND json_type({s}) IN ('UBIGINT', 'BIGINT', 'VARCHAR') "
        f"AND ({t} IS NULL OR json_type({t}) IN ('UBIGINT', 'BIGINT', 'DOUBLE', 'VARCHAR'))"
    )
    return (
        f"SELECT {n} ->> '$' AS name, CASE WHEN NOT coalesce({types}, false) THEN NULL "
        f"WHEN json_type({s}) = 'VARCHAR' THEN {s} ->> '$' ELSE CAST({s} AS VARCHAR) END AS "
        f"size, CASE WHEN json_type({t}) = 'VARCHAR' THEN {t} ->> '$' ELSE CAST({t} AS VARCHAR) "
        f"END AS mtime FROM read_json({sql_text(path)}, format = 'newline_delimited', "
        f"auto_detect = false, columns = {{{fields}}}, maximum_object_size = {MAX_LINE - 1})"
    )


def inventory_kind(path: str) -> str | None:
    """``"csv"``, ``"jsonl"`` or ``"parquet"`` for a local inventory the engine can read (a
    JSON Lines file begins with ``{``, after white space), else None."""
    if "://" in path and not path.startswith("file://"):
        return None
    path = path.removeprefix("file://")
    try:
        with open(path, "rb") as stream:
            head = stream.read(HEAD)
    except OSError:
        return None
    if head[:4] == b"PAR1":
        return "parquet"
    if path.endswith((".gz", ".bz2", ".xz", ".zst", ".lz4", ".zip")):
        return None
    text = head.decode("utf-8", "replace")
    if text.removeprefix("\ufeff").lstrip().startswith("{"):  # as the row reader tells JSON Lines
        return None if '"fileSchema"' in text else "jsonl"  # an S3 Inventory manifest
    return None if head[:1] == b"[" else "csv"


def source(con, path: str, kind: str) -> str:
    """The SELECT of the inventory's name, size and mtime, as text."""
    if kind != "parquet" and not _scan_ok(path, kind):
        raise Fallback
    if kind == "jsonl":
        return _source_jsonl(con, path)
    if kind == "parquet":
        return parquet.source(con, path)
    header = _csv_header(path)
    columns = dict(zip(("name", "size", "mtime"), columns_at(header)))
    if columns["name"] is None or columns["size"] is None:
        raise Fallback  # the row reader says what the header lacks
    return _source_csv(path, header, columns)
