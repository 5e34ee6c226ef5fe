"""Seekable Zstandard: a tar stream cut into zstd frames at sample boundaries, followed by the
Zstandard Seekable Format's seek table (a skippable frame every zstd decoder passes over), so
one sample can be read by decompressing its own frames alone.

The library is ``compression.zstd`` (Python 3.14 and later) or its backport ``backports.zstd``
for older Pythons: one API over libzstd; the bytes depend on libzstd's version and the level,
which the plan record names (``zstd_library``)."""

from __future__ import annotations

import contextlib
import struct
import sys
from typing import BinaryIO

from .compress import Sink

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

SKIPPABLE_MAGIC = 0x184D2A5E  # the seek table's skippable frame
SEEKABLE_MAGIC = 0x8F92EAB1  # the last four bytes of a seekable archive
FOOTER = struct.Struct("<IBI")  # frame count, descriptor, seekable magic
ENTRY = struct.Struct("<II")  # compressed size, decompressed size (no checksums)
FRAME_MAX = 1 << 30  # decompressed bytes a frame holds at most (the table's fields are u32)
STEP = 1 << 20  # input given to the compressor at a time within a frame


def zstd_library() -> str:
    """What the bytes depend on: ``libzstd <version>``."""
    return f"libzstd {zstd.zstd_version}"


def open_zstd(fileobj: BinaryIO) -> BinaryIO:
    """The bytes of every frame in a zstd stream, read forward (skippable frames passed)."""
    return zstd.ZstdFile(fileobj, "rb")  # type: ignore[return-value]


def decompress(data: bytes, size: int) -> bytes:
    """One or more whole frames that hold ``size`` bytes, decompressed, never more than that.

    Raises:
        ValueError: they are not whole frames of that many bytes.
    """
    out = bytearray()
    rest = data
    try:
        while rest:
            frame = zstd.ZstdDecompressor()
            out += frame.decompress(rest, max_length=size - len(out) + 1)
            if len(out) > size or not frame.eof:
                raise ValueError("the frames hold more or less than their sample")
            rest = frame.unused_data
    except zstd.ZstdError as err:
        raise ValueError(str(err)) from None
    if len(out) != size:
        raise ValueError("the frames hold more or less than their sample")
    return bytes(out)


def leading(data: bytes, size: int) -> bytes:
    """What frames that are not ``size`` bytes decompress to, up to ``size`` bytes and up to
    the first damage (to tell which member's header differs from its record)."""
    out = bytearray()
    rest = data
    with contextlib.suppress(zstd.ZstdError):
        while rest and len(out) < size:
            frame = zstd.ZstdDecompressor()
            out += frame.decompress(rest, max_length=size - len(out))
            if not frame.eof:
                break
            rest = frame.unused_data
    return bytes(out[:size])


class SeekableZstdSink:
    """Compresses into frames that end where ``boundary()`` is called (and every
    ``FRAME_MAX`` bytes), then writes the seek table on ``close()``.

    ``frame_starts`` holds the compressed offset of each boundary: where the frame that begins
    there starts in the shard."""

    def __init__(self, out: Sink, level: int) -> None:
        self._out = out
        self._level = level
        self._z = zstd.ZstdCompressor(level=level)
        self._frames: list[tuple[int, int]] = []  # (compressed, decompressed) sizes
        self._packed = 0  # compressed bytes of the frame in progress
        self._taken = 0  # decompressed bytes of the frame in progress
        self.offset = 0  # compressed bytes written before the frame in progress
        self.frame_starts: list[int] = []

    def _emit(self, data: bytes) -> None:
        if data:
            self._out.write(data)
            self._packed += len(data)

    def _end_frame(self) -> None:
        if not self._taken:
            return
        self._emit(self._z.flush(zstd.ZstdCompressor.FLUSH_FRAME))
        self._frames.append((self._packed, self._taken))
        self.offset += self._packed
        self._packed = self._taken = 0

    def boundary(self) -> None:
        """End the frame in progress: what is written next starts a frame of its own."""
        self._end_frame()
        self.frame_starts.append(self.offset)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Compress and pass on."""
        view = memoryview(data)
        while view:
            room = min(FRAME_MAX - self._taken, STEP)
            piece, view = view[:room], view[room:]
            self._emit(self._z.compress(piece))
            self._taken += len(piece)
            if self._taken >= FRAME_MAX:
                self._end_frame()

    def close(self) -> None:
        """End the last frame, write the seek table and close the output."""
        self._end_frame()
        entries = b"".join(ENTRY.pack(c, d) for c, d in self._frames)
        footer = FOOTER.pack(len(self._frames), 0, SEEKABLE_MAGIC)
        body = entries + footer
        self._out.write(struct.pack("<II", SKIPPABLE_MAGIC, len(body)) + body)
        self._out.close()
