"""``--progress`` without a terminal: plain lines whose last ones carry the run's real totals."""

from __future__ import annotations

import io

from helpers import assert_true_totals, make_tree, run_ishard

from ishard import render

# 1,500 files: more than one listing report (every 1,000 files), so the last must not be lost.
TREE = {f"d{i % 3}/{i:05d}.{ext}": 40 + i % 97 for i in range(750) for ext in ("cls", "txt")}


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
