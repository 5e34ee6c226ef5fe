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
from collections.abc import Generator
from typing import BinaryIO

from .compress import Sink
from .reading import FormatDamage

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


class _Checked(zstd.ZstdFile):
    """A zstd stream read forward; what libzstd refuses (a damaged frame, a content checksum
    that differs, a window larger than it allows) is the format's damage."""

    def read(self, size: int | None = -1) -> bytes:
        try:
            return super().read(size)
        except (zstd.ZstdError, MemoryError) as err:
            raise FormatDamage(f"zstd: {err or type(err).__name__}") from None

    def read1(self, size: int | None = -1) -> bytes:
        try:
            return super().read1(size)
        except (zstd.ZstdError, MemoryError) as err:
            raise FormatDamage(f"zstd: {err or type(err).__name__}") from None

    def readinto(self, b) -> int:
        try:
            return super().readinto(b)
        except (zstd.ZstdError, MemoryError) as err:
            raise FormatDamage(f"zstd: {err or type(err).__name__}") from None


def open_zstd(fileobj: BinaryIO) -> BinaryIO:
    """The bytes of every frame in a zstd stream, read forward (skippable frames passed)."""
    return _Checked(fileobj, "rb")  # type: ignore[return-value]


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
    except (zstd.ZstdError, MemoryError) as err:
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


def _compressor(level: int) -> zstd.ZstdCompressor:
    """Frames that carry zstd's content checksum (4 bytes each): a changed byte fails their
    decompression, as a gzip member's CRC does."""
    param = zstd.CompressionParameter
    return zstd.ZstdCompressor(options={param.compression_level: level, param.checksum_flag: 1})


class SeekableZstdSink:
    """Compresses into frames that end where ``boundary()`` is called (and every
    ``FRAME_MAX`` bytes), then writes the seek table on ``close()``.

    ``frame_starts`` holds the compressed offset of each boundary: where the frame that begins
    there starts in the shard."""

    def __init__(self, out: Sink, level: int) -> None:
        self._out = out
        self._level = level
        self._z = _compressor(level)
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
        self._emit(self._z.flush(zstd.ZstdCompressor.FLUSH_FRAME))  # the next frame: same options
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


ZSTD_MAGIC = 0xFD2FB528
TABLE_MAX = 1 << 28  # a seek table of more bytes (some 33 million frames) is not read


class FrameWalk:
    """The frames of a zstd stream, walked as its bytes go by (``feed``, then ``finish``):
    each frame's compressed size read from its header and block headers, nothing
    decompressed; and the seek table (the last skippable frame, when a seekable one)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []  # compressed size of each zstd frame, in order
        self.skippable = 0  # skippable frames before the last one
        self.table: bytes | None = None  # the content of the last skippable frame
        self.table_at = 0  # where it starts
        self.error: str | None = None
        self._pos = 0
        self._buf = bytearray()
        self._skipped = 0  # bytes passed over of the ones asked for
        self._steps = self._walk()
        self._want: tuple[int, bool] | None = next(self._steps)

    def feed(self, data: bytes | memoryview) -> None:
        """The stream's next bytes."""
        view = memoryview(data)
        while view and self._want is not None and self.error is None:
            n, keep = self._want
            take = min(n - (len(self._buf) if keep else self._skipped), len(view))
            if keep:
                self._buf += view[:take]
            else:
                self._skipped += take
            self._pos += take
            view = view[take:]
            if (len(self._buf) if keep else self._skipped) == n:
                got, self._buf, self._skipped = bytes(self._buf), bytearray(), 0
                self._want = self._steps.send(got)

    def finish(self) -> str | None:
        """What is wrong with the stream's frames, once it ended (None: nothing)."""
        if self.error is None and (self._buf or self._skipped or self._want != (4, True)):
            self.error = f"it ends inside a frame, at byte {self._pos}"
        return self.error

    def _walk(self) -> Generator[tuple[int, bool], bytes, None]:
        while True:
            magic = int.from_bytes((yield (4, True)), "little")
            start = self._pos - 4
            if magic & 0xFFFFFFF0 == 0x184D2A50:
                size = int.from_bytes((yield (4, True)), "little")
                if self.table is not None:
                    self.skippable += 1
                self.table_at = start
                self.table = (yield (size, True)) if size <= TABLE_MAX else b""
            elif magic == ZSTD_MAGIC:
                yield from self._frame()
                self.sizes.append(self._pos - start)
            else:
                self.error = f"no zstd frame starts at byte {start}"
                yield (1 << 62, False)

    def _frame(self) -> Generator[tuple[int, bool], bytes, None]:
        descriptor = (yield (1, True))[0]
        single = descriptor & 0x20
        fcs = (1 if single else 0, 2, 4, 8)[descriptor >> 6]
        yield (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3] + fcs, False
        last = False
        while not last:
            head = int.from_bytes((yield (3, True)), "little")
            last, kind, size = bool(head & 1), (head >> 1) & 3, head >> 3
            if kind == 3:
                self.error = f"a reserved block type at byte {self._pos - 3}"
                yield (1 << 62, False)
            if kind == 1 or size:
                yield (1 if kind == 1 else size), False
        if descriptor & 0x04:
            yield 4, False


def seek_table_problem(walk: FrameWalk) -> str | None:
    """What is wrong with a seekable shard's seek table, against the frames ``walk`` found in
    it (their count, each one's compressed size, their sum: where the table starts); None
    when nothing."""
    error = walk.finish()
    table = walk.table
    if error is not None:
        return error
    if table is None or walk.skippable or len(table) < FOOTER.size:
        return "there is no seek table after the frames"
    count, descriptor, magic = FOOTER.unpack_from(table, len(table) - FOOTER.size)
    width = 12 if descriptor & 0x80 else ENTRY.size
    if magic != SEEKABLE_MAGIC or descriptor & 0x7C or len(table) != count * width + FOOTER.size:
        return f"the seek table claims {count} frames in {len(table)} bytes"
    if count != len(walk.sizes):
        return f"the seek table claims {count} frames, the shard holds {len(walk.sizes)}"
    for i, size in enumerate(walk.sizes):
        claimed, plain = ENTRY.unpack_from(table, i * width)
        if claimed != size or not 0 < plain <= FRAME_MAX:
            return f"the seek table's frame {i} claims {claimed} bytes, the frame takes {size}"
    return None
