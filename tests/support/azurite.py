"""A real, private Azure Blob server for tests: Azurite (npm ``azurite``), on 127.0.0.1.

The README's test command installs it into ``.azurite/`` (``npm install --prefix .azurite
azurite@3.37.0``); an ``azurite-blob`` on PATH is used otherwise. Without either, the
fixtures fail (they never skip: a store left untested must not pass CI).

Azurite takes the emulator's well-known account ``devstoreaccount1`` and its published key;
containers are created here with one Shared Key-signed request (obstore creates none).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import shutil
import uuid
from email.utils import formatdate
from pathlib import Path

import pytest
from localserver import HOST, LocalServer, for_the_session, free_port

ACCOUNT = "devstoreaccount1"
# The Azure Storage emulator's published development key (the same in every install).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
VERSION = "2021-08-06"
LOCAL = Path(__file__).resolve().parents[2] / ".azurite" / "node_modules" / ".bin"
INSTALL = "npm install --prefix .azurite azurite@3.37.0"


def find_azurite() -> str | None:
    """``azurite-blob`` from the repository's ``.azurite/``, else from PATH."""
    local = LOCAL / "azurite-blob"
    return str(local) if local.exists() else shutil.which("azurite-blob")


class Azurite(LocalServer):
    """``azurite-blob`` on a free port of 127.0.0.1, its data in ``folder``."""

    name = "azurite-blob"

    def __init__(self, binary: str, folder: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://{HOST}:{self.port}/{ACCOUNT}"
        self.start(
            [
                binary,
                "--blobHost",
                HOST,
                "--blobPort",
                str(self.port),
                "--location",
                str(folder),
                "--silent",
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
            ],
            lambda: self._request("GET", "", {"comp": "list"}),
        )

    def storage_options(self) -> dict:
        """What ``--storage-option`` gives ishard for this server (obstore's own keys)."""
        return {"account_name": ACCOUNT, "account_key": KEY, "endpoint": self.endpoint}

    def _request(self, method: str, path: str, query: dict[str, str]) -> int:
        """One request signed with the account key (Shared Key); its HTTP status."""
        date = formatdate(usegmt=True)
        resource = f"/{ACCOUNT}/{ACCOUNT}/{path}" + "".join(
            f"\n{k}:{v}" for k, v in sorted(query.items())
        )
        to_sign = "\n".join(
            [method, *[""] * 11, f"x-ms-date:{date}\nx-ms-version:{VERSION}", resource]
        )
        signature = base64.b64encode(
            hmac.new(base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest()
        ).decode()
        conn = http.client.HTTPConnection(HOST, self.port, timeout=10)
        try:
            conn.request(
                method,
                f"/{ACCOUNT}/{path}?" + "&".join(f"{k}={v}" for k, v in query.items()),
                headers={
                    "x-ms-date": date,
                    "x-ms-version": VERSION,
                    "Content-Length": "0",
                    "Authorization": f"SharedKey {ACCOUNT}:{signature}",
                },
            )
            answer = conn.getresponse()
            answer.read()
            return answer.status
        finally:
            conn.close()

    def make_container(self) -> str:
        """A new, empty container with a unique name."""
        name = f"test-{uuid.uuid4().hex[:16]}"
        status = self._request("PUT", name, {"restype": "container"})
        if status != 201:
            raise RuntimeError(f"creating container {name} answered {status}")
        return name


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """One Azurite for the session; fails (never skips) when it is not installed."""
    missing = f"Azurite is not installed — run `{INSTALL}` (the README's test command does)"
    yield from for_the_session(Azurite, find_azurite(), missing, tmp_path_factory.mktemp("azurite"))


@pytest.fixture
def azure_container(azurite) -> str:
    """A fresh, empty container on the session's Azurite."""
    return azurite.make_container()
