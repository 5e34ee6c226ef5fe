"""The documented facts about DALI, EPL, Streaming, WebDataset and DistributedSampler, one by one."""

from __future__ import annotations

import pytest

from ishard.errors import UsageError
from ishard.split import dali, streaming, whale
from ishard.split import torch as sampler
from ishard.split import webdataset as wds

# ---- DALI -------------------------------------------------------------------------------


def batches(n, s, k, b, epochs, policy="fill", pad=False, stick=False):
    return dali.epoch_batches(
        n, s, k, b, epochs, pad_last_batch=pad, last_batch_policy=policy, stick_to_shard=stick
    )


def test_dali_bounds_and_padded_epoch_size():  # fact 1
    assert dali.shard_bounds(10, 3) == [(0, 3), (3, 3), (6, 4)]
    assert dali.reader_meta(10, 3, pad_last_batch=True) == {
        "epoch_size": 10,
        "epoch_size_padded": 12,
    }
    assert dali.reader_meta(10, 3) == {"epoch_size": 10, "epoch_size_padded": 10}


def test_dali_fewer_samples_than_shards_is_an_error():
    with pytest.raises(UsageError, match="2 samples cannot be split over 3 DALI shards"):
        dali.shard_bounds(2, 3)


def test_dali_reader_epochs_rotate_unless_sticky():  # facts 2, 3
    sizes = dict(enumerate(s for _, s in dali.shard_bounds(10, 3)))
    assert [sizes[dali.reader_epoch_shard(2, e, 3)] for e in range(4)] == [4, 3, 3, 4]
    assert [dali.reader_epoch_shard(2, e, 3) for e in range(3)] == [2, 0, 1]
    assert {sizes[dali.reader_epoch_shard(2, e, 3, stick_to_shard=True)] for e in range(4)} == {4}
    assert dali.reader_epoch_shard(1, 5, 3) == 0
    assert [
        sorted({i for batch in b for i in batch}) for b in batches(10, 3, 1, 3, 6, "partial", True)
    ][5] == [
        0,
        1,
        2,
    ]


def test_dali_fill_with_padding():  # fact 4
    assert dali.iterator_size(10, 3, 4, pad_last_batch=True)[1] == 1
    rank0 = batches(10, 3, 0, 4, 2, pad=True)
    assert rank0 == [[[0, 1, 2, 2]], [[3, 4, 5, 5]]]
    assert batches(10, 3, 2, 4, 1, pad=True) == [[[6, 7, 8, 9]]]


def test_dali_partial_with_padding():  # fact 6
    assert batches(10, 3, 0, 4, 1, "partial", True) == [[[0, 1, 2]]]
    assert batches(10, 3, 2, 4, 1, "partial", True) == [[[6, 7, 8, 9]]]


def test_dali_drop_gives_no_batch_when_the_shard_is_smaller_than_a_batch():  # fact 7
    assert dali.iterator_size(10, 3, 4, last_batch_policy="drop") == (3, 0)
    for pad in (False, True):
        assert all(batches(10, 3, k, 4, 3, "drop", pad) == [[], [], []] for k in range(3))


def test_dali_partial_can_return_an_empty_batch():  # fact 10
    assert dali.iterator_size(10, 3, 1, pad_last_batch=True, last_batch_policy="partial")[1] == 4
    assert batches(10, 3, 0, 1, 1, "partial", True) == [[[0], [1], [2], []]]


def test_dali_padding_reaches_a_batch_boundary():  # fact 11
    for k in range(3):
        assert sum(map(len, batches(10, 3, k, 3, 1, pad=True)[0])) == 6
    assert batches(10, 3, 0, 3, 1, pad=True) == [[[0, 1, 2], [2, 2, 2]]]


@pytest.mark.parametrize(
    "policy, pad, b, first, counts",
    [
        ("fill", True, 2, [[0, 1], [2, 2]], [2, 2, 2]),
        ("fill", False, 2, [[0, 1], [2, 3]], [2, 2, 1]),
        ("partial", True, 2, [[0, 1], [2]], [2, 2, 2]),
        ("partial", False, 2, [[0, 1], [2]], [2, 2, 2]),
        ("drop", True, 2, [[0, 1]], [1, 1, 1]),
        ("drop", False, 2, [[0, 1]], [1, 1, 1]),
        ("fill", True, 4, [[0, 1, 2, 2]], [1, 1, 1]),
        ("fill", False, 4, [[0, 1, 2, 3]], [1, 1, 1]),
        ("partial", True, 4, [[0, 1, 2]], [1, 1, 1]),
        ("drop", False, 4, [], [0, 0, 0]),
    ],
)
def test_dali_worked_example(policy, pad, b, first, counts):
    every = [batches(10, 3, k, b, 3, policy, pad) for k in range(3)]
    assert every[0][0] == first
    for epoch, count in enumerate(counts):
        assert [len(rank[epoch]) for rank in every] == [count] * 3


def test_dali_worked_example_other_ranks_and_partial_epoch_one():
    assert batches(10, 3, 1, 4, 1, pad=True) == [[[3, 4, 5, 5]]]
    assert batches(10, 3, 1, 4, 1) == [[[3, 4, 5, 6]]]
    assert batches(10, 3, 0, 4, 2, "partial")[1] == [[4, 5, 6]]
    assert batches(10, 3, 0, 4, 1, "partial") == batches(10, 3, 0, 4, 1, "partial", True)


def test_dali_drop_with_padding_quirk():
    assert batches(10, 3, 0, 3, 2, "drop", True)[1][0] == [2, 2, 2]


@pytest.mark.parametrize(
    "policy, pad, last, next_first",
    [
        ("partial", True, [6], [0, 1]),
        ("fill", True, [6, 6], [0, 1]),
        ("fill", False, [6, 0], [1, 2]),
        ("drop", False, [4, 5], [1, 2]),
        ("drop", True, [4, 5], [0, 1]),
    ],
)
def test_dali_docstring_example(policy, pad, last, next_first):
    two = batches(7, 1, 0, 2, 2, policy, pad)
    assert two[0][-1] == last and two[1][0] == next_first


def test_dali_iterator_lengths():
    assert dali.iterator_size(10, 3, 4, pad_last_batch=True) == (4, 1)
    assert dali.iterator_size(10, 3, 4) == (4, 1)
    assert dali.iterator_size(10, 3, 3) == (6, 2)


def test_dali_bad_policy():
    with pytest.raises(UsageError, match="'pad' is not a DALI policy"):
        batches(10, 3, 0, 2, 1, "pad")


# ---- Whale / EPL ------------------------------------------------------------------------


def files(n):
    return [f"f{i}" for i in range(n)]


def test_whale_slicing():  # fact 14
    assert whale.assign(files(2), [2, 2]) == [["f0"], ["f1"]]
    assert whale.assign(files(4), [2, 2]) == [["f0", "f2"], ["f1", "f3"]]


def test_whale_uneven_choices():  # fact 15
    assert whale.assign(files(3), [2, 2]) == [files(3), files(3)]
    assert whale.assign(files(3), [2, 2], drop_last=True) == [["f0"], ["f1"]]
    assert whale.assign(files(3), [2, 2], unbalanced=True) == [["f0", "f2"], ["f1"]]


def test_whale_fewer_files_than_units():  # fact 16
    for flags in ({}, {"drop_last": True}, {"unbalanced": True}):
        assert whale.assign(files(1), [2, 2], **flags) == [["f0"], ["f0"]]


def test_whale_units_and_replication():
    assert whale.units([4, 2, 2]) == [range(2), range(2, 3), range(3, 4)]
    got = whale.assign(files(2), [4, 2, 2], seed=3)  # 2 files < 4 units: not sliced
    assert sorted(got[0]) == ["f0", "f0", "f1", "f1"] and got[1] == got[2] == files(2)
    assert got == whale.assign(files(2), [4, 2, 2], seed=3)
    assert whale.assign(files(5), [4, 2, 2], unbalanced=True) == [
        ["f0", "f1", "f4"],
        ["f2"],
        ["f3"],
    ]


# ---- MosaicML Streaming -----------------------------------------------------------------


def test_streaming_orig_partition():  # fact 19
    np = pytest.importorskip("numpy")
    ids = streaming.get_partitions_orig(10, 2, 2, 2, 2, 2)
    assert ids.shape == (2, 2, 2, 1, 2)
    assert ids[0, 0, 0].tolist() == [[0, 2]] and ids[0, 0, 1].tolist() == [[4, -1]]
    assert ids[0, 1, 0].tolist() == [[1, 3]] and ids[0, 1, 1].tolist() == [[3, -1]]
    assert ids[1, 0, 0].tolist() == [[5, 7]] and ids[1, 0, 1].tolist() == [[9, -1]]
    assert ids[1, 1, 0].tolist() == [[6, 8]] and ids[1, 1, 1].tolist() == [[8, -1]]
    assert all(int((ids[p, r] >= 0).sum()) == 3 for p in range(2) for r in range(2))
    values, counts = np.unique(ids[ids >= 0], return_counts=True)
    assert values[counts > 1].tolist() == [3, 8]


def test_streaming_short_rows_repeat():  # fact 21
    ids = streaming.get_partitions_orig(11, 2, 1, 1, 1, 1)
    assert ids.flatten().tolist() == [0, 5, 1, 6, 2, 7, 3, 8, 4, 9, 4, 10]
    assert streaming.samples_per_rank(11, 1) == 11


def test_streaming_divide_spans():  # fact 25
    spans = [(4 * i, 4 * i + 4) for i in range(5)]
    out, nodes = streaming.divide_spans(spans, 20, 3)
    assert [out[a:b] for a, b in nodes] == [
        [(0, 4), (4, 6)],
        [(6, 8), (8, 12), (12, 13)],
        [(13, 16), (16, 20)],
    ]


def test_streaming_node_sets_fixed_for_the_run():  # fact 26
    want = {0, 1, *range(4, 12)}
    for algo in ("py1s", "py1b", "py1br", "py1e"):
        for epoch in (0, 1):
            assert set(streaming.get_shuffle(algo, [4] * 5, 2, 9176, epoch)[:10].tolist()) == want
    for epoch in (0, 1):
        assert set(streaming.get_shuffle("py2s", [4] * 5, 2, 9176, epoch)[:10].tolist()) == {
            0,
            2,
            *range(4, 12),
        }


def test_streaming_run_shard_order():  # fact 26; one node per shard, blocks of 1
    spans = streaming.get_shuffle("py1b", [4] * 5, 5, 9176, 0, block_size=1)
    assert [int(spans[4 * n]) // 4 for n in range(5)] == [2, 1, 0, 3, 4]


def test_streaming_py1s_and_naive_orders():  # fact 27
    assert streaming.get_shuffle("py1s", [4] * 5, 2, 9176, 0).tolist() == [
        1,
        0,
        6,
        5,
        7,
        4,
        8,
        11,
        9,
        10,
        18,
        19,
        16,
        17,
        15,
        14,
        13,
        12,
        2,
        3,
    ]
    assert streaming.get_shuffle("naive", [10], 2, 9176, 0).tolist() == [
        8,
        1,
        2,
        7,
        5,
        6,
        9,
        3,
        0,
        4,
    ]


def test_streaming_defaults():  # fact 28
    assert streaming.default_block_size(1) == 4_000_000
    assert streaming.default_block_size(8) == 500_000
    assert streaming.default_block_size(16) == streaming.default_block_size(64) == 262_144
    assert streaming.default_canonical_nodes("py1e", 2) == 2
    assert streaming.default_canonical_nodes("py1s", 2) == 128


def test_streaming_py1br_can_leave_a_tail_unshuffled():
    tails = 0
    for seed in range(60):
        got = streaming.get_shuffle("py1br", [200], 1, seed, 0, block_size=40)
        tail = 0
        while tail < 200 and got[199 - tail] == 199 - tail:
            tail += 1
        tails += tail >= 3
    assert tails > 0


def test_streaming_errors():
    with pytest.raises(UsageError, match="3 canonical nodes and 2 physical nodes"):
        streaming.get_partitions_orig(10, 3, 2, 1, 1, 1)
    with pytest.raises(UsageError, match="shuffle algorithm 'py3x' is unknown"):
        streaming.get_shuffle("py3x", [4], 1, 0, 0)


# ---- WebDataset -------------------------------------------------------------------------


def test_wds_split_by_node_then_worker():  # fact 29
    assert wds.assign(10, 2, 2) == {0: {0: [0, 4, 8], 1: [2, 6]}, 1: {0: [1, 5, 9], 1: [3, 7]}}


def test_wds_make_seed():  # fact 31
    assert wds.make_seed(1 * 1000 + 2, 0, 0) == 962922
    assert wds.make_seed(0, 0, 0) == 0


def test_wds_ddp_equalize():  # fact 33
    assert wds.equalized_batches(20, 4) == 5


def test_wds_detshuffle_seed_plus_epoch():
    items = list(range(50))
    assert wds.detshuffle(items, 7, 1, bufsize=10, initial=5) == wds.detshuffle(
        items, 8, 0, bufsize=10, initial=5
    )
    assert sorted(wds.detshuffle(items, 7, 0)) == items


def test_wds_uneven_batches():
    # 5 shards of 10 over 2 ranks x 1 worker, B=4: rank 0 has 30 samples, rank 1 has 20
    assert wds.batches_per_rank([10] * 5, 2, 1, 4) == [8, 5]
    assert wds.batches_per_rank([10] * 5, 2, 1, 4, drop_last=True) == [7, 5]
    assert wds.batches_per_rank([3, 3], 1, 2, 2) == [4]  # each worker a partial batch


# ---- PyTorch DistributedSampler ---------------------------------------------------------


def test_sampler_indices():  # fact 34
    assert [sampler.indices(10, 3, r) for r in range(3)] == [
        [0, 3, 6, 9],
        [1, 4, 7, 0],
        [2, 5, 8, 1],
    ]
    assert [sampler.indices(10, 3, r, drop_last=True) for r in range(3)] == [
        [0, 3, 6],
        [1, 4, 7],
        [2, 5, 8],
    ]


def test_sampler_small_datasets():
    assert sampler.num_samples_per_rank(2, 5, drop_last=True) == 0
    assert [sampler.indices(2, 5, r) for r in range(5)] == [[0], [1], [0], [1], [0]]
    assert sampler.batches_per_rank(10, 3, 3) == 2
    assert sampler.batches_per_rank(10, 3, 3, drop_last_batch=True) == 1


# ---- docs/distributing-shards.md --------------------------------------------------------


def test_distributing_shards_examples_run():
    """Every ``>>>`` example in the page's python blocks returns what the page shows."""
    import doctest
    import re
    from pathlib import Path

    page = Path(__file__).parents[2] / "docs" / "distributing-shards.md"
    text = page.read_text(encoding="utf-8")
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner()
    tried, modules, failures = 0, set(), []
    for block in re.finditer(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL):
        line = text[: block.start()].count("\n") + 1
        test = parser.get_doctest(block.group(1), {}, f"{page.name}:{line}", str(page), line)
        if not test.examples:
            continue  # the ShardedSamples / IterableDataset sketches are not examples
        modules |= set(re.findall(r"from ishard\.split import (\w+)", block.group(1)))
        tried += runner.run(test, out=failures.append).attempted
    assert not failures, "".join(failures)
    assert modules == {"dali", "whale", "webdataset", "torch", "streaming"}
    assert tried == text.count("\n>>> ")  # every example on the page ran, none outside a block
