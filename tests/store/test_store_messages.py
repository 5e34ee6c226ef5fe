"""What a person sees when a store cannot be used: a malformed endpoint is one line before
any store is built, an unreachable store names where it was looked for, refused credentials
are told apart from missing ones (with each store's own advice), and credentials written in a
URL are refused and never shown. Against SeaweedFS, Azurite and loopback servers on
127.0.0.1; nothing here leaves 127.0.0.1."""

from __future__ import annotations

import json
import os
import socketserver
import threading

import pytest
from azurite import ACCOUNT
from helpers import assert_error, make_tree, run_ishard
from localserver import free_port
from s3server import S3Proxy

SCRUBBED = ("AWS_", "AIS_", "AZURE_", "AZURITE_", "GOOGLE_")


@pytest.fixture
def bare_env(tmp_path):
    """This environment without store settings or proxies, a HOME of its own and no
    metadata service."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(SCRUBBED) and "proxy" not in k.lower()}  # fmt: skip
    env.update(HOME=str(tmp_path / "home"), AWS_EC2_METADATA_DISABLED="true",
               NO_PROXY="127.0.0.1")  # fmt: skip
    (tmp_path / "home").mkdir()
    return env


@pytest.fixture
def src(tmp_path):
    return make_tree(tmp_path / "src", {"a/1.jpg": b"1" * 600, "a/1.cls": b"7"})


def keys(env: dict, server) -> dict:
    return {**env, "AWS_ACCESS_KEY_ID": server.access_key,
            "AWS_SECRET_ACCESS_KEY": server.secret_key}  # fmt: skip


# ---------------------------------------------------------------- malformed endpoints


@pytest.mark.parametrize(
    "how, origin",
    [
        (("--endpoint-url", "127.0.0.1:8333"), "--endpoint-url"),
        ({"AWS_ENDPOINT_URL": "127.0.0.1:8333"}, "AWS_ENDPOINT_URL"),
        ({"AWS_ENDPOINT_URL_S3": "127.0.0.1:8333"}, "AWS_ENDPOINT_URL_S3"),
        (("--storage-option", "endpoint_url=127.0.0.1:8333"), "--storage-option endpoint_url"),
    ],
)  # fmt: skip
def test_an_endpoint_without_a_scheme_is_one_line_naming_where_it_came_from(
    bare_env, src, how, origin
):
    env = {**bare_env, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    args = how if isinstance(how, tuple) else ()
    result = run_ishard("shard", src, "s3://bkt/out", *args,
                        env={**env, **(how if isinstance(how, dict) else {})})  # fmt: skip
    assert assert_error(result, 2) == (
        f"ishard: error: endpoint URL '127.0.0.1:8333' ({origin}) has no scheme — write "
        "http://127.0.0.1:8333 or https://127.0.0.1:8333")  # fmt: skip


@pytest.mark.parametrize(
    "endpoint, problem",
    [
        ("http://127.0.0.1:notaport", "has a port that is not a number from 1 to 65535"),
        ("http://127.0.0.1:99999", "has a port that is not a number from 1 to 65535"),
        ("http://:8333", "names no host"),
        ("ftp://127.0.0.1:8333", "has the scheme 'ftp', not http or https"),
        ("http://127.0.0.1:8333/a b", "holds a space"),
        ("http://127.0.0.1:8333/a`b", "holds a space, a control or a non-ASCII character"),
        ("http://[::1:8333", "has a port that is not a number"),
    ],
)
def test_a_malformed_endpoint_is_refused_before_any_request(bare_env, src, endpoint, problem):
    env = {**bare_env, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    for source, dest in ((src, "s3://bkt/out"), ("s3://bkt/in", src.parent / "out")):
        result = run_ishard("shard", source, dest, "--endpoint-url", endpoint, env=env)
        assert_error(result, 2, f"endpoint URL {endpoint!r} (--endpoint-url) {problem}", " — ")
    assert not (src.parent / "out").exists()


def test_endpoint_url_wins_over_a_malformed_aws_endpoint_url_s3(
    s3_server, s3_bucket, bare_env, src
):
    """As in the AWS CLI, --endpoint-url wins over the environment: a malformed
    AWS_ENDPOINT_URL_S3 beside it is not used, so it stops nothing."""
    env = {**keys(bare_env, s3_server), "AWS_ENDPOINT_URL_S3": "127.0.0.1:1"}
    result = run_ishard("shard", src, f"s3://{s3_bucket}/out", "--endpoint-url",
                        s3_server.endpoint_url, "--no-progress", env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    client = s3_server.client()
    listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="out/").get("Contents", [])
    assert "out/manifest.json" in [o["Key"] for o in listed]


@pytest.mark.parametrize(
    "url, extra, origin",
    [
        ("gs://bkt", {"GOOGLE_BASE_URL": "127.0.0.1:4443"}, "GOOGLE_BASE_URL"),
        ("gs://bkt", "keyfile", "gcs_base_url in the key file"),
        ("az://cont", {"AZURE_STORAGE_ENDPOINT": "127.0.0.1:4443"}, "AZURE_STORAGE_ENDPOINT"),
        ("az://cont", ("--endpoint-url", "127.0.0.1:4443"), "--endpoint-url"),
        ("az://cont", {"AZURE_MSI_ENDPOINT": "127.0.0.1:4443"}, "AZURE_MSI_ENDPOINT"),
        ("ais://bkt", {"AIS_ENDPOINT": "127.0.0.1:4443"}, "AIS_ENDPOINT"),
    ],
)  # fmt: skip
def test_gcs_azure_and_aistore_endpoints_are_checked_too(
    bare_env, src, tmp_path, url, extra, origin
):
    options = {"gs": ["skip_signature=true"], "az": [f"account_name={ACCOUNT}"],
               "ai": ["key=k", "secret=s"]}[url[:2]]  # fmt: skip
    env, args = dict(bare_env), []
    if extra == "keyfile":  # an emulator's address, as the docs say to give it
        key = tmp_path / "key.json"
        key.write_text(json.dumps({"gcs_base_url": "127.0.0.1:4443", "disable_oauth": True,
                                   "client_email": "", "private_key": "",
                                   "private_key_id": ""}))  # fmt: skip
        options = [f"service_account={key}"]
    elif isinstance(extra, dict):
        env.update(extra)
    else:
        args = list(extra)
    options_args = [a for o in options for a in ("--storage-option", o)]
    result = run_ishard("shard", src, f"{url}/out", *args, *options_args, env=env)
    line = assert_error(result, 2, "endpoint URL '127.0.0.1:4443' (", "has no scheme")
    assert origin in line


# ---------------------------------------------------------------- where a store was looked for


def test_cannot_reach_names_the_endpoint_it_tried(bare_env, src, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {**bare_env, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    result = run_ishard("shard", src, "s3://bkt/out", "--endpoint-url", dead, "--retries", "1",
                        env=env)  # fmt: skip
    assert_error(result, 1, f"cannot reach destination 's3://bkt/out' at {dead}: ",
                 "check the endpoint and the network")  # fmt: skip
    key = tmp_path / "key.json"  # a GCS emulator's address, from its key file
    key.write_text(json.dumps({"gcs_base_url": dead, "disable_oauth": True, "client_email": "",
                               "private_key": "", "private_key_id": ""}))  # fmt: skip
    result = run_ishard("shard", "gs://bkt/in", tmp_path / "out", "--retries", "1",
                        "--storage-option", f"service_account={key}", "--storage-option",
                        "allow_http=true", env=env)  # fmt: skip
    assert_error(result, 1, f"cannot reach source 'gs://bkt/in' at {dead}: ")
    assert not (tmp_path / "out").exists()


class _TunnelRefused(socketserver.StreamRequestHandler):
    """A proxy on 127.0.0.1 that notes the first line of each request (``CONNECT host:443``)
    and refuses to open the tunnel: nothing goes further."""

    def handle(self) -> None:
        self.server.seen.append(self.rfile.readline().decode("latin-1").strip())  # type: ignore[attr-defined]
        self.wfile.write(
            b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )


@pytest.fixture
def refusing_proxy():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _TunnelRefused)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "url, options, endpoint",
    [
        ("s3://bkt/out", ["key=k", "secret=s", "region=eu-west-3"],
         "https://s3.eu-west-3.amazonaws.com"),
        ("gs://bkt/out", ["skip_signature=true"], "https://storage.googleapis.com"),
        ("az://cont/out", ["account_name=someaccount", "skip_signature=true"],
         "https://someaccount.blob.core.windows.net"),
    ],
)  # fmt: skip
def test_without_an_endpoint_cannot_reach_names_the_stores_own_host(
    bare_env, src, refusing_proxy, url, options, endpoint
):
    """Requests go through a loopback proxy that refuses them (so none leaves 127.0.0.1): the
    message names the service host the store would have used."""
    proxy = f"proxy_url=http://127.0.0.1:{refusing_proxy.server_address[1]}"
    args = [a for o in [*options, proxy] for a in ("--storage-option", o)]
    result = run_ishard("shard", src, url, "--retries", "1", *args, env=bare_env)
    assert_error(result, 1, f"cannot reach destination {url!r} at {endpoint}: ")
    host = endpoint.removeprefix("https://")
    assert refusing_proxy.seen and all(
        line.startswith("CONNECT ") and host.partition(".")[2] in line
        for line in refusing_proxy.seen), refusing_proxy.seen  # fmt: skip


# ---------------------------------------------------------------- refused credentials


def test_a_bogus_session_token_says_the_credentials_were_refused(
    s3_server, s3_bucket, bare_env, src
):
    """SeaweedFS looks a key sent with a session token up among temporary credentials: a
    bogus token with valid keys is refused (InvalidAccessKeyId)."""
    env = {**keys(bare_env, s3_server), "AWS_SESSION_TOKEN": "bogus-token-73c1"}
    result = run_ishard("shard", src, f"s3://{s3_bucket}/out", "--endpoint-url",
                        s3_server.endpoint_url, env=env)  # fmt: skip
    line = assert_error(
        result, 1, f"the credentials for destination 's3://{s3_bucket}/out' were refused "
        "(InvalidAccessKeyId: ", "a session token is set (AWS_SESSION_TOKEN): check it, or "
        "unset it")  # fmt: skip
    assert "no credentials" not in line and "bogus-token-73c1" not in line


def _aws_error(code: str, message: str):
    """A rule for S3Proxy: every request answered as AWS answers it, 400 and its XML."""

    def answer(request):
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>'
                f"{message}</Message><Token-0>bogus</Token-0><RequestId>ishard-test</RequestId>"
                "</Error>").encode()  # fmt: skip
        return 400, [("Content-Type", "application/xml")], body

    return answer


@pytest.mark.parametrize(
    "code, message",
    [
        ("InvalidToken", "The provided token is malformed or otherwise invalid."),
        ("ExpiredToken", "The provided token has expired."),
    ],
)
def test_aws_answers_about_a_session_token_say_the_credentials_were_refused(
    s3_server, bare_env, src, tmp_path, code, message
):
    proxy = S3Proxy(s3_server.endpoint_url, _aws_error(code, message))
    env = {**keys(bare_env, s3_server), "AWS_SESSION_TOKEN": "bogus"}
    try:
        for source, dest, role in ((src, "s3://bkt/out", "destination"),
                                   ("s3://bkt/in", tmp_path / "out", "source")):  # fmt: skip
            result = run_ishard("shard", source, dest, "--endpoint-url", proxy.endpoint_url,
                                env=env)  # fmt: skip
            assert_error(result, 1, f"the credentials for {role} ", f"were refused ({code}: "
                         f"{message}) — check AWS_ACCESS_KEY_ID", "(AWS_SESSION_TOKEN)")  # fmt: skip
    finally:
        proxy.close()
    assert not (tmp_path / "out").exists()


WRONG_KEY = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk="


@pytest.mark.parametrize("how", ["account_key", "sas_key"])
def test_a_wrong_azure_key_or_sas_gets_azure_advice(
    azurite, azure_container, bare_env, src, tmp_path, how
):
    secret = (
        WRONG_KEY
        if how == "account_key"
        else ("sv=2021-08-06&ss=b&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&sig=V3JvbmdTaWc%3D")
    )
    options = [f"account_name={ACCOUNT}", f"endpoint={azurite.endpoint}", f"{how}={secret}"]
    args = [a for o in options for a in ("--storage-option", o)]
    runs = ((src, f"az://{azure_container}/out", "destination"),
            (f"az://{azure_container}/in", tmp_path / "out", "source"))  # fmt: skip
    for source, dest, role in runs:
        result = run_ishard("shard", source, dest, *args, env=bare_env)
        line = assert_error(
            result, 1, f"the credentials for {role} ", " were refused (", "AZURE_STORAGE_ACCOUNT_KEY",
            "SAS token", "`az login`")  # fmt: skip
        assert "AWS" not in line
        assert secret not in result.stderr and "V3Jvbm" not in result.stderr


# ---------------------------------------------------------------- credentials in a URL


SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYzz9q"


@pytest.mark.parametrize(
    "args",
    [
        ("shard", "SRC", f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bkt/out"),
        ("shard", f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bkt/in", "OUT", "--dry-run"),
        ("shard", f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bkt/in", "OUT", "--debug", "--json"),
        ("shard", "SRC", "OUT", "--src-list", f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bkt/l.csv"),
        (f"-src_bck=gs://AKIAIOSFODNN7EXAMPLE:{SECRET}@bkt", "-dst_bck=OUT"),
        ("verify", f"az://AKIAIOSFODNN7EXAMPLE:{SECRET}@cont/out"),
        ("ls", f"s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bkt/out/shard-000000.tar"),
        ("shard", "SRC", f"memory://user:{SECRET}@host/out"),
    ],
)  # fmt: skip
def test_credentials_in_a_url_are_refused_and_never_shown(bare_env, src, tmp_path, args):
    args = [str(src) if a == "SRC" else str(tmp_path / "out") if a == "OUT" else
            a.replace("OUT", str(tmp_path / "out")) for a in args]  # fmt: skip
    result = run_ishard(*args, env=bare_env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert SECRET not in result.stdout + result.stderr
    assert "AKIAIOSFODNN7EXAMPLE" not in result.stdout + result.stderr
    line = result.stderr.splitlines()[-1]
    assert line.startswith("ishard: error: ") and "://***@" in line
    assert "holds credentials before its '@' — ishard takes none from a URL" in line
    assert not (tmp_path / "out").exists()
