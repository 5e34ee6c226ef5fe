"""Find samples through a destination's sample index, and read one out of its shard with a
ranged read (``ishard find``, ``ishard cat``).

Where a sample's bytes lie in its shard: in a ``.tar`` or a stored ``.zip`` from its first
member's header to the end of its last member's data (a tar's padding included); in a
seekable ``.tar.zst`` its frames. A ``.tgz``, a ``.tar.lz4`` or a deflated ``.zip`` cannot be
entered in the middle: their samples are found by reading the shard forward."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from ..checksums import digest_of, member_checksum, split
from ..errors import DataError, UsageError
from ..formats.registry import read_as
from ..run.manifest import MANIFEST_NAME, read_manifest
from ..run.sampleindex import check_index, fetch_index
from ..store import Location, parse_storage_options, resolve
from .archive import contents, damage_as_error

BLOCK = 512
FIND_BATCH = 1 << 16  # keys looked up in one query


@dataclass(frozen=True)
class MemberPlace:
    """One member of a found sample: its name in the archive, where its header and data start
    (in the shard, or in the tar stream inside a compressed shard), its size and mtime."""

    member: str
    header_offset: int
    data_offset: int
    size: int
    mtime: int
    checksum: int | None = None  # the xxh3-64 of its bytes (None: an index without them)


@dataclass(frozen=True)
class Found:
    """A sample the index holds: its shard, its members in archive order, and the bytes of the
    shard that hold it (``start``, ``end``: a half-open range; None where the shard's format
    has no random access)."""

    key: str
    shard: str
    members: tuple[MemberPlace, ...]
    start: int | None
    end: int | None
    frames: bool  # the range is zstd frames (decompressed, they start at the first header)

    def as_json(self) -> dict[str, Any]:
        """The sample as ``ishard find --json`` prints it."""
        return {
            "key": self.key,
            "shard": self.shard,
            "range": None if self.start is None else [self.start, self.end],
            "compressed": self.frames,
            "members": [
                {
                    "member": m.member,
                    "header_offset": m.header_offset,
                    "data_offset": m.data_offset,
                    "size": m.size,
                }
                for m in self.members
            ],
        }


def _destination(dst: str, endpoint_url: str | None, storage_options) -> Location:
    return resolve(
        str(dst),
        endpoint_url=endpoint_url,
        role="destination",
        storage_options=parse_storage_options(storage_options),
    )


def _index_record(location: Location) -> tuple[dict, dict]:
    """The manifest's ishard record and its sample index record; the manifest is parsed, not
    checked entry by entry (a lookup reads no shard list), unless it cannot be read, for
    ``read_manifest``'s error."""
    data = location.read_file(MANIFEST_NAME)
    try:
        manifest = orjson.loads(data) if data is not None else None
    except orjson.JSONDecodeError:
        manifest = None
    if not isinstance(manifest, dict):
        manifest = read_manifest(location)
    record = manifest.get("ishard") or {}
    index = record.get("samples_index")
    if isinstance(index, dict) and not _plain_name(index.get("name")):
        raise DataError(
            f"{location.child(MANIFEST_NAME)!r} names a sample index outside the destination "
            f"({index.get('name')!r}) — run ishard verify on the destination"
        )
    if not isinstance(index, dict):
        raise UsageError(
            f"{location.child(MANIFEST_NAME)!r} names no sample index (written by a run with "
            "--no-sample-index, or by an older ishard) — shard again to write one"
        )
    return record, index


def _plain_name(name: object) -> bool:
    """A file name right in the destination: no folder, no ``..``, no NUL."""
    return isinstance(name, str) and name not in ("", ".", "..") and not set(name) & {"/", "\0"}


@contextlib.contextmanager
def _index_file(location: Location, index: Mapping) -> Iterator[str]:
    """A path the column engine reads the index at, checked against the manifest's record:
    a local index through the descriptor it was opened with (no link followed), any other
    copied to a temporary folder first."""
    fd = None
    if os.path.isdir("/proc/self/fd"):
        with location.translated("destination"):
            try:
                fd = location.store.descriptor(location.key(index["name"]))
            except FileNotFoundError:
                fd = None  # fetch_index names it missing
    if fd is not None:
        try:
            size = os.fstat(fd).st_size
            with open(fd, "rb", closefd=False) as f:
                digest = digest_of(f, split(index["checksum"])[0])
            check_index(location, index, index["name"], size, digest)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="ishard-find-") as folder:
        yield fetch_index(location, index, folder, index["name"])


def _query(path: str, keys: Sequence[str]) -> list[tuple]:
    import duckdb
    import numpy as np

    con = duckdb.connect()
    try:
        rows: list[tuple] = []
        columns = {
            r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
        }
        sums = "xxh3_64" if "xxh3_64" in columns else "NULL"  # an index of an older ishard
        for start in range(0, len(keys), FIND_BATCH):
            wanted = {"key": np.array(keys[start : start + FIND_BATCH], dtype=object)}
            con.register("wanted", wanted)
            rows += con.execute(
                "SELECT key, shard, member, header_offset, data_offset, size, mtime, "
                f"frame_offset, frame_size, {sums} FROM read_parquet(?) "
                "WHERE key IN (SELECT key FROM wanted) ORDER BY key, shard, header_offset",
                [path],
            ).fetchall()
            con.unregister("wanted")
        return rows
    finally:
        con.close()


def _found(key: str, rows: list[tuple], stored_zip: bool) -> Found:
    shard = rows[0][1]
    places = tuple(MemberPlace(r[2], r[3], r[4], r[5], r[6], r[9]) for r in rows)
    if any(p.header_offset is None for p in places):
        raise UsageError(
            "the sample index has no offsets (written by an older ishard) — shard again "
            "to write one"
        )
    fmt = read_as(shard)
    first, last = places[0], places[-1]
    if fmt.seekable and rows[0][7] is not None:
        return Found(key, shard, places, rows[0][7], rows[0][7] + rows[0][8], True)
    if fmt.name == "tar":
        end = last.data_offset + last.size + (-last.size % BLOCK)
        return Found(key, shard, places, first.header_offset, end, False)
    if fmt.container == "zip" and stored_zip:
        return Found(key, shard, places, first.header_offset, last.data_offset + last.size, False)
    return Found(key, shard, places, None, None, False)


def find(
    dst: str,
    keys: Sequence[str],
    *,
    endpoint_url: str | None = None,
    storage_options=None,
) -> tuple[list[Found], list[str]]:
    """The samples ``keys`` name, from ``dst``'s sample index (in the order asked), and the
    keys it does not hold.

    Raises:
        UsageError: ``dst`` has no manifest or its manifest names no index.
        DataError: the index is not the one the manifest names.
    """
    location = _destination(dst, endpoint_url, storage_options)
    record, index = _index_record(location)
    stored_zip = record.get("options", {}).get("zip_compression", "stored") != "deflated"
    unique = list(dict.fromkeys(keys))
    with _index_file(location, index) as path:
        rows = _query(path, unique)
    by_key: dict[str, list[tuple]] = {}
    for row in rows:
        by_key.setdefault(row[0], []).append(row)
    found = [_found(k, by_key[k], stored_zip) for k in unique if k in by_key]
    return found, [k for k in unique if k not in by_key]


def read_sample(
    dst: str, found: Found, *, endpoint_url: str | None = None, storage_options=None
) -> list[tuple[MemberPlace, bytes]]:
    """The members of a found sample with their bytes: one ranged read of the shard where its
    format allows (its frames decompressed for a seekable shard), else the shard read forward
    to the sample.

    Raises:
        DataError: the bytes read are not the sample the index says (the shard was changed).
    """
    location = _destination(dst, endpoint_url, storage_options)
    key = location.key(found.shard)
    with location.translated("destination"):
        if found.start is None or found.end is None:
            return _read_forward(location, key, found)
        data = location.store.read(key, found.start, found.end)
    if found.frames:
        from ..formats.zstd import decompress

        base, last = found.members[0].header_offset, found.members[-1]
        try:  # the sample's part of the tar stream: headers, data, padding, and no more
            data = decompress(data, last.data_offset + last.size + (-last.size % BLOCK) - base)
        except ValueError:
            data = b""  # told below, as any other bytes that are not the sample
    else:
        base = found.start
    out = []
    for m in found.members:
        at = m.data_offset - base
        body = data[at : at + m.size]
        if at < 0 or len(body) != m.size or not _named(data, m, base, found.shard):
            raise DataError(
                f"shard {location.child(found.shard)!r} does not hold member {m.member!r} where "
                "the sample index says — run ishard verify on the destination"
            )
        out.append((m, _checked(location, found, m, body)))
    return out


def _checked(location: Location, found: Found, member: MemberPlace, body: bytes) -> bytes:
    """``body``, when it is the member's bytes the index has the checksum of.

    Raises:
        DataError: other bytes (the shard changed after it was indexed)."""
    if member.checksum is not None and member_checksum(body) != member.checksum:
        raise DataError(
            f"bytes of member {member.member!r} in shard {location.child(found.shard)!r} are "
            "not those indexed (the shard changed after it was written) — run ishard verify "
            "on the destination"
        )
    return body


def _named(data: bytes, member: MemberPlace, base: int, shard: str) -> bool:
    """Does the header at the member's offset carry its name? (a cheap check that the shard
    is the one indexed: a tar's plain ustar name or a pax path, a zip's local header name)."""
    head = data[member.header_offset - base : member.data_offset - base]
    name = member.member.encode("utf-8", "surrogateescape")
    if read_as(shard).container == "zip":
        return head[30 : 30 + len(name)] == name
    return name in head or name.rpartition(b"/")[2] in head


def _read_forward(location: Location, key: str, found: Found) -> list[tuple[MemberPlace, bytes]]:
    wanted = {m.member: m for m in found.members}
    got: dict[str, bytes] = {}
    with location.store.open_read(key) as raw:
        if read_as(found.shard).container == "zip":  # its directory, then its members alone
            with damage_as_error(found.shard), zipfile.ZipFile(raw) as zf:
                listed = set(zf.namelist())
                got = {name: zf.read(name) for name in wanted if name in listed}
            return _all_of(location, found, got)
        for name, data in contents(found.shard, raw):
            if name in wanted:
                got[name] = data
                if len(got) == len(wanted):
                    break
    return _all_of(location, found, got)


def _all_of(
    location: Location, found: Found, got: dict[str, bytes]
) -> list[tuple[MemberPlace, bytes]]:
    if len(got) != len(found.members):
        raise DataError(
            f"shard {location.child(found.shard)!r} does not hold every member of sample "
            f"{found.key!r} the sample index names — run ishard verify on the destination"
        )
    return [(m, _checked(location, found, m, got[m.member])) for m in found.members]


def write_tar(out: BinaryIO, samples: Sequence[list[tuple[MemberPlace, bytes]]]) -> None:
    """The samples' members as one tar stream on ``out`` (as ishard writes a ``.tar``)."""
    from ..formats.tar import TarWriter

    class _Out:
        def write(self, data: bytes | bytearray | memoryview) -> None:
            out.write(data)

        def close(self) -> None:
            out.flush()

    writer = TarWriter(_Out())  # type: ignore[arg-type]
    for sample in samples:
        writer.sample()
        for m, data in sample:
            writer.add(m.member, len(data), m.mtime, io.BytesIO(data))
    writer.close()


def safe_parts(member: str) -> list[str]:
    """The folders and file name of ``member`` under an extraction folder.

    Raises:
        DataError: the name would leave the folder (absolute, ``..``, an empty part).
    """
    parts = member.split("/")
    if member.startswith("/") or "\0" in member or any(p in ("", ".", "..") for p in parts):
        raise DataError(
            f"member name {member!r} would leave the extraction folder — not extracted; "
            "run ishard verify on the destination"
        )
    return parts


def extract(folder: str, samples: Sequence[list[tuple[MemberPlace, bytes]]]) -> list[str]:
    """Write each member under ``folder`` (made if missing) by its name in the archive; the
    paths written. No link is followed: each folder is entered through the descriptor of the
    one above it, and each file is written under a temporary name, then renamed over
    whatever had its name (a link is replaced, never written through).

    Raises:
        DataError: a name that would leave ``folder``, or a link where a folder must be.
    """
    os.makedirs(folder, exist_ok=True)
    root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    written = []
    try:
        for sample in samples:
            for m, data in sample:
                parts = safe_parts(m.member)
                _write_under(root, parts, data, m.member, folder)
                written.append(os.path.join(folder, *parts))
    finally:
        os.close(root)
    return written


def _write_under(root: int, parts: list[str], data: bytes, member: str, folder: str) -> None:
    nofollow = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    at = os.dup(root)
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=at)
            try:
                inner = os.open(part, nofollow, dir_fd=at)
            except OSError as err:
                raise DataError(
                    f"cannot extract {member!r} into {folder!r}: {part!r} is not a folder "
                    "there (a link is never followed) — choose an empty -o folder"
                ) from err
            os.close(at)
            at = inner
        temp = f".{parts[-1]}.ishard-{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=at)
        try:
            with open(fd, "wb", closefd=False) as f:
                f.write(data)
            os.rename(temp, parts[-1], src_dir_fd=at, dst_dir_fd=at)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=at)
            raise
        finally:
            os.close(fd)
    finally:
        os.close(at)
