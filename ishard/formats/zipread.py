"""The zip container read back: its members through its central directory (it seeks), and a
member's local header (name, sizes or data descriptor) held against an index row."""

from __future__ import annotations

import functools
import struct
import zipfile
import zlib
from collections.abc import Collection, Iterator, Mapping
from typing import BinaryIO

from .reading import Container, Entry, Place, compared

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


def _members(
    fileobj: BinaryIO, whole: bool, only: Collection[str] | None = None
) -> Iterator[Entry]:
    """Every regular-file member in directory order, or the ones ``only`` names (that the
    directory lists, each by its last entry), in that order; zipfile checks each member's
    CRC-32 and length as its bytes end, so ``whole`` adds nothing."""
    with zipfile.ZipFile(fileobj) as zf:
        if only is None:
            entries = [i for i in zf.infolist() if not i.is_dir()]
        else:
            listed = set(zf.namelist())
            entries = [zf.getinfo(name) for name in only if name in listed]
        for info in entries:
            yield info.filename, info.file_size, functools.partial(zf.open, info)


def mismatch(data: bytes, base: int, place: Place) -> tuple[str | None, str]:
    """What the zip local header at ``place.header_offset`` (and the data descriptor after the
    member, where the header leaves its sizes to one) says that the index does not, for a
    member stored without compression (None when they agree), and the member's name."""
    at = place.header_offset - base
    if at < 0 or len(data) < at + _LOCAL.size:
        return f"has no zip local header at offset {place.header_offset}", place.member
    magic, _, flags, method, _, _, _, packed, size, name_length, extra_length = _LOCAL.unpack_from(
        data, at
    )
    if magic != _LOCAL_MAGIC:
        return f"has no zip local header at offset {place.header_offset}", place.member
    raw = data[at + _LOCAL.size : at + _LOCAL.size + name_length]
    name = raw.decode("utf-8" if flags & _UTF8_FLAG else "cp437", "surrogateescape")
    extra = data[at + _LOCAL.size + name_length : at + _LOCAL.size + name_length + extra_length]
    zip64 = _extra_fields(extra).get(_ZIP64_ID)
    differs = compared(
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
        return differs, place.member
    if flags & _DATA_DESCRIPTOR_FLAG:
        return _descriptor_mismatch(data, base, place, zip64 is not None), place.member
    if size == _FULL and zip64 is not None and len(zip64) >= 16:
        size, packed = struct.unpack_from("<QQ", zip64)
    sizes = {"says size": (size, place.size), "says stored size": (packed, place.size)}
    return compared(sizes), place.member


def _descriptor_mismatch(data: bytes, base: int, place: Place, zip64: bool) -> str | None:
    shape = _DESCRIPTOR64 if zip64 else _DESCRIPTOR
    at = place.data_offset + place.size - base
    if len(data) < at + shape.size or data[at : at + 4] != _DESCRIPTOR_MAGIC:
        return f"has no data descriptor after its {place.size} bytes (the size the index says)"
    _, _, packed, size = shape.unpack_from(data, at)
    return compared({"says size": (size, place.size), "says stored size": (packed, place.size)})


def _extra_fields(extra: bytes) -> Mapping[int, bytes]:
    """A zip extra field's records by header id."""
    fields = {}
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        fields[kind] = extra[at + 4 : at + 4 + length]
        at += 4 + length
    return fields


# zipfile raises RuntimeError (or its subclass for what is not implemented) for a method or an encryption
# flag it cannot read: damage too in a shard ishard wrote stored or deflated
ZIP = Container(
    "zip",
    _members,
    mismatch,
    (zipfile.BadZipFile, zlib.error, RuntimeError),
    seeks=True,
    trailer=DESCRIPTOR_BYTES,
)
