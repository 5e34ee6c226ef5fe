"""AWS S3 Inventory reports as listings (``--src-list …/manifest.json``): the manifest names
its data files (headerless CSV with URL-encoded keys, Parquet or ORC) and their columns; each
is read a row at a time and checked as an inventory's rows are."""

from __future__ import annotations

import contextlib
import csv
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator

from ...errors import UsageError
from ...store import Location
from ..rowrules import (
    IDENTITY,
    MAX_SIZE,
    ORC_TIME,
    REPORT_SIZE,
    REPORT_TIME,
    S3_KEY,
    S3_SIZE,
    Row,
    checked_name,
    checked_size,
    data_file,
    mtime_seconds,
    open_inventory,
    schema_fields,
)
from .lines import csv_error, csv_reader


def report_rows(manifest: dict, where: str, opener, column: list[str]) -> Iterator[Row]:
    """AWS S3 Inventory: manifest.json names its data files (headerless CSV with URL-encoded
    keys, Parquet or ORC) and their column schema; its ETag column's name (``ETag``, in
    Parquet and ORC ``e_tag``), if it has one, is put in ``column``."""
    kind = str(manifest.get("fileFormat", "CSV")).upper()
    if kind == "PARQUET":
        return _s3_parquet(manifest, where, opener, column)
    if kind == "ORC":
        return _s3_orc(manifest, where, opener, column)
    if kind != "CSV":
        raise UsageError(
            f"--src-list {where!r} is an S3 Inventory report in {manifest.get('fileFormat')} "
            "format, which ishard cannot read — configure the inventory as CSV, ORC or Parquet"
        )
    return _s3_csv(manifest, where, opener, column)


PARQUET_BATCH = 1 << 16  # rows fetched at a time from an S3 Inventory Parquet data file


def _s3_parquet(manifest: dict, where: str, opener, column: list[str]) -> Iterator[Row]:
    """An S3 Inventory report in Parquet: columns ``key`` (not URL-encoded, unlike CSV's),
    ``size`` and, if the report has it, ``last_modified_date``; read by the column engine a
    batch at a time, a store's data file copied to a private temporary folder first."""
    fields = schema_fields(re.findall(r"\b(\w+)\s*(?:\(|;)", manifest["fileSchema"]), where)
    import duckdb

    mtime = REPORT_TIME.over(time="last_modified_date") if "last_modified_date" in fields else "0"
    for item in manifest.get("files", []):
        data, label = data_file(where, item["key"]), item["key"]
        with _local_copy(data, opener) as path, duckdb.connect() as con:
            try:
                etag = _text_etag(con, path)  # the ETags of a file that has them as text
                column += [etag] if etag != "NULL" and not column else []
                rows = con.execute(
                    f"SELECT key, size, {mtime}, {etag} FROM read_parquet(?)", [path]
                )
                number = 0
                while batch := rows.fetchmany(PARQUET_BATCH):
                    for key, size, seconds, etag in batch:
                        number += 1
                        yield _parquet_row((key, size, seconds, etag), where, label, number)
            except duckdb.Error as err:
                raise UsageError(
                    f"--src-list {where!r}: data file {label!r} cannot be read as the "
                    f"manifest's Parquet ({str(err).splitlines()[0]}) — use the inventory as "
                    "AWS wrote it"
                ) from None


def _text_etag(con, path: str) -> str:
    """``e_tag`` where the Parquet data file at ``path`` has it as text, else ``NULL``."""
    described = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
    types = {row[0]: row[1] for row in described}
    return "e_tag" if types.get("e_tag") == "VARCHAR" else "NULL"


def _s3_orc(manifest: dict, where: str, opener, column: list[str]) -> Iterator[Row]:
    """An S3 Inventory report in ORC: the columns of the Parquet form (``fileSchema`` is
    ``struct<bucket:string,key:string,size:bigint,last_modified_date:timestamp,…>``), read with
    pyarrow (the ``orc`` extra) a stripe at a time, a store's data file copied first."""
    fields = schema_fields(re.findall(r"(\w+)\s*:", manifest["fileSchema"]), where)
    try:
        import pyarrow as pa
        from pyarrow import orc
    except ImportError:
        raise UsageError(
            f"--src-list {where!r} is an S3 Inventory report in ORC, which ishard reads with "
            "pyarrow — pip install 'ishard[orc]', or configure the inventory as CSV or Parquet"
        ) from None
    column += ["e_tag"] if "e_tag" in fields else []
    columns = ["key", "size", *(c for c in ("last_modified_date", "e_tag") if c in fields)]
    for item in manifest.get("files", []):
        data, label = data_file(where, item["key"]), item["key"]
        with _local_copy(data, opener) as path:
            try:
                stripes = orc.ORCFile(path)
                batches = (stripes.read_stripe(i, columns=columns) for i in range(stripes.nstripes))
                rows = (_orc_rows(batch, pa) for batch in batches)
                for number, row in enumerate(itertools.chain.from_iterable(rows)):
                    yield _parquet_row(row, where, label, number + 1)
            except (pa.ArrowException, OSError, KeyError) as err:
                raise UsageError(
                    f"--src-list {where!r}: data file {label!r} cannot be read as the "
                    f"manifest's ORC ({str(err).splitlines()[0]}) — use the inventory as AWS "
                    "wrote it"
                ) from None


def _orc_rows(batch, pa) -> Iterator[tuple]:
    """(key, size, whole seconds, ETag) of one ORC stripe; a non-timestamp time is a schema
    error."""
    keys, sizes = batch.column("key").to_pylist(), batch.column("size").to_pylist()
    names = batch.schema.names
    etags = batch.column("e_tag").to_pylist() if "e_tag" in names else itertools.repeat(None)
    if "last_modified_date" not in names:
        return zip(keys, sizes, itertools.repeat(0), etags)
    when = batch.column("last_modified_date")
    if not pa.types.is_timestamp(when.type):
        raise KeyError(f"last_modified_date is {when.type}, not a timestamp")
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[when.type.unit]
    ticks = when.cast(pa.int64()).to_pylist()
    seconds = (None if t is None else ORC_TIME.python(t, per_second) for t in ticks)
    return zip(keys, sizes, seconds, etags)


def _parquet_row(row: tuple, where: str, data: str, number: int) -> Row:
    key, size, seconds, etag = row
    if (
        not isinstance(key, str)
        or not isinstance(size, (int, type(None)))
        or REPORT_SIZE.python(size) is None
    ):
        raise UsageError(
            f"--src-list {where!r}: data file {data!r} row {number} does not match the "
            "manifest's fileSchema (key, size) — use the inventory as AWS wrote it"
        )
    label = f"{where}: data file {data}"
    if (size or 0) > MAX_SIZE:
        checked_size(size, label, number, "row")
    name = checked_name(key, label, number, "row")
    return name, REPORT_SIZE.python(size), seconds or 0, IDENTITY.python(etag)


@contextlib.contextmanager
def _local_copy(data: str, opener) -> Iterator[str]:
    """A local path of ``data``: itself, or a store object copied into a private folder."""
    local = Location.local_path(data)
    if opener is None or local is not None:
        yield data if local is None else local
        return
    folder = tempfile.mkdtemp(prefix="ishard-inventory-")
    try:
        path = os.path.join(folder, "data")
        with open_inventory(data, opener) as stream, open(path, "wb") as out:
            shutil.copyfileobj(stream, out, 1 << 20)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _s3_csv(manifest: dict, where: str, opener, column: list[str]) -> Iterator[Row]:
    """The CSV form: headerless, gzip'ed, keys URL-encoded."""
    schema = [c.strip() for c in manifest["fileSchema"].split(",")]
    if "Key" not in schema or "Size" not in schema:
        raise UsageError(
            f"--src-list {where!r}: the inventory must include the Key and Size fields"
        )
    at = tuple(schema.index(f) if f in schema else None for f in S3_CSV_FIELDS)
    column += ["ETag"] if "ETag" in schema else []
    for item in manifest.get("files", []):
        data = data_file(where, item["key"])
        label = f"{where}: data file {item['key']}"
        with open_inventory(data, opener) as stream:
            reader = csv_reader(stream, label)
            try:
                for row in reader:
                    if row:
                        yield _s3_row(row, at, where, item["key"], reader.line_num)
            except csv.Error as err:
                raise csv_error(err, reader, label) from None


S3_CSV_FIELDS = ("Key", "Size", "LastModifiedDate", "ETag")  # the fields a CSV report's row gives


def _s3_row(row: list[str], at: tuple, where: str, data: str, number: int) -> Row:
    """One CSV report row: ``at``, where its ``S3_CSV_FIELDS`` stand (None: not there)."""
    key_at, size_at, mtime_at, etag_at = at
    try:
        mtime = mtime_seconds(row[mtime_at]) if mtime_at is not None else 0
        size = int(S3_SIZE.python(row[size_at]))
        key = S3_KEY.python(row[key_at])
        etag = IDENTITY.python(row[etag_at]) if etag_at is not None else None
        if size < 0:
            raise ValueError(size)
    except (ValueError, IndexError):
        raise UsageError(
            f"--src-list {where!r}: data file {data!r} line {number} does "
            "not match the manifest's fileSchema (Key, Size) — use the inventory "
            "as AWS wrote it"
        ) from None
    if size > MAX_SIZE:  # a UsageError (a ValueError): not caught above
        checked_size(size, f"{where}: data file {data}", number)
    return checked_name(key, f"{where}: data file {data}", number), size, mtime, etag
