"""One run at a time per destination: a lock a crashed run does not leave stuck."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ..errors import IshardError
from . import localstate
from .lockrecord import LOCK_NAME, STATE_DIR, busy, run_owner
from .retry import Retrier

if TYPE_CHECKING:
    from .location import Location


class LocalLock:
    """``flock`` on ``DST/.ishard-run/lock``: the kernel releases it when the process dies."""

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
            if err.errno == errno.ELOOP:
                raise localstate.not_ours(dest.root, LOCK_NAME) from None
            raise IshardError(
                f"cannot create the run lock {str(path)!r}: {err.strerror} — "
                "check that the destination is writable"
            ) from None
        finally:
            if folder is not None:
                os.close(folder)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                owner = orjson.loads(os.pread(self._fd, 4096, 0) or b"{}")
            except orjson.JSONDecodeError:
                owner = {}
            os.close(self._fd)
            owner = owner if isinstance(owner, dict) else {}  # only shown: flock decides
            raise busy(dest, owner, "a run that was killed holds no lock") from None
        info = orjson.dumps(run_owner())
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, info, 0)
        self._path = path

    def release(self) -> None:
        """Give the lock up (its file goes with the run's other records)."""
        os.close(self._fd)


def acquire(dest: Location, retrier: Retrier | None = None):
    """Lock ``dest`` for this run (store requests retried by ``retrier``).

    Raises:
        IshardError: another live run holds the lock (exit 1), naming it and what to do.
        UsageError: ``$ISHARD_LEASE_SECONDS`` is not a number of seconds (object stores).
    """
    return dest.store.lock(dest, retrier or Retrier())
