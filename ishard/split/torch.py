"""PyTorch's DistributedSampler without shuffling: the sample indices each rank reads."""

from __future__ import annotations

import math

from ishard.split._check import index, non_negative, positive


def num_samples_per_rank(num_samples: int, world_size: int, *, drop_last: bool = False) -> int:
    """ceil(N/R); with ``drop_last`` and N mod R ≠ 0, ceil((N−R)/R) = floor(N/R)."""
    non_negative(num_samples, "num_samples")
    positive(world_size, "world_size")
    if drop_last and num_samples % world_size:
        return max(0, math.ceil((num_samples - world_size) / world_size))
    return math.ceil(num_samples / world_size)


def indices(num_samples: int, world_size: int, rank: int, *, drop_last: bool = False) -> list[int]:
    """Rank ``rank``'s indices: range(N) padded by repeating from its start (tiled when the
    padding is longer than N) or truncated with ``drop_last``, then every R-th from ``rank``.
    """
    index(rank, positive(world_size, "world_size"), "rank", "world_size")
    per_rank = num_samples_per_rank(num_samples, world_size, drop_last=drop_last)
    total = per_rank * world_size
    order = list(range(num_samples))
    if total > num_samples and num_samples:
        missing = total - num_samples
        order += (order * math.ceil(missing / num_samples))[:missing]
    return order[:total][rank:total:world_size]


def batches_per_rank(
    num_samples: int,
    world_size: int,
    batch_size: int,
    *,
    drop_last: bool = False,
    drop_last_batch: bool = False,
) -> int:
    """DataLoader batches per rank: ceil(per_rank/B), or floor with the loader's own
    ``drop_last`` (``drop_last_batch`` here; ``drop_last`` is the sampler's).

    Every rank gets the same count: the sampler pads or truncates to equal ranks.
    """
    per_rank = num_samples_per_rank(num_samples, world_size, drop_last=drop_last)
    positive(batch_size, "batch_size")
    return per_rank // batch_size if drop_last_batch else math.ceil(per_rank / batch_size)
