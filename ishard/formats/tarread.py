"""The tar container read back: its members read forward in bounded memory (what follows the
archive's end checked), and a member's ustar or pax header held against an index row."""

from __future__ import annotations

import functools
import io
import tarfile
from collections.abc import Collection, Iterator
from typing import BinaryIO

from ..names import shown
from .reading import READ_STEP, Container, Entry, Headers, Place, PlacedDamage, compared
from .tarheaders import Unusual, walk

TAR_BUFFER = 1 << 20
BLOCK = 512


class _Tail:
    """A tar stream read through: where its last byte that is not zero was, so that what
    follows the archive's end can be checked."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.position = 0
        self.last_data = 0  # one past the last non-zero byte read

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        kept = len(data.rstrip(b"\0"))
        if kept:
            self.last_data = self.position + kept
        self.position += len(data)
        return data


def _members(stream: BinaryIO, whole: bool, only: Collection[str] | None = None) -> Iterator[Entry]:
    """Every regular-file member, read forward (``only`` is for a container that can pick)."""
    tail = _Tail(stream)
    with tarfile.open(fileobj=tail, mode="r|", bufsize=TAR_BUFFER) as tar:  # type: ignore[call-overload]
        for info in tar:
            tar.members = []  # type: ignore[attr-defined]  # forward-only: keep no history
            if info.isfile():
                yield info.name, info.size, functools.partial(tar.extractfile, info)
        end = tar.offset  # where tarfile stopped: the end-of-archive block, or a bad header
    if whole:
        while tail.read(READ_STEP):  # a compressed stream checks its trailer at its end
            pass
        if tail.last_data > end:  # tarfile stops quietly at a damaged header past the first
            raise PlacedDamage(
                f"the member header at byte {end} is damaged: tar readers stop there, and "
                f"{tail.last_data - end} bytes after it hold data"
            )


def mismatch(data: bytes, base: int, place: Place) -> tuple[str | None, str]:
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
    differs = compared(
        {
            "names": (shown(info.name), shown(place.member)),
            "says it is a": ("file" if info.isreg() else "link or folder", "file"),
            "says size": (info.size, place.size),
            "puts its data at offset": (base + info.offset_data, place.data_offset),
        }
    )
    return differs, info.name


def _read_at(stream: BinaryIO, offset: int, count: int) -> bytes:
    stream.seek(offset)
    return stream.read(count)


def headers(stream: BinaryIO, seekable: bool) -> Headers:
    """Every regular-file member's name, header and data offsets, size and mtime, in archive
    order, read without its bytes where ``stream`` seeks (tarfile then seeks over each
    member's data); read forward through them otherwise. A member's header offset is that of
    its first header (a pax or GNU long-name header before its own).

    Raises:
        PlacedDamage: a damaged header past the first, with data after it (tar readers stop
            there quietly), or a member cut short by the end of the shard.
    """
    if seekable:
        try:
            size = stream.seek(0, io.SEEK_END)
            at = getattr(stream, "at", None)  # a ranged file's read at an offset
            return walk(at or functools.partial(_read_at, stream), size)
        except Unusual:
            stream.seek(0)  # tarfile reads it: what it makes of the header is the answer
    found = Headers()
    source = stream if seekable else _Tail(stream)
    mode = "r:" if seekable else "r|"
    try:
        with tarfile.open(  # type: ignore[call-overload]
            fileobj=source, mode=mode, bufsize=TAR_BUFFER, errors="surrogateescape"
        ) as tar:
            for info in tar:
                tar.members = []  # type: ignore[attr-defined]  # keep no history
                if info.isfile():
                    found.add(info.name, info.offset, info.offset_data, info.size, info.mtime)
            end = tar.offset
    except tarfile.ReadError as err:
        if "unexpected end of data" in str(err):
            raise PlacedDamage(f"it ends inside a member ({err})") from None
        raise
    if seekable:
        stream.seek(end)
        after = stream.read(BLOCK)
        if after.strip(b"\0"):
            raise PlacedDamage(
                f"the member header at byte {end} is damaged: tar readers stop there, and "
                "data follows it"
            )
        return found
    while source.read(READ_STEP):  # a compressed stream checks its trailer at its end
        pass
    if source.last_data > end:  # type: ignore[union-attr]
        raise PlacedDamage(
            f"the member header at byte {end} is damaged: tar readers stop there, and "
            f"{source.last_data - end} bytes after it hold data"  # type: ignore[union-attr]
        )
    return found


TAR = Container("tar", _members, mismatch, (tarfile.TarError,), block=BLOCK, headers=headers)
