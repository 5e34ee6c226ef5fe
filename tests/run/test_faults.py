"""A destination that fills up (ENOSPC): a clear exit 1, no partial shard under a final name,
and --resume finishes the job once there is room. The full disk is a real 320 KiB tmpfs,
mounted in a private mount namespace (``unshare``), so nothing outside the test sees it."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from helpers import DATASET_RECORDS, in_private_namespace, make_tree

# four samples of ~100 KB: with 100KB shards, four shards; only about two fit in 320 KiB
TREE = {f"s/{i}.bin": bytes([i]) * 100_000 for i in range(4)}
SCRIPT = """
set -u
mount -t tmpfs -o size={size} ishard-full "$DST" || exit 99
if [ -n "$SEED" ]; then cp -a "$SEED/." "$DST/"; fi
"$PY" -m ishard shard "$SRC" "$DST" --shard-size 100KB --no-progress --member-names original {extra} 2> "$ERR"
echo $? > "$RC"
cp -a "$DST/." "$COPY/"
"""


def run_on_small_disk(
    tmp_path: Path, size: str, extra: str = "", run: str = "run", seed: Path | None = None
) -> tuple:
    """Run ishard into a tmpfs of ``size`` mounted on DST (private mount namespace) that
    starts with ``seed``'s files; return (exit code, stderr, what DST held at the end —
    copied out before the namespace ends)."""
    src = tmp_path / "src"
    if not src.exists():
        make_tree(src, TREE)
    dst, copy = tmp_path / f"{run}-dst", tmp_path / f"{run}-copy"
    dst.mkdir(exist_ok=True)
    copy.mkdir()
    env = {
        "SRC": str(src),
        "DST": str(dst),
        "COPY": str(copy),
        "ERR": str(tmp_path / f"{run}.err"),
        "SEED": str(seed or ""),
    }
    in_private_namespace(
        SCRIPT.format(size=size, extra=extra),
        env,
        tmp_path / f"{run}.rc",
        "cannot mount a tmpfs in a private namespace",
    )
    rc = int((tmp_path / f"{run}.rc").read_text())
    return rc, (tmp_path / f"{run}.err").read_text(), copy


def test_a_full_destination_fails_cleanly_and_resume_finishes(tmp_path):
    rc, err, held = run_on_small_disk(tmp_path, "320k")
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ishard: error: cannot write ")
    assert "No space left on device" in lines[0] and "--resume" in lines[0]
    names = sorted(p.name for p in held.iterdir())
    assert "manifest.json" not in names
    shards = [n for n in names if n.endswith(".tar")]
    assert not [n for n in names if "ishard-tmp" in n]
    assert 1 <= len(shards) < 4
    for name in shards:  # whatever has a final name is a whole shard
        with tarfile.open(held / name) as tar:
            for member in tar.getmembers():
                assert tar.extractfile(member).read() == TREE[member.name]
    # more room, the same destination content: --resume keeps those shards, writes the rest
    rc, err, final = run_on_small_disk(tmp_path, "2m", "--resume", run="again", seed=held)
    assert rc == 0, err
    reference = tmp_path / "reference"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ishard",
            "shard",
            str(tmp_path / "src"),
            str(reference),
            "--shard-size",
            "100KB",
            "--no-progress",
            "--member-names",
            "original",
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    expected = {p.name: p.read_bytes() for p in reference.glob("*.tar")}
    assert len(expected) == 4
    assert {p.name: p.read_bytes() for p in final.glob("*.tar")} == expected
    assert sorted(p.name for p in final.iterdir()) == sorted([*expected, *DATASET_RECORDS])
