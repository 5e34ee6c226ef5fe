"""One shard read back and checked against its manifest entry (``ishard verify``'s per-shard
step): size, checksum and members in one pass over its bytes; with ``--deep`` member data,
payload and samples. A ``Problem`` is one thing found wrong."""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

from ..checksums import hasher, split
from ..formats.reading import FrameWalker
from ..formats.registry import read_as
from ..planning.keys import KeyFunction
from ..progress import Progress
from ..run.manifest import entry_checksum
from ..store import Location
from ..store.base import NotRegular
from .archive import DamagedArchive, Member, scan

READ_STEP = 1 << 20
REPORT_EVERY = 4 << 20  # bytes read between progress reports


@dataclass(frozen=True)
class Problem:
    """One thing wrong in DST: the file it is about, its kind, a sentence, expected vs found.

    Kinds: ``missing``, ``not_regular`` (a link, FIFO, device or directory: never read),
    ``unreadable``, ``size``, the checksum's algorithm (``xxh128``, ``blake3``, ``sha256``,
    ``md5``: the shard's digest differs from the recorded one), ``checksum_missing`` (the
    run recorded checksums, as its options say, but this shard's entry has none), ``members``,
    ``payload``, ``samples``, ``split_sample``, ``scattered_sample``, ``unlisted``, ``index``,
    ``seek_table`` (a ``.tar.zst``'s seek table does not describe its frames; ``--deep``)
    (the manifest's record of the sample index is malformed).
    """

    name: str
    kind: str
    detail: str
    expected: object = None
    found: object = None


class _Tap(io.RawIOBase):
    """A shard's raw bytes on their way in: counted, hashed (by ``algorithm``, when a checksum
    is to be checked), reported as progress; the first read failure is kept apart from archive
    damage."""

    def __init__(self, raw: BinaryIO, algorithm: str | None, progress: Progress) -> None:
        super().__init__()
        self._raw, self._progress = raw, progress
        self._hash = hasher(algorithm) if algorithm else None
        self.frames: FrameWalker | None = None  # a seekable shard's frames, walked (--deep)
        self.count = self._pending = 0
        self.error: Exception | None = None
        self._ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self._ended:  # a zip's reader moves the file on afterwards: count nothing twice
            return 0
        try:
            data = self._raw.read(len(buffer))
        except Exception as err:  # noqa: BLE001 - a store's read error, kept apart from archive damage
            self.error = err
            raise OSError(f"read failed: {err}") from None
        n = len(data)
        self._ended = not n
        buffer[:n] = data
        self.count += n
        self._pending += n
        if self._hash is not None:
            self._hash.update(data)
        if self.frames is not None:
            self.frames.feed(data)
        if self._pending >= REPORT_EVERY or not n:
            self._progress.verified(self._pending)
            self._pending = 0
        return n

    def drain(self) -> None:
        """Read what is left (for the checksum and the count)."""
        while self.read(READ_STEP):
            pass

    @property
    def hexdigest(self) -> str | None:
        return self._hash.hexdigest() if self._hash is not None else None


@dataclass
class ShardCheck:
    problems: list[Problem]
    keys: list[str] | None  # distinct sample keys in archive order (with deep only)
    nbytes: int = 0


def _open(dst: Location, name: str) -> tuple[BinaryIO, int]:
    """The shard's bytes and its size; FileNotFoundError when it is not there, NotRegular
    when it is not a regular file."""
    key = dst.key(name)
    size = dst.store.stat(key).size
    return dst.store.open_read(key), size


def _members(name: str, raw: BinaryIO, tap: _Tap, deep: bool) -> list[Member]:
    """Every member, read from one pass over the bytes (a container that seeks, a zip, is
    hashed first)."""
    if read_as(name).container.seeks:
        tap.drain()
        raw.seek(0)
        return list(scan(name, raw, read_data=deep))
    found = list(scan(name, io.BufferedReader(tap, READ_STEP), read_data=deep))
    tap.drain()
    return found


def _check_members(
    name: str,
    members: list[Member],
    record: Mapping | None,
    deep: bool,
    key_of: KeyFunction | None,
    entry: Mapping,
) -> ShardCheck:
    if record is None:
        return ShardCheck([], None)
    problems: list[Problem] = []
    _compare(problems, name, "members", "member count", record["files"], len(members))
    if not deep or key_of is None:
        return ShardCheck(problems, None)
    _compare(
        problems,
        name,
        "payload",
        "member payload",
        record["payload_bytes"],
        sum(m.size for m in members),
        " bytes",
    )
    keys, scattered = _sample_runs(name, members, key_of)
    _compare(problems, name, "samples", "sample count", entry["nsamples"], len(keys))
    return ShardCheck(problems + scattered, keys)


# A shard whose bytes are not the ones written: what the reader of verify's line can do
CHANGED_FIX = (
    " — the shard changed after ishard wrote it (damaged or replaced): run the ishard shard "
    "command that wrote it again with --resume, which rewrites such shards (or --overwrite "
    "to start over)"
)


def _compare(
    problems: list[Problem],
    name: str,
    kind: str,
    what: str,
    expected,
    found,
    unit: str = "",
    fix: str = "",
) -> None:
    if found != expected:
        problems.append(
            Problem(
                name,
                kind,
                f"{what} is {found}{unit}, the manifest says {expected}{unit}{fix}",
                expected,
                found,
            )
        )


def _sample_runs(
    name: str, members: list[Member], key_of: KeyFunction
) -> tuple[list[str], list[Problem]]:
    """Distinct keys in order; a problem for each sample whose members are not side by side."""
    keys: list[str] = []
    seen: set[str] = set()
    problems: list[Problem] = []
    last = None
    for m in members:
        key = key_of(m.name)
        if key == last:
            continue
        if key not in seen:
            seen.add(key)
            keys.append(key)
        elif not any(p.expected == key for p in problems):
            problems.append(
                Problem(
                    name,
                    "scattered_sample",
                    f"members of sample {key!r} are "
                    f"not side by side: {m.name!r} follows another sample's",
                    key,
                    m.name,
                )
            )
        last = key
    return keys, problems


def _opened(dst: Location, name: str) -> tuple[BinaryIO, int] | ShardCheck:
    """The shard's bytes and its size, or the check of a shard that is missing, not a regular
    file or cannot be read (a store's passing error is raised: the caller retries)."""
    try:
        return _open(dst, name)
    except FileNotFoundError:
        return ShardCheck([Problem(name, "missing", "is missing (the manifest lists it)")], None)
    except NotRegular as err:
        return ShardCheck(
            [
                Problem(
                    name,
                    "not_regular",
                    f"is not a regular file ({err.strerror or err}) — verify "
                    "reads only regular files; put the shard itself back",
                )
            ],
            None,
        )
    except OSError as err:
        if dst.store.capabilities.transient_errors:
            raise
        return ShardCheck(
            [Problem(name, "unreadable", f"cannot be read: {err.strerror or err}")], None
        )


def check_shard(
    dst: Location,
    entry: Mapping,
    record: Mapping | None,
    deep: bool,
    key_of: KeyFunction | None,
    progress: Progress,
) -> ShardCheck:
    """Every check of one shard that needs only that shard."""
    name = entry["url"]
    opened = _opened(dst, name)
    if isinstance(opened, ShardCheck):
        return opened
    raw, size = opened
    problems: list[Problem] = []
    recorded = entry_checksum(entry)
    algorithm, expected = split(recorded) if recorded else (None, None)
    # the fix is told once: on the checksum's line, or the size's when none was recorded
    fix = "" if algorithm else CHANGED_FIX
    _compare(problems, name, "size", "size", entry["filesize"], size, " bytes", fix)
    tap = _Tap(raw, algorithm, progress)
    frames = read_as(name).frames
    if deep and frames is not None:
        tap.frames = frames.walk()
    with raw:
        try:
            shard = _check_members(
                name, _members(name, raw, tap, deep), record, deep, key_of, entry
            )
        except (DamagedArchive, OSError) as err:
            if tap.error is not None and dst.store.capabilities.transient_errors:
                raise tap.error from None  # the store, not the archive: retried by the caller
            reason = err.reason if isinstance(err, DamagedArchive) else str(err)
            shard = ShardCheck([Problem(name, "unreadable", f"cannot be read: {reason}")], None)
            _drain_quietly(tap)
    if algorithm is not None and tap.error is None:
        _compare(problems, name, algorithm, algorithm, expected, tap.hexdigest, fix=CHANGED_FIX)
    if not any(p.kind == "unreadable" for p in shard.problems):  # else told as unreadable
        problems += _seek_table(name, tap)
    shard.problems[:0] = problems
    shard.nbytes = tap.count
    progress.shard_verified(name)
    return shard


def _seek_table(name: str, tap: _Tap) -> list[Problem]:
    """A problem when a seekable shard's seek table does not describe the frames it holds
    (what a reader of one sample trusts to find that sample's frames)."""
    frames = read_as(name).frames
    if frames is None or tap.frames is None or tap.error is not None:
        return []
    detail = frames.problem(tap.frames)
    if detail is None:
        return []
    return [Problem(name, "seek_table", f"seek table is wrong: {detail}{CHANGED_FIX}")]


def _drain_quietly(tap: _Tap) -> None:
    try:
        tap.drain()
    except OSError:
        pass  # already reported as unreadable
