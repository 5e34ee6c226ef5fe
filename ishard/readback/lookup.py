"""Find samples through a destination's sample index, and read one out of its shard with a
ranged read (``ishard find``, ``ishard cat``).

How a sample's bytes are reached is its format record's to say (``Format.reach``): a byte
range from its first member's header to the end of its last member's data, padding included
(a ``.tar``, a stored ``.zip``); its own frames (a seekable ``.tar.zst``); or, for a format that
cannot be entered in the middle (a ``.tgz``, a ``.tar.lz4``, a deflated ``.zip``), the shard
read forward to it."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..checksums import digest_of, member_checksum, split
from ..errors import DataError, UsageError
from ..formats.registry import read_as
from ..names import quoted, shown
from ..run.manifest import MANIFEST_NAME, check_manifest, read_manifest
from ..run.sampleindex import COPIED_COLUMN, check_index, fetch_index
from ..store import Location
from .archive import contents
from .dataset import ROLE, dataset
from .indexrows import Claims, sample_keys
from .nearkeys import near_keys

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
    source_md5: str | None = None  # copied in the store (--compose): its MD5 by the source


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
    shard_size: int | None = None  # the shard's size, as the manifest records it

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
    return dataset(dst, endpoint_url=endpoint_url, storage_options=storage_options)


def _index_record(location: Location) -> tuple[dict, dict, dict[str, int]]:
    """The manifest's ishard record, its sample index record and its shards (name → recorded
    size: the only shards a lookup reads); ``read_manifest``'s error where it cannot be read."""
    data = location.read_file(MANIFEST_NAME, role=ROLE)
    if data is not None:
        manifest = check_manifest(data, location.child(MANIFEST_NAME))
    else:
        manifest = read_manifest(location)
    shards = {e["url"]: e["filesize"] for e in manifest["shardlist"]}
    record = manifest.get("ishard")
    record = record if isinstance(record, dict) else {}
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
    return record, index, shards


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
        with location.translated(ROLE):
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


def _query(
    path: str, keys: Sequence[str], where: str, near: int
) -> tuple[list[tuple], dict[str, tuple[str, ...]]]:
    """The index rows of ``keys``, and up to ``near`` keys the index holds nearest to each
    of the first keys it does not hold (``nearkeys.near_keys``).

    Raises:
        DataError: the index cannot be read as one."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")  # it draws on stdout, into --json
        rows = _rows(con, path, keys)
        held = {r[0] for r in rows}
        missing = [k for k in keys if k not in held]
        return rows, near_keys(con, path, missing, near) if near and missing else {}
    except duckdb.Error as err:
        raise DataError(
            f"{where!r} cannot be read as a sample index ({str(err).splitlines()[0]}) — run "
            "ishard verify on the destination"
        ) from None
    finally:
        con.close()


def _rows(con, path: str, keys: Sequence[str]) -> list[tuple]:
    import numpy as np

    rows: list[tuple] = []
    columns = {
        r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
    }
    sums = "xxh3_64" if "xxh3_64" in columns else "NULL"  # an index of an older ishard
    etags = COPIED_COLUMN if COPIED_COLUMN in columns else "NULL"  # no member copied in a store
    for start in range(0, len(keys), FIND_BATCH):
        wanted = {"key": np.array(keys[start : start + FIND_BATCH], dtype=object)}
        con.register("wanted", wanted)
        rows += con.execute(
            "SELECT key, shard, member, header_offset, data_offset, size, mtime, "
            f"frame_offset, frame_size, {sums}, {etags} FROM read_parquet(?) "
            "WHERE key IN (SELECT key FROM wanted) ORDER BY key, shard, header_offset",
            [path],
        ).fetchall()
        con.unregister("wanted")
    return rows


def _found(key: str, rows: list[tuple], claims: Claims) -> Found:
    claims.check(key, rows)  # before anything is read: the shard, offsets and sizes
    shard = rows[0][1]
    size = claims.shards[shard]
    places = tuple(MemberPlace(r[2], r[3], r[4], r[5], r[6], r[9], r[10]) for r in rows)
    fmt = read_as(shard)
    reach = fmt.reach(claims.options)
    if reach == "frames" and rows[0][7] is not None:
        return Found(key, shard, places, rows[0][7], rows[0][7] + rows[0][8], True, size)
    if reach == "range":
        end = places[-1].data_offset + fmt.container.padded(places[-1].size)
        return Found(key, shard, places, places[0].header_offset, end, False, size)
    return Found(key, shard, places, None, None, False, size)


@dataclass(frozen=True)
class Lookup:
    """What :func:`search` found: the samples (in the order asked), the keys the index does
    not hold, up to ``near`` keys it holds nearest to each of the first of those (by missing
    key; one with none is left out), and the index's path or URL."""

    found: list[Found]
    missing: list[str]
    near: dict[str, tuple[str, ...]]
    index: str


def search(
    dst: str,
    keys: str | Iterable[str],
    *,
    near: int = 0,
    endpoint_url: str | None = None,
    storage_options=None,
) -> Lookup:
    """The samples ``keys`` name (one key, or an iterable of them), from ``dst``'s sample
    index (in the order asked), the keys it does not hold and, with ``near``, up to that many
    keys it holds nearest to each of the first ``nearkeys.NEAR_FOR`` of those (one more
    pass over its keys). Each sample's rows are held against the manifest first: a shard it
    lists, offsets and sizes inside it.

    Raises:
        UsageError: ``keys`` is not a key or keys; ``dst`` has no manifest or its manifest
            names no index.
        DataError: the index is not the one the manifest names, or says what cannot be.
    """
    wanted = sample_keys(keys)
    location = _destination(dst, endpoint_url, storage_options)
    record, index, shards = _index_record(location)
    options = record.get("options")
    claims = Claims(
        location.child(index["name"]), shards, options if isinstance(options, dict) else {}
    )
    # a key that is not UTF-8 (a local file's undecodable bytes) is held with \xNN escapes
    stored = {k: shown(k) for k in dict.fromkeys(wanted)}
    with _index_file(location, index) as path:
        rows, nearest = _query(path, list(dict.fromkeys(stored.values())), claims.where, near)
    by_key: dict[str, list[tuple]] = {}
    for row in rows:
        by_key.setdefault(row[0], []).append(row)
    found = [_found(k, by_key[s], claims) for k, s in stored.items() if s in by_key]
    missing = [k for k, s in stored.items() if s not in by_key]
    close = {k: nearest[stored[k]] for k in missing if stored[k] in nearest}
    return Lookup(found, missing, close, claims.where)


def find(
    dst: str,
    keys: str | Iterable[str],
    *,
    endpoint_url: str | None = None,
    storage_options=None,
) -> tuple[list[Found], list[str]]:
    """The samples ``keys`` name and the keys the index does not hold: :func:`search`
    without near keys.

    Raises:
        UsageError: ``keys`` is not a key or keys; ``dst`` has no manifest or its manifest
            names no index.
        DataError: the index is not the one the manifest names, or says what cannot be.
    """
    done = search(dst, keys, endpoint_url=endpoint_url, storage_options=storage_options)
    return done.found, done.missing


def read_sample(
    dst: str, found: Found, *, endpoint_url: str | None = None, storage_options=None
) -> list[tuple[MemberPlace, bytes]]:
    """The members of a found sample with their bytes: one ranged read of the shard where its
    format allows (its frames decompressed for a seekable shard), else the shard read forward
    to the sample. Each member's header is held against its row (name, size, where its data
    starts).

    Raises:
        UsageError: ``found`` is not a sample :func:`find` found.
        DataError: the bytes read are not the sample the index says (the shard was changed).
    """
    if not isinstance(found, Found):
        raise UsageError(
            f"found must be a sample ishard.find found, not a {type(found).__name__} — e.g. "
            "read_sample(dst, find(dst, key)[0][0])"
        )
    location = _destination(dst, endpoint_url, storage_options)
    key = location.key(found.shard)
    with location.translated(ROLE):
        if found.start is None or found.end is None:
            return _read_forward(location, key, found)
        end = found.end
        trailer = 0 if found.frames else read_as(found.shard).container.trailer
        if trailer:  # what follows the last member's data, where it has any (a zip's descriptor)
            end += trailer
            end = end if found.shard_size is None else min(end, found.shard_size)
        data = location.store.read(key, found.start, end)
    if found.frames:
        return _from_frames(location, found, data)
    return [_member(location, found, data, found.start, m) for m in found.members]


def _from_frames(
    location: Location, found: Found, frames: bytes
) -> list[tuple[MemberPlace, bytes]]:
    """The members out of a sample's zstd frames: exactly its part of the tar stream
    (headers, data, padding); else the first member whose header differs from its row, or
    the frames named."""
    fmt = read_as(found.shard)
    walk = fmt.frames
    if walk is None:
        raise UsageError(
            f"found says sample {quoted(found.key)} is in frames, but shard {found.shard!r} is "
            "not cut into frames — give a sample ishard.find found"
        )
    base, last = found.members[0].header_offset, found.members[-1]
    span = last.data_offset + fmt.container.padded(last.size) - base
    try:
        data = walk.decompress(frames, span)
    except ValueError:
        data = walk.leading(frames, span + fmt.container.block)  # as far as the headers go
        for m in found.members:
            if fmt.container.mismatch(data, base, m)[0] is not None:
                _member(location, found, data, base, m)
        raise DataError(
            f"shard {location.child(found.shard)!r} does not hold sample {quoted(found.key)} "
            f"where the sample index says (its frames do not decompress to the {span} bytes "
            "its members take) — run ishard verify on the destination"
        ) from None
    return [_member(location, found, data, base, m) for m in found.members]


def _member(
    location: Location, found: Found, data: bytes, base: int, member: MemberPlace
) -> tuple[MemberPlace, bytes]:
    """A member's bytes out of ``data`` (the shard's, or its tar stream's, from ``base``),
    once its header says what its row does."""
    differs, name = read_as(found.shard).container.mismatch(data, base, member)
    at = member.data_offset - base
    body = data[at : at + member.size]
    if differs is None and len(body) != member.size:
        differs = f"ends the shard after {len(body)} of its {member.size} bytes"
    if differs is not None:
        raise _not_held(location, found, member, differs)
    return dataclasses.replace(member, member=name), _checked(location, found, member, body)


def _checked(location: Location, found: Found, member: MemberPlace, body: bytes) -> bytes:
    """``body``, when it is the member's bytes the index has the checksum of.

    Raises:
        DataError: other bytes (the shard changed after it was indexed)."""
    md5 = member.source_md5
    if (member.checksum is not None and member_checksum(body) != member.checksum) or (
        md5 is not None and hashlib.md5(body).hexdigest() != md5
    ):
        raise DataError(
            f"bytes of member {quoted(member.member)} in shard {location.child(found.shard)!r} "
            "are not those indexed (the shard changed after it was written) — run ishard "
            "verify on the destination"
        )
    return body


def _not_held(location: Location, found: Found, member: MemberPlace, detail: str) -> DataError:
    return DataError(
        f"shard {location.child(found.shard)!r}: member {quoted(member.member)} {detail}, so "
        "the shard does not hold it where the sample index says — run ishard verify on the "
        "destination"
    )


def _read_forward(location: Location, key: str, found: Found) -> list[tuple[MemberPlace, bytes]]:
    wanted = {shown(m.member): m for m in found.members}
    got: dict[str, tuple[str, bytes]] = {}
    with location.store.open_read(key) as raw:
        for name, data in contents(found.shard, raw, only=wanted):
            if shown(name) in wanted:  # the index holds a name that is not UTF-8 escaped
                got[shown(name)] = (name, data)
                if len(got) == len(wanted):
                    break
    return _all_of(location, found, got)


def _all_of(
    location: Location, found: Found, got: dict[str, tuple[str, bytes]]
) -> list[tuple[MemberPlace, bytes]]:
    if len(got) != len(found.members):
        raise DataError(
            f"shard {location.child(found.shard)!r} does not hold every member of sample "
            f"{found.key!r} the sample index names — run ishard verify on the destination"
        )
    out = []
    for m in found.members:
        name, data = got[shown(m.member)]
        if len(data) != m.size:
            detail = f"holds {len(data)} bytes (the index says {m.size})"
            raise _not_held(location, found, m, detail)
        out.append((dataclasses.replace(m, member=name), _checked(location, found, m, data)))
    return out


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
