"""The sample index's offsets, ``ishard find`` and ``ishard cat``: every index row checked
against the shard's bytes as tarfile, zipfile and zstandard read them (never ishard's own
readers), and samples read out through ``cat`` compared with the source files."""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import struct
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pyarrow.parquet
import pytest
import zstandard
from helpers import TAR_CODECS, invoke_ishard, make_tree, shard_files

from ishard.formats import ARCHIVE_EXTS

SEEKABLE_MAGIC = 0x8F92EAB1

# samples of one to three files, the large ones over one zstd step, a name that needs a pax
# header (over 100 bytes, no '/' to split at)
TREE: dict[str, bytes | int] = {
    **{f"train/{i:04d}.jpg": 3000 + 997 * i for i in range(12)},
    **{f"train/{i:04d}.cls": f"{i % 3}\n".encode() for i in range(12)},
    **{f"train/{i:04d}.json": b'{"i": %d}' % i for i in range(0, 12, 3)},
    "train/big.bin": 1_300_000,
    f"train/{'n' * 120}.txt": b"long name",
}


def source_bytes(src: Path, name: str) -> bytes:
    return (src / name).read_bytes()


def index_rows(dst: Path) -> list[dict]:
    return pyarrow.parquet.read_table(dst / "samples.parquet").to_pylist()


def tar_offsets(data: bytes) -> dict[str, tuple[int, int]]:
    """(header offset, data offset) of each member of a tar stream, as tarfile reads them."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: (m.offset, m.offset_data) for m in tar.getmembers()}


def zip_offsets(data: bytes) -> dict[str, tuple[int, int]]:
    """(local header offset, data offset) of each member: the data starts after the local
    header's 30 bytes, its name and its extra field (lengths read from the header itself)."""
    out = {}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            at = info.header_offset
            name_length, extra_length = struct.unpack_from("<HH", data, at + 26)
            out[info.filename] = (at, at + 30 + name_length + extra_length)
    return out


def seek_table(data: bytes) -> list[tuple[int, int]]:
    """The (compressed, decompressed) sizes of a seekable zstd file's frames, from its footer."""
    count, descriptor, magic = struct.unpack_from("<IBI", data, len(data) - 9)
    assert magic == SEEKABLE_MAGIC and descriptor & 0x7C == 0
    width = 12 if descriptor & 0x80 else 8
    start = len(data) - 9 - count * width
    assert struct.unpack_from("<I", data, start - 4)[0] == count * width + 9  # frame size
    assert struct.unpack_from("<I", data, start - 8)[0] == 0x184D2A5E  # skippable magic
    return [struct.unpack_from("<II", data, start + i * width) for i in range(count)]


@pytest.mark.parametrize("ext", ARCHIVE_EXTS)
def test_every_index_row_points_at_its_member_in_the_shard(ext, tmp_path):
    """Header and data offsets agree with tarfile (over the format's own decompressor) and
    zipfile; in a ``.tar.zst`` each sample's frames, decompressed alone, are exactly its part of
    the tar stream, and the seek table lists frames that add up to the whole file."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    done = invoke_ishard("shard", src, dst, "--ext", ext, "--shard-size", "20KiB", "--no-progress")
    assert done.returncode == 0, done.stderr
    rows = index_rows(dst)
    assert len(rows) == len(TREE)
    shards = {p.name: p.read_bytes() for p in shard_files(dst)}
    assert len(shards) > 3
    for name, data in shards.items():
        mine = [r for r in rows if r["shard"] == name]
        if ext == ".zip":
            places = zip_offsets(data)
            stream = data
        else:
            stream = TAR_CODECS[ext][1](data)
            places = tar_offsets(stream)
        assert [r["member"] for r in mine] == list(places), name
        for r in mine:
            assert (r["header_offset"], r["data_offset"]) == places[r["member"]], r
            if ext != ".zip":  # the member's bytes sit at its data offset
                body = stream[r["data_offset"] : r["data_offset"] + r["size"]]
                assert body == source_bytes(src, r["source"]), r
        if ext != ".tar.zst":
            assert all(r["frame_offset"] is None and r["frame_size"] is None for r in mine)
            continue
        frames = seek_table(data)
        assert sum(c for c, _ in frames) + 8 + 8 * len(frames) + 9 == len(data)
        assert sum(d for _, d in frames) == len(stream)
        firsts = {}
        for r in mine:
            firsts.setdefault(r["key"], r)
        for key, first in firsts.items():
            chunk = data[first["frame_offset"] : first["frame_offset"] + first["frame_size"]]
            part = (
                zstandard.ZstdDecompressor()
                .stream_reader(io.BytesIO(chunk), read_across_frames=True)
                .read()
            )
            assert stream.startswith(part, first["header_offset"]), key
            for r in mine:
                if r["key"] == key:
                    at = r["data_offset"] - first["header_offset"]
                    assert part[at : at + r["size"]] == source_bytes(src, r["source"])


@pytest.mark.parametrize("ext", [*ARCHIVE_EXTS, ".zip deflated"])
def test_cat_reads_a_random_sample_out_of_its_shard(ext, tmp_path):
    """``ishard cat`` of random samples: the tar stream it prints (read with tarfile) and the
    files it writes with ``-o`` hold the source's bytes; ``find --json`` names the shard and
    members as the index does."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    ext, _, deflated = ext.partition(" ")
    done = invoke_ishard(
        "shard", src, dst, "--ext", ext, "--shard-size", "20KiB", "--no-progress",
        "--member-names", "original", *(["--zip-compression", "deflated"] if deflated else []),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = index_rows(dst)
    keys = sorted({r["key"] for r in rows})
    for key in random.Random(ext).sample(keys, 3):
        members = {r["member"]: r for r in rows if r["key"] == key}
        found = invoke_ishard("find", dst, key, "--json")
        assert found.returncode == 0, found.stderr
        (sample,) = json.loads(found.stdout)["samples"]
        assert sample["shard"] == next(iter(members.values()))["shard"]
        has_range = ext in (".tar", ".tar.zst") or (ext == ".zip" and not deflated)
        assert (sample["range"] is not None) == has_range
        assert [m["member"] for m in sample["members"]] == list(members)
        streamed = subprocess.run(
            [*invoke_command(), "cat", str(dst), key], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(streamed)) as tar:
            got = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
        assert got == {m: source_bytes(src, r["source"]) for m, r in members.items()}
        out = tmp_path / f"one-{key.replace('/', '_')}"
        assert invoke_ishard("cat", dst, key, "-o", out).returncode == 0
        for m, r in members.items():
            assert (out / m).read_bytes() == source_bytes(src, r["source"])


def invoke_command() -> list[str]:
    import sys

    return [sys.executable, "-m", "ishard"]


def test_find_names_missing_keys_and_reads_keys_from_a_file(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    assert invoke_ishard("shard", src, dst, "--no-progress").returncode == 0
    keys = tmp_path / "keys.txt"
    keys.write_text("0001\nnope\n0002\n")
    done = invoke_ishard("find", dst, "--keys-from", keys)
    assert done.returncode == 1
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["0001", "0002"]
    assert done.stderr == (
        "ishard: error: 1 of 3 sample keys is not in the sample index: 'nope' — see the keys "
        """it holds with python -c 'import duckdb, sys; duckdb.read_parquet(sys.argv[1])"""
        f""".project("key").show()' {dst / "samples.parquet"}\n"""
    )
    as_json = json.loads(invoke_ishard("find", dst, "nope", "--json").stdout)
    assert as_json == {"samples": [], "missing": ["nope"]}
    none = invoke_ishard("shard", src, tmp_path / "bare", "--no-sample-index", "--no-progress")
    assert none.returncode == 0
    refused = invoke_ishard("find", tmp_path / "bare", "0001")
    assert refused.returncode == 2
    assert "names no sample index" in refused.stderr


def test_cat_replaces_a_planted_link_and_never_writes_through_it(tmp_path):
    """A link planted under a member's name in the ``-o`` folder is replaced by the file; the
    file it pointed at keeps its bytes. A link where a folder must be is refused."""
    src = make_tree(tmp_path / "src", {"a/x.jpg": b"new bytes", "a/x.cls": b"1"})
    dst = tmp_path / "dst"
    assert (
        invoke_ishard("shard", src, dst, "--no-progress", "--member-names", "original").returncode
        == 0
    )
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    os.symlink(victim, out / "a" / "x.jpg")
    done = invoke_ishard("cat", dst, "x", "-o", out)
    assert done.returncode == 0, done.stderr
    assert victim.read_bytes() == b"precious"
    assert not (out / "a" / "x.jpg").is_symlink()
    assert (out / "a" / "x.jpg").read_bytes() == b"new bytes"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    os.symlink(elsewhere, linked / "a")
    refused = invoke_ishard("cat", dst, "x", "-o", linked)
    assert refused.returncode == 1
    assert "is not a folder there (a link is never followed)" in refused.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_tar_zst_shard_reads_with_zstd_tar_and_webdataset(tmp_path):
    """``zstd -d`` and GNU ``tar --zstd`` take the seekable shard as any .tar.zst; webdataset
    reads it through ``pipe:zstd -dc``, one sample a key, with the source's bytes."""
    webdataset = pytest.importorskip("webdataset")
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    done = invoke_ishard("shard", src, dst, "--ext", ".tar.zst", "--no-progress")
    assert done.returncode == 0, done.stderr
    (shard,) = shard_files(dst)
    plain = subprocess.run(["zstd", "-dc", str(shard)], capture_output=True, check=True).stdout
    listed = subprocess.run(
        ["tar", "--zstd", "-tf", str(shard)], capture_output=True, check=True, text=True
    ).stdout.split()
    with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
        assert listed == [m.name for m in tar.getmembers()]
    dataset = webdataset.WebDataset(f"pipe:zstd -dc {shard}", shardshuffle=False)
    samples = {s["__key__"]: s for s in dataset}
    expected_keys = {Path(name).stem for name in TREE}  # members named <sample key>.<ext>
    assert set(samples) == expected_keys
    for name in TREE:
        key, ext = Path(name).stem, Path(name).suffix[1:]
        assert samples[key][ext] == source_bytes(src, name)


def test_a_sample_larger_than_a_frame_spans_frames_that_cat_reads_whole(tmp_path, monkeypatch):
    """A frame holds at most ``FRAME_MAX`` bytes of the tar stream (the seek table's fields are
    32-bit): a larger sample takes several, its index range covers them all, and ``cat`` reads
    it whole. (The bound is lowered here so a small file crosses it.)"""
    import ishard
    from ishard.formats import zstd

    monkeypatch.setattr(zstd, "FRAME_MAX", 100_000)
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    ishard.shard(src, dst, ext=".tar.zst", shard_size="64MiB", jobs=1)
    (shard,) = shard_files(dst)
    data = shard.read_bytes()
    frames = seek_table(data)
    samples = {r["key"] for r in index_rows(dst)}
    assert len(frames) > len(samples) + 1  # big.bin's 1.3 MB took several frames
    assert all(d <= 100_000 for _, d in frames)
    found, missing = ishard.find(dst, ["big"])
    assert missing == []
    (sample,) = found
    assert sample.frames
    starts = list(itertools.accumulate([c for c, _ in frames], initial=0))
    assert starts.index(sample.end) - starts.index(sample.start) > 1  # whole frames, several
    ((member, body),) = ishard.read_sample(dst, sample)
    assert member.member == "big.bin" and body == source_bytes(src, "train/big.bin")


def test_find_refuses_an_index_the_manifest_names_outside_the_destination(tmp_path):
    """A manifest edited to name ``../elsewhere.parquet`` as its index: nothing outside DST is
    read; one line, exit 1."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    assert invoke_ishard("shard", src, dst, "--no-progress").returncode == 0
    (tmp_path / "elsewhere.parquet").write_bytes((dst / "samples.parquet").read_bytes())
    manifest = json.loads((dst / "manifest.json").read_bytes())
    manifest["ishard"]["samples_index"]["name"] = "../elsewhere.parquet"
    (dst / "manifest.json").write_text(json.dumps(manifest))
    done = invoke_ishard("find", dst, "0001")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "names a sample index outside the destination ('../elsewhere.parquet')" in done.stderr


@pytest.mark.parametrize("ext", [".tar", ".tar.zst"])
def test_cat_refuses_a_shard_changed_since_it_was_indexed(ext, tmp_path):
    """A shard rewritten in place (its bytes where the index points now another's): ``cat``
    says so in one line, exit 1, and writes nothing."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    done = invoke_ishard("shard", src, dst, "--ext", ext, "--no-progress")
    assert done.returncode == 0, done.stderr
    (row,) = [r for r in index_rows(dst) if r["key"] == "0005"][:1]
    shard = dst / row["shard"]
    data = bytearray(shard.read_bytes())
    at = row["frame_offset"] if ext == ".tar.zst" else row["header_offset"]
    data[at : at + 64] = bytes(64)
    shard.write_bytes(bytes(data))
    out = tmp_path / "out"
    refused = invoke_ishard("cat", dst, "0005", "-o", out)
    assert refused.returncode == 1
    assert refused.stderr.startswith("ishard: error: shard ")
    assert "where the sample index says — run ishard verify on the destination" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    assert not out.exists()


def test_the_index_is_written_through_a_tmp_dir_whose_name_holds_a_quote(tmp_path):
    """The engine's folder (under ``--tmp-dir``) is named in the SQL that writes the file: a
    quote in it must be written as one, not end the string."""
    src = make_tree(tmp_path / "src", TREE)
    tmp = tmp_path / "it's tmp"
    tmp.mkdir()
    dst = tmp_path / "dst"
    done = invoke_ishard("shard", src, dst, "--tmp-dir", tmp, "--no-progress")
    assert done.returncode == 0, done.stderr
    assert sorted({row["key"] for row in index_rows(dst)}) == sorted(
        {name.rsplit("/", 1)[1].split(".")[0] for name in TREE}
    )
    assert list(tmp.iterdir()) == []  # the engine's folder went with the run


def test_rows_put_in_a_few_at_a_time_give_the_same_index(tmp_path, monkeypatch):
    """The plan's rows and the writers' offsets reach the engine a batch of whole shards at a
    time; batches of one or two shards (many of them, both kinds, frames included) give the
    very file one batch gives."""
    from ishard.run import sampleindex

    src = make_tree(tmp_path / "src", TREE)
    files = {}
    for batch in (sampleindex.BATCH_ROWS, 4):
        monkeypatch.setattr(sampleindex, "BATCH_ROWS", batch)
        dst = tmp_path / f"dst-{batch}"
        args = ("shard", src, dst, "--ext", ".tar.zst", "--shard-size", "20KiB", "--no-progress")
        done = invoke_ishard(*args)
        assert done.returncode == 0, done.stderr
        assert len(shard_files(dst)) > 3
        files[batch] = (dst / "samples.parquet").read_bytes()
    assert len(set(files.values())) == 1
    assert len(index_rows(tmp_path / "dst-4")) == len(TREE)
