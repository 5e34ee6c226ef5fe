"""Check the shards in a destination against its manifest: presence, size, md5, members, samples."""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

from .archive import DamagedArchive, Member, scan
from .checksums import ALGORITHMS, hasher, split
from .errors import DataError, UsageError
from .formats import ARCHIVE_EXTS
from .formats.registry import read_as
from .options import jobs_option
from .planning.keys import KeyFunction, key_function, sample_key, wds_split
from .run.manifest import MANIFEST_NAME, entry_checksum, read_manifest
from .run.progress import SILENT, Progress
from .sizes import counted
from .store import Location, parse_storage_options, resolve
from .store.base import NotRegular
from .store.retry import Retrier
from .store.sinks import TEMP_SUFFIX

LOG = logging.getLogger("ishard")

READ_STEP = 1 << 20
REPORT_EVERY = 4 << 20  # bytes read between progress reports


@dataclass(frozen=True)
class Problem:
    """One thing wrong in DST: the file it is about, its kind, a sentence, expected vs found.

    Kinds: ``missing``, ``not_regular`` (a link, FIFO, device or directory: never read),
    ``unreadable``, ``size``, the checksum's algorithm (``xxh128``, ``blake3``, ``sha256``,
    ``md5``: the shard's digest differs from the recorded one), ``checksum_missing`` (the
    run recorded checksums, as its options say, but this shard's entry has none), ``members``,
    ``payload``, ``samples``, ``split_sample``, ``scattered_sample``, ``unlisted``.
    """

    name: str
    kind: str
    detail: str
    expected: object = None
    found: object = None


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found: no problems means every listed shard is intact."""

    destination: str
    deep: bool
    shards: int
    shards_ok: int
    checksums_checked: int
    bytes_read: int
    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems

    def __repr__(self) -> str:  # the counts: the problems may be many
        return (
            f"Verification(ok={self.ok}, shards={self.shards}, shards_ok={self.shards_ok}, "
            f"problems={len(self.problems)}, deep={self.deep}, dst={self.destination!r})"
        )

    def to_dict(self) -> dict:
        """Plain JSON-ready values (what ``ishard verify --json`` prints)."""
        doc = asdict(self)
        doc["ok"] = self.ok
        return doc


def member_key_function(options: Mapping) -> KeyFunction:
    """A member's sample key, from the options a manifest recorded.

    Members named like their source files (``member_names`` absent or ``"original"``) have
    the key the run gave the file: ``sample_key_pattern`` with the file's extension trimmed.
    ``--ekm`` and ``--collapse`` only route and cut samples, so they leave keys alone.
    Members named ``<key>.<ext>`` (``member_names="sample"``) have their name up to the
    basename's first dot as key (``.seg.png`` is one extension there, as WebDataset reads it).

    Raises:
        DataError: the recorded naming or key pattern is not one this ishard knows.
    """
    naming = options.get("member_names") or "original"
    if naming not in ("original", "sample"):
        raise DataError(
            f"the manifest's member_names {naming!r} is unknown to this ishard — "
            "verify with the ishard version that wrote the shards"
        )
    if naming == "sample":  # <key>.<extension>, the extension after the basename's first dot
        return lambda name: wds_split(name)[0]
    pattern = options.get("sample_key_pattern", "")
    try:
        key = key_function(pattern)
    except UsageError:
        raise DataError(
            f"the manifest's sample_key_pattern {pattern!r} is not a valid RE2 "
            "regex (written by an ishard before RE2, or edited) — verify without "
            "--deep, or rewrite the shards"
        ) from None
    return lambda name: sample_key(name, key)


class _Tap(io.RawIOBase):
    """A shard's raw bytes on their way in: counted, hashed (by ``algorithm``, when a checksum
    is to be checked), reported as progress; the first read failure is kept apart from archive
    damage."""

    def __init__(self, raw: BinaryIO, algorithm: str | None, progress: Progress) -> None:
        super().__init__()
        self._raw, self._progress = raw, progress
        self._hash = hasher(algorithm) if algorithm else None
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
class _Shard:
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
    """Every member, read from one pass over the bytes (a zip is hashed first: it seeks)."""
    if read_as(name).container == "zip":
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
) -> _Shard:
    if record is None:
        return _Shard([], None)
    problems: list[Problem] = []
    _compare(problems, name, "members", "member count", record["files"], len(members))
    if not deep or key_of is None:
        return _Shard(problems, None)
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
    return _Shard(problems + scattered, keys)


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


def _check_shard(
    dst: Location,
    entry: Mapping,
    record: Mapping | None,
    deep: bool,
    key_of: KeyFunction | None,
    progress: Progress,
) -> _Shard:
    """Every check of one shard that needs only that shard."""
    name = entry["url"]
    try:
        raw, size = _open(dst, name)
    except FileNotFoundError:
        return _Shard([Problem(name, "missing", "is missing (the manifest lists it)")], None)
    except NotRegular as err:
        return _Shard(
            [
                Problem(
                    name,
                    "not_regular",
                    f"is not a regular file ({err}) — verify "
                    "reads only regular files; put the shard itself back",
                )
            ],
            None,
        )
    except OSError as err:
        if dst.store.remote:
            raise
        return _Shard([Problem(name, "unreadable", f"cannot be read: {err.strerror or err}")], None)
    problems: list[Problem] = []
    recorded = entry_checksum(entry)
    algorithm, expected = split(recorded) if recorded else (None, None)
    # the fix is told once: on the checksum's line, or the size's when none was recorded
    fix = "" if algorithm else CHANGED_FIX
    _compare(problems, name, "size", "size", entry["filesize"], size, " bytes", fix)
    tap = _Tap(raw, algorithm, progress)
    with raw:
        try:
            shard = _check_members(
                name, _members(name, raw, tap, deep), record, deep, key_of, entry
            )
        except (DamagedArchive, OSError) as err:
            if tap.error is not None and dst.store.remote:
                raise tap.error from None  # the store, not the archive: retried by the caller
            reason = err.reason if isinstance(err, DamagedArchive) else str(err)
            shard = _Shard([Problem(name, "unreadable", f"cannot be read: {reason}")], None)
            _drain_quietly(tap)
    if algorithm is not None and tap.error is None:
        _compare(problems, name, algorithm, algorithm, expected, tap.hexdigest, fix=CHANGED_FIX)
    shard.problems[:0] = problems
    shard.nbytes = tap.count
    progress.shard_verified(name)
    return shard


def _drain_quietly(tap: _Tap) -> None:
    try:
        tap.drain()
    except OSError:
        pass  # already reported as unreadable


def _dst_names(dst: Location) -> Iterator[str]:
    """Every file under DST, relative to it, with '/' between parts."""
    cut = len(dst.key(""))
    for key in dst.store.find(dst.key("")):
        yield key[cut:]


def _strays(dst: Location, listed: set[str]) -> tuple[list[Problem], list[str]]:
    """Archives DST holds but the manifest does not list (problems); temp files (warnings)."""
    problems, warnings = [], []
    for name in sorted(_dst_names(dst)):
        base = name.rpartition("/")[2]
        if name in listed or name == MANIFEST_NAME:
            continue
        if base.startswith(".") and base.endswith(TEMP_SUFFIX):
            warnings.append(
                f"leftover temp file {name!r} from an interrupted run — safe to "
                "delete once no ishard run writes to this destination"
            )
        elif name.endswith(ARCHIVE_EXTS):
            problems.append(
                Problem(
                    name,
                    "unlisted",
                    "looks like a shard but the manifest does not list it (left by another run?)",
                )
            )
    return problems, warnings


def verify(
    dst: str | Path,
    *,
    deep: bool = False,
    jobs: int = 0,
    progress: Progress = SILENT,
    endpoint_url: str | None = None,
    storage_options=None,
) -> Verification:
    """Check every shard ``dst/manifest.json`` lists, and look for files it does not list.

    Args:
        dst: the destination of a finished run: a directory or a store URL.
        deep: also read every member back in full, and check payload bytes, sample counts
            and that each sample's members sit side by side in exactly one shard.
        jobs: shards checked at once (default: CPUs, at most 8; 8 for a store).
        progress: told how many bytes and shards are checked.
        endpoint_url: an S3-compatible endpoint, as for :func:`ishard.shard`.
        storage_options: ``KEY=VALUE`` strings or a dict for the filesystem.

    Returns:
        Every problem found (none means all is well), warnings and totals.

    Raises:
        UsageError: a bad ``jobs`` value, or DST does not exist.
        IshardError: no manifest or a broken one; the store cannot be reached.
    """
    workers = jobs_option(jobs)
    location = resolve(
        str(dst),
        endpoint_url=endpoint_url,
        role="destination",
        storage_options=parse_storage_options(storage_options),
    )
    manifest = read_manifest(location)
    record = manifest.get("ishard")
    records = record["shards"] if record else [None] * len(manifest["shardlist"])
    key_of = member_key_function(record.get("options", {})) if record and deep else None
    entries = list(zip(manifest["shardlist"], records))
    progress.verifying(len(entries), sum(e["filesize"] for e, _ in entries))
    workers = workers or (8 if location.store.remote else min(8, os.cpu_count() or 1))
    check = _checker(location, deep, key_of, progress)
    problems: list[Problem] = []
    owner: dict[str, str] = {}
    ok = nbytes = 0
    LOG.info("checking %s listed in %s", counted(len(entries), "shard"), location.url)
    promised = _promised_checksum(record)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for (entry, _), shard in zip(entries, pool.map(check, entries)):
            shard.problems += _missing_checksum(entry, promised)
            shard.problems += _split_samples(entry["url"], shard.keys or (), owner)
            problems += shard.problems
            ok += not shard.problems
            nbytes += shard.nbytes
            LOG.info(
                "checked %s: %d bytes read, %s",
                entry["url"],
                shard.nbytes,
                counted(len(shard.problems), "problem") if shard.problems else "ok",
            )
    strays, warnings = _strays(location, {e["url"] for e, _ in entries})
    if record is None:
        warnings.insert(
            0, "the manifest has no 'ishard' record: member counts and samples are not checked"
        )
    return Verification(
        str(dst),
        deep,
        len(entries),
        ok,
        sum(entry_checksum(e) is not None for e, _ in entries),
        nbytes,
        tuple(problems + strays),
        tuple(warnings),
    )


def _checker(
    location: Location, deep: bool, key_of: KeyFunction | None, progress: Progress
) -> Callable[[tuple], _Shard]:
    retrier = Retrier()

    def check(item: tuple) -> _Shard:
        entry, record = item
        if not location.store.remote:
            return _check_shard(location, entry, record, deep, key_of, progress)
        try:
            return retrier.run(
                lambda: _check_shard(location, entry, record, deep, key_of, progress)
            )
        except Exception as err:  # noqa: BLE001 - a store's error, translated once
            raise location.error(err, "destination") from None

    return check


def _promised_checksum(record: Mapping | None) -> str | None:
    """The algorithm whose checksum the run recorded for every shard, as its options say
    (``--checksum``); None when it recorded none, or the manifest does not say."""
    options = record.get("options") if record else None
    algorithm = options.get("checksum") if isinstance(options, Mapping) else None
    return algorithm if isinstance(algorithm, str) and algorithm in ALGORITHMS else None


def _missing_checksum(entry: Mapping, promised: str | None) -> list[Problem]:
    """A problem when the run recorded a checksum for every shard but this entry has none:
    the manifest was edited, and without it a changed byte inside a member goes unseen."""
    if promised is None or entry_checksum(entry) is not None:
        return []
    return [
        Problem(
            entry["url"],
            "checksum_missing",
            f"has no checksum in the manifest, though the run recorded one for every shard "
            f"(--checksum {promised}) — the manifest was edited, so its bytes cannot be "
            "checked: restore the manifest the run wrote, or rewrite the shards",
            promised,
            None,
        )
    ]


def _split_samples(name: str, keys, owner: dict[str, str]) -> list[Problem]:
    """A problem for each sample of shard ``name`` that an earlier shard holds too."""
    problems = []
    for key in keys:
        first = owner.setdefault(key, name)
        if first != name:
            problems.append(
                Problem(
                    name,
                    "split_sample",
                    f"sample {key!r} is split: {first!r} holds some of its members too",
                    first,
                    name,
                )
            )
    return problems
