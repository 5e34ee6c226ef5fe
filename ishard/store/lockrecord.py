"""The lock's record and words: taking it, the run-state folder, the lock object, its checks, the lease's length and clock, the messages."""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ..errors import IshardError, UsageError
from ..names import quoted
from .retry import Retrier

if TYPE_CHECKING:
    from .location import Location

STATE_DIR = ".ishard-run"  # a run's lock and resume records live here, inside DST
LOCK_NAME = f"{STATE_DIR}/lock"
LEASE_ENV = "ISHARD_LEASE_SECONDS"  # object stores: the lease length, for operators and tests
LEASE_SECONDS = 60.0  # object stores: a lock not renewed for this long is free again
# ISHARD_LEASE_SECONDS's range: below 2 s a renewal (every third) is no longer far from a
# store's own latency; above an hour a killed run on another machine blocks DST too long
LEASE_RANGE = (2.0, 3600.0)
RENEW_EVERY = 3  # the lease is renewed every lease / RENEW_EVERY seconds
FRESH_FOR = 2  # before publishing, a confirmation older than lease / FRESH_FOR is renewed first
HELD: set[str] = set()  # ids of the leases this process holds now


def run_owner() -> dict:
    """This run as its lock names it: a new id, the host, the pid, when it started."""
    return {
        "id": uuid.uuid4().hex,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _field(value: object, limit: int = 80) -> str:
    """A lock record's field as printed: shortened, and written as a Python literal when it
    holds a control character (a planted ``\x1b[2J`` must not clear the terminal)."""
    text = value if isinstance(value, str) else repr(value)
    text = text if len(text) <= limit else text[:limit] + "…"
    return text if text.isprintable() else quoted(text)


def lock_problem(record: dict) -> str | None:
    """Why ``record`` is no lock ishard wrote (None: it is one). Such a lock is never taken
    over: what wrote it is unknown."""
    expires, pid = record.get("expires"), record.get("pid", 1)
    if not isinstance(record.get("id"), str):
        return "it names no run id"
    if isinstance(expires, bool) or not isinstance(expires, (int, float)):
        return f"its expiry time is {_field(repr(expires))}, not a number of seconds"
    if not math.isfinite(expires):
        return f"its expiry time is {_field(repr(expires))}"
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        return f"its pid is {_field(repr(pid))}, not a process id"
    for name in ("host", "started"):
        if not isinstance(record.get(name, ""), str):
            return f"its {name} is {_field(repr(record[name]))}, not text"
    return None


def _remove_hint(dest: Location) -> str:
    return (
        f"if no ishard run is writing into {dest.url!r}, delete the lock object "
        f"{dest.child(LOCK_NAME)!r} (e.g. with the store's command-line tool), then run again"
    )


def _malformed(dest: Location, problem: str) -> IshardError:
    """The lock object is none ishard wrote: what is wrong and how to clear it."""
    return IshardError(
        f"the lock object {dest.child(LOCK_NAME)!r} is not one ishard writes ({problem}) — "
        + _remove_hint(dest)
    )


def refuse_if_held(dest: Location, record: dict) -> None:
    """Go on only if the lock ``record`` (read from ``dest``) has run out or names a run of
    this machine that is gone.

    Raises:
        IshardError: the lock is malformed, live, or runs out later than a lease can make
            it (``LEASE_RANGE``'s longest, with as much again for clocks that disagree);
            each names the lock object and what to do.
    """
    problem = lock_problem(record)
    if problem is not None:
        raise _malformed(dest, problem)
    left = record["expires"] - time.time()
    if left <= 0 or _dead_here(record):
        return
    if left > 2 * LEASE_RANGE[1]:
        raise busy(
            dest,
            record,
            f"its lock says it runs out in {_far(left)}, later than any lease "
            f"(at most {LEASE_RANGE[1]:g} s): " + _remove_hint(dest),
        )
    raise busy(dest, record, f"if it was killed, its lock runs out in {int(left) + 1} s")


def _far(seconds: float) -> str:
    """A long time, roughly, for a person: ``3 hours``, ``12 days``, ``2974 years``."""
    days = seconds / 86400
    if days < 2:
        return f"{seconds / 3600:.0f} hours"
    if days < 730:
        return f"{days:.0f} days"
    return f"{days / 365.25:.0f} years" if days < 3652500 else "more than 10000 years"


def busy(dest: Location, owner: dict, until: str) -> IshardError:
    pid, host, started = (
        _field(owner[k]) if owner.get(k) else None for k in ("pid", "host", "started")
    )
    who = " ".join(x for x in (pid and f"pid {pid}", host and f"on {host}") if x)
    who = ", ".join(x for x in (who, started and f"started {started}") if x)
    return IshardError(
        f"another ishard run is writing into {dest.url!r}{f' ({who})' if who else ''} — wait "
        f"for it to finish or stop it, then add --resume to finish its work; {until}"
    )


def lease_seconds() -> float:
    """The lease length on object stores: ``$ISHARD_LEASE_SECONDS``, else 60 s.

    Raises:
        UsageError: the variable is set to something other than a number of seconds in
            ``LEASE_RANGE``.
    """
    text = os.environ.get(LEASE_ENV, "").strip()
    if not text:
        return LEASE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    least, most = LEASE_RANGE
    if not least <= value <= most:  # NaN is in no range
        raise UsageError(
            f"{LEASE_ENV}={text!r} is not a number of seconds from {least:g} to {most:g} — "
            "unset it (the default is 60) or write e.g. 60"
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


def lost(url: str, lease: float) -> LeaseLost:
    return LeaseLost(
        f"another ishard run took over {url!r}: this run's lease on it ran out (the run was "
        f"paused or cut off from the store for about {lease:g} s) — this run stopped and "
        "published nothing more; let the other run finish, then check the destination with "
        f"`ishard verify {url}`"
    )


def removed(url: str, lock: str) -> LeaseLost:
    """The lock this run held was deleted while the run held it (not by a run of ishard,
    which removes only its own lock)."""
    return LeaseLost(
        f"this run's lock {lock!r} was removed by someone else while the run was writing into "
        f"{url!r} — this run stopped and published nothing more; make sure no other ishard run "
        f"writes there and nobody removes a live run's lock, then run again with --resume"
    )


def late(url: str, what: str) -> IshardError:
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
        return owner.get("id") not in HELD
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def acquire(dest: Location, retrier: Retrier | None = None):
    """Lock ``dest`` for this run (store requests retried by ``retrier``).

    Raises:
        IshardError: another live run holds the lock (exit 1), naming it and what to do.
        UsageError: ``$ISHARD_LEASE_SECONDS`` is not a number of seconds (object stores).
    """
    return dest.store.lock(dest, retrier or Retrier())
