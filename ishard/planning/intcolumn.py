"""Int columns of a listing that Python does not hold: ``SpooledInts``, ints in a file with no
name read a window at a time with ``pread``, and ``Positions``, the column 0, 1, 2, … of no
size. What planning keeps per object of a hundred million files lives in such columns, so
what Python holds is bounded by the windows it reads, not by the objects."""

from __future__ import annotations

import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

WINDOW = 1 << 20  # ints read at once when a whole column is walked (4 or 8 MB)
GAP = 1 << 12  # ints between two wanted ones below which one read takes both
SPAN = 1 << 20  # ints one read of scattered positions spans at most (4 or 8 MB)


def _numpy():
    import numpy as np  # imported where a plan is cut: the command starts without it

    return np


class _Column(ABC):
    """What both int columns share: a length, a width (``typecode`` ``i``: 4 bytes, ``q``:
    8), indexing like a numpy array (an int gives an int, a slice a numpy array, an array of
    positions a numpy array of those values), windows in order, ``np.asarray`` of it whole.
    A column gives ``window`` and ``take``."""

    __slots__ = ("_count", "typecode")

    def __init__(self, count: int, typecode: str) -> None:
        self._count, self.typecode = count, typecode

    @property
    def dtype(self) -> Any:
        """The numpy type of its values."""
        return _numpy().dtype("<i4" if self.typecode == "i" else "<i8")

    @property
    def itemsize(self) -> int:
        """Bytes a value."""
        return 4 if self.typecode == "i" else 8

    def __len__(self) -> int:
        return self._count

    @abstractmethod
    def window(self, start: int, stop: int) -> Any:
        """Values ``start`` to ``stop`` (clipped to the column) as a numpy array."""

    @abstractmethod
    def take(self, indices: Any) -> Any:
        """The values at ``indices`` (any order, repeats and negatives allowed)."""

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            out = self.window(start, stop)
            return out if step == 1 else out[::step]
        if isinstance(index, (int, _numpy().integer)):
            at = int(index) + (self._count if index < 0 else 0)
            if not 0 <= at < self._count:
                raise IndexError("planning column index out of range")
            return int(self.window(at, at + 1)[0])
        return self.take(index)

    def _checked(self, indices: Any) -> Any:
        """``indices`` as int64 positions, negatives counted from the end; IndexError for one
        past either end."""
        np = _numpy()
        at = np.asarray(indices, dtype=np.int64)
        at = np.where(at < 0, at + self._count, at)
        if len(at) and (int(at.min()) < 0 or int(at.max()) >= self._count):
            raise IndexError("planning column index out of range")
        return at

    def windows(self, step: int | None = None) -> Iterator[tuple[int, Any]]:
        """(where it starts, the values) of each window of ``step`` values (``WINDOW``), in
        order."""
        step = step or WINDOW
        for start in range(0, self._count, step):
            yield start, self.window(start, start + step)

    def __iter__(self) -> Iterator[int]:
        for _, part in self.windows():
            yield from part.tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        whole = self.window(0, self._count)
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def tobytes(self) -> bytes:
        """The column's bytes, as ``array.tobytes`` gives them."""
        return bytes(self.window(0, self._count).data)


class SpooledInts(_Column):
    """A column of little-endian ints in a file with no name, read with ``pread`` (forked
    writers read it through the descriptor they inherit); ``np.asarray`` reads it whole (what
    a path that reads value by value does first)."""

    __slots__ = ("_file",)

    def __init__(self, file: Any, count: int, typecode: str) -> None:
        super().__init__(count, typecode)
        self._file = file

    @classmethod
    def written(cls, chunks: Iterable[Any], typecode: str, folder: str | None) -> SpooledInts:
        """The ints given a chunk (a numpy array) at a time, written to a new file in
        ``folder``."""
        np = _numpy()
        dtype = np.dtype("<i4" if typecode == "i" else "<i8")
        file = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (kept open by the column)
        count = 0
        try:
            for chunk in chunks:
                part = np.asarray(chunk).astype(dtype, copy=False)
                file.write(memoryview(part).cast("B"))
                count += len(part)
            file.flush()
        except BaseException:
            file.close()
            raise
        return cls(file, count, typecode)

    def window(self, start: int, stop: int) -> Any:
        """Values ``start`` to ``stop`` (clipped to the column) as a numpy array."""
        np = _numpy()
        start, stop = max(0, start), min(stop, self._count)
        width = self.itemsize
        size = width * max(stop - start, 0)
        data = bytearray(size)
        view, at, fd = memoryview(data), 0, self._file.fileno()
        while at < size:
            got = os.preadv(fd, [view[at:]], width * start + at)
            if not got:
                raise OSError(f"a planning column's temporary file ends at value {start}")
            at += got
        return np.frombuffer(data, dtype=self.dtype)

    def take(self, indices: Any) -> Any:
        """The values at ``indices`` (any order, repeats allowed) as a numpy array: the
        positions sorted, each run of them within ``GAP`` of the next read at once, in reads
        of at most ``SPAN`` values — a shard's files lie in a few spans of the listing."""
        np = _numpy()
        at = self._checked(indices)
        if not len(at):
            return np.empty(0, dtype=self.dtype)
        order = np.argsort(at, kind="stable")
        ranked = at[order]
        breaks = np.flatnonzero(np.diff(ranked) > GAP) + 1
        out = np.empty(len(at), dtype=self.dtype)
        for a, b in zip([0, *breaks.tolist()], [*breaks.tolist(), len(ranked)]):
            while a < b:  # a read spans at most SPAN values: positions spread wide, bounded
                lo = int(ranked[a])
                end = a + int(np.searchsorted(ranked[a:b], lo + SPAN, side="left"))
                span = self.window(lo, int(ranked[end - 1]) + 1)
                out[order[a:end]] = span[ranked[a:end] - lo]
                a = end
        return out

    def sum(self, dtype: Any = None) -> int:
        """The values added up (as 8-byte ints), a window at a time."""
        np = _numpy()
        return sum(int(part.sum(dtype=np.int64)) for _, part in self.windows())

    def max(self) -> int:
        """The largest value (the column is not empty)."""
        return max(int(part.max()) for _, part in self.windows())

    def min(self) -> int:
        """The smallest value (the column is not empty)."""
        return min(int(part.min()) for _, part in self.windows())

    def __reduce__(self):  # pickled (sent to a Dask worker, say) as an array of the values
        from array import array

        return array, (self.typecode, self.tobytes())

    def __repr__(self) -> str:
        return f"SpooledInts({self._count} × {self.itemsize} B)"


class Positions(_Column):
    """The column 0, 1, …, ``count - 1`` (the files by sample when each sample's files are in
    a row of the listing), of no size."""

    __slots__ = ()

    def __init__(self, count: int, typecode: str = "q") -> None:
        super().__init__(count, typecode)

    def window(self, start: int, stop: int) -> Any:
        """Values ``start`` to ``stop`` (clipped) as a numpy array."""
        start, stop = max(0, start), min(stop, self._count)
        return _numpy().arange(start, max(start, stop), dtype=self.dtype)

    def take(self, indices: Any) -> Any:
        """The values at ``indices``: the indices themselves, checked."""
        return self._checked(indices).astype(self.dtype, copy=False)

    def sum(self, dtype: Any = None) -> int:
        """The values added up."""
        return self._count * (self._count - 1) // 2

    def __reduce__(self):
        return Positions, (self._count, self.typecode)

    def __repr__(self) -> str:
        return f"Positions({self._count})"
