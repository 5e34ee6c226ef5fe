"""Stop signals (SIGINT, SIGTERM, SIGHUP): a flag the waits poll, and an exception elsewhere.

A signal raised as an exception inside a wait of the standard library (``concurrent.futures``
juggles locks the writer threads need) can leave a lock held and hang the run for good. So
while ishard waits for its writers (``deferred``) a signal only sets the flag, and each wait
is a loop with a timeout that looks at it; elsewhere (listing, planning) the first signal
raises ``Stopped``. A signal's exit code is 128 + its number: 130, 143, 129.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TICK = 0.25  # seconds between a wait's looks at the flag
STOPPED = threading.Event()  # set by the first stop signal
_state = {"signum": 0, "deferred": 0}


class Stopped(BaseException):
    """A stop signal arrived outside a wait (no ``except Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def received() -> int:
    """The first stop signal's number (SIGINT when none was seen: a KeyboardInterrupt)."""
    return _state["signum"] or int(signal.SIGINT)


def name() -> str:
    """``SIGINT``, ``SIGTERM`` or ``SIGHUP``: the first stop signal's name."""
    return signal.Signals(received()).name


def _on_signal(signum: int, frame: object) -> None:
    first = not STOPPED.is_set()
    if first:
        _state["signum"] = signum
        STOPPED.set()
    if first and not _state["deferred"]:
        raise Stopped(signum)
    # a repeated signal while ishard stops: it is already stopping, in bounded time


def _reset() -> None:
    STOPPED.clear()
    _state["signum"] = 0


def install() -> None:
    """The command's handlers: SIGINT, SIGTERM and SIGHUP stop the run. A signal the command
    was started with ignored (``nohup``, a script's background job) stays ignored."""
    _reset()
    for signum in SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _on_signal)


@contextmanager
def deferred() -> Iterator[None]:
    """Inside, a stop signal only sets ``STOPPED`` (the code inside polls it). In the main
    thread of a program without ``install`` (the Python API), Ctrl-C is handled so for the
    while too."""
    main = threading.current_thread() is threading.main_thread()
    if not main:
        yield
        return
    swapped = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if not _state["deferred"] and swapped:
        _reset()  # an earlier call's Ctrl-C (the API) does not stop this one
    _state["deferred"] += 1
    if swapped:
        signal.signal(signal.SIGINT, _on_signal)
    try:
        yield
    finally:
        _state["deferred"] -= 1
        if swapped:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            if not _state["deferred"]:
                _reset()  # the API's next call is not a stopping run (its retries count)


def stopping() -> bool:
    """Has a stop signal arrived?"""
    return STOPPED.is_set()
