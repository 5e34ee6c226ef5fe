"""``ishard find``, ``ishard cat``, ``ishard.find`` and ``ishard.read_sample`` hold the sample
index against the manifest and the shard: an index rewritten by someone who also rewrote the
manifest's record of it (so the whole-file check passes) reads nothing outside DST, nothing
but the member each row names, and prints no terminal escape."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest
import xxhash
from helpers import assert_error, invoke_ishard, make_tree

import ishard
from ishard.errors import DataError, UsageError

# four samples of a 3000-byte image and a label: two shards of two samples at 8KiB
TREE = {**{f"{i:02d}.jpg": 3000 + i for i in range(4)}, **{f"{i:02d}.cls": b"1" for i in range(4)}}
Rows = list[dict]


def sharded(tmp_path: Path, ext: str = ".tar", *more: str) -> Path:
    src = tmp_path / "src"
    if not src.exists():
        make_tree(src, TREE)
    dst = tmp_path / f"dst{ext}{''.join(more)}"
    done = invoke_ishard(
        "shard", src, dst, "--ext", ext, "--shard-size", "8KiB", "--no-progress", *more
    )
    assert done.returncode == 0, done.stderr
    return dst


def rewrite_index(dst: Path, change: Callable[[Rows], Rows]) -> None:
    """Rewrite ``DST/samples.parquet`` with ``change``'s rows."""
    table = pyarrow.parquet.read_table(dst / "samples.parquet")
    replace_index(dst, pyarrow.Table.from_pylist(change(table.to_pylist()), schema=table.schema))


def replace_index(dst: Path, table: pyarrow.Table) -> None:
    """Write ``table`` as ``DST/samples.parquet``, and the manifest's record of it (bytes,
    rows, checksum) to match: the index passes the whole-file check."""
    pyarrow.parquet.write_table(table, dst / "samples.parquet")
    data = (dst / "samples.parquet").read_bytes()
    manifest = json.loads((dst / "manifest.json").read_bytes())
    manifest["ishard"]["samples_index"].update(
        bytes=len(data), rows=table.num_rows, checksum=f"xxh128:{xxhash.xxh3_128_hexdigest(data)}"
    )
    (dst / "manifest.json").write_text(json.dumps(manifest))


def on_key(key: str, **values) -> Callable[[Rows], Rows]:
    """Set ``values`` in every row of sample ``key``."""
    return lambda rows: [{**r, **values} if r["key"] == key else r for r in rows]


def on_member(name: str, **values) -> Callable[[Rows], Rows]:
    """Set ``values`` in the row of member ``name``."""
    return lambda rows: [{**r, **values} if r["member"] == name else r for r in rows]


def victim_tar(path: Path) -> Path:
    """A tar outside DST whose one member, ``secret``, is at offsets 0 and 512."""
    import io
    import tarfile

    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("secret")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"secret"))
    return path


def refused_everywhere(dst: Path, key: str, out: Path, *needles: str) -> None:
    """``find``, ``cat`` (stream and ``-o``) and the API refuse the sample in one line, exit 1,
    and write nothing."""
    assert_error(invoke_ishard("find", dst, key), 1, *needles)
    assert_error(invoke_ishard("find", dst, key, "--json"), 1, *needles)
    assert_error(invoke_ishard("cat", dst, key, "-o", out), 1, *needles)
    assert_error(invoke_ishard("cat", dst, key), 1, *needles)
    assert not out.exists()
    with pytest.raises(DataError):
        found, _ = ishard.find(dst, [key])
        for sample in found:
            ishard.read_sample(dst, sample)


@pytest.mark.parametrize(
    "shard",
    [
        "../victim.tar",
        "../" * 12 + "etc/passwd",
        "/etc/passwd",
        "VICTIM",  # replaced by the victim's absolute path
        "s3://bucket/victim.tar",
        "shard-000009.tar",  # a plain name, but no shard the manifest lists
        "",
    ],
)
def test_an_index_shard_the_manifest_does_not_list_is_never_read(shard, tmp_path):
    """The ``shard`` column names a file outside DST (``..``, absolute, a URL) or no shard
    of the manifest's: refused before any read, naming samples.parquet and the value."""
    dst = sharded(tmp_path)
    victim = victim_tar(tmp_path / "victim.tar")
    shard = str(victim) if shard == "VICTIM" else shard
    member = "root" if shard.endswith("passwd") else "secret"
    rewrite_index(dst, on_key("01", shard=shard, member=member, header_offset=0, data_offset=512))
    rewrite_index(dst, lambda rows: [r for r in rows if r["key"] != "01" or r["size"] > 1])
    rewrite_index(dst, on_key("01", size=6))
    refused_everywhere(dst, "01", tmp_path / "out", "samples.parquet", repr(shard), "verify")


@pytest.mark.parametrize(
    "change",
    [
        {"header_offset": -512},
        {"data_offset": -1},
        {"size": -3},
        {"data_offset": 0},  # before its own header
        {"header_offset": 1 << 40, "data_offset": (1 << 40) + 512},  # past the shard's end
        {"size": 1 << 40},  # its data past the shard's end
        {"header_offset": None},
    ],
    ids=repr,
)
def test_find_refuses_offsets_and_sizes_outside_the_shard(change, tmp_path):
    """Offsets and sizes that are negative, out of order or past the shard's recorded size:
    ``find`` prints none of them, ``cat`` reads nothing."""
    dst = sharded(tmp_path)
    rewrite_index(dst, on_member("01.jpg", **change))
    refused_everywhere(dst, "01", tmp_path / "out", "samples.parquet", "'01'", "verify")


@pytest.mark.parametrize(
    "change",
    [{"frame_offset": -1}, {"frame_size": -5}, {"frame_size": 0}, {"frame_offset": 1 << 40}],
    ids=repr,
)
def test_find_refuses_frames_outside_a_tar_zst_shard(change, tmp_path):
    dst = sharded(tmp_path, ".tar.zst")
    rewrite_index(dst, on_key("01", **change))
    refused_everywhere(dst, "01", tmp_path / "out", "samples.parquet", "'01'", "verify")


@pytest.mark.parametrize(
    "ext", [".tar", ".tar.gz", ".zip", ".tar.lz4", ".tar.zst", ".zip deflated"]
)
@pytest.mark.parametrize("size", [10, 3001 + 512])
def test_cat_refuses_a_size_the_shard_does_not_hold(ext, size, tmp_path):
    """A row's ``size`` changed (smaller, or larger by a tar block): the member's header (a
    tar's size field, a zip's sizes) or the bytes read forward say otherwise — one line, exit
    1, nothing written. (Only the data: ``find`` reads no shard.)"""
    ext, _, deflated = ext.partition(" ")
    dst = sharded(tmp_path, ext, *(["--zip-compression", "deflated"] if deflated else []))
    rewrite_index(dst, on_member("01.jpg", size=size))
    out = tmp_path / "out"
    for args in (("-o", out), ()):
        assert_error(invoke_ishard("cat", dst, "01", *args), 1, "'01.jpg'", str(size), "verify")
    assert not out.exists()


@pytest.mark.parametrize("ext", [".tar", ".zip", ".tar.zst"])
def test_cat_refuses_a_member_name_the_header_does_not_carry(ext, tmp_path):
    """A row renamed to another name (here one that merely ends the real one, or a prefix of
    it): the header at its offset names another member."""
    dst = sharded(tmp_path, ext)
    for wrong in ("1.jpg", "01.jp"):
        rewrite_index(dst, on_member("01.jpg" if wrong == "1.jpg" else "1.jpg", member=wrong))
        line = assert_error(invoke_ishard("cat", dst, "01"), 1, repr(wrong), "verify")
        assert "header" in line


def test_a_key_in_two_shards_or_a_member_twice_is_refused(tmp_path):
    dst = sharded(tmp_path)
    rows = pyarrow.parquet.read_table(dst / "samples.parquet").to_pylist()
    other = next(r["shard"] for r in rows if r["key"] == "03")
    assert other != next(r["shard"] for r in rows if r["key"] == "01")
    rewrite_index(dst, on_member("01.cls", shard=other))
    refused_everywhere(dst, "01", tmp_path / "out", "samples.parquet", "'01'", "two shards")
    rewrite_index(
        dst, on_member("01.cls", shard=next(r["shard"] for r in rows if r["key"] == "01"))
    )
    assert invoke_ishard("find", dst, "01").returncode == 0
    rewrite_index(dst, lambda rs: [*rs, next(r for r in rs if r["member"] == "01.jpg")])
    refused_everywhere(dst, "01", tmp_path / "out", "samples.parquet", "'01.jpg'", "twice")


def test_find_escapes_control_characters_and_json_stays_exact(tmp_path):
    """Names from the index with an OSC sequence and a newline: the text output escapes them
    (one line a sample, no escape character); ``--json`` keeps them exact."""
    dst = sharded(tmp_path)
    evil = "01\x1b]0;owned\x07\nfake line.jpg"
    rewrite_index(dst, on_member("01.jpg", member=evil))
    done = invoke_ishard("find", dst, "01", "00")
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["01", "00"]
    assert "01\\x1b]0;owned\\x07\\x0afake line.jpg" in lines[0]
    as_json = json.loads(invoke_ishard("find", dst, "01", "--json").stdout)
    assert evil in [m["member"] for m in as_json["samples"][0]["members"]]


def test_the_api_takes_one_key_or_an_iterable_of_keys_and_refuses_other_types(tmp_path):
    dst = sharded(tmp_path)
    found, missing = ishard.find(dst, "01")
    assert [f.key for f in found] == ["01"] and missing == []
    found, missing = ishard.find(dst, (k for k in ("02", "nope")))
    assert [f.key for f in found] == ["02"] and missing == ["nope"]
    for bad in (1, b"01", None, ["01", 2], [b"01"], [None], {"01": 1.5}.values()):
        with pytest.raises(UsageError, match="keys"):
            ishard.find(dst, bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="found"):
        ishard.read_sample(dst, "01")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "column, kind",
    [
        ("key", pyarrow.int64()),
        ("shard", pyarrow.int64()),
        ("header_offset", pyarrow.string()),
        ("size", pyarrow.float64()),
    ],
    ids=str,
)
def test_an_index_of_other_column_types_is_refused_in_one_line(column, kind, tmp_path):
    """A column of another type than ishard writes: one line naming samples.parquet, exit 1,
    no engine error."""
    dst = sharded(tmp_path)
    table = pyarrow.parquet.read_table(dst / "samples.parquet")
    values = table.column(column)
    if column == "shard":
        values = pyarrow.array([7] * table.num_rows)
    at = table.schema.get_field_index(column)
    replace_index(dst, table.set_column(at, column, values.cast(kind)))
    asked = "1" if column == "key" else "01"
    assert_error(invoke_ishard("find", dst, asked), 1, "samples.parquet", "verify")
    assert_error(invoke_ishard("cat", dst, asked, "-o", tmp_path / "out"), 1, "samples.parquet")


@pytest.mark.parametrize("ext", [".tar", ".tar.zst", ".tar.gz"])
def test_a_sample_whose_names_are_not_utf8_is_found_and_read(ext, tmp_path):
    """A local file name with a byte that is not UTF-8: the index holds it escaped (``\\xff``);
    ``find`` looks the key up as the index holds it, and ``cat -o`` writes the member under its
    own name with its bytes (the header's name, not the escaped one)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / os.fsdecode(b"caf\xff.jpg")).write_bytes(b"jpeg bytes")
    (src / os.fsdecode(b"caf\xff.cls")).write_bytes(b"7")
    dst = tmp_path / "dst"
    done = invoke_ishard("shard", src, dst, "--ext", ext, "--member-names", "original")
    assert done.returncode == 0, done.stderr
    key = os.fsdecode(b"caf\xff")
    found, missing = ishard.find(dst, key)
    assert missing == [] and [f.key for f in found] == [key]
    read = {m.member: body for m, body in ishard.read_sample(dst, found[0])}
    assert read == {os.fsdecode(b"caf\xff.cls"): b"7", os.fsdecode(b"caf\xff.jpg"): b"jpeg bytes"}
    done = invoke_ishard("cat", dst, key, "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / os.fsdecode(b"caf\xff.jpg")).read_bytes() == b"jpeg bytes"
