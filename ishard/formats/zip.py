"""Zip writer: stored members by default, fixed timestamps and attributes, ZIP64 when needed."""

from __future__ import annotations

import io
import time
import zipfile
from typing import BinaryIO

from ..checksums import member_hasher
from ..errors import UsageError
from .compress import Sink
from .tar import read_exactly

DOS_EPOCH = (1980, 1, 1, 0, 0, 0)
DOS_LAST = (2107, 12, 31, 23, 59, 58)


class _Stream(io.RawIOBase):
    """A forward-only view of a sink, so zipfile writes data descriptors instead of seeking."""

    def __init__(self, sink: Sink) -> None:
        self._sink: Sink | None = sink
        self._pos = 0

    def discard(self) -> None:
        """Drop every later write (the archive was abandoned)."""
        self._sink = None

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self._sink is not None:
            self._sink.write(bytes(data))
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self._pos

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        pass


class _Hashed:
    """A member being written, hashed on the way (the sample index's checksum of it)."""

    def __init__(self, member) -> None:
        self._member, self.hash = member, member_hasher()

    def write(self, data) -> None:
        self.hash.update(data)
        self._member.write(data)

    def close(self) -> None:
        """Closed by its ``with``."""


def dos_time(mtime: int) -> tuple[int, int, int, int, int, int]:
    """UTC calendar time for a zip entry, clamped to the range zip can hold."""
    if mtime < 315532800:  # 1980-01-01
        return DOS_EPOCH
    stamp = time.gmtime(mtime)[:6]
    return min(stamp, DOS_LAST)


class ZipWriter:
    """Streams members into ``sink`` as a zip archive."""

    def __init__(self, sink: Sink, *, deflate: bool = False, level: int | None = None) -> None:
        self._sink = sink
        self._stream = _Stream(sink)
        self._method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
        self._level = level if deflate else None
        self._zip = zipfile.ZipFile(self._stream, "w", allowZip64=True)
        self._headers: list[int] = []
        self._data: list[int] = []
        self._sums: list[int] = []

    def add(self, name: str, size: int, mtime: int, source: BinaryIO) -> None:
        """Append a regular file of ``size`` bytes read from ``source``."""
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"file {name!r} has a name that is not UTF-8, which zip cannot store — "
                "use a tar format (--ext .tar)"
            ) from None
        info = zipfile.ZipInfo(name, dos_time(mtime))
        info.compress_type = self._method
        if hasattr(info, "compress_level"):  # Python 3.13+
            info.compress_level = self._level
        else:
            setattr(info, "_compresslevel", self._level)  # noqa: B010 - private before 3.13
        info.external_attr = 0o100644 << 16
        info.create_system = 3
        info.file_size = size
        self._headers.append(self._stream.tell())
        with self._zip.open(info, "w", force_zip64=size >= zipfile.ZIP64_LIMIT) as member:
            self._data.append(self._stream.tell())
            hashed = _Hashed(member)
            read_exactly(source, size, name, hashed)
        self._sums.append(hashed.hash.intdigest())

    def sample(self) -> None:
        """A new sample begins: nothing to do in a zip."""

    def layout(self) -> tuple[list[int], list[int], None]:
        """Where each member's local header and (stored or deflated) data start."""
        return self._headers, self._data, None

    def checksums(self) -> list[int]:
        """Each member's xxh3-64, taken as its bytes went into the archive."""
        return self._sums

    def close(self) -> None:
        """Write the central directory and close the sink."""
        self._zip.close()
        self._sink.close()

    def abort(self) -> None:
        """Abandon the archive; zipfile must not write a central directory when collected."""
        self._stream.discard()
        try:
            self._zip.close()
        except ValueError:  # a member is still open for writing; its writes go nowhere too
            pass
