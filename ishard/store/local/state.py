"""A local run state's files (``DST/.ishard-run/``), never read, written or removed through a link."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from ...errors import UsageError
from ..base import NotRegular
from ..lockrecord import STATE_DIR

# The run state's own entries and the kind each must be (anything else was planted there).
ENTRIES = {"done": stat.S_ISDIR, "run.json": stat.S_ISREG, "lock": stat.S_ISREG}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RECORD_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def not_ours(root: str, inner: str) -> UsageError:
    """The error for a run-state entry (``inner``, relative to DST) that is a link or of the
    wrong kind: ishard neither follows nor removes it."""
    return UsageError(
        f"{str(Path(root) / inner)!r} is a symbolic link or not a "
        f"{'directory' if inner in (STATE_DIR, f'{STATE_DIR}/done') else 'regular file'} — "
        f"ishard keeps its run state in {STATE_DIR}/ inside the destination and follows no link "
        "there: remove it (and check what put it there), then run again"
    )


def check(root: str) -> None:
    """Refuse a ``DST/.ishard-run`` (or one of its entries) that is a link or of the wrong kind.

    Raises:
        UsageError: naming the entry (exit 2).
    """
    folder = Path(root) / STATE_DIR
    try:
        mode = folder.lstat().st_mode
    except OSError:
        return  # missing; or unreadable, which taking the lock then reports
    if not stat.S_ISDIR(mode):
        raise not_ours(root, STATE_DIR)
    for name, kind in ENTRIES.items():
        try:
            mode = (folder / name).lstat().st_mode
        except OSError:
            continue
        if not kind(mode):
            raise not_ours(root, f"{STATE_DIR}/{name}")


def open_dir(root: str, inner: str, *, create: bool) -> int | None:
    """A descriptor of the real directory ``inner`` (``.ishard-run`` or ``.ishard-run/done``)
    inside the destination ``root``, made if ``create``; None if missing. No part of ``inner``
    may be a link.

    Raises:
        UsageError: a part of ``inner`` is a link or no directory.
        OSError: it cannot be made or opened.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # DST itself: the user's
    done = ""
    try:
        for part in inner.split("/"):
            done = f"{done}/{part}" if done else part
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise not_ours(root, done) from None
                raise
            os.close(fd)
            fd = child
        result, fd = fd, -1
        return result
    finally:
        if fd >= 0:
            os.close(fd)


class NotRegularRecord(UsageError):
    """A manifest or run record in DST that is a link, a FIFO, a directory …: never read."""


def not_regular(path: str, what: str) -> NotRegularRecord:
    """The refusal of ``path`` (a manifest or run record), which is ``what`` (``a FIFO``)."""
    return NotRegularRecord(
        f"{path!r} is {what}, not a regular file — ishard reads its manifest and run records "
        "only from regular files and follows no link: remove it (and check what put it "
        "there), then run again"
    )


def read(dir_fd: int, name: str) -> bytes | None:
    """The bytes of the regular file ``name`` in ``dir_fd``; None if missing. Opened without
    blocking (a FIFO planted there would block an open for good) and without following a
    link.

    Raises:
        NotRegular: a link, a FIFO, a directory … under that name (never read).
    """
    try:
        fd = os.open(name, _RECORD_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotRegular("a symbolic link") from None
        raise
    try:
        what = kind(os.fstat(fd).st_mode)
        if what is not None:
            raise NotRegular(what)
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)


def kind(mode: int) -> str | None:
    """None for a regular file; else what it is, in words (``a FIFO``)."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "not a plain file")


def write(dir_fd: int, name: str, data: bytes | BinaryIO, temp: str) -> None:
    """Write ``name`` in ``dir_fd`` whole — ``data``, or what an open file gives a MiB at a
    time: a new temp file (``O_EXCL``, so never through a link) renamed over it (a rename
    replaces a link, it does not follow it)."""
    try:
        os.unlink(temp, dir_fd=dir_fd)  # a killed run's, of the same pid
    except FileNotFoundError:
        pass
    fd = os.open(
        temp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o644,
        dir_fd=dir_fd,
    )
    try:
        with open(fd, "wb", closefd=False) as f:
            if isinstance(data, (bytes, bytearray, memoryview)):
                f.write(data)
            else:
                shutil.copyfileobj(data, f, 1 << 20)
    except BaseException:  # a full disk, or a stop signal: no temp file left behind
        os.close(fd)
        os.unlink(temp, dir_fd=dir_fd)
        raise
    os.close(fd)
    os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def remove(dir_fd: int, name: str) -> None:
    """Remove ``name`` in ``dir_fd``: a link itself (never what it points to), a file, or a
    directory tree (whose links are not followed either)."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        _remove_tree(dir_fd, name)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _remove_tree(dir_fd: int, name: str) -> None:
    """A directory tree under ``dir_fd``, links removed as links (``shutil.rmtree`` takes a
    ``dir_fd`` only from Python 3.11 on)."""
    if sys.version_info >= (3, 11):
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        remove_tree_walking(dir_fd, name)


def remove_tree_walking(dir_fd: int, name: str) -> None:
    """What ``shutil.rmtree(name, dir_fd=dir_fd)`` does, for Python 3.10: each directory opened
    without following a link, its entries removed (links as links), then the directory."""
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        for entry in os.scandir(fd):
            if entry.is_dir(follow_symlinks=False):
                remove_tree_walking(fd, entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
