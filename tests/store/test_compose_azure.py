"""``--compose auto`` between containers of one Azure account, against Azurite on 127.0.0.1:
large members staged with Put Block From URL (a byte range of the source, conditional on its
ETag), the rest with Put Block, committed by Put Block List.

And GCS, where nothing is composed: its emulator (fake-gcs-server) takes a compose whose
source preconditions do not hold, so the one property that makes composing safe — a source
rewritten meanwhile fails the shard — cannot be shown there (the first test here shows it).
"""

from __future__ import annotations

import http.client
import json

import pytest
from helpers import MiB, assert_error, assert_ok, blob, crc64nvme, run_ishard
from s3server import S3Proxy

from ishard.store import open_store

SMALL = {f"a/img-{i:03d}.jpg": blob(f"small{i}", 40_000 + 7 * i) for i in range(20)}
LARGE = {
    f"b/clip-{i}.mp4": blob(f"clip{i}", size)
    for i, size in enumerate((10 * MiB + 1000, 11 * MiB + 77, 10 * MiB + 513))
}
NOTES = {f"b/clip-{i}.json": blob(f"note{i}", 300 + 11 * i) for i in range(3)}
DATA = {**SMALL, **LARGE, **NOTES}
COMPOSE = ("--compose-min-size", "10MiB", "--shard-size", "16MiB", "--jobs", "1",
           "--member-names", "original", "--no-progress")  # fmt: skip


def crc64_of(data: bytes) -> str:
    return f"crc64nvme:{crc64nvme(data):016x}"


@pytest.fixture
def account(azurite, azure_container, clean_env):
    """The container's store, the options and environment that reach it, its source loaded."""
    options = azurite.storage_options()
    store = open_store(f"az://{azure_container}", storage_options=options)
    for name, data in DATA.items():
        store.put(f"src/{name}", data)
    args = [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]
    return store, azure_container, args, clean_env


def header(request, name: str) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == name), None)


def shards(store, prefix: str) -> dict[str, bytes]:
    return {k[len(prefix) :]: store.read(k) for k in store.find(prefix) if k.endswith(".tar")}


def test_azure_composed_shards_are_the_client_path_bytes(account, azurite, tmp_path):
    store, container, args, env = account
    src = f"az://{container}/src/"
    assert_ok(run_ishard("shard", src, f"az://{container}/never/", *COMPOSE, *args,
                         "--compose", "never", env=env))  # fmt: skip
    seen: list = []
    port_url = azurite.endpoint.rsplit("/", 1)[0]
    with S3Proxy(port_url, after=lambda r, status: seen.append((r, status))) as proxy:
        via = [a.replace(port_url, proxy.endpoint_url) for a in args]
        done = run_ishard("shard", src, f"az://{container}/auto/", *COMPOSE, *via, "-v", env=env)
    assert done.returncode == 0 and "through this machine" not in done.stderr, done.stderr

    auto = shards(store, "auto/")
    assert auto == shards(store, "never/") and len(auto) >= 2
    manifest = json.loads(store.read("auto/manifest.json"))
    assert {e["url"]: e["checksum"] for e in manifest["shardlist"]} == {
        n: crc64_of(d) for n, d in auto.items()
    }
    # ishard's own requests (signed with the key): each large member staged from its URL,
    # none of its bytes read or sent
    signed = [r for r, _ in seen if "SharedKey" in (header(r, "authorization") or "")]
    copies = [header(r, "x-ms-copy-source") or "" for r in signed]
    copies = [c for c in copies if c]
    assert {c.partition("?")[0].rpartition("/src/")[2] for c in copies} == set(LARGE)
    assert not [r for r in signed if r.method == "GET" and r.key.endswith(".mp4")]
    sent = sum(len(r.body) for r in signed if r.method == "PUT" and ".tar" in r.key)
    assert sent < sum(len(d) for d in auto.values()) - sum(len(d) for d in LARGE.values()) + MiB

    deep = run_ishard("verify", f"az://{container}/auto/", *args, "--deep", env=env)
    assert deep.returncode == 0 and "all ok" in deep.stdout + deep.stderr, deep.stderr


def test_an_azure_source_rewritten_mid_composition_fails_the_run_then_resume_finishes(
    account, azurite
):
    store, container, args, env = account
    target = "src/b/clip-1.mp4"
    changed = blob("changed", len(LARGE["b/clip-1.mp4"]))

    def rewrite_first(request):
        copying = (header(request, "x-ms-copy-source") or "").partition("?")[0]
        if copying.endswith(target) and not rewritten:
            rewritten.append(True)
            store.put(target, changed)

    rewritten: list = []
    src, dst = f"az://{container}/src/", f"az://{container}/auto/"
    port_url = azurite.endpoint.rsplit("/", 1)[0]
    with S3Proxy(port_url, rule=rewrite_first) as proxy:
        via = [a.replace(port_url, proxy.endpoint_url) for a in args]
        done = run_ishard("shard", src, dst, *COMPOSE, *via, env=env)
    assert_error(done, 1, "'src/b/clip-1.mp4' changed while shard", "--resume")
    assert not [n for n, d in shards(store, "auto/").items() if changed[:4096] in d]

    assert_ok(run_ishard("shard", src, dst, *COMPOSE, *args, "--resume", env=env))
    assert_ok(run_ishard("shard", src, f"az://{container}/never/", *COMPOSE, *args,
                         "--compose", "never", env=env))  # fmt: skip
    auto = shards(store, "auto/")
    assert auto == shards(store, "never/")
    assert any(changed in d for d in auto.values())


def test_the_gcs_emulator_keeps_no_precondition_of_a_compose(fake_gcs, gcs_bucket):
    """Why GCS composing is neither done nor tested: fake-gcs-server composes although a
    source's ``ifGenerationMatch`` does not hold (GCS answers 412), so a source rewritten
    during a run could not be shown to fail it; and it takes no write of obstore's."""
    conn = http.client.HTTPConnection("127.0.0.1", fake_gcs.port, timeout=30)

    def call(method: str, path: str, body: bytes) -> tuple[int, dict]:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")

    status, made = call(
        "POST", f"/upload/storage/v1/b/{gcs_bucket}/o?uploadType=media&name=part", b"x" * 100
    )
    assert status == 200
    stale = int(made["generation"]) + 1
    request = {
        "sourceObjects": [{"name": "part", "objectPreconditions": {"ifGenerationMatch": stale}}]
    }
    status, _ = call(
        "POST", f"/storage/v1/b/{gcs_bucket}/o/whole/compose", json.dumps(request).encode()
    )
    conn.close()
    assert status == 200  # GCS itself answers 412 Precondition Failed
