"""The user guide's nightly job, run as printed for three nights from no destination: the first
makes the dataset, the second brings new samples and a changed label, the third nothing new.
Each night the dataset is read back with webdataset (through ``ishard ls --urls``), wids
(through the manifest) and ``ishard verify --deep``, and holds exactly the feed's samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    invoke_ishard,
    make_tree,
    read_wids,
    snapshot,
    source_samples,
    webdataset_samples,
)

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "user-guide.md"

# 36 samples of an image and a label, 30 to 41 KB each: with the script's 128KiB about 10 shards
FIRST = {
    **{f"img/{i:03d}.jpg": 30_000 + 900 * (i % 13) for i in range(36)},
    **{f"cls/{i:03d}.cls": 2 for i in range(36)},
}
LATER = {  # the second night's new samples: their names sort among the old ones
    **{f"img/{i:03d}a.jpg": 25_000 for i in range(3, 36, 7)},
    **{f"cls/{i:03d}a.cls": 3 for i in range(3, 36, 7)},
}


def nightly_script(feed: Path, shards: Path) -> str:
    """The guide's nightly script, its two folders replaced by ``feed`` and ``shards``."""
    text = GUIDE.read_text(encoding="utf-8").split("### A nightly job", 1)[1]
    script = text.split("```sh\n", 1)[1].split("```", 1)[0]
    assert "/data/feed" in script and "/data/shards" in script, script
    return script.replace("/data/feed", str(feed)).replace("/data/shards", str(shards))


def run_night(script: str) -> subprocess.CompletedProcess:
    """The script in a shell, with the ishard command of this Python first on the path."""
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISHARD_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["sh", "-c", script], check=False, capture_output=True, text=True, env=env, timeout=300
    )


def listed(shards: Path) -> list[str]:
    return [e["url"] for e in json.loads((shards / "manifest.json").read_bytes())["shardlist"]]


def check_readers(feed: Path, shards: Path, cache: Path) -> list[str]:
    """webdataset through the brace patterns ``ishard ls --urls`` prints, wids through the
    manifest and ``ishard verify --deep`` all find exactly the feed's samples; the patterns."""
    urls = invoke_ishard("ls", shards, "--urls")
    assert urls.returncode == 0, urls.stderr
    patterns = urls.stdout.splitlines()
    expected = source_samples(feed)
    assert webdataset_samples("::".join(patterns)) == expected
    assert read_wids(shards / "manifest.json", cache) == expected
    deep = invoke_ishard("verify", shards, "--deep")
    assert deep.returncode == 0 and deep.stdout.rstrip().endswith("all ok"), deep.stdout
    return patterns


@pytest.mark.skipif(sys.platform != "linux", reason="the guide's script is a POSIX shell script")
def test_the_guides_nightly_script_runs_three_nights_from_no_destination(tmp_path):
    feed = make_tree(tmp_path / "feed", FIRST)
    shards = tmp_path / "shards"
    script = nightly_script(feed, shards)

    first = run_night(script)  # night 1: no destination yet
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines()[0] == (
        f"ishard: --update: {str(shards)!r} holds no dataset yet — this run makes it of the "
        "whole source, as a run without --update would"
    )
    assert first.stdout.startswith("wrote ") and "verified" in first.stdout
    patterns = check_readers(feed, shards, tmp_path / "c1")
    assert len(patterns) == 1  # one run of names: shard-000000 … on
    night1 = snapshot(shards)
    names1 = listed(shards)
    assert len(names1) >= 8

    make_tree(feed, LATER, mtime=1_700_086_400)  # night 2: new samples, and a label fixed
    (feed / "cls/017.cls").write_bytes(b"relabelled")
    second = run_night(script)
    assert second.returncode == 0, second.stderr
    assert "update: the dataset held 36 samples; 5 new, 1 changed, 0 removed" in second.stdout
    names2 = listed(shards)
    gone = [n for n in names1 if n not in names2]
    assert len(gone) == 1 and not (shards / gone[0]).exists()  # the shard of sample 017
    kept = [n for n in names1 if n in names2]
    assert names2[: len(kept)] == kept and all(
        (shards / n).read_bytes() == night1[n] for n in kept
    )  # untouched, byte for byte
    assert all(int(n[6:12]) >= len(names1) for n in names2[len(kept) :])  # no name reused
    patterns = check_readers(feed, shards, tmp_path / "c2")
    assert len(patterns) == 2  # the retired name is a gap
    night2 = snapshot(shards)

    third = run_night(script)  # night 3: nothing new
    assert third.returncode == 0, third.stderr
    assert third.stderr.splitlines() == [
        (
            f"ishard: nothing to update: the dataset in {str(shards)!r} holds every one of the "
            "source's 41 samples as it is; nothing was written"
        )
    ]
    assert third.stdout.splitlines()[0].startswith("verified ")  # the shard run printed nothing
    assert len(third.stdout.splitlines()) == 1
    assert snapshot(shards) == night2
    check_readers(feed, shards, tmp_path / "c3")
