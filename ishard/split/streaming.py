"""MosaicML Streaming: canonical-node shuffles and the ``orig`` partition of sample positions.

Each function draws from numpy's ``default_rng`` in the same order as Streaming does, so the
results are identical for the same inputs. numpy is imported when a function runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ishard.errors import UsageError
from ishard.split._check import non_negative, numpy, positive

ALGOS = ("naive", "py1s", "py2s", "py1b", "py1br", "py1e")
DEFAULT_SEED = 9176
Span = tuple[int, int]


def default_canonical_nodes(algo: str, physical_nodes: int) -> int:
    """``num_canonical_nodes`` when not given: 64·P for py1s and py2s, else P."""
    return 64 * physical_nodes if algo in ("py1s", "py2s") else physical_nodes


def default_block_size(num_canonical_nodes: int) -> int:
    """``shuffle_block_size`` when not given: max(4,000,000 // C, 1<<18)."""
    return max(4_000_000 // num_canonical_nodes, 1 << 18)


def samples_per_rank(epoch_size: int, num_ranks: int) -> int:
    """``len(dataset)`` on one rank: ceil(epoch_size / num_ranks)."""
    return math.ceil(epoch_size / num_ranks)


def _pieces(lengths: Sequence[int], num_parts: int) -> list[list[tuple[int, int, int]]]:
    """Cut consecutive items at bounds floor(N(c+1)/C): per part, (item, from, to) pieces; an
    item that crosses a bound gives its first part to the earlier part."""
    total = sum(lengths)
    parts: list[list[tuple[int, int, int]]] = []
    item, used, done = 0, 0, 0  # used: of the current item; done: samples placed
    for part in range(num_parts):
        end = total * (part + 1) // num_parts
        pieces = []
        while item < len(lengths):
            left = lengths[item] - used
            if end < done + left:
                if done < end:
                    pieces.append((item, used, used + end - done))
                    used += end - done
                    done = end
                break
            pieces.append((item, used, lengths[item]))
            item, used, done = item + 1, 0, done + left
        parts.append(pieces)
    return parts


def divide_spans(
    spans: Sequence[Span], num_samples: int, num_parts: int
) -> tuple[list[Span], list[Span]]:
    """Cut id spans at canonical-node bounds floor(N(c+1)/C).

    Returns:
        The spans after cutting (a span crossing a bound is split, its first ids going to the
        earlier node) and, per node, the ``(begin, end)`` slice of that list it owns.
    """
    if sum(b - a for a, b in spans) != num_samples:
        raise UsageError(f"the spans hold {sum(b - a for a, b in spans)} ids, not {num_samples}")
    out: list[Span] = []
    nodes: list[Span] = []
    for pieces in _pieces([b - a for a, b in spans], positive(num_parts, "num_parts")):
        first = len(out)
        out += [(spans[i][0] + lo, spans[i][0] + hi) for i, lo, hi in pieces]
        nodes.append((first, len(out)))
    return out, nodes


def _node_spans(shard_sizes: Sequence[int], nodes: int, seed: int, epoch: int):
    """Spans in run order, cut per node, each node's spans in this epoch's order; the epoch rng."""
    np = numpy()
    starts = [0]
    for size in shard_sizes:
        starts.append(starts[-1] + int(size))
    order = list(range(len(shard_sizes)))
    np.random.default_rng(seed).shuffle(order)
    spans, parts = divide_spans([(starts[i], starts[i + 1]) for i in order], starts[-1], nodes)
    epoch_rng = np.random.default_rng(seed + epoch)
    per_node = []
    for begin, end in parts:
        mine = spans[begin:end]
        epoch_rng.shuffle(mine)
        per_node.append(mine)
    return per_node, epoch_rng


def _py1s(shard_sizes, nodes, seed, epoch, block):
    np = numpy()
    per_node, rng = _node_spans(shard_sizes, nodes, seed, epoch)
    pieces = []
    for a, b in (span for mine in per_node for span in mine):
        ids = np.arange(a, b, dtype=np.int64)
        rng.shuffle(ids)
        pieces.append(ids)
    return _concat(pieces)


def _concat(pieces):
    np = numpy()
    return np.concatenate(pieces).astype(np.int64) if pieces else np.zeros(0, np.int64)


def _node_ids(mine: list[Span]):
    np = numpy()
    return _concat([np.arange(a, b, dtype=np.int64) for a, b in mine])


def _py1b(shard_sizes, nodes, seed, epoch, block):
    per_node, rng = _node_spans(shard_sizes, nodes, seed, epoch)
    out = []
    for mine in per_node:
        ids = _node_ids(mine)
        for start in range(0, len(ids), block):
            rng.shuffle(ids[start : start + block])
        out.append(ids)
    return _concat(out)


def _py1br(shard_sizes, nodes, seed, epoch, block):
    per_node, rng = _node_spans(shard_sizes, nodes, seed, epoch)
    staggers = rng.integers(0, int(0.75 * block), (nodes,))
    out = []
    for mine, stagger in zip(per_node, staggers):
        ids = _node_ids(mine)
        blocks, end = [], 0
        while end < len(ids):  # as Streaming codes it: blocks 1 and 2 overlap by the stagger
            width = rng.integers(int(0.75 * block), int(1.25 * block))
            start, stop = max(end - stagger, 0), min(end + width - stagger, len(ids))
            blocks.append((start, stop))
            end += stop - start
        for start, stop in blocks:
            rng.shuffle(ids[start:stop])
        out.append(ids)
    return _concat(out)


def _py1e(shard_sizes, nodes, seed, epoch, block):
    np = numpy()
    per_node, rng = _node_spans(shard_sizes, nodes, seed, epoch)
    out = []
    for mine in per_node:
        sizes = [b - a for a, b in mine]
        total = sum(sizes)
        if total == 0:
            raise UsageError(
                f"a canonical node gets no samples ({sum(shard_sizes)} samples over {nodes} "
                "canonical nodes) — use fewer canonical nodes"
            )
        samples = np.empty(total)  # float, as Streaming has it
        for (a, b), at in zip(mine, np.cumsum([0] + sizes[:-1])):
            ids = np.arange(a, b)
            rng.shuffle(ids)
            samples[at : at + b - a] = ids
        positions = np.arange(total).astype(np.float64)
        offset = 0
        for size in sizes:
            width = rng.integers(int(0.75 * block), int(1.25 * block))
            cutoff = max((width - size) / 2, 0)
            low, high = max(-cutoff, -offset), min(cutoff, total - offset - size)
            positions[offset : offset + size] += rng.uniform(low=low, high=high, size=size)
            offset += size
        out.append(samples[np.argsort(positions)].astype(np.int64))
    return _concat(out)


def _py2s(shard_sizes, nodes, seed, epoch, block):
    np = numpy()
    starts = np.concatenate([[0], np.cumsum(np.asarray(shard_sizes, dtype=np.int64))])
    shards = [np.arange(starts[i], starts[i + 1], dtype=np.int64) for i in range(len(shard_sizes))]
    run_rng = np.random.default_rng(seed)
    order = list(range(len(shards)))
    run_rng.shuffle(order)
    shards = [shards[i] for i in order]
    for ids in shards:
        run_rng.shuffle(ids)
    epoch_rng = np.random.default_rng(seed + epoch)
    out = []
    for pieces in _pieces([len(s) for s in shards], nodes):
        mine = [shards[i][lo:hi].copy() for i, lo, hi in pieces]
        epoch_rng.shuffle(mine)
        for ids in mine:
            epoch_rng.shuffle(ids)
        out += mine
    return _concat(out)


def _naive(shard_sizes, nodes, seed, epoch, block):
    np = numpy()
    return np.random.default_rng(seed + epoch).permutation(int(sum(shard_sizes))).astype(np.int64)


_ALGOS = {
    "naive": _naive,
    "py1s": _py1s,
    "py2s": _py2s,
    "py1b": _py1b,
    "py1br": _py1br,
    "py1e": _py1e,
}


def get_shuffle(
    algo: str,
    shard_sizes: Sequence[int],
    num_canonical_nodes: int,
    seed: int,
    epoch: int,
    block_size: int = 1 << 18,
):
    """The epoch's permutation of sample ids: position i of the partition reads id ``out[i]``.

    Args:
        algo: naive, py1s, py2s, py1b (Streaming before 0.11), py1br or py1e.
        shard_sizes: samples per shard, in index order.
        num_canonical_nodes: C; every algorithm but naive keeps each node's id set for the run.
        seed: the run's seed (Streaming's default is 9176).
        epoch: from 0; the epoch rng is seeded with seed + epoch.
        block_size: shuffle block (py1b, py1br, py1e).

    Returns:
        An int64 numpy array of length sum(shard_sizes).
    """
    if algo not in _ALGOS:
        raise UsageError(f"shuffle algorithm {algo!r} is unknown — use one of {', '.join(ALGOS)}")
    for size in shard_sizes:
        non_negative(int(size), "shard size")
    positive(num_canonical_nodes, "num_canonical_nodes")
    positive(block_size, "block_size")
    if algo == "py1br" and block_size < 2:  # its stagger is drawn from [0, int(0.75 * block))
        raise UsageError(f"py1br needs a block size of at least 2, not {block_size}")
    return _ALGOS[algo](list(shard_sizes), num_canonical_nodes, seed, epoch, block_size)


def _rows(num_samples: int, nodes: int, physical: int):
    """The C rows of positions, each padded for C < P; short rows repeat their last position."""
    np = numpy()
    per_node = math.ceil(num_samples / nodes)
    ratio = physical // nodes if nodes < physical else 1
    padding = -per_node % ratio
    width = per_node + padding
    if num_samples > nodes or (num_samples == nodes and nodes >= physical):
        starts = np.arange(nodes, dtype=np.int64) * num_samples // nodes
        stops = np.arange(1, nodes + 1, dtype=np.int64) * num_samples // nodes
        rows = starts[:, None] + np.arange(width, dtype=np.int64)[None, :]
        rows[:, per_node - 1] -= (stops - starts < per_node).astype(np.int64)
        if padding and width < 2 * padding + ratio - 1:  # the columns to repeat do not exist
            raise UsageError(
                f"{num_samples} samples are too few for {nodes} canonical node(s) over "
                f"{physical} physical nodes (Streaming's orig partition fails here too) — use "
                "as many canonical nodes as physical nodes, or more samples"
            )
        if padding:  # each pad column repeats the column pad + ratio − 1 places before it
            rows[:, -padding:] = rows[:, -2 * padding - ratio + 1 : -padding - ratio + 1]
        return rows
    needed = nodes * width  # fewer samples than nodes: tile them
    return np.resize(np.arange(num_samples, dtype=np.int64), needed).reshape(nodes, width)


def get_partitions_orig(
    num_samples: int,
    num_canonical_nodes: int,
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int,
    drop_first: int = 0,
):
    """Streaming's ``orig`` partition of sample positions over nodes, ranks and workers.

    Returns:
        An int64 array shaped (P, R, W, batches per worker, B): positions 0..N−1, −1 where
        a rank's list was padded to a multiple of W·B. Batch k of a rank is chunk k of its
        list, from worker k mod W (DataLoader's round-robin).

    Raises:
        UsageError: C and P do not divide one another, or a count is not positive.
    """
    np = numpy()
    nodes = positive(num_canonical_nodes, "num_canonical_nodes")
    physical = positive(num_physical_nodes, "num_physical_nodes")
    ranks = positive(ranks_per_node, "ranks_per_node")
    workers, batch = (
        positive(workers_per_rank, "workers_per_rank"),
        positive(batch_size, "batch_size"),
    )
    positive(num_samples, "num_samples")
    if max(nodes, physical) % min(nodes, physical):
        raise UsageError(
            f"{nodes} canonical nodes and {physical} physical nodes do not divide one another — "
            "make one a multiple of the other"
        )
    drop_first = non_negative(drop_first, "drop_first") // physical * physical
    ids = _rows(num_samples, nodes, physical).T.flatten()[drop_first:]
    ids = ids.reshape(-1, physical).T  # node p: elements p, p+P, ...
    short = ids.shape[1] % ranks
    if short:
        extra = ranks - short
        if ranks + extra - 1 <= ids.shape[1]:
            last = ids[:, -ranks - extra + 1 : ids.shape[1] - ranks + 1]
        else:
            whole, part = divmod(extra, ids.shape[1])
            last = np.concatenate([np.tile(ids, whole), ids[:, :part]], 1)
        ids = np.concatenate([ids, last], 1)
    ids = ids.reshape(physical, -1, ranks).transpose(0, 2, 1)  # rank r: every R-th from r
    per_rank = ids.shape[2]
    pad = math.ceil(per_rank / (workers * batch)) * workers * batch - per_rank
    ids = np.concatenate([ids, np.full((physical, ranks, pad), -1, np.int64)], 2)
    return ids.reshape(physical, ranks, -1, workers, batch).transpose(0, 1, 3, 2, 4)


def epoch_sample_ids(
    shard_sizes: Sequence[int],
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int,
    *,
    num_canonical_nodes: int | None = None,
    shuffle_algo: str | None = None,
    seed: int = DEFAULT_SEED,
    epoch: int = 0,
    block_size: int | None = None,
    drop_first: int = 0,
):
    """Sample ids per (node, rank, worker, batch, slot) for one epoch, −1 for padding.

    Positions from :func:`get_partitions_orig`, mapped through :func:`get_shuffle` when
    ``shuffle_algo`` is given; defaults for C and the block size are Streaming's.
    """
    np = numpy()
    algo = shuffle_algo or "py1e"
    nodes = num_canonical_nodes or default_canonical_nodes(algo, num_physical_nodes)
    positions = get_partitions_orig(
        int(sum(shard_sizes)),
        nodes,
        num_physical_nodes,
        ranks_per_node,
        workers_per_rank,
        batch_size,
        drop_first,
    )
    if shuffle_algo is None:
        return positions
    perm = get_shuffle(
        shuffle_algo, shard_sizes, nodes, seed, epoch, block_size or default_block_size(nodes)
    )
    return np.where(positions < 0, -1, perm[np.maximum(positions, 0)])
