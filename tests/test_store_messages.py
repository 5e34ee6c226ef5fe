"""What a person sees when a store cannot be used: a malformed endpoint is one line before
any store is built. Against SeaweedFS on 127.0.0.1; nothing here leaves 127.0.0.1."""

from __future__ import annotations

import json
import os

import pytest
from azurite import ACCOUNT
from conftest import assert_error, make_tree, run_ishard

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
