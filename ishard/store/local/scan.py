"""One directory's entries for the local walk, with each file's lstat as a column: read in native code (``_scan.c``) where it was built, else through Python; no link followed."""

from __future__ import annotations

import os
import sys
from operator import itemgetter
from stat import S_ISREG
from types import ModuleType
from typing import TYPE_CHECKING

from ...names import SURROGATE

if TYPE_CHECKING:
    import numpy as np  # imported when a directory is read: not for `ishard --help`

native: ModuleType | None
try:
    from . import _scan as native
except ImportError:  # installed without a C compiler: read through Python
    native = None

#: an entry's kind, as ``_scan.c`` gives it: a directory, a symbolic link, a regular file,
#: any other file (a FIFO, a socket, a device)
KIND_DIR, KIND_LINK, KIND_FILE, KIND_SPECIAL = b"dlfs"

_MIX = 0x9E3779B97F4A7C15  # local_stamp's (walk.py)
_NO_STAT = (0, 0, 0, 0)
_ENCODING, _ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


class Folder:
    """A directory's entries: ``children`` as (name — a directory's ending in '/' —, kind,
    row), ordered as their names sort bytewise; ``stats`` the rows, four int64 each (size,
    mtime seconds, mtime nanoseconds, inode's 64 bits; zeros for directories and links)."""

    __slots__ = ("children", "stats")

    def __init__(self, names: list[str], kinds: bytes, stats: np.ndarray, ascii: bool) -> None:
        children = [
            (name + "/" if kind == KIND_DIR else name, kind, row)
            for row, (name, kind) in enumerate(zip(names, kinds))
        ]
        bytewise = not ascii and any(SURROGATE.search(n) for n in names)
        children.sort(key=_bytewise if bytewise else itemgetter(0))
        self.children = children
        self.stats = stats

    def columns(self, rows: list[int]) -> tuple[list[int], list[int], list[int]]:
        """The sizes, whole-second mtimes and stamps (``walk.local_stamp``: the nanosecond
        mtime and the inode mixed, in 64 bits that wrap) of the files at ``rows``."""
        import numpy as np

        picked = self.stats[rows]
        seconds = picked[:, 1]
        mtime_ns = seconds.view(np.uint64) * np.uint64(1_000_000_000)
        mtime_ns += picked[:, 2].view(np.uint64)
        stamps = mtime_ns * np.uint64(_MIX) + picked[:, 3].view(np.uint64)
        return picked[:, 0].tolist(), seconds.tolist(), stamps.view(np.int64).tolist()


def scan(path: str | os.PathLike[str]) -> Folder:
    """Read the directory ``path`` (a link there is followed: the walk names only real
    directories, and linked ones when asked to follow them); raises OSError."""
    if native is None:
        return scan_in_python(path)
    return scan_natively(path, native)


def scan_natively(path: str | os.PathLike[str], reader: ModuleType) -> Folder:
    """``scan`` through ``reader``, the native module built from ``_scan.c``."""
    import numpy as np

    names, kinds, stats = reader.scan(path)
    listed = names.decode(_ENCODING, _ERRORS).split("\0")
    listed.pop()  # after the last name's end
    rows = np.frombuffer(stats, dtype=np.int64).reshape(-1, 4)
    return Folder(listed, kinds, rows, names.isascii())


def scan_in_python(path: str | os.PathLike[str]) -> Folder:
    """``scan`` through Python's ``os.scandir``: what the native reader gives, slower."""
    import numpy as np

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    names: list[str] = []
    kinds = bytearray()
    rows: list[int] = []  # four values a row
    try:
        with os.scandir(fd) as it:  # each entry's lstat taken relative to fd, while open
            for entry in it:
                names.append(entry.name)
                if entry.is_dir(follow_symlinks=False):
                    kinds.append(KIND_DIR)
                    rows.extend(_NO_STAT)
                elif entry.is_symlink():
                    kinds.append(KIND_LINK)
                    rows.extend(_NO_STAT)
                else:
                    st = entry.stat(follow_symlinks=False)
                    kinds.append(KIND_FILE if S_ISREG(st.st_mode) else KIND_SPECIAL)
                    seconds, nanoseconds = divmod(st.st_mtime_ns, 1_000_000_000)
                    inode = st.st_ino - (1 << 64) if st.st_ino >> 63 else st.st_ino
                    rows.extend((st.st_size, seconds, nanoseconds, inode))
    finally:
        os.close(fd)
    table = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return Folder(names, bytes(kinds), table, "/".join(names).isascii())


def _bytewise(child: tuple[str, int, int]) -> bytes:
    return child[0].encode("utf-8", "surrogateescape")
