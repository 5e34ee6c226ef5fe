"""The member headers ``ishard index`` reads from a tar without its members' bytes, held to
what Python's ``tarfile`` reads of the same archive: names (pax and GNU long names, folders in
a ustar prefix, names that are not UTF-8), where each header and its data start, sizes and
mtimes; and damage found as tarfile finds it."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from ishard.formats.reading import PlacedDamage
from ishard.formats.tarheaders import walk
from ishard.formats.tarread import headers
from ishard.store.ranged import RangedFile


def tar_bytes(members: list[tuple[str, bytes | None]], fmt: int, **info) -> bytes:
    """A tar of ``members`` (None: a folder; bytes starting with ``->``: a symlink)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt, encoding="utf-8") as tar:
        for name, data in members:
            member = tarfile.TarInfo(name)
            member.mtime = info.get("mtime", 1_700_000_000)
            if data is None:
                member.type = tarfile.DIRTYPE
                tar.addfile(member)
            elif data.startswith(b"->"):
                member.type, member.linkname = tarfile.SYMTYPE, data[2:].decode()
                tar.addfile(member)
            else:
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
    return out.getvalue()


def by_tarfile(data: bytes) -> list[tuple[str, int, int, int, int]]:
    with tarfile.open(fileobj=io.BytesIO(data), errors="surrogateescape") as tar:
        return [(m.name, m.offset, m.offset_data, m.size, int(m.mtime)) for m in tar if m.isfile()]


def rows(found) -> list[tuple[str, int, int, int, int]]:
    return list(zip(found.member, found.header_offset, found.data_offset, found.size, found.mtime))


LONG = "folder/" * 40 + "a-name-longer-than-a-ustar-header-holds.jpg"
WIDE = "k4." + "x" * 120  # no folder: too long for a ustar header
PREFIXED = "folder/" * 15 + "a-name-a-ustar-prefix-holds-the-folders-of.jpg"  # 151 characters
MEMBERS = [
    ("k1.jpg", os.urandom(1000)),
    ("k1.cls", b"3"),
    ("folder", None),
    ("folder/k2.seg.png", os.urandom(513)),
    ("link.jpg", b"->k1.jpg"),
    ("ünïcödé/k3.txt", b"text"),
    (LONG, os.urandom(700)),
    ("empty.txt", b""),
    (PREFIXED, b"prefixed"),
    (WIDE, os.urandom(10)),
]


@pytest.mark.parametrize(
    "fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT], ids=str
)
def test_headers_are_what_tarfile_reads(fmt):
    ustar = fmt == tarfile.USTAR_FORMAT
    members = [m for m in MEMBERS if not ustar or m[0] not in (LONG, WIDE)]
    data = tar_bytes(members, fmt)
    expected = by_tarfile(data)
    files = [m for m in members if m[1] is not None and not m[1].startswith(b"->")]
    assert len(expected) == len(files)
    # the walk itself (not tarfile, which reads what it leaves): every header here is its own
    assert rows(walk(lambda offset, count: data[offset : offset + count], len(data))) == expected
    assert rows(headers(io.BytesIO(data), True)) == expected  # seeking over member data
    assert rows(headers(io.BytesIO(data), False)) == expected  # read forward
    ranged = RangedFile(lambda start, end: data[start:end], len(data))
    assert rows(headers(ranged, True)) == expected  # a store's ranged reads


def test_a_name_that_is_not_utf8_is_kept_as_tarfile_keeps_it():
    data = tar_bytes([("caf\udce9.jpg", b"x"), ("ok.jpg", b"y")], tarfile.GNU_FORMAT)
    expected = by_tarfile(data)
    assert expected[0][0] == "caf\udce9.jpg"
    assert rows(walk(lambda offset, count: data[offset : offset + count], len(data))) == expected


def test_a_big_mtime_and_size_fields_in_base_256():
    data = tar_bytes([("far.jpg", b"z" * 3)], tarfile.GNU_FORMAT, mtime=8**12 + 5)
    assert (
        rows(headers(io.BytesIO(data), True))
        == by_tarfile(data)
        == [("far.jpg", 0, 512, 3, 8**12 + 5)]
    )


def test_a_damaged_header_past_the_first_is_found_as_reading_forward_finds_it():
    data = bytearray(tar_bytes([("a.jpg", b"1" * 600), ("b.jpg", b"2"), ("c.jpg", b"3")], 1))
    second = 512 + 1024  # a.jpg's header and its data, padded
    data[second + 10 : second + 14] = b"\xff\xff\xff\xff"  # its name, so its checksum fails
    for seekable in (True, False):
        with pytest.raises(PlacedDamage, match=f"the member header at byte {second}"):
            headers(io.BytesIO(bytes(data)), seekable)


def test_a_tar_cut_short_inside_a_member_is_damage():
    data = tar_bytes([("a.jpg", b"1" * 5000), ("b.jpg", b"2" * 5000)], tarfile.PAX_FORMAT)
    with pytest.raises((PlacedDamage, tarfile.ReadError, EOFError)):
        headers(io.BytesIO(data[:6000]), True)


def test_a_pax_header_claiming_gigabytes_is_damage_not_read_into_memory():
    data = bytearray(tar_bytes([("x" * 150 + ".jpg", b"1")], tarfile.PAX_FORMAT))
    assert data[156:157] == b"x"  # the pax header of the long name comes first
    data[124:136] = b"%011o\0" % (3 << 30)  # its size: 3 GiB
    data[148:156] = b" " * 8
    data[148:156] = b"%06o\0 " % sum(data[:512])
    with pytest.raises(PlacedDamage, match="the header at byte 0 says"):
        headers(io.BytesIO(bytes(data)), True)
