"""Shards of every format read back with the real tools: tarfile, zipfile, lz4, GNU tar, unzip.

Nothing here reads a shard with ishard's own code: archives are opened with the standard
library, the ``lz4`` package and the system tools, and tar headers are decoded by hand.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import re
import subprocess
import tarfile
import time
import zipfile
import zlib
from pathlib import Path

import pytest
from helpers import SMALL_TREE as TREE
from helpers import TAR_CODECS, invoke_ishard, make_tree, read_shard, shard_files, stem, tar_stream

from ishard.formats import ARCHIVE_EXTS, FORMATS

EXTS = ARCHIVE_EXTS  # every extension of every format ishard writes
TAR_EXTS = tuple(e for f in FORMATS if f.container.name == "tar" for e in f.exts)
MTIME = 1_700_000_000  # make_tree's default mtime
# Members are checked against the source tree by path: these runs keep source paths.
ORIGINAL = ("--member-names", "original")
TOOL_ENV = {**os.environ, "LC_ALL": "C.UTF-8", "TZ": "UTC"}


# ---------------------------------------------------------------- helpers


def source_files(src: Path) -> dict[str, bytes]:
    """Every regular file under ``src`` by its '/'-separated relative name."""
    out = {}
    for path in sorted(src.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[path.relative_to(src).as_posix()] = path.read_bytes()
    return out


def tar_infos(path: Path) -> list[tarfile.TarInfo]:
    """tarfile's view of every member's header."""
    with tarfile.open(fileobj=io.BytesIO(tar_stream(path))) as tar:
        return tar.getmembers()


def check_samples_whole(shards: dict[str, list[str]]) -> None:
    """Each sample's files sit in one shard, next to each other, in name order."""
    home: dict[str, str] = {}
    for shard, names in shards.items():
        runs: list[tuple[str, list[str]]] = []
        for name in names:
            key = stem(name)
            if runs and runs[-1][0] == key:
                runs[-1][1].append(name)
            else:
                runs.append((key, [name]))
        for key, files in runs:
            assert key not in home, f"sample {key!r} is in {home[key]} and again in {shard}"
            home[key] = shard
            assert files == sorted(files, key=lambda n: n.encode()), (shard, files)


def run_tool(*args: str, allow: tuple[bytes, ...] = ()) -> subprocess.CompletedProcess:
    """Run a system tool in a UTF-8 locale; fail on a non-zero exit or stderr (but ``allow``)."""
    done = subprocess.run(list(args), check=False, capture_output=True, env=TOOL_ENV, timeout=120)
    assert done.returncode == 0, (args, done.stderr.decode(errors="replace"))
    noise = [line for line in done.stderr.splitlines() if line not in allow]
    assert noise == [], (args, done.stderr.decode(errors="replace"))
    return done


def tool_list(path: Path, verbose: bool = False) -> list[str]:
    """Member lines as GNU tar (``-t``/``-tv``) or unzip (``-Z1``) prints them."""
    flag = "-tvf" if verbose else "-tf"
    if path.name.endswith(".zip"):
        out = run_tool("unzip", "-Z1", str(path)).stdout
    elif path.name.endswith(".tar.lz4"):
        script = f'set -o pipefail; lz4 -dc "$1" | tar {flag} -'
        out = run_tool("bash", "-c", script, "_", str(path)).stdout
    elif path.name.endswith((".tgz", ".tar.gz")):
        out = run_tool("tar", "-z" + flag[1:], str(path)).stdout
    elif path.name.endswith(".tar.zst"):
        out = run_tool("tar", "--zstd", flag, str(path)).stdout
    else:
        out = run_tool("tar", flag, str(path)).stdout
    return out.decode("utf-8").splitlines()


def tool_extract(path: Path, dest: Path, allow: tuple[bytes, ...] = ()) -> None:
    """Extract a shard into ``dest`` with GNU tar (``--zstd`` too), ``lz4 -dc | tar -x`` or
    unzip."""
    dest.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".zip"):
        run_tool("unzip", "-t", "-q", str(path))
        run_tool("unzip", "-o", "-q", str(path), "-d", str(dest))
    elif path.name.endswith(".tar.lz4"):
        script = 'set -o pipefail; lz4 -dc "$1" | tar -x -C "$2"'
        run_tool("bash", "-c", script, "_", str(path), str(dest), allow=allow)
    elif path.name.endswith((".tgz", ".tar.gz")):
        run_tool("tar", "-xzf", str(path), "-C", str(dest), allow=allow)
    elif path.name.endswith(".tar.zst"):
        run_tool("tar", "--zstd", "-xf", str(path), "-C", str(dest), allow=allow)
    else:
        run_tool("tar", "-xf", str(path), "-C", str(dest), allow=allow)


def parse_number(field: bytes) -> int:
    """A tar numeric field: octal text, or GNU base-256 when the top bit is set."""
    if field[0] & 0x80:
        return int.from_bytes(field[1:], "big")
    text = field.rstrip(b"\0 ").strip()
    return int(text or b"0", 8)


def raw_entries(data: bytes) -> list[tuple[bytes, bytes]]:
    """(512-byte header, body) of every tar entry, pax headers included; checks the trailer."""
    entries, off = [], 0
    while True:
        assert off + 512 <= len(data), "archive ends without the two zero end blocks"
        block = data[off : off + 512]
        if block == bytes(512):
            break
        stored = int(block[148:154], 8)
        assert stored == sum(block[:148]) + 8 * 32 + sum(block[156:]), "bad header checksum"
        size = parse_number(block[124:136])
        entries.append((block, data[off + 512 : off + 512 + size]))
        off += 512 + size + (-size % 512)
    assert data[off : off + 1024] == bytes(1024), "no two zero end blocks"
    assert set(data[off:]) <= {0}, "non-zero bytes after the end blocks"
    return entries


def pax_records(body: bytes) -> dict[bytes, bytes]:
    """Decode pax records strictly: each '<len> <key>=<value>\\n' must be exactly <len> bytes."""
    out, pos = {}, 0
    while pos < len(body):
        space = body.index(b" ", pos)
        length = int(body[pos:space])
        record = body[pos : pos + length]
        assert record.endswith(b"\n"), f"pax record length {length} is wrong: {record!r}"
        key, _, value = record[space - pos + 1 : -1].partition(b"=")
        out[key] = value
        pos += length
    return out


def header_name(block: bytes) -> bytes:
    """prefix/name of a ustar header."""
    name = block[0:100].rstrip(b"\0")
    prefix = block[345:500].rstrip(b"\0")
    return prefix + b"/" + name if prefix else name


def shard_tree(tmp: Path, files: dict, *args: str) -> tuple[Path, Path]:
    """Make ``files`` under tmp/src, shard them with the CLI into tmp/dst; return (src, dst)."""
    src = make_tree(tmp / "src", files)
    dst = tmp / "dst"
    done = invoke_ishard("shard", *ORIGINAL, src, dst, "--no-progress", *args)
    assert done.returncode == 0, done.stderr
    return src, dst


# ---------------------------------------------------------------- round trips, every format


@pytest.fixture(scope="module", params=EXTS)
def sharded(request, tmp_path_factory):
    """TREE sharded with 4 KiB shards in one format: (ext, src, dst)."""
    tmp = tmp_path_factory.mktemp("fmt" + request.param.replace(".", "_"))
    src, dst = shard_tree(tmp, TREE, "--ext", request.param, "--shard-size", "4KiB")
    return request.param, src, dst


EXPECTED_SHARDS = [  # computed by hand from TREE's sizes, 4 KiB greedy packing, listing order
    ["ann/0001.xml", "train/a/0001.cls", "train/a/0001.jpg", "train/a/0001.json", "big/0005.bin"],
    ["binary/0004.bin"],
    ["top.txt", "train/a/0002.jpg", "train/a/0002.json", "train/b/0003.jpg", "train/b/0003.json"],
    ["ключ.txt"],
]


def test_python_readers_get_every_file_back_byte_identical(sharded):
    ext, src, dst = sharded
    source = source_files(src)
    shards = shard_files(dst)
    assert [p.name for p in shards] == [f"shard-{i:06d}{ext}" for i in range(4)]
    seen: dict[str, bytes] = {}
    by_shard = {}
    for path in shards:
        members = read_shard(path)
        by_shard[path.name] = [name for name, _ in members]
        for name, data in members:
            assert name not in seen, f"{name!r} is in two shards"
            seen[name] = data
    assert seen.keys() == source.keys()
    for name, data in source.items():
        assert seen[name] == data, name
    check_samples_whole(by_shard)
    assert list(by_shard.values()) == EXPECTED_SHARDS


def test_system_tools_list_and_extract_byte_identical(sharded, tmp_path):
    ext, src, dst = sharded
    out = tmp_path / "x"
    by_shard = {}
    for path in shard_files(dst):
        names = tool_list(path)
        assert names == [name for name, _ in read_shard(path)]
        by_shard[path.name] = names
        tool_extract(path, out)
    check_samples_whole(by_shard)
    assert source_files(out) == source_files(src)
    for name in TREE:
        got = os.stat(out / name).st_mtime
        # GNU tar restores the exact mtime; zip keeps 2-second DOS time (UTC by ishard's rule)
        assert got == (MTIME if ext != ".zip" else MTIME - MTIME % 2), name


@pytest.mark.parametrize("ext", TAR_EXTS)
def test_tar_members_are_plain_ustar_with_fixed_metadata(ext, tmp_path):
    ordinary = {k: v for k, v in TREE.items() if k.isascii()}  # ASCII names of <= 100 bytes
    files = {**ordinary, "fraction/0009.jpg": 10}
    src = make_tree(tmp_path / "src", files)
    os.utime(src / "fraction/0009.jpg", ns=(0, 1_700_000_001_750_000_000))
    dst = tmp_path / "dst"
    done = invoke_ishard(
        "shard", *ORIGINAL, src, dst, "--ext", ext, "--shard-size", "4KiB", "--no-progress"
    )
    assert done.returncode == 0, done.stderr
    expected_mtime = {name: MTIME for name in ordinary} | {"fraction/0009.jpg": 1_700_000_001}
    names = []
    for path in shard_files(dst):
        for block, _ in raw_entries(tar_stream(path)):
            name = header_name(block).decode()
            names.append(name)
            assert block[156:157] == b"0", (name, block[156:157])  # no pax, no GNU long names
            assert block[257:263] == b"ustar\0" and block[263:265] == b"00", name
            assert parse_number(block[100:108]) == 0o644, name
            assert parse_number(block[108:116]) == 0 and parse_number(block[116:124]) == 0
            assert block[265:297] == bytes(32) and block[297:329] == bytes(32), name
            assert parse_number(block[136:148]) == expected_mtime[name], name
        for info in tar_infos(path):
            assert info.pax_headers == {}, info.name
            assert (info.mode, info.uid, info.gid, info.uname, info.gname) == (0o644, 0, 0, "", "")
            assert info.mtime == expected_mtime[info.name]
        for line in tool_list(path, verbose=True):
            assert line.startswith("-rw-r--r-- 0/0 "), line
    assert sorted(names) == sorted(files)


# ---------------------------------------------------------------- long and non-ASCII names

SPLITTABLE = "d" * 60 + "/" + "e" * 50 + "/" + "f" * 40 + ".jpg"  # 156 bytes
EDGE_SPLIT = "p" * 155 + "/" + "n" * 96 + ".jpg"  # prefix exactly 155, name exactly 100
EXACTLY_100 = "q" * 96 + ".jpg"
LONG_BASENAME = "dir/" + "x" * 116 + ".jpg"  # a 120-byte last element cannot go in 100 bytes
LONG_PREFIX = "a" * 160 + "/b.jpg"  # the only '/' is past byte 155
NON_ASCII = ["données/été.jpg", "ключ.txt", "emoji/🙂.json"]
PLAIN_NAMES = [SPLITTABLE, EDGE_SPLIT, EXACTLY_100]
PAX_NAMES = [LONG_BASENAME, LONG_PREFIX, *NON_ASCII]


@pytest.mark.parametrize("ext", TAR_EXTS)
def test_long_and_non_ascii_names_round_trip_with_pax_only_when_needed(ext, tmp_path):
    names = PLAIN_NAMES + PAX_NAMES
    files = {name: f"content of {name}".encode() for name in names}
    src, dst = shard_tree(tmp_path, files, "--ext", ext)
    members, pax_for, infos, listed = [], {}, {}, []
    out = tmp_path / "x"
    for path in shard_files(dst):
        pending = None
        in_shard = []
        for block, body in raw_entries(tar_stream(path)):
            if block[156:157] == b"x":
                assert pending is None
                pending = pax_records(body)
                continue
            assert block[156:157] == b"0"
            assert block[257:265] == b"ustar\x0000"
            if pending is None:
                name = header_name(block).decode()
            else:
                name = pending[b"path"].decode()
                pax_for[name] = pending
            in_shard.append(name)
            pending = None
        members += in_shard
        assert [n for n, _ in read_shard(path)] == in_shard
        infos.update((i.name, i) for i in tar_infos(path))
        listed += tool_list(path)
        tool_extract(path, out)
    assert sorted(members, key=str.encode) == sorted(names, key=str.encode)
    assert set(pax_for) == set(PAX_NAMES), "pax headers exactly for names that need them"
    for name, records in pax_for.items():
        assert records == {b"path": name.encode()}, name
    assert set(infos) == set(names)
    for name in PLAIN_NAMES:
        assert infos[name].pax_headers == {}, name
    for name in PAX_NAMES:
        assert infos[name].pax_headers == {"path": name}, name
    assert sorted(listed, key=str.encode) == sorted(names, key=str.encode)
    assert source_files(out) == source_files(src)


@pytest.mark.parametrize("ext", [".tar", ".tar.lz4"])
def test_non_utf8_name_round_trips_as_bytes_with_gnu_tar(ext, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    raw = b"caf\xe9.txt"  # Latin-1, not valid UTF-8
    with open(os.path.join(os.fsencode(src), raw), "wb") as f:
        f.write(b"latin-1 name")
    dst = tmp_path / "dst"
    done = invoke_ishard("shard", *ORIGINAL, src, dst, "--ext", ext, "--no-progress")
    assert done.returncode == 0, done.stderr
    (path,) = shard_files(dst)
    ((block, body), (_, data)) = raw_entries(tar_stream(path))
    assert block[156:157] == b"x"
    assert pax_records(body) == {b"hdrcharset": b"BINARY", b"path": raw}
    assert data == b"latin-1 name"
    out = tmp_path / "x"
    # GNU tar 1.34 does not know POSIX's hdrcharset keyword (Python's tarfile writes it too);
    # it says so and still restores the name byte for byte
    tool_extract(path, out, allow=(b"tar: Ignoring unknown extended header keyword 'hdrcharset'",))
    assert os.listdir(os.fsencode(out)) == [raw]
    assert (out / os.fsdecode(raw)).read_bytes() == b"latin-1 name"


# ---------------------------------------------------------------- out-of-range numbers


def test_mtimes_outside_the_ustar_range_use_pax_and_zip_clamps(tmp_path):
    before_1970, after_2242 = -5, 8**11 + 7
    files = {"old/1.txt": b"old", "new/2.txt": b"new", "now/3.txt": b"now"}
    src = make_tree(tmp_path / "src", files)
    os.utime(src / "old/1.txt", (before_1970, before_1970))
    try:
        os.utime(src / "new/2.txt", (after_2242, after_2242))
    except (OSError, OverflowError):
        pytest.skip("this filesystem cannot hold a year-2242 mtime")
    if os.stat(src / "new/2.txt").st_mtime != after_2242:
        pytest.skip("this filesystem cannot hold a year-2242 mtime")
    for ext in (".tar", ".zip"):
        done = invoke_ishard(
            "shard", *ORIGINAL, src, tmp_path / ext[1:], "--ext", ext, "--no-progress"
        )
        assert done.returncode == 0, done.stderr
    (tar_path,) = shard_files(tmp_path / "tar")
    mtimes = {i.name: i.mtime for i in tar_infos(tar_path)}
    assert mtimes == {"old/1.txt": before_1970, "new/2.txt": after_2242, "now/3.txt": MTIME}
    pax = {}
    pending = None
    for block, body in raw_entries(tar_path.read_bytes()):
        if block[156:157] == b"x":
            pending = pax_records(body)
        else:
            pax[header_name(block).decode()] = pending
            pending = None
    assert pax == {
        "old/1.txt": {b"mtime": b"-5"},
        "new/2.txt": {b"mtime": str(after_2242).encode()},
        "now/3.txt": None,
    }
    listing = run_tool("tar", "--full-time", "--utc", "-tvf", str(tar_path)).stdout.decode()
    assert "1969-12-31 23:59:55 old/1.txt" in listing
    assert time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(after_2242)) + " new/2.txt" in listing
    (zip_path,) = shard_files(tmp_path / "zip")
    with zipfile.ZipFile(zip_path) as zf:
        dates = {i.filename: i.date_time for i in zf.infolist()}
    assert dates == {
        "old/1.txt": (1980, 1, 1, 0, 0, 0),
        "new/2.txt": (2107, 12, 31, 23, 59, 58),
        "now/3.txt": time.gmtime(MTIME)[:6],
    }


def test_member_of_8gib_or_more_has_a_size_gnu_tar_and_tarfile_read(tmp_path):
    """The header alone, for every tar flavour of shard: ishard's header for an 8 GiB + 1
    member is placed in a sparse archive (the data is a hole), and the real readers must find
    the member's size and the end of the archive. The CLI run is the test after this one."""
    from ishard.formats.tar import member_header

    size = 8 * 1024**3 + 1
    head = member_header("big/huge.bin", size, MTIME)
    path = tmp_path / "huge.tar"
    with open(path, "wb") as f:
        f.write(head)
        data_end = len(head) + size
        f.truncate(data_end + (-size % 512))
        f.seek(0, os.SEEK_END)
        f.write(b"\0" * 1024)
    own = head[-512:]
    assert own[257:265] == b"ustar\x0000"
    assert parse_number(own[124:136]) == size
    with tarfile.open(path) as tar:
        (info,) = tar.getmembers()
    assert (info.name, info.size, info.mtime) == ("big/huge.bin", size, MTIME)
    listing = tool_list(path, verbose=True)
    assert len(listing) == 1 and f" {size} " in listing[0] and listing[0].endswith(" big/huge.bin")


def test_member_of_8gib_or_more_round_trips_through_the_cli(tmp_path):
    """Issue 5: a sparse 8 GiB + 1 byte source file, sharded by the CLI and read back by the
    lz4 tool, GNU tar and tarfile: the member's size is exact, its first and last bytes are
    where they belong, and the member after it (same sample) starts where the size says.

    ``.tar.lz4`` keeps the shard small (the zeros compress ~250:1), ``--checksum none`` spares
    an md5 over 8 GiB, and ``lz4 -d --sparse`` decodes every byte once into a sparse tar that
    GNU tar and tarfile then seek through: about 20 s in all, where piping 8 GiB through
    ``tar -tv`` and tarfile as well would take over a minute."""
    size = 8 * 1024**3 + 1  # one byte more than a ustar size field holds
    after = b"the member after the big one\n"
    src = make_tree(tmp_path / "src", {"big/huge.txt": after})
    huge = src / "big" / "huge.bin"
    with open(huge, "wb") as f:
        f.write(b"HEAD")
        f.truncate(size - 4)
        f.seek(0, os.SEEK_END)
        f.write(b"TAIL")
    os.utime(huge, (MTIME, MTIME))
    if huge.stat().st_size != size or huge.stat().st_blocks * 512 > 1 << 20:
        pytest.skip("the filesystem under the test folder has no sparse files")
    dst = tmp_path / "dst"
    done = invoke_ishard(
        "shard", *ORIGINAL, src, dst, "--ext", ".tar.lz4", "--checksum", "none", "--no-progress"
    )
    assert done.returncode == 0, done.stderr
    (shard,) = shard_files(dst)
    assert shard.stat().st_size < 64 << 20
    plain = tmp_path / "plain.tar"
    run_tool("lz4", "-d", "-q", "--sparse", str(shard), str(plain))
    if plain.stat().st_blocks * 512 > 64 << 20:  # lz4 wrote the zeros out after all: drop them
        plain.unlink()
        pytest.fail("lz4 --sparse did not leave holes; 8 GiB were written to disk")
    listing = tool_list(plain, verbose=True)
    assert len(listing) == 2, listing
    assert f" {size} " in listing[0] and listing[0].endswith(" big/huge.bin"), listing
    assert f" {len(after)} " in listing[1] and listing[1].endswith(" big/huge.txt"), listing
    assert run_tool("tar", "-xOf", str(plain), "big/huge.txt").stdout == after
    with tarfile.open(plain) as tar:
        big, small = tar.getmembers()
        assert (big.name, big.size, big.mtime, big.isfile()) == ("big/huge.bin", size, MTIME, True)
        data = tar.extractfile(big)
        assert data.read(8) == b"HEAD\0\0\0\0"
        data.seek(size - 8)
        assert data.read() == b"\0\0\0\0TAIL"
        assert (small.name, small.size) == ("big/huge.txt", len(after))
        assert tar.extractfile(small).read() == after


# ---------------------------------------------------------------- gzip and lz4 wrappers


@pytest.mark.parametrize("ext", [".tgz", ".tar.gz"])
def test_gzip_wrapper_has_no_timestamp_or_file_name_and_gzip_accepts_it(ext, sharded_small):
    for path in shard_files(sharded_small(ext)):
        data = path.read_bytes()
        assert data[:3] == b"\x1f\x8b\x08"
        assert data[3] & 0x08 == 0, "gzip header carries a file name"
        assert data[4:8] == bytes(4), "gzip header carries a timestamp"
        run_tool("gzip", "-t", str(path))


def test_lz4_shards_pass_lz4_test(sharded_small):
    for path in shard_files(sharded_small(".tar.lz4")):
        run_tool("lz4", "-t", "-q", str(path))


@pytest.fixture
def sharded_small(tmp_path):
    """Shard a few files in a given format; return DST."""

    def make(ext: str, *args: str) -> Path:
        files = {"a/1.jpg": 3000, "a/1.txt": 40, "b/2.jpg": 5000, "c/3.bin": bytes(range(256))}
        _, dst = shard_tree(
            tmp_path / ext.replace(".", "_"), files, "--ext", ext, "--shard-size", "4KiB", *args
        )
        return dst

    return make


# ---------------------------------------------------------------- zip


@pytest.mark.parametrize(
    "args, method",
    [
        ((), zipfile.ZIP_STORED),
        (("--zip-compression", "deflated"), zipfile.ZIP_DEFLATED),
        (("--zip-compression", "deflated", "--compress-level", "9"), zipfile.ZIP_DEFLATED),
    ],
)
def test_zip_members_method_and_attributes(args, method, tmp_path):
    files = {**TREE, "zeros/0010.bin": bytes(50_000)}
    src, dst = shard_tree(tmp_path, files, "--ext", ".zip", "--shard-size", "4KiB", *args)
    out = tmp_path / "x"
    for path in shard_files(dst):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                assert info.compress_type == method, info.filename
                assert info.external_attr >> 16 == 0o100644, info.filename
                assert info.create_system == 3, info.filename
                assert not info.is_dir()
                if info.filename == "zeros/0010.bin":
                    stored = info.compress_size == info.file_size
                    assert stored == (method == zipfile.ZIP_STORED)
        zipinfo = run_tool("unzip", "-Z", str(path)).stdout.decode().splitlines()
        rows = [r for r in zipinfo if r.startswith("-")]
        assert rows and all(r.startswith("-rw-r--r--") for r in rows), rows
        assert "No errors detected" in run_tool("unzip", "-t", str(path)).stdout.decode()
        tool_extract(path, out)
    assert source_files(out) == source_files(src)


# ---------------------------------------------------------------- header builder


def test_packed_ustar_headers_equal_the_field_by_field_builder():
    """TarWriter packs common headers from a template; the bytes must not change."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ishard.formats.tar import TarWriter, member_header

    names = st.one_of(
        st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=120),
        st.lists(st.text("abcxyz._-", min_size=1, max_size=70), min_size=1, max_size=5).map(
            "/".join
        ),
        st.sampled_from(PLAIN_NAMES + PAX_NAMES),
    )

    class Sink:
        def __init__(self) -> None:
            self.data = bytearray()

        def write(self, data) -> None:
            self.data += data

        def close(self) -> None:
            pass

    @settings(max_examples=300, deadline=None)
    @given(names, st.integers(0, 8**11 + 5), st.integers(-5, 8**11 + 5))
    def check(name, size, mtime):
        sink = Sink()
        writer = TarWriter(sink)
        writer._header(name, size, mtime)
        writer._flush()
        assert bytes(sink.data) == member_header(name, size, mtime)
        assert writer.offset == len(sink.data)

    check()


# ---------------------------------------------------------------- gzip libraries


@pytest.mark.parametrize("library", ["isal", "zlib-ng", "zlib"])
@pytest.mark.parametrize("level", [None, "1", "9", "0"])
def test_every_gzip_library_writes_gzip_that_gnu_tar_and_tarfile_read(
    library, level, tmp_path, monkeypatch
):
    """The fastest installed gzip library is used; each must give valid, repeatable gzip."""
    import ishard
    from ishard.formats import compress

    pytest.importorskip(compress.GZIP_LIBRARIES[library])
    monkeypatch.setattr(compress, "GZIP_PREFERENCE", (library,))
    expected = "zlib" if level == "0" else library
    assert compress.gzip_library(int(level or 6))[0] == expected
    src = make_tree(tmp_path / "src", TREE)
    outs = []
    for run in ("one", "two"):
        ishard.shard(
            src,
            tmp_path / run,
            ext=".tgz",
            shard_size="4KiB",
            jobs=2,
            compress_level=None if level is None else int(level),
            member_names="original",
        )
        outs.append({p.name: p.read_bytes() for p in shard_files(tmp_path / run)})
    assert outs[0] == outs[1]
    extracted = tmp_path / "x"
    for path in shard_files(tmp_path / "one"):
        run_tool("gzip", "-t", str(path))
        tool_extract(path, extracted)
        assert [n for n, _ in read_shard(path)] == tool_list(path)
    assert source_files(extracted) == source_files(src)


def test_gzip_library_zlib_writes_exactly_pythons_zlib_bytes(tmp_path):
    """--gzip-library zlib pins the bytes: each shard is its tar stream through Python's own
    zlib at the level, gzip framing (wbits 31), whatever else is installed."""
    src = make_tree(tmp_path / "src", TREE)
    for level in ("6", "1"):
        out = tmp_path / f"out{level}"
        done = invoke_ishard(
            "shard",
            *ORIGINAL,
            src,
            out,
            "--ext",
            ".tgz",
            "--shard-size",
            "4KiB",
            "--gzip-library",
            "zlib",
            "--compress-level",
            level,
        )
        assert done.returncode == 0, done.stderr
        shards = shard_files(out)
        assert len(shards) > 1
        for path in shards:
            data = path.read_bytes()
            tar = gzip.decompress(data)
            z = zlib.compressobj(int(level), zlib.DEFLATED, 31)
            assert z.compress(tar) + z.flush() == data, path.name


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("pigz", "--gzip-library 'pigz' must be one of auto, isal, zlib-ng, zlib"),
    ],
)
def test_gzip_library_unknown_is_exit_2(value, needle, tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    done = invoke_ishard(
        "shard", *ORIGINAL, src, tmp_path / "out", "--ext", ".tgz", "--gzip-library", value
    )
    assert done.returncode == 2
    assert done.stderr == f"ishard: error: {needle}\n"
    assert not (tmp_path / "out").exists()


def test_gzip_library_not_installed_is_exit_2_with_the_install_command(tmp_path):
    from ishard.formats import compress

    missing = [n for n in ("isal", "zlib-ng") if compress._load(n) is None]
    if not missing:
        pytest.skip("isal and zlib-ng are both installed here")
    src = make_tree(tmp_path / "src", TREE)
    done = invoke_ishard(
        "shard", *ORIGINAL, src, tmp_path / "out", "--ext", ".tgz", "--gzip-library", missing[0]
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"ishard: error: --gzip-library {missing[0]!r} is not installed — pip install"
    )
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- the registry of formats

# (lowest, highest, default) --compress-level of each format that takes one, by its extension
LEVELS = {".tgz": (0, 9, 6), ".zip": (0, 9, None), ".tar.lz4": (0, 9, 0), ".tar.zst": (1, 22, 3)}


def test_the_tests_read_every_format_and_know_every_level_range():
    """A format added to the registry needs a reader here (TAR_CODECS, or zipfile for a zip)
    and its level range written down in LEVELS."""
    assert set(TAR_EXTS) == set(TAR_CODECS)
    assert all(e.endswith(".zip") for f in FORMATS if f.container.name == "zip" for e in f.exts)
    levelled = {
        f.exts[0]: (f.levels[0], f.levels[-1], f.default_level) for f in FORMATS if f.levels
    }
    assert levelled == LEVELS


@pytest.mark.parametrize("ext", sorted(LEVELS))
def test_each_format_writes_at_the_ends_of_its_levels_and_refuses_past_them(ext, tmp_path):
    """Both ends of a format's level range write shards the usual readers read; one past the
    top is exit 2 naming the range; no level writes what the default level writes."""
    import ishard

    low, high, default = LEVELS[ext]
    fmt = next(f for f in FORMATS if ext in f.exts)
    extra = {fmt.level_when[0]: fmt.level_when[1]} if fmt.level_when else {}
    src = make_tree(tmp_path / "src", TREE)
    for level in dict.fromkeys((low, high, None, default)):
        out = tmp_path / f"out{level}"
        ishard.shard(
            src,
            out,
            ext=ext,
            shard_size="4KiB",
            compress_level=level,
            member_names="original",
            **extra,
        )
        assert source_files(src) == dict(m for s in shard_files(out) for m in read_shard(s))
    if default is not None:
        assert snapshot_bytes(tmp_path / "outNone") == snapshot_bytes(tmp_path / f"out{default}")
    done = invoke_ishard(
        "shard", src, tmp_path / "past", "--ext", ext, "--compress-level", str(high + 1)
    )
    assert done.returncode == 2
    assert f"must be a whole number from {low} to {high}" in done.stderr


def snapshot_bytes(dst: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in shard_files(dst)}


def test_a_shard_name_finds_its_format_by_its_longest_extension():
    from ishard.formats import find_format

    assert {e: find_format(f"a/b{e}").exts[0] for e in EXTS} == {
        ".tar": ".tar",
        ".tgz": ".tgz",
        ".tar.gz": ".tgz",
        ".zip": ".zip",
        ".tar.lz4": ".tar.lz4",
        ".tar.zst": ".tar.zst",
    }
    assert find_format("x.rar") is None and find_format("x.tar.rar") is None


def continues(line: str) -> bool:
    """A docstring's Args entry goes on in the lines indented under its first."""
    return line.startswith(" " * 12)


def test_the_api_and_help_name_every_format_and_its_levels():
    """The API's docstrings list every extension and each format's levels; ``--ext`` offers
    every extension and ``--compress-level``'s help each format's levels."""
    import ishard
    from ishard.cli import cli

    params = {p.name: p for p in cli.commands["shard"].params}
    assert tuple(params["ext"].type.choices) == EXTS
    for function in (ishard.plan, ishard.shard):
        doc = function.__doc__
        ext_line = re.split(r"\n {8}(?=\S)", doc[doc.index("ext:") :])[0]  # to the next one
        assert all(f'``"{e}"``' in ext_line for e in EXTS), ext_line
        lines = doc.splitlines()
        at = next(i for i, line in enumerate(lines) if "compress_level:" in line)
        level_line = " ".join([lines[at], *itertools.takewhile(continues, lines[at + 1 :])])
        for f in FORMATS:
            if f.levels is not None:
                assert f.name in level_line and f.name in params["compress_level"].help
