"""An inventory's rules, which both of its planners share (the row reader, ``rows/``, and the
column engine, ``engine/``): the columns that name a file, its size and mtime, the limits of
a line, a field and a size, a checksum or ETag as compared, an inventory opened (an S3 Inventory report's manifest read, and
where its data files are), a name and a size checked and an mtime read, and the one line
that names a row it refuses."""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote_plus

from ..errors import IshardError, UsageError
from ..model import Tally
from ..names import quoted, unsafe_name
from ..rules import Rule
from ..store import Location
from ..store.urls import redacted

NAME_COLUMNS = ("name", "key", "Key", "path", "object")
SIZE_COLUMNS = ("size", "Size", "bytes")
MTIME_COLUMNS = ("mtime", "last_modified", "LastModifiedDate", "LastModified")
# a file's content identity (``--duplicates``): a checksum before an ETag, which depends on how
# the object was uploaded; ``e_tag`` is an S3 Inventory report's in Parquet and ORC
Row = tuple[str, int, int, str | None]  # an inventory row read: name, size, mtime, checksum
IDENTITY_COLUMNS = ("checksum", "sha256", "md5", "ETag", "etag", "e_tag")


MAX_LINE = 1 << 20  # bytes in one inventory line: a file per line never needs more
MAX_FIELD = 128 << 10  # characters in one field (a name): csv's own default limit
MAX_SIZE = (1 << 63) - 1  # bytes of one file, at most: what a size (a signed 64-bit int) holds
NAME_HINT = 'give each file\'s name as text, e.g. {"name": "a/b.jpg", "size": 123}'
SIZE_HINT = "give each file's size in bytes, e.g. 123"
BOM = "\ufeff"


@dataclass(frozen=True)
class InventoryRead:
    """One inventory to read and what to keep of it, as either planner takes it: ``where``
    (a path or a store URL, which ``opener`` opens), ``wanted`` (the prefix a kept name has;
    None: no name can have it), ``include_hidden``, ``tally`` (what is left out, counted) and
    ``on_file`` (told of each file kept, or of them all at once)."""

    where: str
    wanted: str | None
    include_hidden: bool
    tally: Tally
    on_file: Callable[..., None] | None
    opener: Callable[[str], BinaryIO] | None


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


def bad_row(where: str, number: int, what: str, unit: str = "line") -> UsageError:
    return UsageError(f"--src-list {where!r} {unit} {number}: {what}")


def named(value) -> bool:
    """Does a row's name name a file (text, not empty)?"""
    return isinstance(value, str) and value != ""


def name_fits(name: str) -> bool:
    """Is a name at most ``MAX_FIELD`` characters long (a field's)?"""
    return len(name) <= MAX_FIELD


def size_text(text: str) -> int | None:
    """A size field of CSV as the row reader reads it (Python's ``int``: ' 3', '003' and
    '+3' too), if it is from 0 to ``MAX_SIZE``; else None (``checked_size`` says why)."""
    try:
        size = int(text)
    except ValueError:
        return None
    return size if 0 <= size <= MAX_SIZE else None


def size_digits(text: str) -> int | None:
    """A size written as text that ``checked_size`` takes: ASCII digits, white space around
    them; else None."""
    digits = text.strip()
    return int(digits) if digits.isdigit() and digits.isascii() else None


def checked_name(value, where: str, number: int, unit: str = "line", hint: str = NAME_HINT) -> str:
    if not named(value):
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
    if not name_fits(value):
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
    if isinstance(value, str) and (whole := size_digits(value)) is not None:
        value = whole
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


# An AWS S3 Inventory CSV report's LastModifiedDate as AWS writes it (2024-01-01T00:00:05.000Z),
# from 1970 on, with a fraction both Python 3.10's fromisoformat and 3.11's read; hours to 23:
# DuckDB takes 24:00:00 as the next day, Python refuses it
_AWS_TIME = (
    r"(19[7-9][0-9]|[2-9][0-9]{{3}})-[0-9]{{2}}-[0-9]{{2}}T([01][0-9]|2[0-3]):[0-5][0-9]:"
    r"[0-5][0-9](\.[0-9]{{3}}|\.[0-9]{{6}})?Z"
)


def s3_size(text: str) -> str:
    """An S3 Inventory CSV report's size field: empty is 0."""
    return text or "0"


def report_size(size: int | None) -> int | None:
    """An S3 Inventory Parquet or ORC report's size: missing is 0; None for a negative one,
    which the row reader refuses."""
    return None if size is not None and size < 0 else size or 0


def identity(value) -> str | None:
    """A checksum or ETag as compared: the text without the spaces and double quotes around
    it (an S3 listing quotes an ETag, its inventory does not), a whole number as its digits;
    None for an empty one or any other value (a JSON null, a float, a list)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    return value.strip(' "') or None


ETAG_DIGEST = 16  # bytes of an ETag's digest: two files of one size and one digest are alike


def etag_digest(etag: str | None) -> bytes:
    """An ETag as compared (``rowrules.identity``: quotes aside), as ``ETAG_DIGEST`` bytes
    (BLAKE2b; zeros: no ETag)."""
    text = identity(etag)
    if text is None:
        return bytes(ETAG_DIGEST)
    return hashlib.blake2b(
        text.encode("utf-8", "surrogateescape"), digest_size=ETAG_DIGEST
    ).digest()


def whole_seconds(ticks: int, per_second: int) -> int:
    """A time in ``ticks`` (``per_second`` of them a second) in whole seconds, toward zero."""
    return ticks // per_second if ticks >= 0 else -(-ticks // per_second)


def nearest(ticks: int, per: int) -> int:
    """``ticks`` in units of ``per`` of them, to the nearest, a half away from zero."""
    whole = (abs(ticks) + per // 2) // per
    return whole if ticks >= 0 else -whole


def since_1970(when) -> int:
    """A naive ``datetime`` (UTC) in microseconds since 1970."""
    from datetime import datetime, timedelta

    return (when - datetime(1970, 1, 1)) // timedelta(microseconds=1)


# The rules of an inventory's rows in both planners' forms
NAMED = Rule("a row names a file", named, "coalesce({name}, '') <> ''")
NAME_FITS = Rule("a name fits a field", name_fits, f"length({{name}}) <= {MAX_FIELD}")
SIZE_TEXT = Rule(
    "a size as text",
    size_text,
    "CAST({size} AS BIGINT)",
    where="{size} IS NOT NULL AND regexp_full_match({size}, '[0-9]{{1,19}}') AND NOT "
    "(length({size}) = 19 AND {size} > '9223372036854775807')",
)
SIZE_DIGITS = Rule(
    "a size as digits",
    size_digits,
    "CAST(TRY_CAST(trim({size}) AS UHUGEINT) AS VARCHAR)",
    where="regexp_full_match(trim({size}), '[0-9]+')",
)
# an mtime the row reader reads exactly as a whole number (it goes through a float: past 15
# digits it may round, so longer ones, and any other text, are converted by its own function)
MTIME_TEXT = Rule(
    "an mtime as text",
    mtime_seconds,
    "CASE WHEN {mtime} IS NULL OR {mtime} = '' THEN 0 ELSE CAST({mtime} AS BIGINT) END",
    where="{mtime} IS NULL OR {mtime} = '' OR regexp_full_match({mtime}, '[0-9]{{1,15}}')",
)
IDENTITY = Rule(  # trim() only where an end needs it: on every value it took 3.6 s a 10M
    "a checksum or ETag",
    identity,
    "CASE WHEN {value} = '' THEN NULL WHEN starts_with({value}, ' ') OR starts_with({value}, "
    "'\"') OR ends_with({value}, ' ') OR ends_with({value}, '\"') THEN "
    "nullif(trim({value}, ' \"'), '') ELSE {value} END",
)
S3_KEY = Rule(
    "an S3 Inventory CSV key",  # URL-encoded, '+' a space; one not UTF-8 fails in SQL
    unquote_plus,
    "CASE WHEN contains({key}, '%') OR contains({key}, '+') THEN "
    "url_decode(replace({key}, '+', ' ')) ELSE {key} END",
)
S3_SIZE = Rule(
    "an S3 Inventory CSV size", s3_size, "CASE WHEN {size} = '' THEN '0' ELSE {size} END"
)
AWS_TIME = Rule(
    "an AWS time",
    mtime_seconds,
    "CAST(trunc(epoch(TRY_CAST(replace({time}, 'Z', '') AS TIMESTAMP))) AS BIGINT)",
    where=f"regexp_full_match({{time}}, '{_AWS_TIME}')",
)
REPORT_SIZE = Rule(
    "an S3 Inventory Parquet or ORC size",
    report_size,
    "CASE WHEN {size} < 0 THEN NULL ELSE coalesce({size}, 0) END",
)
REPORT_TIME = Rule(  # both planners read it in DuckDB: to the millisecond, then toward zero
    "an S3 Inventory Parquet time",
    lambda when: whole_seconds(nearest(since_1970(when), 1000), 1000),
    "epoch_ms({time}) // 1000",
)
ORC_TIME = Rule(
    "an S3 Inventory ORC time",
    whole_seconds,
    "CASE WHEN {ticks} >= 0 THEN {ticks} // {per_second} ELSE -((-{ticks}) // {per_second}) END",
)


def found_columns(present) -> tuple[str | None, str | None, str | None]:
    """The name, size and mtime columns among ``present`` (a header, a table's columns): of
    each kind, the first of its names there, or None."""
    name, size, mtime = (
        next((n for n in names if n in present), None)
        for names in (NAME_COLUMNS, SIZE_COLUMNS, MTIME_COLUMNS)
    )
    return name, size, mtime


def identity_column(present) -> str | None:
    """The checksum or ETag column among ``present`` (``IDENTITY_COLUMNS``' first), or None."""
    return next((c for c in IDENTITY_COLUMNS if c in present), None)


def columns_at(fields: list[str]) -> tuple[int | None, int | None, int | None]:
    """Where in the header ``fields`` the name, size and mtime columns stand, or None."""
    name, size, mtime = (None if c is None else fields.index(c) for c in found_columns(fields))
    return name, size, mtime


def read_manifest(text, where: str) -> dict:
    try:
        manifest = json.loads(text.read(MAX_LINE * 16))
    except ValueError as err:  # UnicodeDecodeError too
        manifest = f"{err}"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("fileSchema"), str):
        why = manifest if isinstance(manifest, str) else "no fileSchema"
        raise UsageError(
            f"--src-list {where!r} is not an S3 Inventory manifest ({why}) — use "
            "the manifest.json AWS wrote"
        )
    return manifest


def data_file(where: str, key: object) -> str:
    """Where a data file the manifest names is, inside the report's folder: the folder above
    the manifest's (AWS writes ``<config>/<date>/manifest.json`` and ``<config>/data/``). In a
    store, a key under it in the manifest's bucket; locally, the file beside the manifest, at
    ``key`` under its folder, or in ``../data/``, which no symbolic link may lead out of."""
    if not isinstance(key, str) or unsafe_name(key):  # absolute, a '..' part, a control char
        raise _outside(where, key, "")
    local = Location.local_path(where)
    if local is None:
        scheme, _, rest = where.partition("://")
        bucket, _, manifest_key = rest.partition("/")
        report = posixpath.dirname(posixpath.dirname(manifest_key))
        if report and not key.startswith(report + "/"):
            raise _outside(where, key, f"{scheme}://{bucket}/{report}/")
        return f"{scheme}://{bucket}/{key}"
    here = Path(local).parent
    report = os.path.realpath(here.parent)
    for candidate in (here / Path(key).name, here / key, here.parent / "data" / Path(key).name):
        if candidate.exists():
            if os.path.commonpath([report, os.path.realpath(candidate)]) != report:
                raise _outside(where, key, report + os.sep)
            return str(candidate)
    raise UsageError(
        f"--src-list {where!r} names data file {quoted(key)}, which is not beside it — copy "
        "the inventory's data/ files next to manifest.json"
    )


def _outside(where: str, key: object, report: str) -> UsageError:
    """A data file the manifest names outside its report (``report``: the report's folder)."""
    place = f"outside the report's folder {report!r}" if report else "outside the report"
    shown = quoted(key) if isinstance(key, str) else repr(key)[:80]
    return UsageError(
        f"--src-list {where!r} names data file {shown}, which lies {place} — ishard reads only "
        "the data files of the report itself: use the manifest.json AWS wrote, in its place"
    )


def schema_fields(fields: list[str], where: str) -> set[str]:
    """The column names of a Parquet or ORC report's ``fileSchema``, which must hold the key
    and the size."""
    if "key" not in fields or "size" not in fields:
        raise UsageError(
            f"--src-list {where!r}: the inventory must include the Key and Size fields"
        )
    return set(fields)
