"""What ``ishard find`` tells a person: each sample's bytes as an HTTP range (``bytes=first-last``,
the last byte included) that curl reads out of the shard as exactly that sample; a key the
index does not hold named in one line with the keys it holds nearest to it (each of which
``find`` then finds), the keys counted as given, and advice whose command, run as shown with
what ishard installed, shows the index's keys."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import zstandard
from helpers import invoke_ishard, make_tree

TREE: dict[str, bytes | int] = {
    **{f"train/n{i:04d}.jpg": 1500 + 101 * i for i in range(20)},
    **{f"train/n{i:04d}.cls": f"{i % 4}\n".encode() for i in range(20)},
}
RANGE = re.compile(r"^(\S+)  (\S+)  bytes=(\d+)-(\d+)( \(zstd frames\))?  (.+)$")
ZSTD_FRAME = (0xFD2FB528).to_bytes(4, "little")
SKIPPABLE_FRAME = (0x184D2A5E).to_bytes(4, "little")  # the seek table's
NEAR = re.compile(r"'([^']+)' \(nearest: ([^)]+)\)")


def sharded(tmp_path: Path, *more: str) -> tuple[Path, Path]:
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    done = invoke_ishard("shard", src, dst, "--shard-size", "8KiB", "--no-progress", *more)
    assert done.returncode == 0, done.stderr
    return src, dst


def error_line(done) -> str:
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("ishard: error: "), line
    return line.removeprefix("ishard: error: ")


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl reads the printed range")
@pytest.mark.parametrize("ext", [".tar", ".tar.zst"])
def test_the_byte_range_is_the_first_and_last_byte_as_http_reads_them(ext, tmp_path):
    """``curl --range FIRST-LAST`` of the shard (a range as an HTTP Range header takes it)
    returns the sample's headers and data, padding included, and nothing of the next one:
    tarfile reads exactly its members, with the source files' bytes (a ``.tar.zst``'s
    frames decompressed first)."""
    src, dst = sharded(tmp_path, "--ext", ext)
    keys = [f"n{i:04d}" for i in range(20)]
    done = invoke_ishard("find", dst, *keys)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(keys)
    for line in lines:
        matched = RANGE.match(line)
        assert matched, line
        key, shard, first, last, frames, members = matched.groups()
        assert bool(frames) == (ext == ".tar.zst")
        got = subprocess.run(
            ["curl", "--silent", "--fail", "--range", f"{first}-{last}", (dst / shard).as_uri()],
            capture_output=True,
            check=True,
        ).stdout
        assert len(got) == int(last) - int(first) + 1
        after = (dst / shard).read_bytes()[int(last) + 1 :]
        if frames:  # whole frames: the next one (or the seek table's frame) starts after it
            assert after[:4] in (ZSTD_FRAME, SKIPPABLE_FRAME), after[:4]
        else:  # whole 512-byte tar blocks
            assert len(got) % 512 == 0
        if frames:
            got = (
                zstandard.ZstdDecompressor()
                .stream_reader(io.BytesIO(got), read_across_frames=True)
                .read()
            )
        with tarfile.open(fileobj=io.BytesIO(got)) as tar:
            held = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
        assert sorted(held) == sorted(members.split(", ")) == [f"{key}.cls", f"{key}.jpg"]
        for name, data in held.items():
            assert data == (src / "train" / name).read_bytes(), name


def test_a_missing_key_is_named_with_the_keys_the_index_holds_nearest_to_it(tmp_path):
    """A typo at the end, a key given with its extension, a key without its folder: each is
    named with the key meant first among the nearest, and ``find`` finds every key named
    nearest; a key like none of them is named alone."""
    _, dst = sharded(tmp_path, "--sample-key-pattern", "full_name")
    meant = {
        "train/n0007x": "train/n0007",
        "train/n0012.jpg": "train/n0012",
        "n0015": "train/n0015",
    }
    done = invoke_ishard("find", dst, *meant, "nothing-like-it")
    line = error_line(done)
    assert line.startswith("none of the 4 sample keys is in the sample index: "), line
    named = dict(NEAR.findall(line))
    assert set(named) == set(meant)
    for asked, near in named.items():
        suggested = re.findall(r"'([^']+)'", near)
        assert suggested[0] == meant[asked], line
        assert invoke_ishard("find", dst, *suggested).returncode == 0, suggested
    assert ", 'nothing-like-it' — " in line
    assert error_line(invoke_ishard("cat", dst, "train/n0007x", "-o", tmp_path / "o")) == (
        "sample key 'train/n0007x' is not in the sample index; the nearest it holds: "
        + named["train/n0007x"]
        + line[line.index(" — ") :]
    )


def test_missing_keys_are_counted_as_given_and_the_advice_runs(tmp_path):
    """One key alone is named as one; a key given twice counts once (the line says the keys
    are distinct ones); none found says none. The command the line names, run with the
    Python that runs ishard, prints keys the index holds."""
    _, dst = sharded(tmp_path)
    index = dst / "samples.parquet"
    show = (
        f"""python -c 'import duckdb, sys; duckdb.read_parquet(sys.argv[1]).project("key")"""
        f""".show()' {index}"""
    )
    one = error_line(invoke_ishard("find", dst, "zzz"))
    assert one == f"sample key 'zzz' is not in the sample index — see the keys it holds with {show}"
    twice = invoke_ishard("find", dst, "zzz", "n0003", "zzz")
    assert twice.stdout.split()[0] == "n0003"
    assert error_line(twice).startswith(
        "1 of 2 distinct sample keys is not in the sample index: 'zzz' — "
    )
    assert error_line(invoke_ishard("find", dst, "n0003", "zzz", "yyy")).startswith(
        "2 of 3 sample keys are not in the sample index: 'zzz', 'yyy' — "
    )
    assert error_line(invoke_ishard("find", dst, "zzz", "yyy")).startswith(
        "none of the 2 sample keys is in the sample index: 'zzz', 'yyy' — "
    )
    command = one[one.index("python -c ") :].replace("python", sys.executable, 1)
    ran = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"\bn00\d\d\b", ran.stdout), ran.stdout
