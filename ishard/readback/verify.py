"""Check the shards in a destination against its manifest: presence, size, md5, members, samples."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from ..checksums import ALGORITHMS, hasher, split
from ..formats import extensions
from ..options.record import default_workers, jobs_option
from ..planning.keys import KeyFunction
from ..progress import SILENT, Progress
from ..run.manifest import MANIFEST_NAME, entry_checksum, member_key_function, read_manifest
from ..sizes import counted
from ..store import Location
from ..store.lockrecord import STATE_DIR
from ..store.retry import Retrier
from ..store.sinks import TEMP_SUFFIX
from .dataset import ROLE, dataset
from .shard import Problem, ShardCheck, check_shard

LOG = logging.getLogger("ishard")


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


def shard_readers(location: Location) -> int:
    """Shards read at once by default: as many as a run writes to this place."""
    return default_workers(location.store.capabilities.many_at_once)


def _dst_names(dst: Location) -> Iterator[str]:
    """Every file under DST, relative to it, with '/' between parts."""
    cut = len(dst.key(""))
    for key in dst.store.find(dst.key("")):
        yield key[cut:]


UNLISTED = "looks like a shard but the manifest does not list it"
# what to do about it: a run's records in DST say a run that lists it has not finished
UNLISTED_FIX = (
    "(left by another run?) — readers that glob the shards would take it too: delete it, or "
    "move it out of the destination"
)
UNFINISHED_FIX = (
    f"— a run into this destination has not finished ({STATE_DIR}/ holds its records): "
    "resume it (the same ishard shard command with --resume) to list its shards, or, if "
    "this file is not one of them, delete it"
)


def _strays(dst: Location, listed: set[str]) -> tuple[list[Problem], list[str]]:
    """Archives DST holds but the manifest does not list (problems, each naming what to do);
    temp files (warnings)."""
    problems, warnings = [], []
    names = sorted(_dst_names(dst))
    unfinished = any(n.startswith(f"{STATE_DIR}/") for n in names)
    for name in names:
        base = name.rpartition("/")[2]
        if name in listed or name == MANIFEST_NAME:
            continue
        if base.startswith(".") and base.endswith(TEMP_SUFFIX):
            warnings.append(
                f"leftover temp file {name!r} from an interrupted run — safe to "
                "delete once no ishard run writes to this destination"
            )
        elif name.endswith(extensions()):
            fix = UNFINISHED_FIX if unfinished else UNLISTED_FIX
            problems.append(Problem(name, "unlisted", f"{UNLISTED} {fix}"))
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
    location = dataset(dst, endpoint_url=endpoint_url, storage_options=storage_options)
    manifest = read_manifest(location)
    record = manifest.get("ishard")
    records = record["shards"] if record else [None] * len(manifest["shardlist"])
    key_of = member_key_function(record.get("options", {})) if record and deep else None
    entries = list(zip(manifest["shardlist"], records))
    progress.verifying(len(entries), sum(e["filesize"] for e, _ in entries))
    workers = workers or shard_readers(location)
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
    index = record.get("samples_index") if record else None
    if isinstance(index, dict):
        problems += _index_problems(location, index)
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


def _index_problems(location: Location, index: Mapping) -> list[Problem]:
    """The sample index the manifest names: there, with the recorded size and checksum."""
    name = index.get("name")
    if not isinstance(name, str) or "/" in name or not isinstance(index.get("checksum"), str):
        return [Problem(str(name), "index", "the manifest's samples_index record is malformed")]
    algorithm, expected = split(index["checksum"])
    digest, size = hasher(algorithm), 0
    try:
        with location.store.open_read(location.key(name)) as raw:
            while chunk := raw.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except FileNotFoundError:
        return [Problem(name, "missing", "is missing (the manifest names it as the sample index)")]
    except OSError as err:
        return [Problem(name, "unreadable", f"cannot be read: {err.strerror or err}")]
    if size != index.get("bytes"):
        said = index.get("bytes")
        return [
            Problem(name, "size", f"size is {size} bytes, the manifest says {said}", said, size)
        ]
    if digest.hexdigest() != expected:
        return [
            Problem(
                name,
                algorithm,
                f"{algorithm} is {digest.hexdigest()}, the manifest says {expected} — the "
                "sample index changed after ishard wrote it: run the ishard shard command "
                "that wrote the dataset again with --overwrite",
                expected,
                digest.hexdigest(),
            )
        ]
    return []


def _checker(
    location: Location, deep: bool, key_of: KeyFunction | None, progress: Progress
) -> Callable[[tuple], ShardCheck]:
    retrier = Retrier()

    def check(item: tuple) -> ShardCheck:
        entry, record = item
        if not location.store.capabilities.transient_errors:
            return check_shard(location, entry, record, deep, key_of, progress)
        try:
            return retrier.run(lambda: check_shard(location, entry, record, deep, key_of, progress))
        except Exception as err:  # noqa: BLE001 - a store's error, translated once
            raise location.error(err, ROLE) from None

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
