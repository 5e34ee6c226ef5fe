"""``--checksum``: every algorithm is written, recorded and verified (damage found), resume
checks a shard by the algorithm it was recorded with, and manifests of earlier versions (md5)
keep verifying. Digests are computed here with the hash libraries themselves."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import FIXTURES, crc64nvme, invoke_ishard, recorded_checksum, shard_checksum

from ishard.checksums import ALGORITHMS

SOURCE = FIXTURES / "imagenet"


def entries(dst) -> list[dict]:
    return json.loads((dst / "manifest.json").read_text())["shardlist"]


def flip_a_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_algorithm_is_recorded_verified_and_finds_damage(tmp_path, algorithm):
    dst = tmp_path / "out"
    result = invoke_ishard("shard", SOURCE, dst, "--shard-size", "256KiB", "--checksum", algorithm)
    assert result.returncode == 0, result.stderr
    shardlist = entries(dst)
    assert len(shardlist) > 2
    for entry in shardlist:
        data = (dst / entry["url"]).read_bytes()
        if algorithm == "md5":  # wids' own field, as every earlier manifest has it
            assert "checksum" not in entry and entry["md5sum"] == shard_checksum(data, "md5")
        else:
            assert "md5sum" not in entry
            assert entry["checksum"] == f"{algorithm}:{shard_checksum(data, algorithm)}"
    clean = invoke_ishard("verify", dst)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "size, checksum, members" in clean.stdout

    damaged = dst / shardlist[1]["url"]
    flip_a_byte(damaged)
    broken = invoke_ishard("verify", dst)
    assert broken.returncode == 1
    _, recorded = recorded_checksum(shardlist[1])
    line = (
        f"{shardlist[1]['url']}: {algorithm} is "
        f"{shard_checksum(damaged.read_bytes(), algorithm)}, the manifest says {recorded}"
    )
    assert line in broken.stdout, broken.stdout


def test_the_defaults_xxh128_native_md5_in_the_go_spelling(tmp_path):
    native, go = tmp_path / "native", tmp_path / "go"
    assert invoke_ishard("shard", SOURCE, native, "--shard-size", "256KiB").returncode == 0
    result = invoke_ishard(
        f"-src_bck={SOURCE}", f"-dst_bck={go}", "-shard_size=256KiB", "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    assert all(recorded_checksum(e)[0] == "xxh128" for e in entries(native))
    assert all(set(e) == {"url", "md5sum", "nsamples", "filesize"} for e in entries(go))
    chosen = tmp_path / "chosen"
    result = invoke_ishard(
        f"-src_bck={SOURCE}",
        f"-dst_bck={chosen}",
        "-shard_size=256KiB",
        "--checksum",
        "blake3",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    assert all(recorded_checksum(e)[0] == "blake3" for e in entries(chosen))


def test_resume_rechecks_a_finished_shard_by_its_recorded_algorithm(tmp_path):
    dst = tmp_path / "out"
    common = ["--shard-size", "256KiB", "--checksum", "blake3"]
    assert invoke_ishard("shard", SOURCE, dst, *common).returncode == 0
    reference = {p.name: p.read_bytes() for p in dst.iterdir()}
    shard = dst / entries(dst)[2]["url"]
    flip_a_byte(shard)  # the same size: only the checksum tells
    result = invoke_ishard("shard", SOURCE, dst, *common, "--resume")
    assert result.returncode == 0, result.stderr
    assert {p.name: p.read_bytes() for p in dst.iterdir()} == reference


def test_a_manifest_of_an_earlier_version_still_verifies(tmp_path):
    """Written with md5 and without any ``checksum`` field, as earlier versions wrote them."""
    dst = tmp_path / "out"
    done = invoke_ishard("shard", SOURCE, dst, "--shard-size", "256KiB", "--checksum", "md5")
    assert done.returncode == 0, done.stderr
    old = tmp_path / "old"
    shutil.copytree(dst, old)
    assert all("checksum" not in e and "md5sum" in e for e in entries(old))
    assert invoke_ishard("verify", old).returncode == 0
    flip_a_byte(old / entries(old)[0]["url"])
    result = invoke_ishard("verify", old)
    assert result.returncode == 1 and f"{entries(old)[0]['url']}: md5 is" in result.stdout


def test_an_unknown_checksum_is_one_line_exit_2(tmp_path):
    result = invoke_ishard("shard", SOURCE, tmp_path / "out", "--checksum", "crc32")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "ishard: error: --checksum 'crc32' is not a checksum — use one of "
        "xxh128, blake3, sha256, md5, none\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_manifest_with_a_checksum_of_an_unknown_algorithm_is_refused(tmp_path):
    dst = tmp_path / "out"
    assert invoke_ishard("shard", SOURCE, dst, "--shard-size", "256KiB").returncode == 0
    doc = json.loads((dst / "manifest.json").read_text())
    doc["shardlist"][0]["checksum"] = "crc32:00ff"
    (dst / "manifest.json").write_text(json.dumps(doc))
    result = invoke_ishard("verify", dst)
    assert result.returncode == 1 and "is not an ishard manifest" in result.stderr
    assert "checksum" in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("cut", [0, 1, 511, 512, 4096, 9999])
def test_a_composed_shard_s_crc_is_its_parts_crcs_combined(cut):
    """What a composed shard records: the CRC of its bytes, had from its parts' CRCs and
    sizes alone — checked against google-crc32c and a CRC-64 table of the test's own."""
    import random

    import google_crc32c

    from ishard.checksums import crc_combine, crc_of, hasher

    data = random.Random(cut).randbytes(10_000 + cut)
    first, second = data[:cut], data[cut:]
    crc32c = crc_combine("crc32c", crc_of("crc32c", first), crc_of("crc32c", second), len(second))
    assert crc32c == google_crc32c.value(data)
    crc64 = crc_combine(
        "crc64nvme", crc_of("crc64nvme", first), crc_of("crc64nvme", second), len(second)
    )
    assert crc64 == crc64nvme(data)
    whole = hasher("crc64nvme")
    whole.update(first)
    whole.update(second)
    assert whole.hexdigest() == f"{crc64nvme(data):016x}"
