"""Failures while a run writes that used to end in a traceback or the wrong words: a store
that refuses a write with a 4xx answer (told as its refusal of that object, not as a network
failure), and the Dask scheduler killed mid-run (one line, nothing half-written, --resume
finishes). SeaweedFS and Dask processes on 127.0.0.1 only."""

from __future__ import annotations

import os

import pytest
from conftest import assert_error, make_tree, run_ishard

TREE = {"a/1.jpg": b"1" * 600, "a/1.cls": b"7", "b/2.jpg": b"2" * 500, "b/2.cls": b"8"}


def s3_env(s3_server) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AIS_")) and "proxy" not in k.lower()}  # fmt: skip
    env.update(
        AWS_ACCESS_KEY_ID=s3_server.access_key,
        AWS_SECRET_ACCESS_KEY=s3_server.secret_key,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
        NO_PROXY="127.0.0.1",
    )
    return env


# ---------------------------------------------------------------- a store's 4xx answer


def test_a_shard_name_the_store_refuses_is_its_refusal_not_an_unreachable_store(
    s3_server, s3_bucket, tmp_path
):
    """Finding: SeaweedFS answers 400 to a key with a part over 255 bytes (S3 allows 1,024
    for the whole key, which planning checks); the run said "cannot reach … check the endpoint
    and the network". Now it names the refused object (shortened), the store's answer and a
    fix that fits, exit 1, and nothing is left under a shard's name."""
    src = make_tree(tmp_path / "src", TREE)
    template = "x" * 1000 + "-%06d"
    result = run_ishard(
        "shard", src, f"s3://{s3_bucket}/out", "--shard-template", template, "--no-progress",
        "--retries", "0", "--endpoint-url", s3_server.endpoint_url, env=s3_env(s3_server),
    )  # fmt: skip
    line = assert_error(result, 1, "refused", "400", "xxxx")
    assert "cannot reach" not in line and "network" not in line, line
    assert "x" * 1000 not in line, line  # the key shortened
    assert "length" in line, line
    listed = s3_server.client().list_objects_v2(Bucket=s3_bucket).get("Contents", [])
    assert not [o["Key"] for o in listed if "xxxx" in o["Key"]]
