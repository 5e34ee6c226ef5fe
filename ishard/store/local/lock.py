"""One run at a time per local destination: ``flock``, which a crashed run does not leave stuck."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ...errors import IshardError
from ..lockrecord import LOCK_NAME, STATE_DIR, busy, run_owner
from . import state as localstate

if TYPE_CHECKING:
    from ..location import Location


class LocalLock:
    """``flock`` on ``DST/.ishard-run/lock``: the kernel releases it when the process dies.
    It cannot be lost while the run lasts, so nothing is confirmed under it (no ``guard``)."""

    guard = None

    def __init__(self, dest: Location) -> None:
        path = Path(dest.root) / LOCK_NAME
        folder = None
        try:
            # in the real DST/.ishard-run (no link), a lock file that is no link either
            folder = localstate.open_dir(dest.root, STATE_DIR, create=True)
            self._fd = os.open(
                "lock",
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                0o644,
                dir_fd=folder,
            )
            if localstate.kind(os.fstat(self._fd).st_mode) is not None:  # a FIFO planted there
                os.close(self._fd)
                raise localstate.not_ours(dest.root, LOCK_NAME)
        except OSError as err:
            raise _lock_failure(dest, err, "create", "writable") from None
        finally:
            if folder is not None:
                os.close(folder)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(self._fd)
            os.close(self._fd)
            raise busy(dest, owner, "a run that was killed holds no lock") from None
        info = orjson.dumps(run_owner())
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, info, 0)
        self._path = path

    def for_workers(self) -> None:
        """Nothing for a Dask worker to check: the lock cannot be lost."""

    def release(self) -> None:
        """Give the lock up (its file goes with the run's other records)."""
        os.close(self._fd)


def check_flock(dest: Location) -> None:
    """Refuse ``dest`` as :class:`LocalLock` would when a live run holds its lock: a shared
    ``flock`` tried and given back at once on the lock file opened read only; nothing is
    created (a dry run's look).

    Raises:
        IshardError: a run holds the lock (exit 1), named as :class:`LocalLock` names it.
        UsageError: the run state or the lock is a link or of another kind.
    """
    fd = _lock_file(dest)
    if fd is None:
        return
    try:
        if localstate.kind(os.fstat(fd).st_mode) is not None:  # a FIFO planted there
            raise localstate.not_ours(dest.root, LOCK_NAME)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy(dest, _owner(fd), "a run that was killed holds no lock") from None
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _lock_file(dest: Location) -> int | None:
    """The lock file in the real ``DST/.ishard-run``, opened read only; None if missing."""
    folder = None
    try:
        folder = localstate.open_dir(dest.root, STATE_DIR, create=False)
        if folder is None:
            return None
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        return os.open("lock", flags, dir_fd=folder)
    except FileNotFoundError:
        return None  # no DST, or no lock in it: nothing holds it
    except OSError as err:
        raise _lock_failure(dest, err, "read", "readable") from None
    finally:
        if folder is not None:
            os.close(folder)


def _owner(fd: int) -> dict:
    """The run a lock file names (only shown: ``flock`` decides)."""
    try:
        owner = orjson.loads(os.pread(fd, 4096, 0) or b"{}")
    except orjson.JSONDecodeError:
        owner = {}
    return owner if isinstance(owner, dict) else {}


def _lock_failure(dest: Location, err: OSError, doing: str, able: str) -> IshardError:
    """The lock file could not be opened: a link planted at its name is not ours; anything
    else is named with the error and what the destination must be."""
    if err.errno == errno.ELOOP:
        return localstate.not_ours(dest.root, LOCK_NAME)
    return IshardError(
        f"cannot {doing} the run lock {str(Path(dest.root) / LOCK_NAME)!r}: {err.strerror} — "
        f"check that the destination is {able}"
    )
