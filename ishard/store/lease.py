"""A run's lease on a store destination: a lock object renewed while the run lasts."""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import TYPE_CHECKING

import orjson

from ..errors import IshardError
from .base import Refused, Unconditional
from .lockrecord import (
    FRESH_FOR,
    HELD,
    LOCK_NAME,
    RENEW_EVERY,
    LeaseLost,
    busy,
    clock,
    late,
    lease_seconds,
    lock_problem,
    lost,
    refuse_if_held,
    removed,
    run_owner,
)
from .retry import Retrier

if TYPE_CHECKING:
    from .location import Location

# A syntactically valid ETag no object has: a store that honours If-Match refuses it.
_NO_ETAG = '"00000000000000000000000000000000"'


class _Taken(Exception):
    """A conditional write was refused: the lock is not what this run last saw."""

    def __init__(self, current: dict | None) -> None:
        super().__init__("precondition failed")
        self.current = current


def _read_lock(dest: Location, retrier: Retrier) -> tuple[dict | None, str | None]:
    """``dest``'s lock record (``{}`` if unreadable, None if absent) and its ETag."""
    store, key = dest.store, dest.key(LOCK_NAME)
    try:
        data, etag = retrier.run(lambda: store.get(key))
    except FileNotFoundError:
        return None, None
    except IshardError:
        raise
    except Exception as err:  # noqa: BLE001 - a store's error, translated once
        raise dest.error(err, "destination") from None
    try:
        record = orjson.loads(data)
    except orjson.JSONDecodeError:
        record = {}
    return (record if isinstance(record, dict) else {}), etag


def check_lease(dest: Location, retrier: Retrier) -> None:
    """Refuse ``dest`` as :class:`LeaseLock` would before taking it (a live, malformed or
    implausible lock), reading the lock only.

    Raises:
        IshardError: naming the lock and what to do.
    """
    current, _ = _read_lock(dest, retrier)
    if current is not None:
        refuse_if_held(dest, current)


class LeaseLock:
    """An object ``DST/.ishard-run/lock`` holding this run's id and an expiry time, renewed
    every third of the lease (``$ISHARD_LEASE_SECONDS``, 60 s by default); a crashed run's lease
    runs out (at once for a run of this machine whose process is gone).

    On a store that honours conditional writes (checked at acquisition, not assumed) the store
    decides every change: the lock is created only if absent, taken over (expired) only if its
    ETag is the one read, renewed only if it is still this run's last ETag; a refused renewal
    means another run took over. Elsewhere the lock is re-read and its id compared instead.
    Before anything is published the run calls :meth:`confirm` (renewing first when its last
    confirmation is not fresh), and after it :meth:`committed` (was the lease still valid when
    the publication ended?).
    """

    def __init__(self, dest: Location, retrier: Retrier | None = None) -> None:
        self._dest, self._key = dest, dest.key(LOCK_NAME)
        self._store = dest.store
        self.lease = lease_seconds()
        self._retrier = retrier or Retrier()
        self._owner = run_owner()
        self._mutex = threading.RLock()
        self._etag: str | None = None
        self._lost: LeaseLost | None = None  # how this run lost the lease, once it has
        self.conditional = self._store.capabilities.conditional
        current, etag = self._read()
        if current is not None:
            refuse_if_held(dest, current)
        self._confirmed = clock()
        record = self._record()
        if self.conditional:
            try:
                mode = ("match", etag) if current is not None and etag else "create"
                self._etag = self._put(record, mode)
            except _Taken as taken:
                raise busy(
                    dest, taken.current or {}, "it started at the same moment as this one"
                ) from None
            except Unconditional:
                self.conditional = False
            else:
                self.conditional = self._honours_conditions(record)
        if not self.conditional:
            self._write(record)
            current, _ = self._read()
            if not current or current.get("id") != self._owner["id"]:
                raise busy(dest, current or {}, "it started at the same moment as this one")
        HELD.add(self._owner["id"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renewing, name="ishard-lock", daemon=True)
        self._thread.start()

    # -- requests ---------------------------------------------------------------------------
    def _read(self) -> tuple[dict | None, str | None]:
        """The lock's record (``{}`` if unreadable, None if absent) and its ETag."""
        return _read_lock(self._dest, self._retrier)

    def _record(self) -> dict:
        return {**self._owner, "expires": time.time() + self.lease}

    def _put(self, record: dict, mode) -> str:
        """Write ``record`` on condition ``mode``; return the new ETag.

        Raises:
            _Taken: the condition did not hold (and the lock is not ``record`` either: a
                write of ours whose answer was lost, then retried, reads back as ours).
            Unconditional: the store does not take the condition.
        """
        body = orjson.dumps(record)
        try:
            etag = self._retrier.run(lambda: self._store.put(self._key, body, mode=mode))
        except Refused:
            current, etag = self._read()
            if current == record and etag:
                return etag
            raise _Taken(current) from None
        except (Unconditional, IshardError):
            raise
        except Exception as err:  # noqa: BLE001 - a store's error, translated once
            raise self._dest.error(err, "destination") from None
        return etag or ""

    def _honours_conditions(self, record: dict) -> bool:
        """Whether the store refuses writes whose condition does not hold: our lock is
        rewritten (same bytes) once only-if-absent and once on a wrong ETag; a store that
        honours both refuses both."""
        body = orjson.dumps(record)
        for mode in ("create", ("match", _NO_ETAG)):
            try:
                etag = self._retrier.run(partial(self._store.put, self._key, body, mode=mode))
            except Refused:
                continue
            except Unconditional:
                return False
            except Exception as err:  # noqa: BLE001 - a store's error, translated once
                raise self._dest.error(err, "destination") from None
            self._etag = etag or self._etag  # written: the condition was ignored
            return False
        return True

    def _write(self, record: dict) -> None:
        data = orjson.dumps(record)
        try:
            self._retrier.run(lambda: self._store.put(self._key, data))
        except Exception as err:  # noqa: BLE001 - a store's error, translated once
            raise self._dest.error(err, "destination") from None

    # -- holding it -------------------------------------------------------------------------
    def _renew(self) -> float:
        """Extend the lease now; return the clock time the confirmation counts from.

        Raises:
            LeaseLost: another run holds the lock now.
        """
        with self._mutex:
            if self._lost:
                raise self._lost
            sent, record = clock(), self._record()
            if self.conditional:
                try:
                    self._etag = self._put(record, ("match", self._etag or _NO_ETAG))
                except _Taken as taken:
                    raise self._losing(taken.current) from None
            else:
                self._check_id()
                self._write(record)
            self._confirmed = sent
            return sent

    def _check_id(self) -> None:
        current, _ = self._read()
        if not current or current.get("id") != self._owner["id"]:
            raise self._losing(current)

    def _losing(self, current: dict | None) -> LeaseLost:
        """The lease is lost: the lock now holds ``current`` (None: it is gone — removed by
        someone while the lease was this run's, or by a run that took over once it ran out
        and has finished)."""
        ran_out = clock() - self._confirmed >= self.lease
        self._lost = (
            lost(self._dest.url, self.lease)
            if current is not None or ran_out
            else removed(self._dest.url, self._dest.child(LOCK_NAME))
        )
        return self._lost

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
                raise self._lost
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
            raise late(self._dest.url, what) from None

    @property
    def guard(self) -> LeaseLock:
        """This lease: it can be lost, so every publication is confirmed under it."""
        return self

    def for_workers(self) -> LeaseCheck:
        """What a Dask worker needs to check this lease itself before it commits."""
        return LeaseCheck(self._dest.url, self._owner["id"], self.lease)

    def release(self) -> None:
        """Stop renewing and remove the lock, if it is still this run's."""
        self._stop.set()
        self._thread.join()
        HELD.discard(self._owner["id"])
        with self._mutex:
            if self._lost:
                return
            try:
                current, _ = self._read()
                if current and current.get("id") == self._owner["id"]:
                    self._store.delete([self._key], self._retrier)  # retried as any request
            except Exception:  # noqa: BLE001, S110 - it runs out by itself
                pass


class LeaseCheck:
    """A Dask worker's check before it commits a shard: the lock still names this run and has
    not run out. The client renews the lease; workers only read it (see docs/object-stores.md
    for what this does and does not guarantee)."""

    def __init__(self, url: str, lease_id: str, lease: float, dest: Location | None = None) -> None:
        self.url, self.lease_id, self.lease, self._dest = url, lease_id, lease, dest

    def __reduce__(self):  # travels to workers without the client's store
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
        if dest is None:
            raise TypeError("LeaseCheck.confirm() needs bind(dest) first")
        sent = clock()
        try:
            data, _ = Retrier().run(lambda: dest.store.get(dest.key(LOCK_NAME)))
            record = orjson.loads(data)
        except FileNotFoundError:
            raise removed(self.url, dest.child(LOCK_NAME)) from None
        except orjson.JSONDecodeError:
            record = {}
        except Exception as err:  # noqa: BLE001 - any other failure: one line
            raise dest.error(err, "destination") from None
        if (
            not isinstance(record, dict)
            or lock_problem(record) is not None
            or record.get("id") != self.lease_id
            or record["expires"] <= time.time()
        ):
            raise lost(self.url, self.lease)
        return sent

    def committed(self, confirmed: float, what: str) -> None:
        """As :meth:`LeaseLock.committed`, by re-reading the lock."""
        if clock() - confirmed < self.lease:
            return
        try:
            self.confirm()
        except LeaseLost:
            raise late(self.url, what) from None
