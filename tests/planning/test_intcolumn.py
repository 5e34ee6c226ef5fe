"""Int columns Python does not hold: what a spooled column gives back is what was written,
read any way the planner reads it."""

from __future__ import annotations

import os
import pickle
from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.planning import intcolumn
from ishard.planning.intcolumn import Positions, SpooledInts
from ishard.planning.table import column_sum, held, int64_bytes, int_view


def spooled(values, typecode, folder, chunk=7):
    data = np.asarray(values, dtype=np.int64)
    return SpooledInts.written(
        (data[a : a + chunk] for a in range(0, len(data), chunk)), typecode, str(folder)
    )


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=300),
    picks=st.lists(st.integers(0, 10**6), max_size=80),
    typecode=st.sampled_from(["i", "q"]),
    gap=st.sampled_from([1, 3, 4096]),
    span=st.sampled_from([1, 5, 1 << 20]),
)
def test_a_spooled_column_reads_back_what_was_written(
    tmp_path_factory, values, picks, typecode, gap, span
):
    """Ints, windows, positions in any order (repeats, negatives), sums and extremes are the
    values written, whatever the reads are grouped by and however far one may span."""
    folder = tmp_path_factory.mktemp("spool")
    column = spooled(values, typecode, folder)
    expected = np.asarray(values, dtype=np.int64)
    old, (intcolumn.GAP, intcolumn.SPAN) = (intcolumn.GAP, intcolumn.SPAN), (gap, span)
    try:
        assert len(column) == len(values)
        assert np.array_equal(np.asarray(column), expected)
        assert list(column) == values
        if values:
            at = np.asarray(picks, dtype=np.int64) % len(values)
            assert np.array_equal(column[at], expected[at])
            assert np.array_equal(column[-at - 1], expected[-at - 1])
            assert column[len(values) - 1] == values[-1] and column[-1] == values[-1]
            assert column.max() == max(values) and column.min() == min(values)
            a, b = sorted(picks[:2] * 2)[:2] if picks else (0, 0)
            assert np.array_equal(column[a % 400 : b % 400], expected[a % 400 : b % 400])
        assert column.sum() == sum(values) == column_sum(column)
        assert int64_bytes(column[0 : len(values)]) == expected.tobytes()
        assert held(column).tolist() == values
        assert pickle.loads(pickle.dumps(column)).tolist() == values
    finally:
        intcolumn.GAP, intcolumn.SPAN = old
    assert os.listdir(folder) == []  # a file with no name


def test_a_spooled_column_refuses_positions_past_its_ends(tmp_path):
    column = spooled([5, 6, 7], "i", tmp_path)
    for bad in (3, -4):
        with pytest.raises(IndexError):
            column[bad]
        with pytest.raises(IndexError):
            column[np.array([0, bad])]
    assert column[5:9].tolist() == [] and column[-2:].tolist() == [6, 7]


def test_a_spooled_column_is_read_by_a_forked_writer(tmp_path):
    """Forked writers read the column through the descriptor they inherit (``pread``: no shared
    offset to move under the parent)."""
    column = spooled(range(100_000), "q", tmp_path, chunk=4096)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read)
        os.write(write, str(int(column[50_000:50_100].sum())).encode())
        os._exit(0)
    os.close(write)
    assert column[10:20].tolist() == list(range(10, 20))
    got = os.read(read, 100)
    os.waitpid(pid, 0)
    assert int(got) == sum(range(50_000, 50_100))


@given(count=st.integers(0, 500), picks=st.lists(st.integers(0, 10**6), max_size=40))
def test_positions_are_the_column_0_to_count(count, picks):
    column = Positions(count, "i")
    expected = np.arange(count)
    assert np.array_equal(np.asarray(column), expected) and list(column) == list(range(count))
    assert column.sum() == int(expected.sum()) and len(column) == count
    assert np.array_equal(column[3 : count - 2], expected[3 : count - 2])
    if count:
        at = np.asarray(picks, dtype=np.int64) % count
        assert np.array_equal(column[at], expected[at]) and column[-1] == count - 1
    assert pickle.loads(pickle.dumps(column)).__array__().tolist() == list(range(count))
    with pytest.raises(IndexError):
        column[count]


def test_int_view_keeps_a_spooled_column_and_views_an_array(tmp_path):
    column = spooled([1, 2], "i", tmp_path)
    assert int_view(column) is column
    assert int_view(array("i", [1, 2])).tolist() == [1, 2]
