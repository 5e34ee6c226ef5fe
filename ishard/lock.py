"""One run at a time per destination: a lock a crashed run does not leave stuck."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import orjson

from .errors import IshardError
from .storage import Location, storage_error

STATE_DIR = ".ishard-run"  # a run's lock and resume records live here, inside DST
LOCK_NAME = f"{STATE_DIR}/lock"
LEASE_SECONDS = 60  # object stores: a lock not renewed for this long is free again
RENEW_SECONDS = 15
SETTLE_SECONDS = 0.5
_HELD: set[str] = set()  # ids of the leases this process holds now  # object stores: wait before re-reading our lock, to see a racing run


def _owner() -> dict:
    return {"id": uuid.uuid4().hex, "host": socket.gethostname(), "pid": os.getpid(),
            "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}


def _busy(dest: Location, owner: dict, until: str) -> IshardError:
    return IshardError(
        f"another ishard run is writing into {dest.url!r} (pid {owner.get('pid')} on "
        f"{owner.get('host')}, started {owner.get('started')}) — wait for it to finish or stop "
        f"it, then add --resume to finish its work; {until}"
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
            self._fd = os.open("lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                               0o644, dir_fd=folder)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise localstate.not_ours(dest.root, LOCK_NAME) from None
            raise IshardError(f"cannot create the run lock {str(path)!r}: {err.strerror} — "
                              "check that the destination is writable") from None
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


class LeaseLock:
    """An object ``DST/.ishard-run/lock`` renewed every RENEW_SECONDS; a crashed run's lease
    runs out after LEASE_SECONDS (at once for a run of this machine whose process is gone). Two runs starting in the same instant may both read "free";
    each re-reads its lock after SETTLE_SECONDS and only the last writer goes on."""

    def __init__(self, dest: Location) -> None:
        self._dest, self._fs, self._path = dest, dest.fs, dest.child(LOCK_NAME)
        self._owner = _owner()
        current = self._read()
        if current and current.get("expires", 0) > time.time() and not _dead_here(current):
            left = int(current["expires"] - time.time()) + 1
            raise _busy(dest, current, f"if it was killed, its lock runs out in {left} s")
        self._write()
        time.sleep(SETTLE_SECONDS)
        current = self._read()
        if not current or current.get("id") != self._owner["id"]:
            raise _busy(dest, current or {}, "it started at the same moment as this one")
        _HELD.add(self._owner["id"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="ishard-lock", daemon=True)
        self._thread.start()

    def _read(self) -> dict | None:
        try:
            return orjson.loads(self._fs.cat_file(self._path))
        except FileNotFoundError:
            return None
        except orjson.JSONDecodeError:
            return {}
        except Exception as err:
            raise storage_error(err, self._dest, "destination") from None

    def _write(self) -> None:
        record = {**self._owner, "expires": time.time() + LEASE_SECONDS}
        try:
            self._fs.pipe_file(self._path, orjson.dumps(record))
        except Exception as err:
            raise storage_error(err, self._dest, "destination") from None

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            try:
                self._write()
            except IshardError:
                pass  # the store is failing: the run's own requests will say so

    def release(self) -> None:
        """Stop renewing and remove the lock."""
        self._stop.set()
        self._thread.join()
        _HELD.discard(self._owner["id"])
        try:
            self._fs.rm_file(self._path)
        except Exception:
            pass  # it runs out by itself


def acquire(dest: Location) -> LocalLock | LeaseLock:
    """Lock ``dest`` for this run.

    Raises:
        IshardError: another live run holds the lock (exit 1), naming it and what to do.
    """
    return LocalLock(dest) if dest.is_local else LeaseLock(dest)
