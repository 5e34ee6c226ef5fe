"""``--compose auto``: S3 → S3 ``.tar`` shards whose large members the store copies itself
(UploadPartCopy with a byte range), against a real S3 server (SeaweedFS on 127.0.0.1).

Each test compares with ``--compose never`` (every byte through the client) byte for byte, and
watches the requests at a proxy in front of the server: what a user would check is that the
large members' bytes did not pass through this machine, and that the shards are the same.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import google_crc32c
import pytest
import xxhash
from helpers import (
    WAIT,
    MiB,
    assert_error,
    assert_ok,
    blob,
    download,
    finish,
    objects,
    put,
    read_members_checked,
    read_webdataset,
    read_wids,
    start_ishard,
    uploads,
)
from s3server import S3Proxy

from ishard.sizes import format_size

# Six MB of small samples first (so the first large member's header part needs none of its
# bytes), then large members of 10-12 MiB with a small file each (so each of the later ones
# lends its first bytes to the part its header goes in).
SMALL = {f"a/img-{i:03d}.jpg": blob(f"small{i}", 150_000 + 7 * i) for i in range(40)}
LARGE = {
    f"b/clip-{i}.mp4": blob(f"clip{i}", size)
    for i, size in enumerate((10 * MiB + 1000, 11 * MiB + 77, 10 * MiB + 513, 12 * MiB))
}
NOTES = {f"b/clip-{i}.json": blob(f"note{i}", 300 + 11 * i) for i in range(4)}
DATA = {**SMALL, **LARGE, **NOTES}
COMPOSE = ("--compose-min-size", "10MiB", "--shard-size", "30MiB", "--jobs", "1")


def shard_objects(client, bucket: str, prefix: str) -> dict[str, bytes]:
    """The shards under ``prefix`` (name -> bytes), without the records beside them."""
    got = objects(client, bucket, prefix)
    return {k[len(prefix) :]: v for k, v in got.items() if k.endswith(".tar")}


def manifest_of(client, bucket: str, prefix: str) -> dict:
    return json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}manifest.json")["Body"].read())


def index_rows(path: Path) -> list[dict]:
    """The sample index's rows, read by pyarrow."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def crc32c(data: bytes) -> str:
    return f"crc32c:{google_crc32c.value(data):08x}"


def ran_ok(done) -> None:
    """Exit 0 and no traceback (``-v`` runs say what they do on stderr)."""
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def header(request, name: str) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == name), None)


@pytest.fixture
def loaded(client, s3_bucket) -> str:
    put(client, s3_bucket, {f"src/{k}": v for k, v in DATA.items()})
    return s3_bucket


def test_composed_shards_are_the_client_path_bytes_and_large_members_never_pass_through(
    cli, client, s3_server, loaded, tmp_path
):
    src = f"s3://{loaded}/src/"
    assert_ok(cli("shard", src, f"s3://{loaded}/never/", *COMPOSE, "--compose", "never"))
    seen: list = []
    with S3Proxy(s3_server.endpoint_url, after=lambda r, status: seen.append((r, status))) as px:
        done = cli("shard", src, f"s3://{loaded}/auto/", *COMPOSE, "-v",
                   "--endpoint-url", px.endpoint_url, endpoint=False)  # fmt: skip
    ran_ok(done)
    assert "written through this machine" not in done.stderr

    never = shard_objects(client, loaded, "never/")
    auto = shard_objects(client, loaded, "auto/")
    assert auto == never and len(auto) >= 2
    members = {}
    for name, data in auto.items():
        members.update(read_members_checked(name, data))
    assert members == {f"src/{k}": v for k, v in DATA.items()}

    # each composed shard's checksum is the CRC-32C of its bytes (the client path's: xxh128)
    manifest = manifest_of(client, loaded, "auto/")
    assert {e["url"]: e["checksum"] for e in manifest["shardlist"]} == {
        n: crc32c(d) for n, d in auto.items()
    }
    # every large member was copied in the store; the client read at most 5 MiB of each
    copies = [r for r, s in seen if r.method == "PUT" and header(r, "x-amz-copy-source")]
    assert {header(r, "x-amz-copy-source").rpartition("/src/")[2] for r in copies} == set(LARGE)
    for r, status in seen:
        if r.method == "GET" and r.key.removeprefix("src/") in LARGE:
            first, last = header(r, "range").removeprefix("bytes=").split("-")
            assert int(first) == 0 and int(last) < 5 * MiB, r.headers
    sent = sum(len(r.body) for r, _ in seen if r.method == "PUT" and r.key.endswith(".tar"))
    small = sum(len(d) for d in auto.values()) - sum(len(d) for d in LARGE.values())
    assert sent <= small + 5 * MiB * len(LARGE)  # at most 5 MiB of each large member sent
    assert uploads(client, loaded) == []

    # read back by tarfile, webdataset, wids, and checked by verify --deep
    local = download(client, loaded, "auto/", tmp_path / "auto")
    for name in auto:
        with tarfile.open(local / name) as tar:
            assert sorted(tar.getnames()) == sorted(m for m in members if m in tar.getnames())
    read = read_webdataset(local, sorted(auto))
    assert read == read_wids(local / "manifest.json", tmp_path / "cache")
    assert {k: sorted(v) for k, v in read.items()} == {
        **{f"src/a/img-{i:03d}": ["jpg"] for i in range(40)},
        **{f"src/b/clip-{i}": ["json", "mp4"] for i in range(4)},
    }
    assert read["src/b/clip-1"]["mp4"] == LARGE["b/clip-1.mp4"]
    deep = cli("verify", f"s3://{loaded}/auto/", "--deep")
    assert deep.returncode == 0, deep.stderr
    assert "all ok" in deep.stdout + deep.stderr

    # the sample index: a copied member's checksum is the MD5 its source gave (its ETag); the
    # others' their xxh3-64; and `ishard cat` checks a copied member by that MD5
    rows = index_rows(local / "samples.parquet")
    for row in rows:
        name = row["source"].removeprefix("src/")
        if name in LARGE:
            assert row["xxh3_64"] is None
            assert row["source_md5"] == hashlib.md5(LARGE[name]).hexdigest()
        else:
            assert row["source_md5"] is None
            assert row["xxh3_64"] == xxhash.xxh3_64_intdigest(DATA[name])
    out = tmp_path / "cat"
    got = cli("cat", f"s3://{loaded}/auto/", "clip-3", "-o", out)
    assert got.returncode == 0, got.stderr
    assert (out / "src/b/clip-3.mp4").read_bytes() == LARGE["b/clip-3.mp4"]
    # a byte of the copied member changed in the shard: cat refuses it (by the source's MD5)
    (row,) = [r for r in rows if r["source"] == "src/b/clip-3.mp4"]
    name = f"auto/{row['shard']}"
    damaged = bytearray(auto[row["shard"]])
    damaged[row["data_offset"] + 7 * MiB] ^= 1
    client.put_object(Bucket=loaded, Key=name, Body=bytes(damaged))
    refused = cli("cat", f"s3://{loaded}/auto/", "clip-3", "-o", tmp_path / "again")
    assert_error(refused, 1, "are not those indexed")
    # and verify finds it by the shard's CRC-32C
    found = cli("verify", f"s3://{loaded}/auto/", "--json")
    assert found.returncode == 1, found.stderr
    problems = json.loads(found.stdout)["problems"]
    assert [(p["name"], p["kind"]) for p in problems] == [(row["shard"], "crc32c")]


def test_progress_counts_the_copied_bytes_as_written(cli, loaded):
    done = cli("shard", f"s3://{loaded}/src/", f"s3://{loaded}/auto/", *COMPOSE, "--progress")
    ran_ok(done)
    wrote = [line for line in done.stderr.splitlines() if line.startswith("ishard: wrote ")]
    assert wrote, done.stderr
    total = sum(len(d) for d in DATA.values())
    assert f"of {format_size(total)} (100%), 2/2 shards" in wrote[-1], wrote[-1]
    assert wrote[-1].startswith(f"ishard: wrote {format_size(total)} of ")


def test_dask_workers_compose_their_shards(cli, client, loaded):
    src = f"s3://{loaded}/src/"
    assert_ok(cli("shard", src, f"s3://{loaded}/never/", *COMPOSE, "--compose", "never"))
    assert_ok(cli("shard", src, f"s3://{loaded}/dask/", *COMPOSE[:4], "--executor", "dask",
                  "--jobs", "2"))  # fmt: skip
    dask = shard_objects(client, loaded, "dask/")
    assert dask == shard_objects(client, loaded, "never/")
    manifest = manifest_of(client, loaded, "dask/")
    assert [e["checksum"] for e in manifest["shardlist"]] == [crc32c(dask[n]) for n in sorted(dask)]
    assert uploads(client, loaded) == []


def test_a_store_that_refuses_range_copies_gets_the_shards_through_the_client(
    cli, client, s3_server, loaded
):
    def no_copies(request):
        if request.method == "PUT" and header(request, "x-amz-copy-source"):
            body = b"<Error><Code>NotImplemented</Code><Message>not here</Message></Error>"
            return 501, [("Content-Type", "application/xml")], body
        return None

    src = f"s3://{loaded}/src/"
    assert_ok(cli("shard", src, f"s3://{loaded}/never/", *COMPOSE, "--compose", "never"))
    with S3Proxy(s3_server.endpoint_url, rule=no_copies) as proxy:
        done = cli("shard", src, f"s3://{loaded}/auto/", *COMPOSE, "-v",
                   "--endpoint-url", proxy.endpoint_url, endpoint=False)  # fmt: skip
    ran_ok(done)
    said = [line for line in done.stderr.splitlines() if "through this machine" in line]
    assert len(said) == 2, done.stderr  # the refusal, once; the shard it met it on
    assert "refused to copy a byte range" in said[0] and "NotImplemented" in said[0]
    assert shard_objects(client, loaded, "auto/") == shard_objects(client, loaded, "never/")
    assert uploads(client, loaded) == []


def test_without_verbose_a_refusal_says_nothing_and_never_composes_nothing(cli, client, loaded):
    src = f"s3://{loaded}/src/"
    done = cli("shard", src, f"s3://{loaded}/never/", *COMPOSE, "--compose", "never", "-v")
    ran_ok(done)
    assert "compose" not in done.stderr
    manifest = manifest_of(client, loaded, "never/")
    assert all(e["checksum"].startswith("xxh128:") for e in manifest["shardlist"])


def test_a_source_object_rewritten_mid_composition_fails_the_run_then_resume_finishes(
    cli, client, s3_server, loaded
):
    target = "src/b/clip-2.mp4"
    changed = blob("changed", len(LARGE["b/clip-2.mp4"]))

    def rewrite_first(request):
        copying = header(request, "x-amz-copy-source") or ""
        if request.method == "PUT" and copying.endswith(target) and not rewritten:
            rewritten.append(True)
            client.put_object(Bucket=loaded, Key=target, Body=changed)

    rewritten: list = []
    src, dst = f"s3://{loaded}/src/", f"s3://{loaded}/auto/"
    with S3Proxy(s3_server.endpoint_url, rule=rewrite_first) as proxy:
        done = cli("shard", src, dst, *COMPOSE, "--endpoint-url", proxy.endpoint_url,
                   endpoint=False)  # fmt: skip
    line = assert_error(done, 1, "'src/b/clip-2.mp4' changed while shard", "--resume")
    assert "Traceback" not in done.stderr and line
    assert uploads(client, loaded) == []
    holding = [n for n, d in shard_objects(client, loaded, "auto/").items()
               if b"clip-2.mp4" in d]  # fmt: skip
    assert holding == []  # the shard it was composed into was never published

    assert_ok(cli("shard", src, dst, *COMPOSE, "--resume"))
    assert_ok(cli("shard", src, f"s3://{loaded}/never/", *COMPOSE, "--compose", "never"))
    auto = shard_objects(client, loaded, "auto/")
    assert auto == shard_objects(client, loaded, "never/")
    assert any(changed in d for d in auto.values())
    assert uploads(client, loaded) == []


def test_a_source_object_deleted_mid_composition_is_one_line_naming_it(
    cli, client, s3_server, loaded
):
    target = "src/b/clip-1.mp4"

    def delete_first(request):
        copying = header(request, "x-amz-copy-source") or ""
        if request.method == "PUT" and copying.endswith(target) and not deleted:
            deleted.append(True)
            client.delete_object(Bucket=loaded, Key=target)

    deleted: list = []
    with S3Proxy(s3_server.endpoint_url, rule=delete_first) as proxy:
        done = cli("shard", f"s3://{loaded}/src/", f"s3://{loaded}/auto/", *COMPOSE,
                   "--endpoint-url", proxy.endpoint_url, endpoint=False)  # fmt: skip
    assert_error(done, 1, "object 'src/b/clip-1.mp4' is missing from", "cannot be read now")
    assert uploads(client, loaded) == []


def test_kill_9_while_composing_then_resume_is_byte_identical_with_no_upload_left(
    cli, client, s3_server, clean_env, loaded, tmp_path
):
    src, dst = f"s3://{loaded}/src/", f"s3://{loaded}/auto/"
    env = {**clean_env, "AWS_ACCESS_KEY_ID": s3_server.access_key,
           "AWS_SECRET_ACCESS_KEY": s3_server.secret_key}  # fmt: skip
    run = subprocess.Popen(
        [sys.executable, "-m", "ishard", "shard", src, dst, *COMPOSE, "--no-progress",
         "--member-names", "original", "--endpoint-url", s3_server.endpoint_url],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while run.poll() is None and not uploads(client, loaded):
            time.sleep(0.01)  # until an upload is open (or the run is over)
        run.send_signal(signal.SIGSTOP)
        dangling = uploads(client, loaded)
    finally:
        run.kill()
        run.wait()
    assert run.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert len(dangling) == 1
    assert_ok(cli("shard", src, dst, *COMPOSE, "--resume"))
    assert_ok(cli("shard", src, f"s3://{loaded}/never/", *COMPOSE, "--compose", "never"))
    assert shard_objects(client, loaded, "auto/") == shard_objects(client, loaded, "never/")
    assert uploads(client, loaded) == []
    # the resumed run's records are an uninterrupted one's
    assert_ok(cli("shard", src, f"s3://{loaded}/fresh/", *COMPOSE))
    resumed, fresh = objects(client, loaded, "auto/"), objects(client, loaded, "fresh/")
    assert resumed["auto/manifest.json"] == fresh["fresh/manifest.json"]
    for where, got in (("auto", resumed), ("fresh", fresh)):
        (tmp_path / where).write_bytes(got[f"{where}/samples.parquet"])
    assert index_rows(tmp_path / "auto") == index_rows(tmp_path / "fresh")


def test_append_composes_the_new_shards_and_the_dataset_verifies(cli, client, loaded):
    src, dst = f"s3://{loaded}/src/", f"s3://{loaded}/auto/"
    assert_ok(cli("shard", src, dst, *COMPOSE))
    more = {"c/clip-9.mp4": blob("clip9", 10 * MiB + 5), "c/clip-9.json": b"{}"}
    put(client, loaded, {f"src/{k}": v for k, v in more.items()})
    assert_ok(cli("shard", src, dst, *COMPOSE, "--append"))
    manifest = manifest_of(client, loaded, "auto/")
    held = shard_objects(client, loaded, "auto/")
    new = [e for e in manifest["shardlist"] if b"clip-9.mp4" in held[e["url"]]]
    assert [e["checksum"] for e in new] == [crc32c(held[new[0]["url"]])]
    members = {}
    for name, data in held.items():
        members.update(read_members_checked(name, data))
    assert members == {f"src/{k}": v for k, v in {**DATA, **more}.items()}
    deep = cli("verify", dst, "--deep")
    assert deep.returncode == 0 and "all ok" in deep.stdout + deep.stderr, deep.stderr
    assert uploads(client, loaded) == []


def test_a_stop_signal_mid_copy_ends_the_run_and_leaves_no_upload_then_resume(
    cli, client, s3_server, s3env, loaded
):
    """SIGTERM while the store copies a member (the copy held at a proxy): the run ends with
    its one line and exit code 143, without waiting for the copy; its upload is aborted;
    --resume then writes what an uninterrupted run writes."""
    copying, release = threading.Event(), threading.Event()

    def hold_copies(request):
        if request.method == "PUT" and header(request, "x-amz-copy-source"):
            copying.set()
            release.wait(WAIT)

    src, dst = f"s3://{loaded}/src/", f"s3://{loaded}/auto/"
    common = (*COMPOSE, "--member-names", "original", "--no-progress")
    with S3Proxy(s3_server.endpoint_url, rule=hold_copies) as proxy:
        run = start_ishard(proxy.endpoint_url, s3env, "shard", src, dst, *common)
        try:
            assert copying.wait(WAIT), "no copy was asked for"
            run.send_signal(signal.SIGTERM)
            result = finish(run)
        finally:
            release.set()
    assert result.returncode == 143, result.stderr
    assert result.stderr.splitlines() == [
        "ishard: error: interrupted (SIGTERM)" + result.stderr.splitlines()[0][36:]
    ]
    assert uploads(client, loaded) == []
    assert_ok(cli("shard", src, dst, *COMPOSE, "--resume"))
    assert_ok(cli("shard", src, f"s3://{loaded}/never/", *COMPOSE, "--compose", "never"))
    assert shard_objects(client, loaded, "auto/") == shard_objects(client, loaded, "never/")
    assert uploads(client, loaded) == []


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--compose", "always", "--compose 'always' is not a mode — use auto or never"),
        ("--compose-min-size", "5MiB", "--compose-min-size '5MiB' is below 10MiB"),
    ],
)
def test_bad_compose_values_are_one_line_and_exit_2(cli, loaded, option, value, needle):
    done = cli("shard", f"s3://{loaded}/src/", f"s3://{loaded}/out/", option, value)
    assert_error(done, 2, needle)


def test_local_sources_other_formats_and_digests_are_written_through_the_client(
    cli, client, loaded, tmp_path: Path
):
    src = f"s3://{loaded}/src/"
    done = cli("shard", src, f"s3://{loaded}/tgz/", *COMPOSE, "--ext", ".tgz", "-v")
    ran_ok(done)
    manifest = manifest_of(client, loaded, "tgz/")
    assert all(e["checksum"].startswith("xxh128:") for e in manifest["shardlist"])
    done = cli("shard", src, f"s3://{loaded}/sha/", *COMPOSE, "--checksum", "sha256", "-v")
    ran_ok(done)
    assert "--checksum sha256 needs every byte of a shard here" in done.stderr
    manifest = manifest_of(client, loaded, "sha/")
    assert all(e["checksum"].startswith("sha256:") for e in manifest["shardlist"])
    local = tmp_path / "src"
    download(client, loaded, "src/", local)
    done = cli("shard", local, f"s3://{loaded}/fromlocal/", *COMPOSE, "-v")
    ran_ok(done)
    assert "compose" not in done.stderr  # a local source: nothing to copy in the store
    manifest = manifest_of(client, loaded, "fromlocal/")
    assert all(e["checksum"].startswith("xxh128:") for e in manifest["shardlist"])
