"""WebDataset's split_by_node / split_by_worker, its seeds and its deterministic shard shuffle."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from typing import TypeVar, cast

from ishard.split._check import non_negative, positive

T = TypeVar("T")
_END = object()


def assign(num_shards: int, world_size: int, num_workers: int) -> dict[int, dict[int, list[int]]]:
    """Shard indices per rank and worker: ``split_by_node`` then ``split_by_worker``.

    Shard i goes to rank i mod world_size, and within the rank to worker
    (i div world_size) mod num_workers. A worker may get nothing (WebDataset then raises
    "fewer shards than workers" unless ``empty_check=False``).
    """
    non_negative(num_shards, "num_shards")
    positive(world_size, "world_size")
    positive(num_workers, "num_workers")
    out: dict[int, dict[int, list[int]]] = {}
    for rank in range(world_size):
        mine = list(range(num_shards))[rank::world_size]
        out[rank] = {w: mine[w::num_workers] for w in range(num_workers)}
    return out


def make_seed(*args) -> int:
    """WebDataset's seed mixer: s = (s·31 + hash(arg)) & 0x7FFFFFFF over the arguments.

    ``ResampledShards`` seeds each worker with ``make_seed(rank*1000 + worker, epoch, seed)``
    when ``deterministic=True``. Strings hash differently in each process unless
    ``PYTHONHASHSEED`` is fixed; whole numbers hash to themselves.
    """
    seed = 0
    for arg in args:
        seed = (seed * 31 + hash(arg)) & 0x7FFFFFFF
    return seed


def detshuffle(
    items: Iterable[T], seed: int, epoch: int, *, bufsize: int = 1000, initial: int = 100
) -> list[T]:
    """The order ``detshuffle`` gives ``items`` in ``epoch`` (the first run is epoch 0).

    A ``random.Random(seed + epoch)`` drives WebDataset's buffered shuffle: fill a buffer of
    up to ``bufsize`` items (taking two per step while it is short), and once it holds
    ``initial`` items emit a random one, moving the last item into its place.
    ``WebDataset(urls, shardshuffle=n, detshuffle=True)`` uses ``bufsize=initial=n``.
    """
    positive(bufsize, "bufsize")
    rng = random.Random(seed + epoch)
    initial = min(positive(initial, "initial"), bufsize)
    source = iter(items)
    buffer: list[T] = []
    out: list[T] = []
    for item in source:
        buffer.append(item)
        if len(buffer) < bufsize:
            extra = next(source, _END)
            if extra is not _END:
                buffer.append(cast(T, extra))
        if len(buffer) >= initial:
            out.append(_pick(buffer, rng))
    while buffer:
        out.append(_pick(buffer, rng))
    return out


def _pick(buffer: list, rng: random.Random):
    k = rng.randint(0, len(buffer) - 1)
    item, buffer[k] = buffer[k], buffer[-1]
    buffer.pop()
    return item


def batches_per_rank(
    shard_sizes: Sequence[int],
    world_size: int,
    num_workers: int,
    batch_size: int,
    *,
    drop_last: bool = False,
) -> list[int]:
    """Batches each rank's DataLoader yields: Σ over its workers of ceil(n_w / B).

    Each worker batches its own stream (a partial last batch unless ``drop_last``); the
    loader takes workers round-robin and skips exhausted ones. Ranks that disagree hang DDP.
    """
    positive(batch_size, "batch_size")
    per_rank = assign(len(shard_sizes), world_size, num_workers)
    out = []
    for rank in range(world_size):
        total = 0
        for shards in per_rank[rank].values():
            samples = sum(shard_sizes[i] for i in shards)
            total += samples // batch_size if drop_last else math.ceil(samples / batch_size)
        out.append(total)
    return out


def equalized_batches(total_batches: int, world_size: int) -> int:
    """Batches per rank under ``with_epoch``-style equalising (old ``ddp_equalize(L)``):
    repeat the stream forever and stop every rank after L // world_size batches."""
    return non_negative(total_batches, "total_batches") // positive(world_size, "world_size")
