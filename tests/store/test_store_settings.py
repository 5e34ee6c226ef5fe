"""S3 settings as AWS CLI users give them (profiles, shared files, endpoint variables), and the
clean-up of a killed run's open multipart uploads, against SeaweedFS on 127.0.0.1."""

from __future__ import annotations

import json
import os

import pytest
from helpers import make_tree, run_ishard

from ishard.store import resolve
from ishard.store.obstore.s3requests import RequestError
from ishard.store.obstore.s3uploads import abort_open_uploads
from ishard.store.retry import Retrier


@pytest.fixture
def bare_env(tmp_path):
    """This environment without any AWS setting, a HOME of its own and no metadata service."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "AIS_")) and "proxy" not in k.lower()
    }
    env.update(HOME=str(tmp_path / "home"), AWS_EC2_METADATA_DISABLED="true", NO_PROXY="127.0.0.1")
    (tmp_path / "home").mkdir()
    return env


def shard_into(env, src, url, *args):
    return run_ishard(
        "shard", src, url, "--shard-size", "1KiB", "--no-progress", "--json", *args, env=env
    )


def objects(server, bucket: str, prefix: str = "") -> list[str]:
    page = server.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for item in page.get("Contents", []))


def test_a_profile_in_the_shared_files_gives_keys_region_and_endpoint(
    s3_server, s3_bucket, bare_env, tmp_path
):
    creds, config = tmp_path / "credentials", tmp_path / "config"
    creds.write_text(
        f"[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n"
        f"[bench]\naws_access_key_id = {s3_server.access_key}\n"
        f"aws_secret_access_key = {s3_server.secret_key}\n"
    )
    config.write_text(
        f"[profile bench]\nregion = us-east-1\nendpoint_url = {s3_server.endpoint_url}\n"
    )
    env = {
        **bare_env,
        "AWS_PROFILE": "bench",
        "AWS_SHARED_CREDENTIALS_FILE": str(creds),
        "AWS_CONFIG_FILE": str(config),
    }
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"1" * 600, "a/2.jpg": b"2" * 600})
    result = shard_into(env, src, f"s3://{s3_bucket}/out")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"] == 2
    assert "out/manifest.json" in objects(s3_server, s3_bucket, "out/")

    env["AWS_PROFILE"] = "nosuch"  # a profile that is not there: one line, exit 2
    result = shard_into(env, src, f"s3://{s3_bucket}/again")
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        (
            "ishard: error: AWS profile 'nosuch' is not in the shared config or credentials files "
            "— fix AWS_PROFILE (or --storage-option profile=…)"
        )
    ]


def test_aws_endpoint_url_and_keys_from_the_environment(s3_server, s3_bucket, bare_env, tmp_path):
    env = {
        **bare_env,
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_key,
        "AWS_ENDPOINT_URL_S3": s3_server.endpoint_url,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
    }  # the S3-specific one wins
    src = make_tree(tmp_path / "src", {"1.jpg": b"1"})
    result = shard_into(env, src, f"s3://{s3_bucket}/out")
    assert result.returncode == 0, result.stderr
    assert objects(s3_server, s3_bucket, "out/") == [
        "out/manifest.json",
        "out/samples.parquet",
        "out/shard-000000.tar",
    ]


def test_an_unknown_storage_option_is_one_line(s3_server, s3_bucket, bare_env, tmp_path):
    src = make_tree(tmp_path / "src", {"1.jpg": b"1"})
    result = shard_into(
        bare_env,
        src,
        f"s3://{s3_bucket}/out",
        "--endpoint-url",
        s3_server.endpoint_url,
        "--storage-option",
        f"key={s3_server.access_key}",
        "--storage-option",
        f"secret={s3_server.secret_key}",
        "--storage-option",
        "no_such_setting=1",
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("ishard: error: ") and "no_such_setting" in line
    assert "--storage-option" in line


def test_open_uploads_of_planned_keys_are_aborted_and_no_others(s3_server, s3_bucket):
    client = s3_server.client()
    keys = ["out/shard-000001.tar", "out/a b+é/shard-000002.tar", "out/other.tar"]
    for key in keys:
        upload = client.create_multipart_upload(Bucket=s3_bucket, Key=key)
        client.upload_part(
            Bucket=s3_bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * 1024
        )
    store = resolve(
        f"s3://{s3_bucket}/out",
        endpoint_url=s3_server.endpoint_url,
        storage_options={"key": s3_server.access_key, "secret": s3_server.secret_key},
    ).store
    assert store.abort_uploads(keys[:2], Retrier(2)) == 2
    left = client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])
    assert [u["Key"] for u in left] == ["out/other.tar"]

    wrong = resolve(
        f"s3://{s3_bucket}/out",
        endpoint_url=s3_server.endpoint_url,
        storage_options={"key": s3_server.access_key, "secret": "not-it"},
    ).store
    with pytest.raises(RequestError) as refused:
        abort_open_uploads(wrong.settings, s3_bucket, {"out/other.tar"}, Retrier(1))
    assert refused.value.status == 403 and "not-it" not in str(refused.value)
    assert len(client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", [])) == 1


def test_sharded_samples_reads_a_bucket_given_s3fs_style_options(s3_server, s3_bucket, tmp_path):
    """Options as fsspec users wrote them (``endpoint_url``, ``key``, ``secret``) reach the
    store; every planned sample comes back from the bucket's shards."""
    from helpers import FIXTURES

    import ishard
    from ishard.split.read import ShardedSamples

    options = {
        "endpoint_url": s3_server.endpoint_url,
        "key": s3_server.access_key,
        "secret": s3_server.secret_key,
    }
    report = ishard.shard(
        FIXTURES / "imagenet", f"s3://{s3_bucket}/out", shard_size="256KiB", storage_options=options
    )
    samples = list(ShardedSamples(f"s3://{s3_bucket}/out/manifest.json", storage_options=options))
    assert len(samples) == sum(r.samples for r in report.results) == 44
    assert len({s.key for s in samples}) == 44
