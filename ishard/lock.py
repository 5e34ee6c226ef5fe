"""One run at a time per destination: a lock a crashed run does not leave stuck."""

from __future__ import annotations

import errno
import fcntl
import math
import os
import socket
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from .errors import IshardError, UsageError
from .retry import Retrier

if TYPE_CHECKING:
    from .store import Location

STATE_DIR = ".ishard-run"  # a run's lock and resume records live here, inside DST
LOCK_NAME = f"{STATE_DIR}/lock"
LEASE_ENV = "ISHARD_LEASE_SECONDS"  # object stores: the lease length, for operators and tests
LEASE_SECONDS = 60.0  # object stores: a lock not renewed for this long is free again
RENEW_EVERY = 3  # the lease is renewed every lease / RENEW_EVERY seconds
FRESH_FOR = 2  # before publishing, a confirmation older than lease / FRESH_FOR is renewed first
_HELD: set[str] = set()  # ids of the leases this process holds now


def _owner() -> dict:
    return {
        "id": uuid.uuid4().hex,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _busy(dest: Location, owner: dict, until: str) -> IshardError:
    pid, host, started = owner.get("pid"), owner.get("host"), owner.get("started")
    who = " ".join(x for x in (pid and f"pid {pid}", host and f"on {host}") if x)
    who = ", ".join(x for x in (who, started and f"started {started}") if x)
    return IshardError(
        f"another ishard run is writing into {dest.url!r}{f' ({who})' if who else ''} — wait "
        f"for it to finish or stop it, then add --resume to finish its work; {until}"
    )


def lease_seconds() -> float:
    """The lease length on object stores: ``$ISHARD_LEASE_SECONDS``, else 60 s.

    Raises:
        UsageError: the variable is set to something other than a number of seconds above 0.
    """
    text = os.environ.get(LEASE_ENV, "").strip()
    if not text:
        return LEASE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UsageError(
            f"{LEASE_ENV}={text!r} is not a number of seconds above 0 — unset it "
            "(the default is 60) or write e.g. 60"
        )
    return value


def clock() -> float:
    """Seconds on a clock that keeps counting while the process is stopped (SIGSTOP) or the
    machine is suspended (Linux's CLOCK_BOOTTIME; the monotonic clock elsewhere)."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


class LeaseLost(IshardError):
    """Another run took the destination over: this run must publish nothing more."""

    exit_code = 1


def _lost(url: str, lease: float) -> LeaseLost:
    return LeaseLost(
        f"another ishard run took over {url!r}: this run's lease on it ran out (the run was "
        f"paused or cut off from the store for about {lease:g} s) — this run stopped and "
        "published nothing more; let the other run finish, then check the destination with "
        f"`ishard verify {url}`"
    )


def _late(url: str, what: str) -> IshardError:
    return IshardError(
        f"{what} was published in {url!r} after this run's lease on it may have run out (the "
        "run was paused or cut off from the store) — another run may have written there "
        f"meanwhile, so the destination may be inconsistent: check it with `ishard verify "
        f"{url}`, and if it reports problems run the other run again with --resume"
    )


def _dead_here(owner: dict) -> bool:
    """The lock's run was on this machine and its process is gone (killed): a stale lock."""
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return False
    if owner["pid"] == os.getpid():  # a run of this process (the Python API): is it still on?
        return owner.get("id") not in _HELD
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


class LocalLock:
    """``flock`` on ``DST/.ishard-run/lock``: the kernel releases it when the process dies."""

    def __init__(self, dest: Location) -> None:
        from . import localstate  # it needs STATE_DIR from here

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
            raise _busy(dest, owner, "a run that was killed holds no lock") from None
        info = orjson.dumps(_owner())
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
