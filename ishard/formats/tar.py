"""Tar writer: plain ustar headers, a pax header only for members that need one, fixed metadata."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import BinaryIO

from ..checksums import member_hasher
from ..errors import SizeChanged
from ..store.readers import unreadable
from .compress import Sink

BLOCK = 512
FLUSH_AT = 1 << 20  # gather headers and small files into writes of about this size
CHUNK = 1 << 20
OCTAL_11 = 8**11  # ustar size and mtime fields hold 11 octal digits: 8 GiB, year 2242
END = bytes(2 * BLOCK)
MODE = b"0000644\0"
ZERO8 = b"0000000\0"
MAGIC = b"ustar\x0000"
PAX_NAME = b"././@PaxHeader"
# The plain ustar header as one struct: name, mode+uid+gid, size, mtime, checksum, typeflag,
# (linkname), magic+version, (uname, gname), devmajor+devminor, prefix, (padding).
_USTAR = struct.Struct("100s24s12s12s8s1s100x8s64x16s155s12x")
_IDS = MODE + ZERO8 + ZERO8
_DEVS = ZERO8 + ZERO8
_FIXED_SUM = sum(_IDS) + sum(b"0") + sum(MAGIC) + sum(_DEVS) + sum(b" " * 8)
_ZEROS = memoryview(bytes(BLOCK))


def _octal(value: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, value)


def _number(value: int, width: int) -> bytes:
    """Octal when it fits, else GNU base-256; negative is 0 (the pax record carries the value)."""
    if value < 0:
        return _octal(0, width)
    if value < 8 ** (width - 1):
        return _octal(value, width)
    return b"\x80" + value.to_bytes(width - 1, "big")


def _split_name(name: bytes) -> tuple[bytes, bytes] | None:
    """(prefix, name) fields for a ustar name, or None when it does not fit."""
    if len(name) <= 100:
        return b"", name
    start = max(len(name) - 101, 0)
    cut = name.find(b"/", start)
    while 0 <= cut <= 155:
        if len(name) - cut - 1 <= 100 and cut > 0:
            return name[:cut], name[cut + 1 :]
        cut = name.find(b"/", cut + 1)
    return None


def _header(name: bytes, prefix: bytes, size: int, mtime: int, typeflag: bytes) -> bytes:
    head = b"".join(
        (
            name.ljust(100, b"\0"),
            MODE,
            ZERO8,
            ZERO8,
            _number(size, 12),
            _number(mtime, 12),
            b"        ",
            typeflag,
            bytes(100),
            MAGIC,
            bytes(64),  # uname, gname: empty
            ZERO8,
            ZERO8,
            prefix.ljust(155, b"\0"),
            bytes(12),
        )
    )
    checksum = b"%06o\0 " % sum(head)
    return head[:148] + checksum + head[156:]


def _pax_record(key: bytes, value: bytes) -> bytes:
    body = b" " + key + b"=" + value + b"\n"
    length = len(body) + len(str(len(body)))
    if len(str(length)) != len(str(len(body))):  # the length's own digits count too
        length += 1
    return str(length).encode() + body


def _padding(size: int) -> bytes:
    return bytes(-size % BLOCK)


def member_header(name: str, size: int, mtime: int) -> bytes:
    """The header block(s) for one regular file: ustar, with a pax header first if needed."""
    raw = name.encode("utf-8", "surrogateescape")
    split = _split_name(raw) if raw.isascii() else None
    records = []
    if split is None:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            records.append(_pax_record(b"hdrcharset", b"BINARY"))
        records.append(_pax_record(b"path", raw))
        split = (b"", raw.decode("ascii", "replace").encode("ascii", "replace")[-100:])
    if not 0 <= size < OCTAL_11:
        records.append(_pax_record(b"size", b"%d" % size))
    if not 0 <= mtime < OCTAL_11:
        records.append(_pax_record(b"mtime", b"%d" % mtime))
    own = _header(split[1], split[0], size, mtime, b"0")
    if not records:
        return own
    pax = b"".join(records)
    pax_head = _header(PAX_NAME, b"", len(pax), max(0, min(mtime, OCTAL_11 - 1)), b"x")
    return pax_head + pax + _padding(len(pax)) + own


def read_exactly(source: BinaryIO, size: int, name: str, into: Sink | bytearray) -> None:
    """Copy ``size`` bytes of ``source`` into ``into``; fail if the file is not that size now."""
    left = size
    while left > 0:
        want = min(left, CHUNK)
        data = source.read(want + 1 if want == left else want)
        if not data:
            raise _shrank(name, size, size - left)
        if len(data) > left:
            raise _grew(name, size)
        left -= len(data)
        if isinstance(into, bytearray):
            into += data
        else:
            into.write(data)
    if size == 0 and source.read(1):
        raise _grew(name, size)


def _shrank(name: str, size: int, got: int) -> SizeChanged:
    return SizeChanged(
        f"file {name!r} shrank while being read: listed {size} bytes, "
        f"got {got} — run again once the source is stable",
        name,
        size,
        got,
    )


def _fileno(source: BinaryIO) -> int:
    """The descriptor to read ``source`` through (from its current offset), or -1."""
    try:
        return source.fileno()
    except (AttributeError, OSError, ValueError):
        return -1


class _Into:
    """Hands ``read_exactly``'s pieces to a function."""

    __slots__ = ("write",)

    def __init__(self, write) -> None:
        self.write = write

    def close(self) -> None:
        """Nothing to flush: each piece went on as it came."""


def _grew(name: str, size: int) -> SizeChanged:
    return SizeChanged(
        f"file {name!r} grew while being read: listed {size} bytes — "
        "run again once the source is stable",
        name,
        size,
    )


class TarWriter:
    """Streams members into ``sink`` as a tar archive; ``offset`` is the bytes written so far.

    Headers, padding and member bytes gather in one reused buffer that goes to the sink in
    writes of about ``FLUSH_AT`` bytes (``sink.write`` gets a memoryview of it, which it must
    not keep). A source with a ``fileno()`` is read through that descriptor, straight into the
    buffer. Each member's bytes are hashed there, on their way into the archive
    (``checksums()``, the sample index's): so no member is copied in the kernel, where its
    bytes would pass by unseen.
    """

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._view = memoryview(bytearray(FLUSH_AT))
        self._pos = 0
        self.offset = 0
        self.header_offsets: list[int] = []
        self.data_offsets: list[int] = []
        self._boundary: Callable[[], None] | None = getattr(sink, "boundary", None)
        self._mtime, self._mtime_field, self._mtime_sum = -1, b"", 0
        self.sums: list[int] = []
        self.placed: list[int] = []  # the members the sink placed (``place``), by index
        self._hash = member_hasher()

    def _flush(self) -> None:
        if self._pos:
            self._sink.write(self._view[: self._pos])
            self._pos = 0

    def _put(self, data: bytes | bytearray | memoryview) -> None:
        n = len(data)
        self.offset += n
        if self._pos + n > FLUSH_AT:
            self._flush()
            if n > FLUSH_AT:
                self._sink.write(data)
                return
        self._view[self._pos : self._pos + n] = data
        self._pos += n

    def _hashed_put(self, data: bytes | bytearray | memoryview) -> None:
        self._hash.update(data)
        self._put(data)

    def _header(self, name: str, size: int, mtime: int) -> None:
        """``member_header``'s bytes; its common case (one plain ustar block) packed straight
        into the buffer, with the checksum of the constant fields computed once."""
        if name.isascii() and 0 <= size < OCTAL_11 and 0 <= mtime < OCTAL_11:
            raw, prefix = name.encode("ascii"), b""
            if len(raw) > 100:
                split = _split_name(raw)
                if split is None:
                    self._put(member_header(name, size, mtime))
                    return
                prefix, raw = split
            if mtime != self._mtime:  # files listed together often share their mtime
                self._mtime, self._mtime_field = mtime, b"%011o\0" % mtime
                self._mtime_sum = sum(self._mtime_field)
            size_field = b"%011o\0" % size
            check = _FIXED_SUM + self._mtime_sum + sum(raw) + sum(prefix) + sum(size_field)
            if self._pos + BLOCK > FLUSH_AT:
                self._flush()
            _USTAR.pack_into(
                self._view,
                self._pos,
                raw,
                _IDS,
                size_field,
                self._mtime_field,
                b"%06o\0 " % check,
                b"0",
                MAGIC,
                _DEVS,
                prefix,
            )
            self._pos += BLOCK
            self.offset += BLOCK
            return
        self._put(member_header(name, size, mtime))

    def _read_fd(self, fd: int, size: int, name: str) -> None:
        """Read the member into the buffer, one byte more than listed to see growth."""
        if self._pos + size >= FLUSH_AT:
            self._flush()
        view, left = self._view, size
        while True:
            room = FLUSH_AT - self._pos
            if room == 0:
                self._flush()
                room = FLUSH_AT
            try:
                n = os.readv(fd, [view[self._pos : self._pos + min(left + 1, room)]])
            except OSError as err:
                raise unreadable(name, err) from None
            if n > left:
                raise _grew(name, size)
            if n == 0:
                if left:
                    raise _shrank(name, size, size - left)
                return
            self._hash.update(view[self._pos : self._pos + n])
            self._pos += n
            left -= n
            if left == 0:
                return

    def sample(self) -> None:
        """A new sample begins: a sink that cuts frames (seekable zstd) starts one here."""
        if self._boundary is not None:
            self._flush()
            self._boundary()

    def add(self, name: str, size: int, mtime: int, source: BinaryIO) -> None:
        """Append a regular file of ``size`` bytes read from ``source``."""
        self.header_offsets.append(self.offset)
        self._header(name, size, mtime)
        self.data_offsets.append(self.offset)
        fd = _fileno(source)
        self._hash.reset()
        if fd < 0:
            read_exactly(source, size, name, _Into(self._hashed_put))
            self.offset -= size  # _put counted the bytes; counted once below
        else:
            self._read_fd(fd, size, name)
        self.sums.append(self._hash.intdigest())
        self.offset += size
        pad = -size % BLOCK
        if pad:
            self._put(_ZEROS[:pad])

    def place(self, name: str, size: int, mtime: int, source: str) -> None:
        """Append a regular file of ``size`` bytes that the sink places itself, copied inside
        its store from the source's ``source`` (``--compose``): its header and padding are
        written here as :meth:`add` writes them, its bytes never pass through this writer (its
        checksum is unknown here: ``placed`` lists it)."""
        self.header_offsets.append(self.offset)
        self._header(name, size, mtime)
        self.data_offsets.append(self.offset)
        self._flush()
        self._sink.place(source, size)  # type: ignore[attr-defined]
        self.placed.append(len(self.sums))
        self.sums.append(0)
        self.offset += size
        pad = -size % BLOCK
        if pad:
            self._put(_ZEROS[:pad])

    def layout(self) -> tuple[list[int], list[int], list[int] | None]:
        """Where each member's header and data start in the tar stream, and where each
        sample's frames start in the shard (then where the last one ends), when the sink cuts
        frames."""
        frames = getattr(self._sink, "frame_starts", None) if self._boundary else None
        return self.header_offsets, self.data_offsets, frames

    def checksums(self) -> list[int]:
        """Each member's xxh3-64, taken as its bytes went into the archive."""
        return self.sums

    def close(self) -> None:
        """Write the two zero end blocks and close the sink."""
        self.sample()  # the end blocks are no sample's: a frame of their own
        self._put(END)
        self._flush()
        self._sink.close()

    def abort(self) -> None:
        """Abandon the archive: buffered bytes are dropped, never written."""
        self._pos = 0
