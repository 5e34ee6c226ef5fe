"""An inventory as the column engine reads it (an ``Inventory``: a CSV file with a header, JSON
Lines or Parquet, gzip'ed or not, or an AWS S3 Inventory report's data files, in CSV or
Parquet) and the SELECT of each row's name, size and mtime, as text; what it would read
otherwise than the row reader does raises ``Fallback``."""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import BinaryIO, TypeVar

from ...errors import UsageError
from ...store import Location
from ..rowrules import (
    AWS_TIME,
    MAX_LINE,
    MTIME_COLUMNS,
    NAME_COLUMNS,
    NAMED,
    ORC_TIME,
    REPORT_SIZE,
    REPORT_TIME,
    S3_KEY,
    S3_SIZE,
    SIZE_COLUMNS,
    columns_at,
    identity_column,
    open_inventory,
)
from . import parquet
from .connection import Fallback, Source, identity_sql, sql_text

T = TypeVar("T")
KINDS = ("csv", "jsonl", "parquet", "s3-csv", "s3-parquet", "s3-orc")
COMPRESSIONS = {".gz": "gzip"}  # by the extension, as the row reader undoes it; others: rows


@dataclass(frozen=True)
class Inventory:
    """An inventory the engine reads: its ``kind`` (one of ``KINDS``; ``s3-`` an AWS S3
    Inventory report's data files), its data ``files`` (one, but for a report; local paths,
    or store URLs that ``fetched`` copies first), their ``compression`` (``"none"`` or
    ``"gzip"``), an S3 CSV report's columns (``schema``, its manifest's ``fileSchema``) and the
    data's bytes as stored (``nbytes``; None where it is not known before it is fetched)."""

    kind: str
    files: tuple[str, ...]
    compression: str = "none"
    schema: tuple[str, ...] = ()
    nbytes: int | None = None

    @property
    def compressed(self) -> bool:
        return self.compression != "none"


SCAN_BLOCK = 8 << 20
HEAD = 1 << 16  # bytes read to tell an inventory's format (as the row reader does)
HEADER_MAX = 1 << 20  # characters of a CSV header line read (the row reader's line limit)
KEY_SHAPES = 256  # distinct key lists of a JSON Lines inventory's lines, at most


def _in_store(path: str) -> bool:
    return Location.local_path(path) is None


def _opened(path: str, compression: str) -> BinaryIO:
    """The bytes of a local data file, its compression undone (by ISA-L's gzip where the
    ``fast`` extra installed it: a quarter of zlib's time)."""
    if compression != "gzip":
        return open(path, "rb")
    try:
        from isal import igzip
    except ImportError:
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return igzip.open(path, "rb")  # type: ignore[return-value]


def _scan_ok(path: str, kind: str, compression: str = "none") -> bool:
    """No NUL byte and no carriage return but in a CRLF line end (``\\r\\n``): a lone one the
    row reader splits lines at where DuckDB does not (or reads otherwise); in JSON Lines no
    escaped NUL either (``\\u0000``, which it reads as text)."""
    odd = (b"\x00", b"\\u0000") if kind == "jsonl" else (b"\x00",)
    tail = b""
    with _opened(path, compression) as stream:
        while block := stream.read(SCAN_BLOCK):
            if block.endswith(b"\r"):  # its \n, if any, is the next block's first byte
                block += stream.read(1)
            looked = tail + block
            if any(o in looked for o in odd) or block.count(b"\r") != block.count(b"\r\n"):
                return False
            tail = block[-5:]  # an escape may begin in one block and end in the next
    return True


def _csv_header(path: str, compression: str) -> list[str]:
    with io.TextIOWrapper(_opened(path, compression), encoding="utf-8-sig", newline="") as text:
        return next(csv.reader([text.readline(HEADER_MAX)]), [])


def _read_csv(files: tuple[str, ...], fields: str, header: bool, compression: str) -> str:
    """DuckDB's reading of CSV ``files`` as the row reader reads them, every column text."""
    listed = "[" + ", ".join(map(sql_text, files)) + "]"
    return (
        f"read_csv({listed}, header = {str(header).lower()}, auto_detect = false, "
        f"delim = ',', quote = '\"', escape = '\"', strict_mode = true, "
        f"null_padding = false, compression = '{compression}', columns = {{{fields}}})"
    )


def _source_csv(inventory: Inventory, header: list[str], columns: dict[str, int | None]) -> Source:
    """The SELECT of name, size, mtime and checksum (all text) from a CSV file with a
    header."""
    fields = ", ".join(f"'f{i}': 'VARCHAR'" for i in range(len(header)))
    pick = {what: f"f{at}" if at is not None else "NULL" for what, at in columns.items()}
    column = identity_column(header)
    ident = identity_sql(column, column and f"f{header.index(column)}")
    return Source(
        f"SELECT {pick['name']} AS name, {pick['size']} AS size, {pick['mtime']} AS mtime, "
        f"{ident} AS ident FROM {_read_csv(inventory.files, fields, True, inventory.compression)}",
        column,
    )


def _source_s3_csv(inventory: Inventory) -> Source:
    """The SELECT of name, size and mtime (as text) from an S3 Inventory CSV report's data
    files: headerless, the key URL-encoded (``+`` a space, as ``unquote_plus`` reads it; a key
    that does not decode to UTF-8 or an empty one hands the listing back), an empty size 0, an AWS time
    converted to whole seconds here (any other text as the row reader converts it)."""
    schema = inventory.schema
    fields = ", ".join(f"'f{i}': 'VARCHAR'" for i in range(len(schema)))
    key, size = f"f{schema.index('Key')}", f"f{schema.index('Size')}"
    if "LastModifiedDate" in schema:
        m = f"f{schema.index('LastModifiedDate')}"
        when = (
            f"CASE WHEN {AWS_TIME.answered(time=m)} THEN "
            f"coalesce(CAST({AWS_TIME.over(time=m)} AS VARCHAR), {m}) ELSE {m} END"
        )
    else:
        when = "NULL"
    column = "ETag" if "ETag" in schema else None
    ident = identity_sql(column, column and f"f{schema.index(column)}")
    return Source(
        f"SELECT {S3_KEY.over(key=key)} AS name, CASE WHEN NOT {NAMED.over(name=key)} THEN NULL "
        f"ELSE {S3_SIZE.over(size=size)} END AS size, {when} AS mtime, {ident} AS ident "
        f"FROM {_read_csv(inventory.files, fields, False, inventory.compression)}",
        column,
    )


# a report's size as text, NULL (the listing handed back) for a row the row reader refuses
_REPORT_SIZE = (
    f"CASE WHEN NOT {NAMED.over(name='key')} THEN NULL "
    f"ELSE CAST({REPORT_SIZE.over(size='size')} AS VARCHAR) END"
)


def _has_pyarrow() -> bool:
    """Whether pyarrow (the ``orc`` extra) is there to read ORC; without it, the row reader
    says what to install."""
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


def _etag(types: dict[str, str]) -> str | None:
    """An S3 Inventory report's ETag column in Parquet or ORC (``e_tag``), if it is text."""
    return "e_tag" if types.get("e_tag") == "VARCHAR" else None


def _source_s3_orc(con, inventory: Inventory) -> Source:
    """The SELECT of name, size and mtime (as text) from an S3 Inventory ORC report's data
    files, scanned by DuckDB through a pyarrow dataset a batch at a time, as the row reader
    takes them (``_source_s3_parquet``'s rules; a time in whole seconds toward zero; a time
    column that is no timestamp hands it back)."""
    import pyarrow as pa
    import pyarrow.dataset

    try:
        data = pyarrow.dataset.dataset(list(inventory.files), format="orc")
    except (pa.ArrowException, OSError):  # no ORC, or damaged: the row reader names the file
        raise Fallback from None
    con.register("orc_report", data)
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                             "orc_report)").fetchall())  # fmt: skip
    if types.get("key") != "VARCHAR" or "size" not in types:
        raise Fallback
    when = "NULL"
    if "last_modified_date" in types:
        if not types["last_modified_date"].startswith("TIMESTAMP"):
            raise Fallback
        seconds = ORC_TIME.over(ticks="epoch_ns(last_modified_date)", per_second="1000000000")
        when = f"CAST({seconds} AS VARCHAR)"
    column = _etag(types)
    return Source(
        f"SELECT key AS name, {_REPORT_SIZE} AS size, {when} AS mtime, "
        f"{identity_sql(column)} AS ident FROM orc_report",
        column,
    )


def _source_s3_parquet(con, inventory: Inventory) -> Source:
    """The SELECT of name, size and mtime (as text) from an S3 Inventory Parquet report's
    data files (``key``, ``size``, ``last_modified_date``), as the row reader takes them: a
    missing size is 0; a missing or empty key, a negative size, a key that is no text hand it
    back (the row reader refuses the row)."""
    listed = "[" + ", ".join(map(sql_text, inventory.files)) + "]"
    types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                             f"read_parquet({listed}))").fetchall())  # fmt: skip
    if types.get("key") != "VARCHAR" or "size" not in types:
        raise Fallback
    when = (
        f"CAST({REPORT_TIME.over(time='last_modified_date')} AS VARCHAR)"
        if "last_modified_date" in types
        else "NULL"
    )
    column = _etag(types)
    return Source(
        f"SELECT key AS name, {_REPORT_SIZE} AS size, {when} AS mtime, "
        f"{identity_sql(column)} AS ident FROM read_parquet({listed})",
        column,
    )


def _json_keys(con, path: str, compression: str) -> dict[str, str | None]:
    """The key of each kind (name, size, mtime) that the row reader's ``_pick`` takes on every
    line, found from the lines' distinct key lists (``KEY_SHAPES`` at most; a key whose value
    is JSON null is still there); no mtime key: None. A name or size key that differs from
    line to line, or is missing, hands the listing back; so do lines whose checksum or ETag
    keys (``ident``: the one of them all, or None) differ."""
    kinds = {"name": NAME_COLUMNS, "size": SIZE_COLUMNS, "mtime": MTIME_COLUMNS}
    shapes = con.execute(  # the lines' key lists, all of them: intersecting each took 4x as long
        f"SELECT DISTINCT json_keys(json) FROM read_ndjson_objects({sql_text(path)}, "
        f"maximum_object_size = {MAX_LINE - 1}, compression = '{compression}') "
        f"LIMIT {KEY_SHAPES + 1}"
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
    idents = {identity_column(shape or ()) for (shape,) in shapes} - {None}
    if len(idents) > 1:  # the row reader takes the first line's: lines that differ go to it
        raise Fallback
    picked["ident"] = next(iter(idents), None)
    return picked


def _source_jsonl(con, path: str, compression: str) -> Source:
    """The SELECT of name, size and mtime (as text) from JSON Lines, each line read as an
    object of the keys the row reader takes (``_json_keys``; a repeated key, a line that is
    no object or not JSON, a line over 1 MiB are errors). Whatever it would refuse or read
    otherwise — a name that is not a string, a size that is not an integer or a string, an
    mtime that is no number or string — makes the size NULL, which hands the listing back."""
    keys = _json_keys(con, path, compression)
    fields = ", ".join(f"{sql_text(k)}: 'JSON'" for k in keys.values() if k is not None)
    n, s = (f'"{keys[kind]}"' for kind in ("name", "size"))
    t = "NULL" if keys["mtime"] is None else f'"{keys["mtime"]}"'
    i = keys["ident"] and f'"{keys["ident"]}"'
    ident = "NULL"  # else text as IDENTITY takes it, a whole number as its digits, others NULL
    if i is not None:
        text = identity_sql(keys["ident"], f"{i} ->> '$'")
        ident = (
            f"CASE json_type({i}) WHEN 'VARCHAR' THEN {text} WHEN 'UBIGINT' THEN CAST({i} AS "
            f"VARCHAR) WHEN 'BIGINT' THEN CAST({i} AS VARCHAR) END"
        )
    types = (
        f"json_type({n}) = 'VARCHAR' AND json_type({s}) IN ('UBIGINT', 'BIGINT', 'VARCHAR') "
        f"AND ({t} IS NULL OR json_type({t}) IN ('UBIGINT', 'BIGINT', 'DOUBLE', 'VARCHAR'))"
    )
    return Source(
        f"SELECT {n} ->> '$' AS name, CASE WHEN NOT coalesce({types}, false) THEN NULL "
        f"WHEN json_type({s}) = 'VARCHAR' THEN {s} ->> '$' ELSE CAST({s} AS VARCHAR) END AS "
        f"size, CASE WHEN json_type({t}) = 'VARCHAR' THEN {t} ->> '$' ELSE CAST({t} AS VARCHAR) "
        f"END AS mtime, {ident} AS ident FROM read_json({sql_text(path)}, "
        f"format = 'newline_delimited', auto_detect = false, columns = {{{fields}}}, "
        f"maximum_object_size = {MAX_LINE - 1}, compression = '{compression}')",
        keys["ident"],
    )


def compression_of(path: str) -> str | None:
    """How the row reader would undo ``path``'s compression, if the engine can too: ``"none"``,
    ``"gzip"``; None for another (``.bz2``, ``.zst`` …: the row reader reads those)."""
    suffix = os.path.splitext(path)[1]
    if suffix in COMPRESSIONS:
        return COMPRESSIONS[suffix]
    return None if suffix in (".bz2", ".xz", ".zst", ".lz4", ".zip", ".lzma", ".snappy") else "none"


def kind_of(head: bytes) -> str | None:
    """``"csv"``, ``"jsonl"`` or ``"parquet"`` by an inventory's first bytes (its compression
    undone), as the row reader tells them; ``"s3"`` for an S3 Inventory manifest; None for a
    JSON document."""
    if head[:4] == b"PAR1":
        return "parquet"
    text = head.decode("utf-8", "replace")
    if text.removeprefix("\ufeff").lstrip().startswith("{"):  # as the row reader tells JSON Lines
        return "s3" if '"fileSchema"' in text else "jsonl"
    return None if head[:1] == b"[" else "csv"


def inventory_kind(path: str) -> str | None:
    """``"csv"``, ``"jsonl"`` or ``"parquet"`` for a local inventory the engine can read (a
    JSON Lines file begins with ``{``, after white space; a ``.gz`` one is read through its
    compression), else None."""
    local = Location.local_path(path)
    if local is None:
        return None
    path = local
    compression = compression_of(path)
    try:
        with open(path, "rb") as raw:
            head = raw.read(HEAD)
            if compression == "gzip" and head[:4] != b"PAR1":
                raw.seek(0)
                head = gzip.GzipFile(fileobj=raw).read(HEAD)
    except (OSError, EOFError):
        return None
    kind = kind_of(head)
    if kind == "parquet":
        return kind
    return None if compression is None or kind == "s3" else kind


def describe(where: str, opener: Callable[[str], BinaryIO] | None = None) -> Inventory | None:
    """The inventory at ``where`` (a local path or a store URL, read through ``opener``) as the
    engine reads it, or None where only the row reader does (``.bz2`` …, ORC without pyarrow)."""
    local_path = Location.local_path(where)
    path = where if local_path is None else local_path
    compression = compression_of(path)
    if compression is None:
        return None
    local = local_path is not None
    try:
        if local:
            kind = inventory_kind(path)
            if kind is not None:
                size = os.path.getsize(path)
                return Inventory(kind, (path,), _of(kind, compression), (), size)
            with open(path, "rb") as stream:
                head = stream.read(HEAD)
        else:
            with open_inventory(where, opener) as stream:
                head = stream.read(HEAD)
    except Exception:  # noqa: BLE001 - the row reader opens it again and says what is wrong
        return None
    kind = kind_of(head)
    if kind == "s3":
        return _report(where, opener)
    if kind is None or local:
        return None
    return Inventory(kind, (where,), _of(kind, compression))


def _of(kind: str, compression: str) -> str:
    """A Parquet file's compression is its own: its bytes are read as they are."""
    return "none" if kind == "parquet" else compression


def _report(where: str, opener) -> Inventory | None:
    """An S3 Inventory report (its ``manifest.json`` at ``where``) as the engine reads it: its
    data files, in CSV (headerless, gzip'ed) or Parquet; None for ORC, or where the row reader
    names what is wrong with it."""
    from ..rowrules import data_file, read_manifest

    try:
        with open_inventory(where, opener, "rt") as text:
            manifest = read_manifest(text, where)
        kind = str(manifest.get("fileFormat", "CSV")).upper()
        items = manifest.get("files", [])
        files = tuple(data_file(where, item["key"]) for item in items)
        layout = _report_layout(kind, manifest, files, where)
        if layout is None:
            return None
        schema, compression = layout
    except (UsageError, KeyError, TypeError, AttributeError):
        return None  # the row reader says what is wrong
    if not files or compression is None:
        return None
    sizes = [item.get("size") for item in items]
    nbytes = sum(sizes) if all(type(n) is int and n >= 0 for n in sizes) else None
    local = not any(map(_in_store, files))
    if local:
        nbytes = sum(os.path.getsize(f) for f in files)
    return Inventory(f"s3-{kind.lower()}", files, compression, schema, nbytes)


def _report_layout(
    kind: str, manifest: dict, files: tuple[str, ...], where: str
) -> tuple[tuple[str, ...], str | None] | None:
    """The columns (CSV's; none for the others) and compression of a report's data files in
    ``kind`` (CSV, PARQUET, ORC); None where the engine leaves them to the row reader.

    Raises:
        UsageError, KeyError, TypeError, AttributeError: a report the row reader refuses.
    """
    from ..rowrules import schema_fields

    if kind == "CSV":
        schema = tuple(c.strip() for c in manifest["fileSchema"].split(","))
        compressions = {compression_of(f) for f in files}
        if "Key" not in schema or "Size" not in schema or len(compressions) != 1:
            return None
        return schema, compressions.pop()
    if kind == "PARQUET":
        schema_fields(re.findall(r"\b(\w+)\s*(?:\(|;)", manifest["fileSchema"]), where)
        return (), "none"
    if kind == "ORC" and _has_pyarrow():
        schema_fields(re.findall(r"(\w+)\s*:", manifest["fileSchema"]), where)
        return (), "none"
    return None


def as_given(original: Inventory, local: Inventory, make: Callable[[], T]) -> T:
    """``make()``, with a refusal it raises or returns naming each of the inventory's files as
    given (a store URL), not as the copy of it that the engine read."""
    copies = [(c, o) for c, o in zip(local.files, original.files) if c != o]
    try:
        made = make()
    except UsageError as refused:
        raise _renamed(refused, copies) from None
    return _renamed(made, copies) if isinstance(made, UsageError) else made  # type: ignore[return-value]


def _renamed(error: UsageError, copies: list[tuple[str, str]]) -> UsageError:
    text = str(error)
    for copy, original in copies:
        text = text.replace(copy, original)
    return type(error)(text) if text != str(error) else error


def fetched(inventory: Inventory, folder: str, opener) -> Inventory:
    """``inventory`` with each data file in a store copied into ``folder`` (private), a MiB at
    a time, as stored: its compression kept, for the engine (told it) to undo; local files as
    they are. No ``opener``: the row reader reads the store's files."""
    files = []
    for number, url in enumerate(inventory.files):
        if not _in_store(url):
            files.append(url)
            continue
        if opener is None:
            raise Fallback
        path = os.path.join(folder, f"inventory-{number}")
        with opener(url) as stream, open(path, "xb") as out:
            shutil.copyfileobj(stream, out, 1 << 20)
        files.append(path)
    return replace(inventory, files=tuple(files))


def source(con, inventory: Inventory) -> Source:
    """The SELECT of the inventory's name, size, mtime and checksum, as text (its files
    local)."""
    kind, compression = inventory.kind, inventory.compression
    if kind == "parquet":
        return parquet.source(con, inventory.files[0])
    if kind == "s3-parquet":
        return _source_s3_parquet(con, inventory)
    if kind == "s3-orc":
        return _source_s3_orc(con, inventory)
    if not all(_scan_ok(f, kind, compression) for f in inventory.files):
        raise Fallback
    if kind == "s3-csv":
        return _source_s3_csv(inventory)
    path = inventory.files[0]
    if kind == "jsonl":
        return _source_jsonl(con, path, compression)
    header = _csv_header(path, compression)
    columns = dict(zip(("name", "size", "mtime"), columns_at(header)))
    if columns["name"] is None or columns["size"] is None:
        raise Fallback  # the row reader says what the header lacks
    return _source_csv(inventory, header, columns)
