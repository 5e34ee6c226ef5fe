"""Retry transient store errors with exponential backoff, counting every retry for the summary."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .. import signals
from ..errors import Interrupted
from .registry import backends

T = TypeVar("T")

PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
             ValueError, TypeError, KeyError)  # fmt: skip
# the store contract's: a condition that did not hold, or is not taken (each backend
# registers its own client's as ``Backend.permanent``)
PERMANENT_NAMES = ("Refused", "Unconditional")
# HTTP answers another try cannot change: a condition that did not hold (If-Match,
# If-None-Match), a feature the store does not implement.
PERMANENT_STATUS = (412, 501)


def http_status(err: BaseException) -> int | None:
    """The HTTP status of a store's answer behind ``err`` (a botocore ClientError, or the
    error s3fs made of one; else as the backend whose client raised it reads it), if there
    was an answer."""
    for e in (err, err.__cause__, err.__context__):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return status if isinstance(status, int) else None
    return next((s for b in backends() if (s := b.status(err)) is not None), None)


def refused_request(status: int | None) -> bool:
    """A 4xx answer but a timeout (408) or throttling (429): the store refused the request as
    it was made, and another try of it would be refused alike."""
    return status is not None and 400 <= status < 500 and status not in (408, 429)


def run_with(retrier: Retrier | None, call: Callable[[], T]) -> T:
    """``call()`` through ``retrier`` (None: tried once)."""
    return call() if retrier is None else retrier.run(call)


def is_transient(err: BaseException) -> bool:
    """Worth another try: connection resets, timeouts, 5xx and throttling; not 'missing' or 'denied'."""
    name = type(err).__name__
    if (
        isinstance(err, PERMANENT)
        or name in PERMANENT_NAMES
        or any(name in b.permanent for b in backends())
    ):
        return False
    status = http_status(err)
    if status in PERMANENT_STATUS or refused_request(status):
        return False
    return isinstance(err, Exception)


def _stopped(err: Exception) -> None:
    """After a stop signal a failed request is not tried again: the run is ``Interrupted``."""
    if signals.stopping() and is_transient(err):
        raise Interrupted(signals.received(), signals.name()) from err


class Retrier:
    """Runs calls with up to ``retries`` more tries after the first (``--retries``), sleeping
    ``base * 2**n`` (capped) between them. Once a stop signal has arrived no call is tried
    again: a stopping run cleans up with one try a request (what it leaves, a later run's
    clean-up finds), so the signal ends it in bounded time whatever the store answers."""

    def __init__(self, retries: int = 5, base: float = 0.25, cap: float = 4.0) -> None:
        self.attempts = max(0, retries) + 1
        self.base, self.cap = base, cap
        self._lock = threading.Lock()
        self.retries = 0

    @property
    def patience(self) -> float:
        """Seconds of backoff before the last try gives up."""
        return sum(min(self.cap, self.base * 2**a) for a in range(self.attempts - 1))

    def _last(self, attempt: int, err: Exception) -> bool:
        """Is the failed try ``attempt`` the last one?"""
        return attempt + 1 >= self.attempts or not is_transient(err)

    def _delay(self, attempt: int) -> float:
        with self._lock:
            self.retries += 1
        return min(self.cap, self.base * 2**attempt)

    async def run_async(self, call: Callable[[], Awaitable[T]]) -> T:
        """Await ``call()`` until it succeeds, fails permanently, or runs out of tries."""
        for attempt in range(self.attempts):
            try:
                return await call()
            except Exception as err:
                _stopped(err)
                if self._last(attempt, err):
                    raise
                import asyncio  # only stores retry on an event loop

                await asyncio.sleep(self._delay(attempt))
                _stopped(err)
        raise AssertionError("unreachable")  # pragma: no cover

    def run(self, call: Callable[[], T]) -> T:
        """Call ``call()`` until it succeeds, fails permanently, or runs out of tries."""
        for attempt in range(self.attempts):
            try:
                return call()
            except Exception as err:
                _stopped(err)
                if self._last(attempt, err):
                    raise
                signals.STOPPED.wait(self._delay(attempt))  # a stop signal ends the wait
                _stopped(err)
        raise AssertionError("unreachable")  # pragma: no cover
