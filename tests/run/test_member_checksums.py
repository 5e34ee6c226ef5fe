"""Each member's checksum in the sample index, taken as its bytes are written, and checked by
``cat``, ``read_sample`` and ``find --verify``; zstd frames that carry their content checksum;
``verify --deep`` reading a ``.tar.zst``'s seek table; zstd frames that claim more than they
hold."""

from __future__ import annotations

import io
import json
import os
import struct
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest
import xxhash
import zstandard
from helpers import assert_error, invoke_ishard, make_tree, read_members, shard_files

from ishard.checksums import digest_of
from ishard.errors import DataError
from ishard.formats import open_writer

# two samples of a large member (incompressible) and a small one
BIG = 70_000


def other_bytes(seed: int) -> bytes:
    """``BIG`` other bytes, the same in every run: a zstd frame of random bytes need not keep
    its size from one draw to the next (a few hundred bytes either way), and the index's
    offsets must still fit the rewritten shard."""
    return __import__("random").Random(seed).randbytes(BIG)


def _tree(root: Path) -> Path:
    rng = __import__("random").Random(43)
    return make_tree(
        root,
        {
            "a.bin": rng.randbytes(BIG),
            "a.cls": b"1\n",
            "b.bin": rng.randbytes(BIG),
            "b.cls": b"2\n",
        },
    )


# (--ext, extra options) of every format and zip method
FORMATS = [
    (".tar", ()),
    (".tgz", ()),
    (".tar.lz4", ()),
    (".tar.zst", ()),
    (".zip", ()),
    (".zip", ("--zip-compression", "deflated")),
]
FORMAT_IDS = ["tar", "tgz", "lz4", "zst", "zip", "zip-deflated"]


def index_rows(dst: Path) -> list[dict]:
    return pyarrow.parquet.read_table(dst / "samples.parquet").to_pylist()


def shard(src: Path, dst: Path, ext: str, *args: str) -> None:
    done = invoke_ishard("shard", src, dst, "--ext", ext, "--no-progress", *args)
    assert done.returncode == 0, done.stderr


def rewrite_member(dst: Path, member: str, data: bytes, deflate: bool = False) -> Path:
    """Write the shard that holds ``member`` again, as its format writes it, with ``data`` in
    its place (same names, sizes, order and samples: the index's offsets still fit), the
    manifest's checksum and size of it brought up to date: only the member's bytes differ."""
    rows = [
        r
        for r in index_rows(dst)
        if r["shard"] == next(r["shard"] for r in index_rows(dst) if r["member"] == member)
    ]
    path = dst / rows[0]["shard"]
    before = dict(read_members(path.name, path.read_bytes()))
    assert len(before[member]) == len(data) and before[member] != data
    out = io.BytesIO()

    class Sink:
        def write(self, chunk):
            out.write(bytes(chunk))

        def close(self):
            pass

    writer = open_writer(path.name, Sink(), zip_deflate=deflate)
    last = None
    for row in sorted(rows, key=lambda r: r["header_offset"]):
        if row["key"] != last:
            writer.sample()
            last = row["key"]
        body = data if row["member"] == member else before[row["member"]]
        writer.add(row["member"], len(body), row["mtime"], io.BytesIO(body))
    writer.close()
    new = out.getvalue()
    if path.name.endswith((".tar", ".tar.zst")) or (path.name.endswith(".zip") and not deflate):
        assert len(new) == path.stat().st_size  # the offsets and frames the index has still fit
    path.write_bytes(new)
    manifest = json.loads((dst / "manifest.json").read_text())
    for entry in manifest["shardlist"]:
        if entry["url"] == path.name:
            for field in [f for f in entry if f not in ("url", "filesize", "nsamples")]:
                if isinstance(entry[field], str) and len(entry[field]) >= 32:
                    algorithm = "md5" if field == "md5" else entry[field].partition(":")[0]
                    with open(path, "rb") as f:
                        digest = digest_of(f, algorithm)
                    entry[field] = digest if ":" in entry[field] else digest.partition(":")[2]
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.mark.parametrize("checksum", ["xxh128", "none"])
@pytest.mark.parametrize(("ext", "options"), FORMATS, ids=FORMAT_IDS)
def test_cat_fails_on_member_bytes_changed_after_indexing(ext, options, checksum, tmp_path):
    """A shard written again with one member's bytes changed (names, sizes and layout kept, the
    container's own checks and the manifest's checksum made to fit): ``cat`` of its sample
    fails in one line naming the member and the shard, exit 1, writes nothing; the other
    sample still reads."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ext, "--checksum", checksum, *options)
    other = other_bytes(1)
    path = rewrite_member(dst, "a.bin", other, deflate=bool(options))
    out = tmp_path / "out"
    refused = invoke_ishard("cat", dst, "a", "-o", out)
    assert_error(refused, 1, "bytes of member 'a.bin'", path.name, "are not those indexed")
    assert not out.exists()
    fine = invoke_ishard("cat", dst, "b", "-o", out)
    assert fine.returncode == 0, fine.stderr
    assert (out / "b.bin").read_bytes() == (src / "b.bin").read_bytes()


def test_read_sample_raises_a_data_error_for_changed_bytes(tmp_path):
    """The API promise: ``ishard.read_sample`` raises ``DataError`` for bytes other than those
    indexed."""
    import ishard

    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ".tar")
    rewrite_member(dst, "b.bin", other_bytes(2))
    (found,), _ = ishard.find(dst, ["b"])
    with pytest.raises(DataError, match="bytes of member 'b.bin' in shard"):
        ishard.read_sample(dst, found)


@pytest.mark.parametrize(("ext", "options"), FORMATS, ids=FORMAT_IDS)
def test_the_index_holds_each_member_s_xxh3_64_whatever_checksum_says(ext, options, tmp_path):
    """Every row's ``xxh3_64`` is the xxh3-64 of the member's bytes as the shard holds them,
    with ``--checksum none`` too."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ext, "--checksum", "none", *options)
    held = {}
    for path in shard_files(dst):
        held.update(read_members(path.name, path.read_bytes()))
    rows = index_rows(dst)
    assert {r["member"]: r["xxh3_64"] for r in rows} == {
        name: xxhash.xxh3_64_intdigest(data) for name, data in held.items()
    }


def test_find_verify_reads_and_checks_each_found_sample(tmp_path):
    """``find --verify`` reads each sample it finds: all well, exit 0; bytes changed after
    indexing, one line naming the member and shard, exit 1."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ".tgz")
    fine = invoke_ishard("find", dst, "a", "b", "--verify")
    assert fine.returncode == 0, fine.stderr
    assert len(fine.stdout.splitlines()) == 2
    path = rewrite_member(dst, "b.bin", other_bytes(2))
    unchanged = invoke_ishard("find", dst, "a", "b")  # without --verify: the index alone
    assert unchanged.returncode == 0, unchanged.stderr
    refused = invoke_ishard("find", dst, "a", "b", "--verify")
    assert refused.returncode == 1
    assert refused.stderr.startswith("ishard: error: bytes of member 'b.bin' in shard")
    assert path.name in refused.stderr
    help_text = invoke_ishard("find", "--help").stdout
    assert "--verify" in help_text


def test_an_index_without_checksums_still_reads(tmp_path):
    """An index written before member checksums were kept (no ``xxh3_64`` column): ``cat``
    reads from it, checking what it can, and says nothing about the column."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ".tar")
    index = dst / "samples.parquet"
    table = pyarrow.parquet.read_table(index)
    pyarrow.parquet.write_table(table.drop_columns(["xxh3_64"]), index)
    manifest = json.loads((dst / "manifest.json").read_text())
    record = manifest["ishard"]["samples_index"]
    with open(index, "rb") as f:
        record["checksum"] = digest_of(f, record["checksum"].partition(":")[0])
    record["bytes"] = index.stat().st_size
    (dst / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "out"
    done = invoke_ishard("cat", dst, "a", "-o", out)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert (out / "a.bin").read_bytes() == (src / "a.bin").read_bytes()


def test_append_carries_the_held_rows_checksums(tmp_path):
    """``--append`` keeps the held samples' rows, checksums included, and the new rows have
    theirs: the grown index holds a checksum for every member, each that of its bytes."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ".tar", "--shard-size", "80KiB")
    (src / "c.bin").write_bytes(os.urandom(1000))
    shard(src, dst, ".tar", "--shard-size", "80KiB", "--append")
    held = {}
    for path in shard_files(dst):
        held.update(read_members(path.name, path.read_bytes()))
    assert {r["member"]: r["xxh3_64"] for r in index_rows(dst)} == {
        name: xxhash.xxh3_64_intdigest(data) for name, data in held.items()
    }
    assert "c.bin" in held


def test_a_resumed_run_keeps_the_checksums_of_the_shards_it_kept(tmp_path, monkeypatch):
    """A run that failed after its first shard (the run records hold it), then ``--resume``:
    the index is byte for byte the uninterrupted run's, checksums of the kept shard included."""
    from ishard.errors import WriteError
    from ishard.run import write

    src = _tree(tmp_path / "src")
    args = (".tar", "--shard-size", "40KiB", "--no-progress", "--jobs", "1")
    whole = tmp_path / "whole"
    shard(src, whole, *args)
    real = write.write_one

    def failing(plan, *rest):
        if plan.name != shard_files(whole)[0].name:
            raise WriteError(f"cannot write shard {plan.name!r}: no space — run again")
        return real(plan, *rest)

    dst = tmp_path / "dst"
    monkeypatch.setattr(write, "write_one", failing)
    assert invoke_ishard("shard", src, dst, "--ext", *args).returncode == 1
    monkeypatch.setattr(write, "write_one", real)
    assert not (dst / "manifest.json").exists()
    assert list((dst / ".ishard-run" / "done").iterdir())
    resumed = invoke_ishard("shard", src, dst, "--ext", *args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert (dst / "samples.parquet").read_bytes() == (whole / "samples.parquet").read_bytes()


# ------------------------------------------------------------------ .tar.zst frames


def frame_spans(data: bytes) -> list[tuple[int, int]]:
    """(offset, compressed size) of each zstd frame before the seek table, from the seek
    table's entries."""
    count = struct.unpack_from("<I", data, len(data) - 9)[0]
    start = len(data) - 9 - 8 * count
    spans, at = [], 0
    for i in range(count):
        size = struct.unpack_from("<I", data, start + 8 * i)[0]
        spans.append((at, size))
        at += size
    return spans


def test_tar_zst_frames_carry_their_content_checksum(tmp_path):
    """Each frame of a ``.tar.zst`` sets zstd's checksum flag; a byte flipped in a member's
    stored bytes (a raw block: no zstd structure notices) fails ``verify --deep`` under
    ``--checksum none``, as the same damage in a ``.tgz`` fails its CRC; ``zstd -t`` reads
    the whole file."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ".tar.zst", "--checksum", "none")
    (path,) = shard_files(dst)
    data = bytearray(path.read_bytes())
    for at, _ in frame_spans(bytes(data)):
        params = zstandard.get_frame_parameters(bytes(data[at : at + 18]))
        assert params.has_checksum
    assert invoke_ishard("verify", dst, "--deep").returncode == 0
    raw = bytes(data)
    where = raw.find((src / "b.bin").read_bytes()[1000:1100])
    assert where > 0  # stored as is (incompressible)
    data[where] ^= 0xFF
    path.write_bytes(bytes(data))
    failed = invoke_ishard("verify", dst, "--deep")
    assert failed.returncode == 1
    assert path.name in failed.stdout + failed.stderr


def test_verify_deep_reads_the_seek_table(tmp_path):
    """A seek table that claims 1,000,000 frames (or frames of other sizes): ``verify --deep``
    names the shard, exit 1."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ".tar.zst", "--checksum", "none")
    (path,) = shard_files(dst)
    good = path.read_bytes()
    path.write_bytes(good[:-9] + struct.pack("<I", 1_000_000) + good[-5:])
    failed = invoke_ishard("verify", dst, "--deep")
    assert failed.returncode == 1
    assert path.name in failed.stdout and "seek table" in failed.stdout
    count = struct.unpack_from("<I", good, len(good) - 9)[0]
    first = len(good) - 9 - 8 * count
    sizes = bytearray(good)
    c0, c1 = struct.unpack_from("<II", good, first), struct.unpack_from("<II", good, first + 8)
    struct.pack_into("<II", sizes, first, c0[0] + 1, c0[1])  # the sum is kept: no frame there
    struct.pack_into("<II", sizes, first + 8, c1[0] - 1, c1[1])
    path.write_bytes(bytes(sizes))
    failed = invoke_ishard("verify", dst, "--deep")
    assert failed.returncode == 1
    assert path.name in failed.stdout and "seek table" in failed.stdout


def test_a_frame_claiming_a_huge_size_is_the_shard_s_damage(tmp_path):
    """A zstd frame header that claims 2^40 bytes: ``cat`` and ``ls`` fail in one line naming
    the shard, exit 1; nothing that large is allocated."""
    src = _tree(tmp_path / "src")
    dst = tmp_path / "dst"
    shard(src, dst, ".tar.zst", "--checksum", "none")
    (path,) = shard_files(dst)
    data = bytearray(path.read_bytes())
    at = next(r["frame_offset"] for r in index_rows(dst) if r["key"] == "a")
    # the frame's header made one that claims 2^40 bytes (single segment, 8-byte content
    # size), its blocks left as they are
    descriptor = data[at + 4]
    single = descriptor & 0x20
    fcs = {0: 1 if single else 0, 1: 2, 2: 4, 3: 8}[descriptor >> 6]
    head = 5 + (0 if single else 1) + {0: 0, 1: 1, 2: 2, 3: 4}[descriptor & 3] + fcs
    huge = struct.pack("<IBQ", 0xFD2FB528, 0xE0 | (descriptor & 0x04), 1 << 40)
    frame = huge + bytes(data[at + head :])
    data[at:] = frame[: len(data) - at]
    assert zstandard.get_frame_parameters(bytes(data[at : at + 18])).content_size == 1 << 40
    path.write_bytes(bytes(data))
    out = tmp_path / "out"
    refused = invoke_ishard("cat", dst, "a", "-o", out)
    assert_error(refused, 1, path.name)
    assert "unexpected" not in refused.stderr
    listed = invoke_ishard("ls", path)
    assert_error(listed, 1, path.name)
    assert "cannot reach" not in listed.stderr
