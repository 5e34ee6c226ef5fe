"""What planning holds in Python does not grow with the objects of an inventory the column
engine reads: four times the objects, about the same memory (Python's allocations, traced;
the engine's own memory is bounded by ``--memory-limit`` and measured in ``benchmarks/``)."""

from __future__ import annotations

import tracemalloc

import duckdb
import pytest

import ishard
from ishard.planning import cut, intcolumn, naming
from ishard.planning.engine import connection, readerkeys

WINDOW = 4096  # rows every window of the planner holds here, so that 100,000 samples are many


def write_inventory(path, samples: int, apart: bool) -> None:
    """A Parquet inventory of ImageNet-like names, two files a sample: the image and its
    annotation in two trees (``apart``) or side by side in one folder."""
    second = "ann" if apart else "train"
    duckdb.sql(
        f"COPY (SELECT name, size, 1700000000 AS mtime FROM (SELECT 'train/n' || "
        f"lpad(CAST(i // 1300 AS VARCHAR), 8, '0') || '/s' || i || '.jpg' AS name, "
        f"20000 + i % 977 AS size FROM range({samples}) t(i) UNION ALL SELECT '{second}/n' || "
        f"lpad(CAST(i // 1300 AS VARCHAR), 8, '0') || '/s' || i || '.xml', 400 + i % 13 "
        f"FROM range({samples}) t(i)) ORDER BY hash(name)) TO '{path}' (FORMAT parquet)"
    )


def traced_peak(tmp_path, samples: int, apart: bool, **options) -> int:
    """The most Python's allocations held while planning the inventory of ``samples``."""
    path = tmp_path / f"inv-{samples}.parquet"
    write_inventory(path, samples, apart)
    (tmp_path / "src").mkdir(exist_ok=True)
    tracemalloc.start()
    try:
        plan = ishard.plan(str(tmp_path / "src"), src_list=str(path), tmp_dir=str(tmp_path),
                           **options)  # fmt: skip
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert plan.file_count == 2 * samples and plan.sample_count == samples
    return peak


@pytest.mark.parametrize("apart", [True, False], ids=["samples apart", "samples in a row"])
@pytest.mark.parametrize("names", ["original", "sample"])
def test_planning_holds_the_same_memory_for_four_times_the_objects(
    tmp_path, monkeypatch, apart, names
):
    for module, name in (
        (connection, "INTS_FETCHED"),
        (connection, "FETCHED"),
        (readerkeys, "FETCHED"),
        (intcolumn, "WINDOW"),
        (cut, "CUT_WINDOW"),
        (naming, "CHUNK"),
    ):
        monkeypatch.setattr(module, name, WINDOW)
    options = {"shard_size": "1TiB", "member_names": names}  # one shard: none per object
    traced_peak(tmp_path, 1_000, apart, **options)  # what is imported once is not measured
    small = traced_peak(tmp_path, 25_000, apart, **options)
    large = traced_peak(tmp_path, 100_000, apart, **options)
    # 200,000 files held as 12 bytes each would add 1.8 MB; the windows are some 100 kB
    assert large < small * 1.3 + (256 << 10), (small, large)
