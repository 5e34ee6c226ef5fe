"""A column of names in one buffer (``Names``): in memory, or spooled to a file with no name
(``SpooledBlob``); and one whose names are loaded the first time one is read (``LaterNames``)."""

from __future__ import annotations

import operator
import os
import sys
import tempfile
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, islice
from typing import Any

NARROW, NARROW_MAX = "i", (1 << 31) - 1  # name offsets: 4 bytes up to 2 GiB of names, then 8
CHUNK = 1 << 16  # names packed, and decoded for reading in order, at a time
SPOOL_READ = 1 << 30  # bytes of a spooled names buffer read at once, at most
TAKE_SORTED_FROM = 64  # names taken at once from which the indices are sorted to find runs
PICKED = 64  # names taken at once from a LaterNames without loading them all, at most


class SpooledBlob:
    """A names buffer in a file with no name (in the temporary folder), read a slice at a time
    with ``pread``: the names' bytes of ten million files take no memory, and forked writers
    read them through the descriptor they inherit (``pread`` keeps no shared offset)."""

    __slots__ = ("_file", "_size")

    def __init__(self, file: Any, size: int) -> None:
        self._file, self._size = file, size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, where: slice) -> bytes:
        start, stop, _ = where.indices(self._size)
        parts, fd = [], self._file.fileno()
        while start < stop:
            part = os.pread(fd, min(stop - start, SPOOL_READ), start)
            if not part:
                raise OSError(f"the names' temporary file ends at byte {start} of {self._size}")
            parts.append(part)
            start += len(part)
        return b"".join(parts)

    def __reduce__(self):  # pickled (sent to a Dask worker, say) as the bytes themselves
        return bytearray, (self[0 : self._size],)


class SpooledStarts(Sequence[int]):
    """Where each spooled name starts (and where the last ends), 8-byte ints in a file with no
    name, read with ``pread`` a few at a time: the starts of a hundred million names take no
    memory either (a run reads a shard's names as a few runs of the listing, two starts a
    run). Pickled as an ``array`` of them."""

    __slots__ = ("_count", "_file")
    typecode = "q"

    def __init__(self, file: Any, count: int) -> None:
        self._file, self._count = file, count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            out = array("q", self._read(8 * start, 8 * max(stop - start, 0)))
            return out if step == 1 else out[::step]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("name start index out of range")
        return int.from_bytes(self._read(8 * index, 8), sys.byteorder, signed=True)

    def _read(self, at: int, size: int) -> bytes:
        data = os.pread(self._file.fileno(), size, at) if size else b""
        while len(data) < size:  # a short read: the rest
            part = os.pread(self._file.fileno(), size - len(data), at + len(data))
            if not part:
                raise OSError(f"the name starts' temporary file ends at byte {at + len(data)}")
            data += part
        return data

    def __reduce__(self):
        return array, ("q", self[0 : self._count].tobytes())


class Names(Sequence[str]):
    """Names in one buffer, not a ``str`` object each (about a byte a character and 4 bytes a
    name — 8 past 2 GiB of names — against some 90 bytes a name as a list of ``str``): UTF-8
    (undecodable bytes kept through their surrogate escapes), each name followed by a newline
    — no listed name holds one, control characters make a name unsafe — and where each name
    starts. Appended names wait in a list of at most ``CHUNK`` and are packed when it fills or
    a name is read; reading in order decodes ``CHUNK`` names at a time."""

    __slots__ = ("_blob", "_pending", "_starts")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._blob = bytearray()
        self._starts = array(NARROW, [0])
        self._pending: list[str] = []
        self.extend(names)

    def append(self, name: str) -> None:
        """Add one name at the end."""
        self._pending.append(name)
        if len(self._pending) >= CHUNK:
            self._pack()

    def extend(self, names: Iterable[str]) -> None:
        """Add names at the end."""
        self._pack()
        items = iter(names)
        while chunk := list(islice(items, CHUNK)):
            self._add(chunk)

    def _pack(self) -> None:
        """Pack the names waiting in ``_pending``."""
        chunk, self._pending = self._pending, []
        if chunk:
            self._add(chunk)

    def _add(self, chunk: list[str]) -> None:
        """Append ``chunk`` (at least one name) to the buffer and the starts."""
        self._blob += self._ended(chunk)

    def _ended(self, chunk: list[str]) -> bytes:
        """``chunk`` (at least one name) as the buffer holds it, its ends added to the starts."""
        data = ("\n".join(chunk) + "\n").encode("utf-8", "surrogateescape")
        if data.count(b"\n") != len(chunk):
            raise ValueError("a name holds a newline, which a name column cannot store")
        sizes: Iterable[int]
        if len(data) == sum(map(len, chunk)) + len(chunk):  # a byte a character in every name
            sizes = map(len, chunk)
        else:
            sizes = (len(n.encode("utf-8", "surrogateescape")) for n in chunk)
        ends = list(accumulate((n + 1 for n in sizes), initial=self._starts[-1]))
        if ends[-1] > NARROW_MAX and self._starts.typecode == NARROW:
            self._starts = array("q", self._starts)  # past 2 GiB of names: 8-byte offsets
        self._starts.extend(ends[1:])  # ends[0]: where the chunk starts, there already
        return data

    @classmethod
    def spooled(cls, chunks: Iterable[list[str]], folder: str | None = None) -> Names:
        """Names given a chunk at a time, their buffer written to a nameless file in
        ``folder`` (``SpooledBlob``) instead of kept in memory: only where each name starts
        stays (4 or 8 bytes a name)."""
        names = cls()
        file = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (kept open by the blob)
        starts = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (kept open by the starts)
        count = 0
        try:
            for chunk in chunks:
                if chunk:
                    file.write(names._ended(chunk))
                    done, names._starts = names._starts, array("q", names._starts[-1:])
                    starts.write(array("q", done[:-1]).tobytes())  # the last starts the next
                    count += len(done) - 1
            starts.write(array("q", names._starts).tobytes())
            file.flush()
            starts.flush()
        except BaseException:
            file.close()
            starts.close()
            raise
        names._blob = SpooledBlob(file, names._starts[-1])  # type: ignore[assignment]
        names._starts = SpooledStarts(starts, count + 1)  # type: ignore[assignment]
        return names

    def __len__(self) -> int:
        return len(self._starts) - 1 + len(self._pending)

    def joined(self, start: int, stop: int) -> bytes:
        """Names ``start:stop`` joined by newlines, as UTF-8 (undecodable bytes as they were
        listed): ``"\\n".join(self[start:stop])`` encoded, straight from the buffer."""
        if self._pending:
            self._pack()
        start, stop, _ = slice(start, stop).indices(len(self))
        if start >= stop:
            return b""
        starts = self._starts
        return bytes(self._blob[starts[start] : starts[stop] - 1])

    def _decoded(self, start: int, stop: int) -> list[str]:
        """Names ``start:stop`` (packed, ``start < stop``) with one decode."""
        starts = self._starts
        return (
            self._blob[starts[start] : starts[stop] - 1]
            .decode("utf-8", "surrogateescape")
            .split("\n")
        )

    def __getitem__(self, index):  # type: ignore[override]
        if self._pending:
            self._pack()
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return self._decoded(start, stop) if start < stop else []
        starts = self._starts
        if index < 0:
            index += len(starts) - 1
        if not 0 <= index < len(starts) - 1:
            raise IndexError("name index out of range")
        return self._blob[starts[index] : starts[index + 1] - 1].decode("utf-8", "surrogateescape")

    def __iter__(self) -> Iterator[str]:
        if self._pending:
            self._pack()
        count = len(self)
        for start in range(0, count, CHUNK):
            yield from self._decoded(start, min(start + CHUNK, count))

    def take(self, indices: Sequence[int]) -> list[str]:
        """The names at ``indices``, in their order. The indices are sorted first (numpy), so
        each run of consecutive ones is decoded at once: files of a sample are often far apart
        in the listing (an image and its annotation in two trees), but a chunk of samples
        still covers a few long runs of it."""
        if self._pending:
            self._pack()
        count = len(indices)
        if count >= TAKE_SORTED_FROM:
            import numpy as np

            at = np.asarray(indices, dtype=np.int64)
            order = np.argsort(at, kind="stable")
            at = at[order]
            breaks = (np.flatnonzero(np.diff(at) != 1) + 1).tolist()
            if len(breaks) <= count // 8:
                names: list[str] = []
                for a, b in zip([0, *breaks], [*breaks, count]):
                    names += self._decoded(int(at[a]), int(at[b - 1]) + 1)
                rank = np.empty(count, dtype=np.int64)
                rank[order] = np.arange(count, dtype=np.int64)
                return list(map(names.__getitem__, rank.tolist()))
        blob, starts = self._blob, self._starts
        return [
            blob[starts[i] : starts[i + 1] - 1].decode("utf-8", "surrogateescape") for i in indices
        ]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Names):
            other._pack()
            self._pack()
            if self._starts[:] != other._starts[:]:  # as arrays (spooled starts are not)
                return False
            return self._blob[0 : len(self._blob)] == other._blob[0 : len(other._blob)]
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and all(map(operator.eq, self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"Names({list(self[:3])!r}{', …' if len(self) > 3 else ''}, {len(self)} names)"


class LaterNames(Names):
    """A ``Names`` column of ``count`` names that ``load`` gives the first time one is read
    (its length is known before): a dry run over an inventory the column engine read never
    needs the names, so they stay in the engine; a run reads them while it plans (its
    fingerprint), before any writer starts or is forked — into a file with no name, when the
    loader spools them (``Names.spooled``). Loaded at most once, under a lock;
    pickled as the names themselves. Up to ``PICKED`` names taken at once (a warning's
    examples) are asked of ``pick`` instead, when given: nothing else is loaded."""

    __slots__ = ("__weakref__", "_count", "_load", "_lock", "_pick")

    def __init__(
        self,
        count: int,
        load: Callable[[], Names],
        pick: Callable[[list[int]], list[str]] | None = None,
    ) -> None:  # no names yet
        self._count, self._lock, self._pick = count, threading.Lock(), pick
        self._load: Callable[[], Names] | None = load

    def take(self, indices: Sequence[int]) -> list[str]:
        if not len(indices):
            return []
        if self._load is not None and self._pick is not None and len(indices) <= PICKED:
            return self._pick(list(indices))
        return super().take(indices)

    def __getattr__(self, attr: str):  # a slot of the names, not set until they are loaded
        if attr not in Names.__slots__:
            raise AttributeError(attr)
        with self._lock:
            if self._load is not None:
                loaded = self._load()
                if len(loaded) != self._count:
                    raise ValueError(f"{len(loaded)} names loaded where {self._count} were listed")
                self._blob, self._starts, self._pending = loaded._blob, loaded._starts, []
                self._load = None
        return object.__getattribute__(self, attr)

    @property
    def loaded(self) -> bool:
        """Whether the names were read from where they wait."""
        return self._load is None

    def __len__(self) -> int:
        return self._count if self._load is not None else super().__len__()

    def __reduce__(self):
        return Names, (), (None, {"_blob": self._blob, "_starts": self._starts, "_pending": []})
