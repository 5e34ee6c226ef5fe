"""One run at a time per destination: a lock a crashed run does not leave stuck."""

from __future__ import annotations

import errno
import fcntl
import math
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from .errors import IshardError, UsageError
from .retry import Retrier, http_status
from .storage import Location, run_on_loop, storage_error

STATE_DIR = ".ishard-run"  # a run's lock and resume records live here, inside DST
LOCK_NAME = f"{STATE_DIR}/lock"
LEASE_ENV = "ISHARD_LEASE_SECONDS"  # object stores: the lease length, for operators and tests
LEASE_SECONDS = 60.0  # object stores: a lock not renewed for this long is free again
RENEW_EVERY = 3  # the lease is renewed every lease / RENEW_EVERY seconds
FRESH_FOR = 2  # before publishing, a confirmation older than lease / FRESH_FOR is renewed first
_HELD: set[str] = set()  # ids of the leases this process holds now
# A syntactically valid ETag no object has: a store that honours If-Match refuses it.
_NO_ETAG = '"00000000000000000000000000000000"'
_UNSUPPORTED = ("NotImplemented", "InvalidArgument", "InvalidRequest")


def _owner() -> dict:
    return {"id": uuid.uuid4().hex, "host": socket.gethostname(), "pid": os.getpid(),
            "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}


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
        raise UsageError(f"{LEASE_ENV}={text!r} is not a number of seconds above 0 — unset it "
                         "(the default is 60) or write e.g. 60")
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


class _Refused(Exception):
    """A conditional write was refused: the lock is not what this run last saw."""

    def __init__(self, current: dict | None) -> None:
        super().__init__("precondition failed")
        self.current = current


class _Unsupported(Exception):
    """The store rejects conditional-write headers."""


class LeaseLock:
    """An object ``DST/.ishard-run/lock`` holding this run's id and an expiry time, renewed
    every third of the lease (``$ISHARD_LEASE_SECONDS``, 60 s by default); a crashed run's lease
    runs out (at once for a run of this machine whose process is gone).

    On a store that honours conditional writes (S3 and compatibles; checked at acquisition, not
    assumed) the store decides every change: the lock is created with ``If-None-Match: *``,
    taken over (expired) with ``If-Match`` on the ETag read, renewed and deleted with ``If-Match``
    on this run's last ETag; a refused renewal means another run took over. Elsewhere the lock
    is re-read and its id compared instead. Before anything is published the run calls
    :meth:`confirm` (renewing first when its last confirmation is not fresh), and after it
    :meth:`committed` (was the lease still valid when the publication ended?).
    """

    def __init__(self, dest: Location, retrier: Retrier | None = None) -> None:
        self._dest, self._path = dest, dest.child(LOCK_NAME)
        self._fs: Any = dest.fs
        self.lease = lease_seconds()
        self._retrier = retrier or Retrier()
        self._owner = _owner()
        self._mutex = threading.RLock()
        self._etag: str | None = None
        self._lost = False
        self.conditional = dest.is_s3
        current, etag = self._read()
        if current is not None and current.get("expires", 0) > time.time() \
                and not _dead_here(current):
            left = int(current["expires"] - time.time()) + 1
            raise _busy(dest, current, f"if it was killed, its lock runs out in {left} s")
        self._confirmed = clock()
        record = self._record()
        if self.conditional:
            try:
                cond = {"IfMatch": etag} if current is not None else {"IfNoneMatch": "*"}
                self._etag = self._put(record, cond)
            except _Refused as refused:
                raise _busy(dest, refused.current or {},
                            "it started at the same moment as this one") from None
            except _Unsupported:
                self.conditional = False
            else:
                self.conditional = self._honours_conditions(record)
        if not self.conditional:
            self._write(record)
            current, _ = self._read()
            if not current or current.get("id") != self._owner["id"]:
                raise _busy(dest, current or {}, "it started at the same moment as this one")
        _HELD.add(self._owner["id"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renewing, name="ishard-lock", daemon=True)
        self._thread.start()

    # -- requests ---------------------------------------------------------------------------
    def _s3(self, method: str, **kwargs):
        bucket, _, key = self._path.partition("/")

        async def call():
            out = await self._fs._call_s3(method, Bucket=bucket, Key=key, **kwargs)
            if method == "get_object":
                async with out["Body"] as body:
                    out["Body"] = await body.read()
            return out

        return self._retrier.run(lambda: run_on_loop(self._fs.loop, call))

    def _read(self) -> tuple[dict | None, str | None]:
        """The lock's record (``{}`` if unreadable, None if absent) and its ETag."""
        try:
            if self._dest.is_s3:
                out = self._s3("get_object")
                data, etag = out["Body"], out.get("ETag")
            else:
                data, etag = self._retrier.run(lambda: self._fs.cat_file(self._path)), None
        except FileNotFoundError:
            return None, None
        except Exception as err:
            raise storage_error(err, self._dest, "destination") from None
        try:
            record = orjson.loads(data)
        except orjson.JSONDecodeError:
            record = {}
        return (record if isinstance(record, dict) else {}), etag

    def _record(self) -> dict:
        return {**self._owner, "expires": time.time() + self.lease}

    def _put(self, record: dict, cond: dict) -> str:
        """Write ``record`` on condition ``cond``; return the new ETag.

        Raises:
            _Refused: the condition did not hold (and the lock is not ``record`` either: a
                write of ours whose answer was lost, then retried, reads back as ours).
            _Unsupported: the store rejects the condition headers.
        """
        body = orjson.dumps(record)
        try:
            return self._s3("put_object", Body=body, **cond)["ETag"]
        except Exception as err:  # noqa: BLE001 - its HTTP status decides
            status = http_status(err)
            if status == 412:
                current, etag = self._read()
                if current == record and etag:
                    return etag
                raise _Refused(current) from None
            if status == 501 or _error_code(err) in _UNSUPPORTED:
                raise _Unsupported from None
            raise storage_error(err, self._dest, "destination") from None

    def _honours_conditions(self, record: dict) -> bool:
        """Whether the store refuses writes whose condition does not hold: our lock is
        rewritten (same bytes) once with ``If-None-Match: *`` and once with a wrong
        ``If-Match``; a store that honours both refuses both."""
        bucket, _, key = self._path.partition("/")
        body = orjson.dumps(record)

        async def probe(cond: dict):
            return await self._retrier.run_async(lambda: self._fs._call_s3(
                "put_object", Bucket=bucket, Key=key, Body=body, **cond))

        async def both():
            import asyncio

            return await asyncio.gather(probe({"IfNoneMatch": "*"}), probe({"IfMatch": _NO_ETAG}),
                                        return_exceptions=True)

        honoured = True
        for out in run_on_loop(self._fs.loop, both):
            if isinstance(out, dict):  # written: the condition was ignored
                self._etag, honoured = out.get("ETag", self._etag), False
            elif http_status(out) != 412:
                if http_status(out) == 501 or _error_code(out) in _UNSUPPORTED:
                    honoured = False
                else:
                    raise storage_error(out, self._dest, "destination")
        return honoured

    def _write(self, record: dict) -> None:
        data = orjson.dumps(record)
        try:
            self._retrier.run(lambda: self._fs.pipe_file(self._path, data))
        except Exception as err:
            raise storage_error(err, self._dest, "destination") from None

    # -- holding it -------------------------------------------------------------------------
    def _renew(self) -> float:
        """Extend the lease now; return the clock time the confirmation counts from.

        Raises:
            LeaseLost: another run holds the lock now.
        """
        with self._mutex:
            if self._lost:
                raise _lost(self._dest.url, self.lease)
            sent, record = clock(), self._record()
            if self.conditional:
                try:
                    self._etag = self._put(record, {"IfMatch": self._etag})
                except _Refused:
                    self._lost = True
                    raise _lost(self._dest.url, self.lease) from None
            else:
                self._check_id()
                self._write(record)
            self._confirmed = sent
            return sent

    def _check_id(self) -> None:
        current, _ = self._read()
        if not current or current.get("id") != self._owner["id"]:
            self._lost = True
            raise _lost(self._dest.url, self.lease)

    def _renewing(self) -> None:
        while not self._stop.wait(self.lease / RENEW_EVERY):
            try:
                self._renew()
            except LeaseLost:
                return  # the next confirm() says so
            except IshardError:
                pass  # the store is failing: the run's own requests will say so

    def confirm(self) -> float:
        """Make sure this run still holds the lease before it publishes something; return the
        clock time of that confirmation (for :meth:`committed`).

        Raises:
            LeaseLost: another run took the destination over.
        """
        with self._mutex:
            if self._lost:
                raise _lost(self._dest.url, self.lease)
            fresh = clock() - self._confirmed < self.lease / FRESH_FOR
            if fresh and self.conditional:
                return self._confirmed
            if fresh:
                self._check_id()
                return self._confirmed
        return self._renew()

    def committed(self, confirmed: float, what: str) -> None:
        """After publishing ``what``: was the lease confirmed at ``confirmed`` still valid? If
        the publication took longer than the lease, a renewal now tells: on a store with
        conditional writes it succeeds only if no other run took the lock meanwhile.

        Raises:
            IshardError: another run may have taken over before the publication ended.
        """
        if clock() - confirmed < self.lease:
            return
        try:
            self._renew()
        except LeaseLost:
            raise _late(self._dest.url, what) from None

    def for_workers(self) -> LeaseCheck:
        """What a Dask worker needs to check this lease itself before it commits."""
        return LeaseCheck(self._dest.url, self._owner["id"], self.lease)

    def release(self) -> None:
        """Stop renewing and remove the lock, if it is still this run's."""
        self._stop.set()
        self._thread.join()
        _HELD.discard(self._owner["id"])
        with self._mutex:
            if self._lost:
                return
            try:
                self._delete()
            except Exception:
                pass  # it runs out by itself

    def _delete(self) -> None:
        """Delete the lock if it is this run's: on condition of the ETag last seen (or, when
        that is refused, of the ETag of a lock that still holds our id: a renewal whose answer
        was lost); by id where the store does not take the condition."""
        if self.conditional:
            try:
                self._s3("delete_object", IfMatch=self._etag)
                return
            except Exception as err:
                if http_status(err) != 412 and http_status(err) != 501 \
                        and _error_code(err) not in _UNSUPPORTED:
                    raise
                unsupported = http_status(err) != 412
            current, etag = self._read()
            if current and current.get("id") == self._owner["id"]:
                if unsupported:
                    self._fs.rm_file(self._path)
                elif etag:
                    self._s3("delete_object", IfMatch=etag)
            return
        current, _ = self._read()
        if current and current.get("id") == self._owner["id"]:
            self._fs.rm_file(self._path)


class LeaseCheck:
    """A Dask worker's check before it commits a shard: the lock still names this run and has
    not run out. The client renews the lease; workers only read it (see docs/object-stores.md
    for what this does and does not guarantee)."""

    def __init__(self, url: str, lease_id: str, lease: float, dest: Location | None = None) -> None:
        self.url, self.lease_id, self.lease, self._dest = url, lease_id, lease, dest

    def __reduce__(self):  # travels to workers without the client's filesystem
        return (LeaseCheck, (self.url, self.lease_id, self.lease))

    def bind(self, dest: Location) -> LeaseCheck:
        """This check, reading the lock through a worker's own location of DST."""
        return LeaseCheck(self.url, self.lease_id, self.lease, dest)

    def confirm(self) -> float:
        """Return the clock time of the check.

        Raises:
            LeaseLost: the lock is gone, another run's, or expired.
        """
        dest = self._dest
        if dest is None or dest.fs is None:
            raise TypeError("LeaseCheck.confirm() needs bind(dest) first")
        fs: Any = dest.fs
        sent = clock()
        try:
            data = Retrier().run(lambda: fs.cat_file(dest.child(LOCK_NAME)))
            record = orjson.loads(data)
        except FileNotFoundError:
            record = {}
        except orjson.JSONDecodeError:
            record = {}
        except Exception as err:  # noqa: BLE001 - any other failure: one line
            raise storage_error(err, dest, "destination") from None
        if not isinstance(record, dict) or record.get("id") != self.lease_id \
                or record.get("expires", 0) <= time.time():
            raise _lost(self.url, self.lease)
        return sent

    def committed(self, confirmed: float, what: str) -> None:
        """As :meth:`LeaseLock.committed`, by re-reading the lock."""
        if clock() - confirmed < self.lease:
            return
        try:
            self.confirm()
        except LeaseLost:
            raise _late(self.url, what) from None


def _error_code(err: BaseException) -> str | None:
    for e in (err, err.__cause__, err.__context__):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            return response.get("Error", {}).get("Code")
    return None


def acquire(dest: Location, retrier: Retrier | None = None) -> LocalLock | LeaseLock:
    """Lock ``dest`` for this run (store requests retried by ``retrier``).

    Raises:
        IshardError: another live run holds the lock (exit 1), naming it and what to do.
        UsageError: ``$ISHARD_LEASE_SECONDS`` is not a number of seconds (object stores).
    """
    return LocalLock(dest) if dest.is_local else LeaseLock(dest, retrier)
