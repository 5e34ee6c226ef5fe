"""Compact, column-by-column storage for millions of files, samples and shards."""

from __future__ import annotations

import hashlib
import operator
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import NamedTuple

from .keys import KeyFunction, wds_split
from .model import FileEntry, Sample, ShardPlan


def _bytewise(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def _has_surrogates(names: list[str]) -> bool:
    # Code-point order equals UTF-8 byte order except for surrogate-escaped bytes (undecodable
    # local file names), which only then need the slower bytes comparison.
    return any(not n.isascii() and any("\udc80" <= c <= "\udcff" for c in n) for n in names)


_MASK = (1 << 64) - 1
_MIX = 0x9E3779B97F4A7C15  # odd: a change of the mtime alone always changes the stamp


def _signed(value: int) -> int:
    value &= _MASK
    return value - (1 << 64) if value >> 63 else value


def local_stamp(mtime_ns: int, inode: int) -> int:
    """A local file's identity beyond its size and whole-second mtime, in 64 bits: its
    nanosecond mtime and its inode, mixed (a new file under the same name, or bytes rewritten
    within the same second, change it)."""
    return _signed(mtime_ns * _MIX + inode)


def store_stamp(info: dict) -> int:
    """An object's identity beyond its size, in 64 bits: its ETag and modification time as the
    store lists them (0 when it lists neither)."""
    etag = next((info[k] for k in ("ETag", "etag") if k in info), None)
    modified = next(
        (info[k] for k in ("LastModified", "last_modified", "updated", "mtime") if k in info), None
    )
    if etag is None and modified is None:
        return 0
    text = f"{etag}\x00{modified}".encode("utf-8", "surrogateescape")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little", signed=True)


class Grouping(NamedTuple):
    """Samples a listing's maker already found (the column engine, for a built-in key
    pattern): the key function, the keys in order of first appearance, each file's sample."""

    key: KeyFunction
    keys: list[str]
    sample_of: array


class FileTable:
    """Listed files as four columns: names, sizes, integer mtimes (whole seconds, what archive
    headers get) and stamps (the rest of a file's identity, for the plan fingerprint only:
    ``local_stamp``, ``store_stamp``, or 0 where the listing has nothing more); ``grouping``
    when the files' samples are known already."""

    __slots__ = ("grouping", "mtimes", "names", "sizes", "stamps")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.sizes = array("q")
        self.mtimes = array("q")
        self.stamps = array("q")
        self.grouping: Grouping | None = None

    @classmethod
    def of(cls, entries: Iterable[FileEntry]) -> FileTable:
        """A table holding ``entries`` in the given order."""
        table = cls()
        for e in entries:
            table.add(e.name, e.size, e.mtime)
        return table

    def add(self, name: str, size: int, mtime: int, stamp: int = 0) -> None:
        """Append one file."""
        self.names.append(name)
        self.sizes.append(size)
        self.mtimes.append(mtime)
        self.stamps.append(stamp)

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, index: int) -> FileEntry:
        return FileEntry(self.names[index], self.sizes[index], self.mtimes[index])

    def __iter__(self) -> Iterator[FileEntry]:
        return map(FileEntry, self.names, self.sizes, self.mtimes)

    def sort(self) -> None:
        """Order by name, bytewise (the order object stores list in); drop repeated names."""
        names = self.names
        if all(map(operator.lt, names, islice(names, 1, None))):
            return  # already sorted and unique: the common case for store listings
        self.grouping = None  # made for the old order
        key = _bytewise if _has_surrogates(names) else None
        order = sorted(
            range(len(names)), key=(lambda i: key(names[i])) if key else names.__getitem__
        )
        keep = [i for n, i in enumerate(order) if n == 0 or names[order[n - 1]] != names[i]]
        del order
        self.names = [names[i] for i in keep]
        self.sizes = array("q", [self.sizes[i] for i in keep])
        self.mtimes = array("q", [self.mtimes[i] for i in keep])
        self.stamps = array("q", [self.stamps[i] for i in keep])


class SampleTable:
    """Samples over a FileTable: a key, a size and a run of file indices per sample."""

    __slots__ = ("files", "keys", "members", "sizes", "starts")

    def __init__(self, files: FileTable) -> None:
        self.files = files
        self.keys: list[str] = []
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

    def file_indices(self, index: int) -> array:
        """The files of sample ``index``."""
        return self.members[self.starts[index] : self.starts[index + 1]]

    def file_count(self, index: int) -> int:
        """How many files sample ``index`` has."""
        return self.starts[index + 1] - self.starts[index]

    def sample(self, index: int, rename: bool = False) -> Sample:
        """Sample ``index`` as a value object; with ``rename`` its files are named
        ``<key>.<extension>`` inside the archive."""
        files, key = self.files, self.keys[index]
        entries = tuple(files[i] for i in self.file_indices(index))
        if rename:
            entries = tuple(
                FileEntry(e.name, e.size, e.mtime, f"{key}.{wds_split(e.name)[1]}") for e in entries
            )
        return Sample(key, entries, self.sizes[index])

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


class ShardList(Sequence[ShardPlan]):
    """The planned shards, built one at a time on access so millions of files stay compact.

    Shard ``i`` is named ``names[i]`` and holds samples ``members[i]`` of ``tables[i]``; with
    ``rename`` members are named ``<sample key>.<extension>``.
    """

    def __init__(
        self,
        names: list[str],
        members: list[list[int]],
        tables: list[SampleTable],
        rename: bool = False,
    ):
        self.names, self.rename = names, rename
        self._members = [array("q", m) for m in members]
        self._tables = tables
        self.sizes = [sum(t.sizes[i] for i in m) for m, t in zip(self._members, tables)]
        self.sample_counts = [len(m) for m in self._members]
        self.file_counts = [
            sum(t.starts[i + 1] - t.starts[i] for i in m) for m, t in zip(self._members, tables)
        ]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def listing(self) -> FileTable | None:
        """The listed files the shards were planned from (every table shares them)."""
        return self._tables[0].files if self._tables else None

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        table = self._tables[index]
        samples = tuple(table.sample(i, self.rename) for i in self._members[index])
        return ShardPlan(self.names[index], samples, self.sizes[index])

    def digest(self, update: Callable[[bytes], None]) -> None:
        """Feed every shard's name and members (name, size, mtime, stamp) to ``update`` (a
        hash's), straight from the columns: no object per file."""
        for name, members, table in zip(self.names, self._members, self._tables):
            files, starts, runs = table.files, table.starts, table.members
            names, sizes, mtimes, stamps = files.names, files.sizes, files.mtimes, files.stamps
            rows = array("q")
            for i in members:
                rows += runs[starts[i] : starts[i + 1]]
            lines = [f"\x01{name}"]
            lines += [f"{names[f]}\x00{sizes[f]}\x00{mtimes[f]}" for f in rows]
            update("\n".join(lines).encode("utf-8", "surrogateescape") + b"\n")
            update(array("q", map(stamps.__getitem__, rows)).tobytes())  # 8 bytes a member
