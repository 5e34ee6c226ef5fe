"""Properties of every split policy over many worlds: nothing lost unless dropped, and counted."""

from __future__ import annotations

import math
import os
from collections import Counter
from itertools import chain, islice, pairwise
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.errors import UsageError
from ishard.split import dali, streaming, whale
from ishard.split import torch as sampler
from ishard.split import webdataset as wds

small = st.integers(1, 6)


def joined(lists):
    """One list of the items of ``lists``, in order."""
    return list(chain.from_iterable(lists))


@st.composite
def dali_world(draw):
    shards = draw(st.integers(1, 6))
    return draw(st.integers(shards, 40)), shards, draw(st.integers(1, 7)), draw(st.integers(1, 4))


def _all(n, s, b, e, policy, pad, stick=False):
    return [
        dali.epoch_batches(
            n, s, k, b, e, pad_last_batch=pad, last_batch_policy=policy, stick_to_shard=stick
        )
        for k in range(s)
    ]


@given(dali_world(), st.sampled_from(["fill", "partial"]), st.booleans())
def test_dali_padded_epochs_cover_every_sample_once_plus_duplicates(world, policy, stick):
    n, s, b, e = world
    bounds = dali.shard_bounds(n, s)
    most = math.ceil(n / s)
    for k, ranks in enumerate(_all(n, s, b, e, policy, True, stick)):
        for epoch, got in enumerate(ranks):
            start, size = bounds[dali.reader_epoch_shard(k, epoch, s, stick_to_shard=stick)]
            assert len(got) == math.ceil(most / b)  # equal on every rank: no DDP hang
            flat = joined(got)
            assert flat[:size] == list(range(start, start + size))
            duplicates = flat[size:]
            assert set(duplicates) <= {start + size - 1}
            assert len(duplicates) == (math.ceil(most / b) * b - size if policy == "fill" else 0)


@given(dali_world(), st.booleans())
def test_dali_fill_without_padding_reads_the_cyclic_scan(world, stick):
    n, s, b, e = world
    every = _all(n, s, b, e, "fill", False, stick)
    assert len({tuple(len(ep) for ep in rank) for rank in every}) == 1  # equal batch counts
    for k, (start, size) in enumerate(dali.shard_bounds(n, s)):
        flat = joined(joined(ep) for ep in every[k])
        assert all(len(batch) == b for ep in every[k] for batch in ep)
        if stick:
            assert flat == [start + i % size for i in range(len(flat))]
        else:
            assert flat == [(start + i) % n for i in range(len(flat))]


def _reader(n, s, k, b, pad, stick):
    """Item q of reader k's stream, from consumers.md's rules: unpadded, the cyclic scan from
    start(k) (sticky: round its own shard); padded, reader-epochs of ceil(M/B)·B items, each
    the samples of shard (k + t) mod S (or k) and then repeats of its last sample."""
    starts = [j * n // s for j in range(s + 1)]
    length = math.ceil(math.ceil(n / s) / b) * b

    def item(q):
        if not pad:
            if stick:
                return starts[k] + q % (starts[k + 1] - starts[k])
            return (starts[k] + q) % n
        t, offset = divmod(q, length)
        v = k if stick else (k + t) % s
        return starts[v] + min(offset, starts[v + 1] - starts[v] - 1)

    return item


def _account(n, delivered):
    """Per epoch: how often each id 0..N−1 was delivered; the duplicates; the dropped ids."""
    reads = Counter(delivered)
    assert set(reads) <= set(range(n))
    return reads, sum(c - 1 for c in reads.values()), [i for i in range(n) if not reads[i]]


@given(dali_world(), st.booleans())
def test_dali_drop_gives_equal_full_batches_and_counts_the_dropped(world, pad):
    n, s, b, e = world
    every = _all(n, s, b, e, "drop", pad)
    size = n // s  # the iterator's size: floor(N/S), also the smallest shard
    per_epoch = size // b
    # each epoch fetches its batches plus, when size mod B != 0, one discarded batch
    consumed = per_epoch * b + (b if size % b else 0)
    starts = [j * n // s for j in range(s + 1)]
    for epoch in range(e):
        assert all(len(rank[epoch]) == per_epoch for rank in every)
        assert all(len(batch) == b for rank in every for batch in rank[epoch])
        want = []
        for k in range(s):
            item = _reader(n, s, k, b, pad, False)
            expected = [item(epoch * consumed + i) for i in range(per_epoch * b)]
            assert joined(every[k][epoch]) == expected
            want += expected
        reads, duplicates, dropped = _account(n, joined(joined(r[epoch]) for r in every))
        assert reads == Counter(want)
        assert len(dropped) == n - len(reads) and sum(reads.values()) == s * per_epoch * b
        if not pad:  # the scans do not overlap: no duplicates, the rest is dropped
            assert duplicates == 0 and len(dropped) == n - s * per_epoch * b
        else:  # every duplicate is a repeat of a shard's last sample (the padding)
            assert {i for i, c in reads.items() if c > 1} <= {starts[v + 1] - 1 for v in range(s)}


@given(dali_world(), st.booleans())
def test_dali_partial_without_padding_accounts_for_every_sample(world, stick):
    n, s, b, e = world
    most = -(-n // s)
    count = -(-most // b)  # the iterator's len: ceil(M/B), every epoch
    starts = [j * n // s for j in range(s + 1)]
    every = _all(n, s, b, e, "partial", False, stick)
    for epoch in range(e):
        delivered = []
        for k, rank in enumerate(every):
            assert len(rank[epoch]) == count
            v = k if stick else (k + epoch) % s
            shard_size = starts[v + 1] - starts[v]
            item = _reader(n, s, k, b, False, stick)
            # batch j keeps the items before the current shard's size; the rest is trimmed
            want = [
                [item(epoch * count * b + j * b + i) for i in range(b) if j * b + i < shard_size]
                for j in range(count)
            ]
            assert rank[epoch] == want
            delivered += joined(want)
        reads, duplicates, dropped = _account(n, delivered)
        assert len(delivered) == n  # each rank delivers its current shard's size: N in total
        assert duplicates == len(dropped)  # so every id read twice pushes one out of the epoch
        if epoch == 0 or stick:  # before any read-ahead drift: each id exactly once
            assert reads == Counter(range(n))


@given(
    st.integers(0, 30),
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
    st.booleans(),
    st.booleans(),
)
def test_whale_every_file_accounted_for(count, gpus, unbalanced, drop_last):
    names = [f"f{i}" for i in range(count)]
    got = whale.assign(names, gpus, unbalanced=unbalanced, drop_last=drop_last)
    units = sum(len(u) for u in whale.units(gpus))
    sliced = count >= units and (count % units == 0 or unbalanced or drop_last)
    if not sliced:
        for task, mine in zip(got, whale.units(gpus)):
            assert Counter(task) == Counter(names * len(mine))
        return
    flat = joined(got)
    kept = names if unbalanced or not drop_last else names[: count - count % units]
    assert sorted(flat) == sorted(kept)  # each kept file exactly once; the rest dropped
    if len(kept) % units == 0:  # equal work exactly when the units divide the files
        per_unit = len(kept) // units
        assert [len(t) for t in got] == [per_unit * len(u) for u in whale.units(gpus)]


@given(st.integers(0, 40), small, small)
def test_wds_assign_matches_split_by_node_and_worker(shards, world, workers):
    from webdataset.shardlists import split_by_node, split_by_worker

    got = wds.assign(shards, world, workers)
    for rank in range(world):
        for worker in range(workers):
            env = {
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "WORKER": str(worker),
                "NUM_WORKERS": str(workers),
            }
            with mock.patch.dict(os.environ, env):
                want = list(split_by_worker(split_by_node(iter(range(shards)))))
            assert got[rank][worker] == want


@given(st.lists(st.integers(0, 9), max_size=20), small, small, st.integers(1, 5), st.booleans())
def test_wds_batches_per_rank_and_when_they_agree(sizes, world, workers, b, drop_last):
    got = wds.batches_per_rank(sizes, world, workers, b, drop_last=drop_last)
    assert len(got) == world
    owners = wds.assign(len(sizes), world, workers)
    for rank, count in enumerate(got):
        per_worker = [sum(sizes[i] for i in owners[rank][w]) for w in range(workers)]
        assert count == sum(n // b if drop_last else -(-n // b) for n in per_worker)
    if len(set(sizes)) <= 1 and len(sizes) % (world * workers) == 0:
        assert len(set(got)) <= 1  # balanced shards: every rank agrees


@given(
    st.lists(st.integers(), max_size=60),
    st.integers(0, 1000),
    st.integers(0, 5),
    st.integers(1, 30),
    st.integers(1, 30),
)
def test_wds_detshuffle_is_webdatasets(items, seed, epoch, bufsize, initial):
    from webdataset.filters import detshuffle

    stage = detshuffle(bufsize, initial, seed=seed, epoch=epoch - 1)
    want = list(stage.run(iter(items)))
    assert wds.detshuffle(items, seed, epoch, bufsize=bufsize, initial=initial) == want


@given(st.lists(st.integers(0, 10**6), max_size=5))
def test_wds_make_seed_is_webdatasets(args):
    from webdataset.utils import make_seed

    assert wds.make_seed(*args) == make_seed(*args)


@given(st.integers(0, 60), st.integers(1, 8), st.booleans(), st.integers(1, 5))
def test_sampler_pads_or_drops_to_equal_ranks(n, world, drop_last, b):
    got = [sampler.indices(n, world, r, drop_last=drop_last) for r in range(world)]
    assert len({len(r) for r in got}) == 1
    flat = Counter(joined(got))
    if drop_last:
        assert all(v == 1 for v in flat.values()) and n - len(flat) == n % world
    else:
        assert set(flat) == set(range(n))
        assert sum(flat.values()) - n == (len(got[0]) * world - n)
    counts = {sampler.batches_per_rank(n, world, b, drop_last=drop_last)}
    assert counts == {math.ceil(len(got[0]) / b)}


@st.composite
def streaming_world(draw):
    physical = draw(st.sampled_from([1, 2, 3, 4]))
    nodes = draw(
        st.sampled_from(
            [physical * k for k in (1, 2, 3)] + [c for c in (1, 2) if physical % c == 0]
        )
    )
    return (
        draw(st.integers(1, 60)),
        nodes,
        physical,
        draw(small),
        draw(st.integers(1, 3)),
        draw(st.integers(1, 4)),
    )


@settings(max_examples=60)
@given(streaming_world())
def test_streaming_partition_covers_everything_equally(world):
    n, nodes, physical, ranks, workers, b = world
    try:
        ids = streaming.get_partitions_orig(n, nodes, physical, ranks, workers, b)
    except UsageError as error:  # Streaming fails too (test_split_streaming_reference.py)
        assert nodes < physical and "orig partition fails here too" in str(error)
        return
    real = [int((ids[p, r] >= 0).sum()) for p in range(physical) for r in range(ranks)]
    assert len(set(real)) == 1  # every rank the same number of samples
    # consumers.md's count: C rows of ceil(N/C) positions (padded to a multiple of P/C when
    # C < P), dealt to P nodes; a node's L positions get R − L mod R repeats to fill its ranks;
    # each rank's list is padded with −1 to whole batches of every worker.
    width = -(-n // nodes)
    if nodes < physical:
        width += -width % (physical // nodes)
    per_node = nodes * width // physical
    per_rank = (per_node + -per_node % ranks) // ranks
    assert real[0] == per_rank
    assert int((ids < 0).sum()) == physical * ranks * (-per_rank % (workers * b))
    if n >= nodes:  # no canonical node is empty: every id appears, the excess are repeats
        reads = Counter(ids[ids >= 0].tolist())
        assert set(reads) == set(range(n))
        assert sum(c - 1 for c in reads.values()) == physical * ranks * per_rank - n
    # elastic determinism: rank (p, r) batch k slot j = global-order position p + P*r + P*R*(kB+j)
    flat = streaming.get_partitions_orig(n, nodes, 1, 1, 1, 1).flatten().tolist()
    if n % (physical * ranks) == 0 and n % nodes == 0:
        for p in range(physical):
            for r in range(ranks):
                rank = ids[p, r].transpose(1, 0, 2).reshape(-1).tolist()  # batch-major
                expect = flat[p + physical * r :: physical * ranks]
                assert [x for x in rank if x >= 0] == expect


@settings(max_examples=60)
@given(
    st.lists(st.integers(0, 9), min_size=1, max_size=12).filter(lambda s: sum(s) >= 8),
    st.integers(1, 8),
    st.integers(0, 99),
    st.sampled_from(streaming.ALGOS),
    st.sampled_from([1, 3, 8, 1 << 18]),
)
def test_streaming_shuffles_permute_and_keep_node_sets(sizes, nodes, seed, algo, block):
    n = sum(sizes)
    if algo == "py1br" and block == 1:
        with pytest.raises(UsageError, match="py1br needs a block size of at least 2"):
            streaming.get_shuffle(algo, sizes, nodes, seed, 0, block)
        return
    first = streaming.get_shuffle(algo, sizes, nodes, seed, 0, block)
    second = streaming.get_shuffle(algo, sizes, nodes, seed, 1, block)
    assert sorted(first.tolist()) == list(range(n))
    if algo != "naive":
        cuts = [n * c // nodes for c in range(nodes + 1)]
        for a, b in pairwise(cuts):
            assert set(first[a:b].tolist()) == set(second[a:b].tolist())


def test_streaming_worker_round_robin_is_dataloader_order():
    ids = streaming.get_partitions_orig(40, 1, 1, 1, 3, 2)
    order = [ids[0, 0, k % 3, k // 3].tolist() for k in range(ids.shape[2] * ids.shape[3])]
    assert [x for batch in order for x in batch if x >= 0] == list(islice(range(40), 40))
