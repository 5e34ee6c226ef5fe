"""The values that flow through ishard: files, samples, shard plans, results and reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

EXAMPLES_KEPT = 5


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One listed file: its name (relative to the source), size in bytes, integer mtime, and
    ``member``, its name inside the archive when that differs (``--member-names sample``)."""

    name: str
    size: int
    mtime: int = 0
    member: str | None = None

    @property
    def arcname(self) -> str:
        """The name the file has inside the archive."""
        return self.member or self.name


@dataclass(frozen=True, slots=True)
class Sample:
    """Files that belong together (same key); they always land in the same shard, adjacent."""

    key: str
    files: tuple[FileEntry, ...]
    size: int  # payload bytes of the files


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """One shard to write: its file name (with extension) and the samples it holds, in order."""

    name: str
    samples: tuple[Sample, ...]
    size: int  # payload bytes: file contents only, no archive headers

    @property
    def file_count(self) -> int:
        """Number of archive members."""
        return sum(len(s.files) for s in self.samples)

    def members(self) -> list[FileEntry]:
        """Files in archive order: sample by sample, each sample's files in name order."""
        return [f for s in self.samples for f in s.files]

    def __reduce__(self):
        # Sent to Dask workers (through the scheduler) as plain columns: pickling a dataclass
        # object per file costs four times as much, on every hop.
        files = self.members()
        return _shard_plan, (
            self.name,
            self.size,
            [s.key for s in self.samples],
            [s.size for s in self.samples],
            [len(s.files) for s in self.samples],
            [f.name for f in files],
            [f.size for f in files],
            [f.mtime for f in files],
            [f.member for f in files],
        )


def _shard_plan(
    name: str,
    size: int,
    keys: list[str],
    sample_sizes: list[int],
    counts: list[int],
    names: list[str],
    sizes: list[int],
    mtimes: list[int],
    members: list[str | None],
) -> ShardPlan:
    """A ShardPlan rebuilt from the columns of ``ShardPlan.__reduce__``."""
    files = list(map(FileEntry, names, sizes, mtimes, members))
    samples, start = [], 0
    for key, sample_size, count in zip(keys, sample_sizes, counts):
        samples.append(Sample(key, tuple(files[start : start + count]), sample_size))
        start += count
    return ShardPlan(name, tuple(samples), size)


@dataclass(frozen=True, slots=True)
class Skipped:
    """Files (or samples) left out for one reason, with a count and the first few names."""

    reason: str
    count: int
    examples: tuple[str, ...]


class Tally:
    """Collects skipped names by reason while listing and grouping; keeps a few examples each."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._examples: dict[str, list[str]] = {}

    def add(self, reason: str, name: str) -> None:
        """Count ``name`` under ``reason``."""
        self._counts[reason] = self._counts.get(reason, 0) + 1
        examples = self._examples.setdefault(reason, [])
        if len(examples) < EXAMPLES_KEPT:
            examples.append(name)

    def add_many(self, reason: str, count: int, examples: list[str]) -> None:
        """Count ``count`` names under ``reason``, of which ``examples`` are the first."""
        self._counts[reason] = self._counts.get(reason, 0) + count
        mine = self._examples.setdefault(reason, [])
        mine.extend(examples[: EXAMPLES_KEPT - len(mine)])

    def merge(self, other: Tally) -> None:
        """Add everything ``other`` counted."""
        for reason, count in other._counts.items():
            self._counts[reason] = self._counts.get(reason, 0) + count
            mine = self._examples.setdefault(reason, [])
            mine.extend(other._examples[reason][: EXAMPLES_KEPT - len(mine)])

    def freeze(self) -> tuple[Skipped, ...]:
        """The tally as values, in the order reasons were first seen."""
        return tuple(Skipped(r, c, tuple(self._examples[r])) for r, c in self._counts.items())


@dataclass(frozen=True)
class Duplicates:
    """Listed files whose bytes repeat an earlier file's (``--duplicates``), by name order: the
    ``groups`` of two or more such files, the ``copies`` (each file past the first of its
    group) and their bytes (``nbytes``); ``by``, what told them alike (an inventory's
    checksum or ETag column, or a hash of the bytes of files whose sizes collide);
    ``dropped`` when the copies were left out (``--duplicates drop``); ``pairs``, (copy,
    first of its group): every copy when dropped, else the first ``EXAMPLES_KEPT``."""

    by: str
    groups: int
    copies: int
    nbytes: int
    dropped: bool
    pairs: tuple[tuple[str, str], ...]

    def record(self, every: bool = False) -> dict:
        """As a summary or manifest records it: the pairs as ``{"name", "same_as"}``, the
        first ``EXAMPLES_KEPT`` of them (``every``: all there are)."""
        pairs = self.pairs if every else self.pairs[:EXAMPLES_KEPT]
        return {
            "by": self.by,
            "groups": self.groups,
            "copies": self.copies,
            "bytes": self.nbytes,
            "dropped": self.dropped,
            ("pairs" if every else "examples"): [{"name": n, "same_as": f} for n, f in pairs],
        }


@dataclass(frozen=True)
class Growth:
    """What a growing dataset's plan (``--append``, ``--update``) found in its destination:
    the samples held there, those new in the source, changed in it or gone from it; the
    shards rewritten (``update``: each shard that held a changed or removed sample, its
    other samples, ``moved``, written into new shards with the rest)."""

    mode: str  # "append" or "update"
    held: int
    added: int
    changed: int
    removed: int
    moved: int
    replaced: tuple[str, ...]
    listed: int = 0  # the shards the dataset's manifest listed

    @property
    def unchanged(self) -> bool:
        """Does the source hold exactly the samples the dataset holds (nothing to write)?"""
        return not (self.added or self.changed or self.removed)


@dataclass(frozen=True)
class Plan:
    """The complete, pure result of planning: every shard a run would write, in order.

    ``shards`` may build each ShardPlan on access (see ``table.ShardList``); the totals and
    ``shard_sizes`` never need to.
    """

    source: str
    shards: Sequence[ShardPlan]
    skipped: tuple[Skipped, ...] = ()
    warnings: tuple[str, ...] = ()
    seed: int | None = None
    options: dict = field(default_factory=dict)
    spilled: int = 0  # the most bytes planning held in its temporary folder (--tmp-dir)
    numbering: tuple[int, ...] = ()  # per shard template (EKM category): the next unused name
    growth: Growth | None = None  # a growing dataset's comparison (--append, --update)
    duplicates: Duplicates | None = None  # files of equal bytes found (--duplicates)

    def _column(self, name: str, value) -> list:
        column = getattr(self.shards, name, None)
        return column if column is not None else [value(s) for s in self.shards]

    @property
    def shard_names(self) -> list[str]:
        """Shard file names, in plan order."""
        return self._column("names", lambda s: s.name)

    @property
    def shard_sizes(self) -> list[int]:
        """Payload bytes per shard, in plan order."""
        return self._column("sizes", lambda s: s.size)

    @property
    def shard_sample_counts(self) -> list[int]:
        """Samples per shard, in plan order."""
        return self._column("sample_counts", lambda s: len(s.samples))

    @property
    def shard_file_counts(self) -> list[int]:
        """Files per shard, in plan order."""
        return self._column("file_counts", lambda s: s.file_count)

    @property
    def sample_count(self) -> int:
        """Samples across all shards."""
        return sum(self.shard_sample_counts)

    @property
    def file_count(self) -> int:
        """Files across all shards."""
        return sum(self.shard_file_counts)

    @property
    def size(self) -> int:
        """Payload bytes across all shards."""
        return sum(self.shard_sizes)

    def __repr__(self) -> str:  # the totals: the shards may be millions
        return (
            f"Plan(shards={len(self.shards)}, samples={self.sample_count}, "
            f"files={self.file_count}, bytes={self.size}, source={self.source!r})"
        )


@dataclass(frozen=True, slots=True)
class ShardResult:
    """One written shard: file name, bytes on disk, the checksum of those bytes as
    ``algorithm:hex`` (e.g. ``xxh128:…``; None when ``checksum="none"``), what it holds."""

    name: str
    filesize: int
    checksum: str | None
    samples: int
    files: int
    payload: int
    index: str | None = None  # the DALI index written beside the shard (``--index dali``)
    etag: str | None = None  # the object's ETag on an S3 destination (checked by --resume)
    offsets: bytes | None = None  # each member's header and data offset (``packed``)
    frames: bytes | None = None  # a seekable shard's sample frame starts, then its end (int64)
    sums: bytes | None = None  # each member's xxh3-64, as its bytes were written (``packed_sums``)
    # members the store copied (``--compose``): (index in the shard, the MD5 of their bytes as
    # the source store gave it, None where it gave none); no hash here saw their bytes, so
    # their ``sums`` are unknown
    copied: tuple[tuple[int, str | None], ...] = ()


def packed(headers: list[int], data: list[int]) -> bytes:
    """Members' header and data offsets as a ``ShardResult`` carries them: int64 pairs."""
    from array import array

    pairs = array("q", bytes(16 * len(headers)))
    pairs[0::2] = array("q", headers)
    pairs[1::2] = array("q", data)
    return pairs.tobytes()


def packed_sums(sums: list[int]) -> bytes:
    """Members' xxh3-64 checksums as a ``ShardResult`` carries them: uint64s."""
    from array import array

    return array("Q", sums).tobytes()


@dataclass(frozen=True)
class Report:
    """What a run did: the plan it executed and the shards it wrote."""

    plan: Plan
    destination: str
    results: tuple[ShardResult, ...]
    seconds: float
    manifest: str
    retries: int = 0  # transient store errors that succeeded on another try
    kept: int = 0  # shards an earlier run had completed (``--resume``), checked and kept
    removed: int = 0  # the earlier run's archives this run did not rewrite, removed at its end
    written_payload: int | None = None  # payload bytes this run wrote (None: all the plan's)

    @property
    def warnings(self) -> tuple[str, ...]:
        """The plan's warnings, told after planning and before the first shard was written."""
        return self.plan.warnings

    @property
    def bytes_per_second(self) -> float | None:
        """Payload this run wrote per second: shards a resumed run kept do not count."""
        written = self.plan.size if self.written_payload is None else self.written_payload
        return written / self.seconds if self.seconds else None

    def __repr__(self) -> str:  # the totals: the plan and results may be millions of rows
        return (
            f"Report(shards={len(self.results)}, samples={self.plan.sample_count}, "
            f"files={self.plan.file_count}, bytes={self.plan.size}, kept={self.kept}, "
            f"dst={self.destination!r})"
        )
