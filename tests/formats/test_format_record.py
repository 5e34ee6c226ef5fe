"""A format is one record: a ``.tar.xz`` (a tar through Python's lzma) defined here and
registered with one call is written by ``ishard shard`` and read back by ``ls``,
``verify --deep``, ``find`` and ``cat`` with no other change; its damage is named as damage."""

from __future__ import annotations

import io
import json
import lzma
import tarfile
from pathlib import Path

import pyarrow.parquet
import pytest
from helpers import invoke_ishard, make_tree

from ishard.formats import TAR, Format, register, unregister
from ishard.formats.compress import CompressorSink
from ishard.formats.tar import TarWriter

TREE: dict[str, bytes | int] = {
    **{f"train/{i:04d}.jpg": 2000 + 331 * i for i in range(6)},
    **{f"train/{i:04d}.cls": f"{i % 3}\n".encode() for i in range(6)},
}


def xz_sink(out, level: int | None) -> CompressorSink:
    """An xz stream over a byte sink: the library's compressor, as a record's writer needs."""
    return CompressorSink(out, lzma.LZMACompressor(preset=6 if level is None else level))


XZ = Format(
    "xz",
    (".tar.xz",),
    TAR,
    lambda sink, settings: TarWriter(xz_sink(sink, settings.level)),  # type: ignore[arg-type]
    lambda fileobj: lzma.LZMAFile(fileobj, "rb"),  # type: ignore[return-value]  # noqa: SIM115
    damage=(lzma.LZMAError,),
)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, Path]:
    """The tree sharded as ``.tar.xz`` while the record is registered (removed after)."""
    root = tmp_path_factory.mktemp("xz")
    src = make_tree(root / "src", TREE)
    dst = root / "dst"
    register(XZ)
    try:
        done = invoke_ishard(
            "shard", src, dst, "--ext", ".tar.xz", "--shard-size", "8KiB", "--no-progress"
        )
    finally:
        unregister(XZ)
    assert done.returncode == 0, done.stderr
    return src, dst


@pytest.fixture
def xz(written):
    """The record registered for one test."""
    register(XZ)
    try:
        yield written
    finally:
        unregister(XZ)


def shards(dst: Path) -> list[Path]:
    names = [e["url"] for e in json.loads((dst / "manifest.json").read_text())["shardlist"]]
    return [dst / n for n in names]


def test_the_shards_are_tars_compressed_by_lzma(xz):
    src, dst = xz
    found = {}
    for shard in shards(dst):
        assert shard.name.endswith(".tar.xz")
        with tarfile.open(fileobj=io.BytesIO(lzma.decompress(shard.read_bytes()))) as tar:
            found |= {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert len(shards(dst)) > 1
    assert found == {Path(n).name: (src / n).read_bytes() for n in TREE}


def test_ls_lists_a_shards_members(xz):
    _, dst = xz
    first = shards(dst)[0]
    done = invoke_ishard("ls", first, "--json")
    assert done.returncode == 0, done.stderr
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(first.read_bytes()))) as tar:
        expected = [{"name": m.name, "size": m.size} for m in tar.getmembers()]
    assert json.loads(done.stdout)["members"] == expected


def test_verify_deep_is_clean_then_names_damage_as_unreadable(xz, tmp_path):
    _, dst = xz
    done = invoke_ishard("verify", dst, "--deep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"verified {len(shards(dst))} shards (")
    assert done.stdout.rstrip().endswith(": all ok")
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in dst.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    damaged = shards(copy)[1]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0x55
    damaged.write_bytes(bytes(data))
    found = invoke_ishard("verify", copy, "--deep")
    assert found.returncode == 1, found.stdout + found.stderr
    assert "Traceback" not in found.stderr
    assert f"{damaged.name}: cannot be read: " in found.stdout


def test_find_reads_forward_and_cat_gives_the_samples_bytes(xz, tmp_path):
    src, dst = xz
    rows = pyarrow.parquet.read_table(dst / "samples.parquet").to_pylist()
    key = rows[len(rows) // 2]["key"]
    members = {r["member"]: r for r in rows if r["key"] == key}
    found = invoke_ishard("find", dst, key, "--json")
    assert found.returncode == 0, found.stderr
    (sample,) = json.loads(found.stdout)["samples"]
    assert sample["range"] is None  # an xz stream cannot be entered in the middle
    assert [m["member"] for m in sample["members"]] == list(members)
    out = tmp_path / "out"
    done = invoke_ishard("cat", dst, key, "-o", out)
    assert done.returncode == 0, done.stderr
    for m, r in members.items():
        assert (out / m).read_bytes() == (src / r["source"]).read_bytes()


def test_the_record_is_gone_once_removed(written):
    _, dst = written
    done = invoke_ishard("ls", shards(dst)[0])
    assert done.returncode == 2
    assert "is not an archive ishard reads" in done.stderr
