"""Compact, column-by-column storage for millions of files, samples and shards."""

from __future__ import annotations

import operator
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, NamedTuple

from ..model import FileEntry, Sample, ShardPlan
from ..names import sample_members
from . import intcolumn
from .handover import NOTHING, Handover, ReaderFindings
from .namecolumn import CHUNK, Names
from .rowrules import ETAG_DIGEST, etag_digest


def _bytewise(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def _has_surrogates(names: list[str]) -> bool:
    # Code-point order equals UTF-8 byte order except for surrogate-escaped bytes (undecodable
    # local file names), which only then need the slower bytes comparison.
    return any(not n.isascii() and any("\udc80" <= c <= "\udcff" for c in n) for n in names)


def int_column(values: Any, narrow: bool = True) -> array:
    """A numpy int array copied into an ``array``: of 4-byte ints when ``narrow`` and every
    value fits in one (file sizes under 2 GiB, mtimes before 2038), else of 8-byte ones."""
    fits = (
        narrow and len(values) and -(1 << 31) <= int(values.min()) and int(values.max()) < 1 << 31
    )
    out = array("i" if fits else "q")
    out.frombytes(memoryview(values.astype("<i4" if fits else "<i8", copy=False)).cast("B"))
    return out  # one copy, through the buffer


def int64_bytes(column: Any) -> bytes:
    """The bytes of an int column as 8-byte ints, whatever its width (what digests read)."""
    if not isinstance(column, array):  # a window of a column Python does not hold: numpy
        import numpy as np

        return np.asarray(column, dtype=np.int64).tobytes()
    return (column if column.typecode == "q" else array("q", column)).tobytes()


def int_view(column: Any) -> Any:
    """An int column as a numpy array over its own bytes (int32 or int64: no copy); a column
    Python does not hold (``intcolumn``) as it is, indexed alike."""
    import numpy as np

    if not isinstance(column, array):
        return column
    return np.frombuffer(column, dtype=np.int32 if column.typecode == "i" else np.int64)


def held(column: Any) -> array:
    """An int column held in memory, as an ``array`` (for a path that reads it value by value,
    and holds as much per object anyway): itself when it is one."""
    if isinstance(column, array):
        return column
    import numpy as np

    values = np.asarray(column)
    out = array("i" if values.dtype.itemsize == 4 else "q")
    out.frombytes(values.tobytes())
    return out


def column_sum(column: Any) -> int:
    """An int column's values added up (8-byte ints), without an ``int`` object a value."""
    import numpy as np

    return int(int_view(column).sum(dtype=np.int64)) if len(column) else 0


class NoStamps(Sequence[int]):
    """A stamp column of zeros, of no size: for listings with no identity beyond size and
    mtime (an inventory read by the column engine), where ``array("q")`` would hold 8 bytes a
    file. Only zeros can be added."""

    __slots__ = ("_count",)

    def __init__(self, count: int = 0) -> None:
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return array("q", bytes(8 * len(range(*index.indices(self._count)))))
        if not -self._count <= index < self._count:
            raise IndexError("stamp index out of range")
        return 0

    def append(self, stamp: int) -> None:
        """Add one stamp, a zero."""
        self.extend((stamp,))

    def extend(self, stamps: Iterable[int]) -> None:
        """Add stamps, all zeros."""
        values = list(stamps)
        if any(values):
            raise ValueError("a column of no stamps holds zeros only")
        self._count += len(values)


class Identities(NamedTuple):
    """What tells the listed files' bytes alike (``--duplicates``): the inventory ``column``
    it came from (a checksum or an ETag) and each file's value (None: none given), in listing
    order — held only for a listing the row reader read (a small one)."""

    column: str
    values: list[str | None]


class FileTable:
    """Listed files as four columns: names, sizes, integer mtimes (whole seconds, what archive
    headers get) and stamps (the rest of a file's identity, for the plan fingerprint only:
    ``local_stamp``, ``store_stamp``, or 0 where the listing has nothing more; ``NoStamps``
    where no file has more); and ``handover``, what the column engine found of the listing
    when it read it (``handover.NOTHING`` when it did not); ``identities``, each file's
    checksum or ETag where the row reader read them from an inventory (else None); ``etags``,
    a store listing's ETags as ``ETAG_DIGEST`` bytes a file (``etag_digest``; zeros: none),
    where the listing kept them (else None)."""

    __slots__ = (
        "_mtimes",
        "_mtimes_later",
        "etags",
        "handover",
        "identities",
        "names",
        "sizes",
        "stamps",
    )

    def __init__(self) -> None:
        self.names = Names()
        self.sizes = array("q")
        self._mtimes = array("q")
        self._mtimes_later: Callable[[], array] | None = None
        self.stamps: array | NoStamps = array("q")
        self.handover = NOTHING
        self.identities: Identities | None = None
        self.etags: bytearray | None = None

    @property
    def mtimes(self) -> array:
        """Each file's mtime (fetched from where it waits, the first time it is read)."""
        if self._mtimes_later is not None:
            self._mtimes, self._mtimes_later = self._mtimes_later(), None
        return self._mtimes

    @mtimes.setter
    def mtimes(self, column: array) -> None:
        self._mtimes, self._mtimes_later = column, None

    @classmethod
    def waiting(
        cls, names: Names, sizes: array, mtimes: Callable[[], array], handover: Handover
    ) -> FileTable:
        """A listing whose names and mtimes wait where its maker left them (the column
        engine's, for an inventory it read: a dry run never reads them; ``mtimes`` fetches them
        all the first time one is read), with no stamps beyond size and mtime, and what its
        maker found of it (``handover``)."""
        table = cls()
        table.names, table.sizes, table._mtimes_later = names, sizes, mtimes
        table.stamps = NoStamps(len(sizes))
        table.handover = handover
        return table

    @classmethod
    def of(cls, entries: Iterable[FileEntry]) -> FileTable:
        """A table holding ``entries`` in the given order."""
        table = cls()
        for e in entries:
            table.add(e.name, e.size, e.mtime)
        return table

    def add(
        self, name: str, size: int, mtime: int, stamp: int = 0, etag: str | None = None
    ) -> None:
        """Append one file (the row readers' path: the mtimes' slot without the property's
        call, unless they still wait), and its ETag where a store listing gives one."""
        if etag is not None and self.etags is None:
            self.etags = bytearray(ETAG_DIGEST * len(self.names))
        if self.etags is not None:
            self.etags += etag_digest(etag)
        self.names.append(name)
        self.sizes.append(size)
        (self._mtimes if self._mtimes_later is None else self.mtimes).append(mtime)
        self.stamps.append(stamp)

    def extend(
        self, names: list[str], sizes: list[int], mtimes: list[int], stamps: list[int]
    ) -> None:
        """Append files given as columns."""
        self.names.extend(names)
        self.sizes.extend(sizes)
        self.mtimes.extend(mtimes)
        self.stamps.extend(stamps)

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, index: int) -> FileEntry:
        return FileEntry(self.names[index], self.sizes[index], self.mtimes[index])

    def __iter__(self) -> Iterator[FileEntry]:
        return map(FileEntry, self.names, self.sizes, self.mtimes)

    def sort(self) -> None:
        """Order by name, bytewise (the order object stores list in); drop repeated names."""
        if _ascending(self.names):
            return  # already sorted and unique: the common case for store listings
        names = list(self.names)
        key = _bytewise if _has_surrogates(names) else None
        order = sorted(
            range(len(names)), key=(lambda i: key(names[i])) if key else names.__getitem__
        )
        keep = [i for n, i in enumerate(order) if n == 0 or names[order[n - 1]] != names[i]]
        del order
        self.kept(keep, names)

    def kept(self, keep: list[int], names: list[str] | None = None) -> None:
        """Keep only the files at ``keep`` (indices), in that order (``names``: the names,
        if already a list); what the engine found of the old listing goes."""
        self.handover = NOTHING
        names = list(self.names) if names is None else names
        if self.identities is not None:
            values = self.identities.values
            self.identities = self.identities._replace(values=[values[i] for i in keep])
        if self.etags is not None:
            old, size = self.etags, ETAG_DIGEST
            self.etags = bytearray(b"".join(old[i * size : (i + 1) * size] for i in keep))
        self.names = Names(names[i] for i in keep)
        self.sizes = array("q", [self.sizes[i] for i in keep])
        self.mtimes = array("q", [self.mtimes[i] for i in keep])
        if isinstance(self.stamps, NoStamps):
            self.stamps = NoStamps(len(keep))
        else:
            self.stamps = array("q", [self.stamps[i] for i in keep])


def _ascending(names: Names) -> bool:
    """Every name sorts before the next (code-point order), read a chunk at a time."""
    last: list[str] = []
    for start in range(0, len(names), CHUNK):
        chunk = last + names[start : start + CHUNK]
        if not all(map(operator.lt, chunk, islice(chunk, 1, None))):
            return False
        last = chunk[-1:]
    return True


class SampleTable:
    """Samples over a FileTable: a key (kept as ``Names``), a size and a run of file indices
    per sample (``starts`` and ``members`` of 4-byte ints when gathered with numpy and every
    value fits, else 8-byte); ``findings``: the key check's over exactly these samples, when
    the column engine found them (a table made from another has none)."""

    __slots__ = ("files", "findings", "flat", "keys", "members", "sizes", "starts")

    def __init__(self, files: FileTable) -> None:
        self.files = files
        self.flat: bool | None = None  # no key holds a '/' (None: not known, look at them)
        self.findings: ReaderFindings | None = None  # the key check's, found by the engine
        self.keys = Names()
        self.sizes = array("q")
        self.starts = array("q", [0])
        self.members = array("q")

    def add(self, key: str, file_indices: Sequence[int]) -> None:
        """Append a sample made of these files (in archive order)."""
        sizes = self.files.sizes
        self.keys.append(key)
        self.sizes.append(sum(sizes[i] for i in file_indices))
        self.members.extend(file_indices)
        self.starts.append(len(self.members))

    def __len__(self) -> int:
        return len(self.keys)

    def hold(self) -> SampleTable:
        """Hold its int columns (and its files' sizes) in memory (``held``), for a path that
        reads them sample by sample; itself."""
        self.sizes, self.starts, self.members = map(held, (self.sizes, self.starts, self.members))
        self.files.sizes = held(self.files.sizes)
        return self

    def file_indices(self, index: int) -> array:
        """The files of sample ``index``."""
        run = self.members[self.starts[index] : self.starts[index + 1]]
        if not isinstance(run, array):  # a window of a column Python does not hold
            return array("q", run.astype("<i8").tobytes())
        return run if run.typecode == "q" else array("q", run)

    def file_count(self, index: int) -> int:
        """How many files sample ``index`` has."""
        return self.starts[index + 1] - self.starts[index]

    def sample(self, index: int, rename: bool = False) -> Sample:
        """Sample ``index`` as a value object; with ``rename`` its files are named
        ``<key>.<extension>`` inside the archive."""
        return self.samples([index], rename)[0]

    def rows(self, indices: Sequence[int]) -> tuple[Any, Any]:
        """The files of samples ``indices``, one run after another (numpy int64), and how many
        each sample has."""
        import numpy as np

        at = np.asarray(indices, dtype=np.int64)
        starts = int_view(self.starts)
        first, counts = starts[at], starts[at + 1] - starts[at]
        total = int(counts.sum())
        ahead = np.cumsum(counts) - counts  # where each sample's run begins among the rows
        step = np.arange(total, dtype=np.int64) + np.repeat(first - ahead, counts)
        return int_view(self.members)[step].astype(np.int64, copy=False), counts

    def samples(self, indices: Sequence[int], rename: bool = False) -> tuple[Sample, ...]:
        """Samples ``indices`` as value objects, their names and keys taken at once (a few
        reads of a spooled buffer, not one a file)."""
        import numpy as np

        files = self.files
        found, counts = self.rows(indices)
        rows, counts = found.tolist(), counts.tolist()
        names, keys = files.names.take(rows), self.keys.take(indices)
        sizes, mtimes = int_view(files.sizes)[found], int_view(files.mtimes)[found]
        columns = [names, sizes.tolist(), mtimes.tolist()]
        if rename:
            each = (k for k, count in zip(keys, counts) for _ in range(count))
            columns.append(sample_members(each, names))
        entries = list(map(FileEntry, *columns))
        totals = int_view(self.sizes)[np.asarray(indices, dtype=np.int64)].tolist()
        out, at = [], 0
        for key, count, total in zip(keys, counts, totals):
            out.append(Sample(key, tuple(entries[at : at + count]), total))
            at += count
        return tuple(out)

    def member_columns(self, indices: Sequence[int], rename: bool = False) -> dict[str, Any]:
        """The files of samples ``indices`` as columns, a row a file in archive order: each
        file's sample key, member name (``<key>.<extension>`` with ``rename``), source name,
        size and mtime (numpy arrays; the texts as object arrays) — what the sample index
        records and what a growing dataset is compared by."""
        import numpy as np

        files = self.files
        found, counts = self.rows(indices)
        names = files.names.take(found.tolist())
        keys = np.repeat(np.array(self.keys.take(indices), dtype=object), counts)
        members = sample_members(keys, names) if rename else names
        return {
            "key": keys,
            "member": np.array(members, dtype=object),
            "source": np.array(names, dtype=object),
            "size": int_view(files.sizes)[found].astype(np.int64, copy=False),
            "mtime": int_view(files.mtimes)[found].astype(np.int64, copy=False),
        }

    def subset(self, indices: Sequence[int]) -> SampleTable:
        """A table over the same files holding samples ``indices`` (in that order)."""
        import numpy as np

        table = SampleTable(self.files)
        table.flat = self.flat
        at = np.asarray(indices, dtype=np.int64)
        rows, counts = self.rows(indices)
        table.keys = Names()
        table.keys.extend(self.keys.take(at.tolist()))
        table.sizes = array("q", int_view(self.sizes)[at].astype(np.int64).tobytes())
        starts = np.zeros(len(at) + 1, np.int64)
        np.cumsum(counts, out=starts[1:])
        table.starts = array("q", starts.tobytes())
        table.members = array("q", rows.tobytes())
        return table

    @classmethod
    def of(cls, samples: Iterable[Sample]) -> SampleTable:
        """A table (over a new FileTable) holding ``samples`` in order."""
        files = FileTable()
        table = cls(files)
        for s in samples:
            first = len(files)
            for f in s.files:
                files.add(f.name, f.size, f.mtime)
            table.add(s.key, range(first, len(files)))
        return table


def _shard_samples(values: Any) -> Any:
    """A shard's sample indices as compact ints: a ``range`` (samples in listing order), an
    ``array`` or a numpy array as they are (a numpy array is a view of the run the shard was
    cut from: no copy), a list as an ``array("q")``."""
    if isinstance(values, (range, array)) or hasattr(values, "dtype"):
        return values
    return array("q", values)


def _shard_sums(samples: Any, sizes: Any, starts: Any) -> tuple[int, int]:
    """The bytes and the files of a shard's ``samples``: of a range, from two slices (no
    array as long as the range); else from its indices."""
    import numpy as np

    if isinstance(samples, range) and samples.step == 1:
        a, b = samples.start, samples.stop
        step = max(b - a, 1) if isinstance(sizes, np.ndarray) else intcolumn.WINDOW  # windows
        total = sum(int(sizes[i : min(i + step, b)].sum(dtype=np.int64)) for i in range(a, b, step))
        return total, int(starts[b]) - int(starts[a])
    at = np.asarray(samples, dtype=np.int64)
    files = int(starts[at + 1].sum(dtype=np.int64)) - int(starts[at].sum(dtype=np.int64))
    return int(sizes[at].sum(dtype=np.int64)), files


class ShardList(Sequence[ShardPlan]):
    """The planned shards, built one at a time on access so millions of files stay compact.

    Shard ``i`` is named ``names[i]`` and holds samples ``members[i]`` of ``tables[i]``; with
    ``rename`` members are named ``<sample key>.<extension>``.
    """

    def __init__(
        self,
        names: list[str],
        members: Sequence[Any],  # per shard: its samples (a range, list, array or numpy array)
        tables: list[SampleTable],
        rename: bool = False,
    ):
        self.names, self.rename = names, rename
        self._members = [_shard_samples(m) for m in members]
        self._tables = tables
        self.sizes, self.file_counts = [], []
        for m, t in zip(self._members, tables):
            size, files = _shard_sums(m, int_view(t.sizes), int_view(t.starts))
            self.sizes.append(size)
            self.file_counts.append(files)
        self.sample_counts = [len(m) for m in self._members]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def listing(self) -> FileTable | None:
        """The listed files the shards were planned from (every table shares them)."""
        return self._tables[0].files if self._tables else None

    def part(self, index: int) -> tuple[SampleTable, Any]:
        """Shard ``index``'s table and its samples' indices in it."""
        return self._tables[index], self._members[index]

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        table = self._tables[index]
        samples = table.samples(self._members[index], self.rename)
        return ShardPlan(self.names[index], samples, self.sizes[index])

    def digest(self, update: Callable[[bytes], None]) -> None:
        """Feed every shard's name and members (names, then sizes, mtimes and stamps as
        8-byte ints) to ``update`` (a hash's), straight from the columns: no object per
        file."""
        import numpy as np

        columns: dict[int, tuple[Any, Any, Any]] = {}  # per listing: sizes, mtimes, stamps
        for name, members, table in zip(self.names, self._members, self._tables):
            files = table.files
            if id(files) not in columns:
                stamps = files.stamps
                columns[id(files)] = (
                    int_view(files.sizes),
                    int_view(files.mtimes),
                    None if isinstance(stamps, NoStamps) else int_view(stamps),
                )
            sizes, mtimes, stamps = columns[id(files)]
            rows = table.rows(members)[0]
            names = files.names.take(rows.tolist())
            head = f"\x01{name}\x00{len(names)}"
            update("\n".join([head, *names, ""]).encode("utf-8", "surrogateescape"))
            for column in (sizes, mtimes, stamps):  # 8 bytes a member each
                if column is None:
                    update(bytes(8 * len(rows)))
                else:
                    update(column[rows].astype(np.int64, copy=False).tobytes())
