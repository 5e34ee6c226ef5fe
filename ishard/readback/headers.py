"""A member's header read back out of a ranged read: does it name the member, and hold the
size, the sample index says? (a tar's ustar name and prefix or pax path, its size field or
pax size; a zip's local header name, and its sizes or its data descriptor's)."""

from __future__ import annotations

import io
import struct
import tarfile
from collections.abc import Mapping
from typing import Protocol

from ..names import quoted, shown

_LOCAL = struct.Struct("<4sHHHHHIIIHH")  # a zip's local file header, 30 bytes
_LOCAL_MAGIC = b"PK\x03\x04"
_DESCRIPTOR_MAGIC = b"PK\x07\x08"
_DESCRIPTOR = struct.Struct("<4sIII")  # signature, crc, compressed and file size
_DESCRIPTOR64 = struct.Struct("<4sIQQ")  # the same with zip64 sizes
DESCRIPTOR_BYTES = _DESCRIPTOR64.size  # the most a data descriptor takes after a member
_ZIP64_ID = 0x0001
_DATA_DESCRIPTOR_FLAG = 0x08
_UTF8_FLAG = 0x800
_FULL = 0xFFFFFFFF


class Place(Protocol):
    """Where the sample index says a member is (``lookup.MemberPlace``)."""

    @property
    def member(self) -> str: ...
    @property
    def header_offset(self) -> int: ...
    @property
    def data_offset(self) -> int: ...
    @property
    def size(self) -> int: ...


def tar_mismatch(data: bytes, base: int, place: Place) -> tuple[str | None, str]:
    """What the tar header(s) at ``place.header_offset`` (``data`` starts at ``base`` of the
    tar stream) say that the index does not (None when they name the member, with its size
    and its data where the index says), and the member's name as the header has it (the
    index holds a name that is not UTF-8 with ``\\xNN`` escapes)."""
    stream = io.BytesIO(data)
    stream.seek(place.header_offset - base)
    try:
        tar = tarfile.TarFile(fileobj=stream, mode="r", encoding="utf-8", errors="surrogateescape")
        info = tar.next()  # the member at the offset (read when opened)
    except (tarfile.TarError, EOFError, ValueError, UnicodeError):
        info = None
    if info is None:
        return f"has no tar header at offset {place.header_offset}", place.member
    differs = _compared(
        {
            "names": (shown(info.name), shown(place.member)),
            "says it is a": ("file" if info.isreg() else "link or folder", "file"),
            "says size": (info.size, place.size),
            "puts its data at offset": (base + info.offset_data, place.data_offset),
        }
    )
    return differs, info.name


def zip_mismatch(data: bytes, base: int, place: Place) -> str | None:
    """What the zip local header at ``place.header_offset`` (and the data descriptor after the
    member, where the header leaves its sizes to one) says that the index does not, for a
    member stored without compression; None when they agree."""
    at = place.header_offset - base
    if at < 0 or len(data) < at + _LOCAL.size:
        return f"has no zip local header at offset {place.header_offset}"
    magic, _, flags, method, _, _, _, packed, size, name_length, extra_length = _LOCAL.unpack_from(
        data, at
    )
    if magic != _LOCAL_MAGIC:
        return f"has no zip local header at offset {place.header_offset}"
    raw = data[at + _LOCAL.size : at + _LOCAL.size + name_length]
    name = raw.decode("utf-8" if flags & _UTF8_FLAG else "cp437", "surrogateescape")
    extra = data[at + _LOCAL.size + name_length : at + _LOCAL.size + name_length + extra_length]
    zip64 = _extra_fields(extra).get(_ZIP64_ID)
    differs = _compared(
        {
            "names": (name, place.member),
            "says its data is": ("compressed" if method else "stored", "stored"),
            "puts its data at offset": (
                base + at + _LOCAL.size + name_length + extra_length,
                place.data_offset,
            ),
        }
    )
    if differs is not None:
        return differs
    if flags & _DATA_DESCRIPTOR_FLAG:
        return _descriptor_mismatch(data, base, place, zip64 is not None)
    if size == _FULL and zip64 is not None and len(zip64) >= 16:
        size, packed = struct.unpack_from("<QQ", zip64)
    return _compared({"says size": (size, place.size), "says stored size": (packed, place.size)})


def _descriptor_mismatch(data: bytes, base: int, place: Place, zip64: bool) -> str | None:
    shape = _DESCRIPTOR64 if zip64 else _DESCRIPTOR
    at = place.data_offset + place.size - base
    if len(data) < at + shape.size or data[at : at + 4] != _DESCRIPTOR_MAGIC:
        return f"has no data descriptor after its {place.size} bytes (the size the index says)"
    _, _, packed, size = shape.unpack_from(data, at)
    return _compared({"says size": (size, place.size), "says stored size": (packed, place.size)})


def _extra_fields(extra: bytes) -> Mapping[int, bytes]:
    """A zip extra field's records by header id."""
    fields = {}
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        fields[kind] = extra[at + 4 : at + 4 + length]
        at += 4 + length
    return fields


def _compared(pairs: Mapping[str, tuple[object, object]]) -> str | None:
    """The first of ``pairs`` (the header's value, the index's) that differ, worded."""
    for what, (header, index) in pairs.items():
        if header != index:
            if what == "names":
                header, index = quoted(str(header)), quoted(str(index))
            return f"has a header that {what} {header} (the index says {index})"
    return None
