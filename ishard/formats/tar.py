"""Tar writer: plain ustar headers, a pax header only for members that need one, fixed metadata."""

from __future__ import annotations

from typing import BinaryIO

from ..errors import SourceError
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
            raise SourceError(
                f"file {name!r} shrank while being read: listed {size} bytes, "
                f"got {size - left} — run again once the source is stable"
            )
        if len(data) > left:
            raise _grew(name, size)
        left -= len(data)
        if isinstance(into, bytearray):
            into += data
        else:
            into.write(data)
    if size == 0 and source.read(1):
        raise _grew(name, size)


def _grew(name: str, size: int) -> SourceError:
    return SourceError(
        f"file {name!r} grew while being read: listed {size} bytes — "
        "run again once the source is stable"
    )


class TarWriter:
    """Streams members into ``sink`` as a tar archive; ``offset`` is the bytes written so far."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._buf = bytearray()
        self.offset = 0
        self.data_offsets: list[int] = []

    def _emit(self, data: bytes) -> None:
        self._buf += data
        self.offset += len(data)
        if len(self._buf) >= FLUSH_AT:
            self._flush()

    def _flush(self) -> None:
        if self._buf:
            self._sink.write(bytes(self._buf))
            self._buf.clear()

    def add(self, name: str, size: int, mtime: int, source: BinaryIO) -> None:
        """Append a regular file of ``size`` bytes read from ``source``."""
        self._emit(member_header(name, size, mtime))
        self.data_offsets.append(self.offset)
        if size <= FLUSH_AT:
            read_exactly(source, size, name, self._buf)
        else:
            self._flush()
            read_exactly(source, size, name, self._sink)
        self.offset += size
        self._emit(_padding(size))

    def close(self) -> None:
        """Write the two zero end blocks and close the sink."""
        self._emit(END)
        self._flush()
        self._sink.close()

    def abort(self) -> None:
        """Abandon the archive (nothing is held that needs releasing)."""
        self._buf.clear()
