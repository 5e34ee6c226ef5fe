"""``--progress`` without a terminal: plain lines whose last ones carry the run's real totals."""

from __future__ import annotations

import io
import json
from pathlib import Path

from conftest import make_tree, run_ishard, without_note

from ishard import render
from ishard.sizes import format_size

# 1,500 files: more than one listing report (every 1,000 files), so the last must not be lost.
TREE = {f"d{i % 3}/{i:05d}.{ext}": 40 + i % 97 for i in range(750) for ext in ("cls", "txt")}


def final_lines(stderr: str) -> tuple[list[str], str]:
    lines = [line for line in stderr.splitlines() if line.startswith("ishard: ")]
    return [line for line in lines if line.startswith("ishard: listed ")], lines[-1]


def assert_true_totals(src: Path, dst: Path, result) -> list[str]:
    """The last listing line and the last line: files listed, bytes and shards written."""
    assert result.returncode == 0, result.stderr
    files = [p for p in src.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    shards = sorted(p.name for p in dst.iterdir() if p.suffix == ".tar")
    manifest = json.loads((dst / "manifest.json").read_text())
    assert len(manifest["shardlist"]) == len(shards) > 1
    listed, last = final_lines(without_note(result.stderr))  # progress: the run's own lines
    assert listed[-1] == f"ishard: listed {len(files)} files, {format_size(total)}"
    assert last.startswith(
        f"ishard: wrote {format_size(total)} of {format_size(total)} (100%), "
        f"{len(shards)}/{len(shards)} shards, "
    )
    return listed


def test_plain_progress_of_forked_writers_ends_with_the_real_totals(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"  # local to local with --jobs 2: forked writer processes
    result = run_ishard(
        "shard", src, dst, "--shard-size", "40KiB", "--jobs", "2", "--progress", "--json"
    )
    listed = assert_true_totals(src, dst, result)
    assert len(listed) <= 2  # a report per 1,000 files at most, throttled: never one per file


def test_plain_listing_lines_are_throttled_but_the_last_total_is_printed(monkeypatch):
    monkeypatch.setattr(render.time, "monotonic", lambda: 1000.0)  # every report comes at once
    out = io.StringIO()
    progress = render.LineProgress(out)
    for n in range(1, 5001):
        progress.listing(n, 10 * n)
    progress.notice("something to know")
    progress.planned(3, 50_000)
    assert out.getvalue().splitlines() == [
        "ishard: listed 1 files, 10B",
        "ishard: something to know",
        "ishard: listed 5000 files, 48.83KiB",
        "ishard: planned 3 shards, 48.83KiB",
    ]


def test_a_narrow_terminal_keeps_bytes_and_eta_on_one_line():
    """At 50 columns the live display drops its bar, not the byte counts or the ETA, and
    nothing wraps; at 100 columns the bar is there."""
    import re

    from rich.console import Console

    for width, bar in ((50, False), (100, True)):
        out = io.StringIO()
        console = Console(file=out, width=width, force_terminal=True, color_system=None)
        shown = render.BarProgress(console)
        shown.planned(5000, 10 << 30)
        shown.wrote(3 << 30)
        shown.close()
        frames = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", out.getvalue()).replace("\r", "\n")
        last = [line for line in frames.splitlines() if "writing" in line][-1]
        assert "3.0/10.0 GiB" in last and re.search(r"(-:--:--|\d:\d\d:\d\d)", last), last
        assert len(last.rstrip()) <= width
        assert ("━" in last) is bar, last
