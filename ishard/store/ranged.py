"""An object read as a seekable file through ranged reads, a block at a time: the bytes of the
last block fetched are served from memory, so a reader that seeks forward over what it does not
need (tar member data) fetches only the blocks that hold what it reads (the headers).

The block grows while reads follow on from it (small members: the object is read in few, large
requests, as a stream would be) and falls back to its least after a long skip (large members:
little more than their headers is fetched) — docs/performance.md has the measurement."""

from __future__ import annotations

import io
from collections.abc import Callable

LEAST_BLOCK = 64 << 10  # bytes fetched after a skip
MOST_BLOCK = 4 << 20  # bytes fetched at most in one request

Fetch = Callable[[int, int], bytes]  # (start, end) → the object's bytes [start, end)


class RangedFile(io.RawIOBase):
    """An object of ``size`` bytes as a read-only seekable file, its bytes fetched by
    ``fetch``; each read outside the block held fetches a block from where it starts: twice
    the last one's size when it starts within a block's length of the last one's end, the
    least after a skip."""

    def __init__(self, fetch: Fetch, size: int) -> None:
        self._fetch_range, self.size = fetch, size
        self._block = LEAST_BLOCK
        self._pos = 0
        self._start = 0
        self._held = b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def at(self, offset: int, count: int) -> bytes:
        """Up to ``count`` bytes from ``offset`` (fewer at the object's end)."""
        at = offset - self._start
        if 0 <= at and at + count <= len(self._held):
            return self._held[at : at + count]
        self.seek(offset)
        return self.read(count) or b""

    def readinto(self, buffer) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self.size - self._pos)
        if wanted <= 0:
            return 0
        done = 0
        view = memoryview(buffer)
        while done < wanted:
            at = self._pos - self._start
            if not 0 <= at < len(self._held):
                self._fetch(self._pos, wanted - done)
                at = 0
            part = self._held[at : at + wanted - done]
            view[done : done + len(part)] = part
            done += len(part)
            self._pos += len(part)
        return done

    def _fetch(self, start: int, wanted: int) -> None:
        held_end = self._start + len(self._held)
        if self._held and held_end <= start < held_end + self._block:
            self._block = min(MOST_BLOCK, self._block * 2)
        else:
            self._block = LEAST_BLOCK
        end = min(self.size, start + max(self._block, wanted))
        self._held = self._fetch_range(start, end)
        self._start = start
        if not self._held:
            raise EOFError(f"the object ends at byte {start}, before its {self.size} bytes")
