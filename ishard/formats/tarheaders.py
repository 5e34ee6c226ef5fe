"""A plain tar's member headers walked without its members' bytes, at a few microseconds a
member: each 512-byte header read where the one before it says the next starts, through a
reader of byte ranges that fetches only the blocks that hold headers.

Plain ustar, GNU and pax headers of regular files, folders and links are read here, pax and
GNU long names included; anything else — a global pax header, a sparse file, a header whose
checksum is wrong, the archive's end missing — hands the whole shard to Python's ``tarfile``
(``tarread.headers``), whose reading is the one these headers must agree with (a test holds
them to it)."""

from __future__ import annotations

from collections.abc import Callable

from .reading import Headers, PlacedDamage

BLOCK = 512
REGULAR = frozenset(b"0\x007")  # tarfile's regular files (sparse ``S`` goes to tarfile)
NO_DATA = frozenset(b"12345")  # links, devices, folders, fifos: no data follows
NAME_OF_NEXT = frozenset(b"xL")
GNU_KINDS = frozenset(b"LKS")
MOST_NAME_BYTES = (
    1 << 20
)  # a pax header or long name larger than this is damage, not read  # a pax header of the next member, a GNU long name

Read = Callable[[int, int], bytes]  # (offset, count) → up to count bytes from there


class Unusual(Exception):
    """A header this walk leaves to ``tarfile``."""


def _number(field: bytes) -> int:
    if field[0] & 0x80:  # base-256 (GNU): a big size or mtime
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * len(field) - 8)) if field[0] == 0xFF else value
    try:
        return int(field.split(b"\0", 1)[0] or b"0", 8)
    except ValueError:
        raise Unusual("a number that is not octal") from None


class _Checksums:
    """Headers' checksums checked a batch at a time (one array sum, not a loop a header), as
    tarfile checks each: the bytes summed unsigned or signed, the checksum field as spaces."""

    BATCH = 4096

    def __init__(self) -> None:
        self._held: list[bytes] = []

    def add(self, header: bytes) -> None:
        self._held.append(header)
        if len(self._held) >= self.BATCH:
            self.check()

    def check(self) -> None:
        if not self._held:
            return
        import numpy as np

        blocks = np.frombuffer(b"".join(self._held), dtype=np.uint8).reshape(-1, BLOCK)
        held, self._held = self._held, []
        spaced = blocks.copy()
        spaced[:, 148:156] = ord(" ")
        unsigned = spaced.sum(axis=1, dtype=np.int64)
        signed = spaced.view(np.int8).sum(axis=1, dtype=np.int64)
        # the field as tar writers write it ("%06o\0 "): six octal digits
        digits = blocks[:, 148:154].astype(np.int64) - ord("0")
        recorded = (digits * (8 ** np.arange(5, -1, -1))).sum(axis=1)
        for row in np.flatnonzero((recorded != unsigned) & (recorded != signed)):
            value = _number(held[row][148:156])  # written otherwise: read as tarfile reads it
            if value != unsigned[row] and value != signed[row]:
                raise Unusual("header checksum")


def _pax(data: bytes) -> dict[str, str]:
    """A pax header's records (``"<length> <key>=<value>\\n"``)."""
    records: dict[str, str] = {}
    at = 0
    while at < len(data) and data[at : at + 1] != b"\0":
        space = data.index(b" ", at)
        length = int(data[at:space])
        if length <= 0:
            raise Unusual("pax record length")
        key, _, value = data[space + 1 : at + length - 1].partition(b"=")
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        at += length
    return records


def walk(read: Read, size: int) -> Headers:
    """Every regular-file member of the plain tar of ``size`` bytes that ``read`` reads, as
    ``tarfile`` reads it.

    Raises:
        Unusual: a header this walk does not read (``tarfile`` then reads the shard).
        PlacedDamage: a pax header or long name of more than ``MOST_NAME_BYTES``.
    """
    found = Headers()
    offset = 0
    first = None  # where the headers of the member being read began (a pax or long name)
    pax: dict[str, str] = {}
    long_name: str | None = None
    checksums = _Checksums()
    while True:
        header = read(offset, BLOCK)
        if len(header) < BLOCK:
            raise Unusual("end of data")  # no end-of-archive block: tarfile says what it is
        if header.count(0) == BLOCK:  # the archive's end, where tarfile stops reading
            if first is not None:
                raise Unusual("a member's headers end at the archive's end")
            checksums.check()
            return found
        checksums.add(header)
        kind = header[156]
        length = _number(header[124:136])
        if kind in NAME_OF_NEXT:
            data = _next_name(read, offset, length)
            if kind == ord("x"):
                pax = _pax(data)
            else:
                long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            first = offset if first is None else first
            offset += BLOCK + length + (-length % BLOCK)
            continue
        if kind not in REGULAR and kind not in NO_DATA:
            raise Unusual(f"type {kind!r}")
        if any(k.startswith("GNU.sparse") for k in pax):
            raise Unusual("a sparse file")
        name = _name(header, pax, long_name)
        if kind in REGULAR:
            if name.endswith("/"):  # tarfile makes some of these folders
                raise Unusual("a file name ending in '/'")
            if "size" in pax:
                length = int(pax["size"])
            mtime = int(float(pax["mtime"])) if "mtime" in pax else _number(header[136:148])
            found.add(name, offset if first is None else first, offset + BLOCK, length, mtime)
            offset += BLOCK + length + (-length % BLOCK)
        else:  # tarfile skips no data after these
            offset += BLOCK
        if offset > size:
            raise Unusual("end of data")
        first, pax, long_name = None, {}, None


def _next_name(read: Read, offset: int, length: int) -> bytes:
    """The ``length`` bytes of a pax header's records or a GNU long name after the header at
    ``offset``.

    Raises:
        PlacedDamage: more than ``MOST_NAME_BYTES`` (held in memory whole: no writer's size).
        Unusual: fewer bytes there.
    """
    if length > MOST_NAME_BYTES:
        raise PlacedDamage(
            f"the header at byte {offset} says the name or pax records after it take "
            f"{length} bytes (more than {MOST_NAME_BYTES})"
        )
    data = read(offset + BLOCK, length)
    if len(data) < length:
        raise Unusual("end of data")
    return data


def _name(header: bytes, pax: dict[str, str], long_name: str | None) -> str:
    if "path" in pax:
        return pax["path"]
    if long_name is not None:
        return long_name
    name = header[:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    prefix = header[345:500].split(b"\0", 1)[0]  # the path's folders, as tarfile takes it
    if prefix and header[156] not in GNU_KINDS:
        return prefix.decode("utf-8", "surrogateescape") + "/" + name
    return name
