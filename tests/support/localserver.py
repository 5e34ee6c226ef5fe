"""What the tests' emulators (Azurite, fake-gcs-server) share: a free port of 127.0.0.1, a
process started and waited for until it answers, and stopped; one for the test session."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

HOST = "127.0.0.1"
START_TIMEOUT = 30.0


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class LocalServer:
    """A server process on ``self.port``; ``start`` returns once ``probe`` answers."""

    name = "server"
    port: int
    proc: subprocess.Popen

    def start(self, argv: list[str], probe: Callable[[], object]) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                probe()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"{self.name} did not start") from None
                time.sleep(0.1)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


Server = TypeVar("Server", bound=LocalServer)


def for_the_session(
    make: Callable[[str, Path], Server], binary: str | None, missing: str, folder: Path
) -> Iterator[Server]:
    """A session fixture's body: the server ``make(binary, folder)`` makes, closed after; a
    failure (never a skip: a store left untested must not pass CI) when ``binary`` is None,
    ``missing`` saying how to install it."""
    if binary is None:
        pytest.fail(missing, pytrace=False)
    server = make(binary, folder)
    try:
        yield server
    finally:
        server.close()
