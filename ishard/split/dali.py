"""NVIDIA DALI readers and iterators (``reader_name`` mode, no shuffle): who gets which samples."""

from __future__ import annotations

import math
from collections.abc import Iterator

from ishard.errors import UsageError
from ishard.split._check import index, non_negative, positive

POLICIES = ("fill", "drop", "partial")


def _check(num_samples: int, num_shards: int) -> None:
    positive(num_shards, "num_shards")
    non_negative(num_samples, "num_samples")
    if num_samples < num_shards:
        raise UsageError(
            f"{num_samples} samples cannot be split over {num_shards} DALI shards — DALI needs "
            "at least one sample per shard; use fewer ranks"
        )


def shard_bounds(num_samples: int, num_shards: int) -> list[tuple[int, int]]:
    """Each DALI shard's ``(start, size)``: start(k) = floor(k·N/S); sizes differ by at most 1.

    Raises:
        UsageError: fewer samples than shards (DALI refuses that too).
    """
    _check(num_samples, num_shards)
    starts = [k * num_samples // num_shards for k in range(num_shards + 1)]
    return [(starts[k], starts[k + 1] - starts[k]) for k in range(num_shards)]


def reader_epoch_shard(
    shard_id: int, epoch: int, num_shards: int, *, stick_to_shard: bool = False
) -> int:
    """The shard a reader reads in its ``epoch``: (shard_id + epoch) mod S, or its own if sticky."""
    index(shard_id, num_shards, "shard_id", "num_shards")
    return shard_id if stick_to_shard else (shard_id + non_negative(epoch, "epoch")) % num_shards


def reader_meta(
    num_samples: int, num_shards: int, *, pad_last_batch: bool = False
) -> dict[str, int]:
    """The reader's ``epoch_size`` (N) and ``epoch_size_padded`` (M·S with padding, else N)."""
    _check(num_samples, num_shards)
    padded = math.ceil(num_samples / num_shards) * num_shards if pad_last_batch else num_samples
    return {"epoch_size": num_samples, "epoch_size_padded": padded}


def iterator_size(
    num_samples: int,
    num_shards: int,
    batch_size: int,
    *,
    pad_last_batch: bool = False,
    last_batch_policy: str = "fill",
) -> tuple[int, int]:
    """What a DALI iterator with ``reader_name`` reports in epoch 0: ``(size, len)``.

    DROP: floor(N/S) and floor(size/B); FILL or PARTIAL with padding: M and ceil(M/B);
    without padding: ceil(M/B)·B and ceil(M/B) (FILL's later epochs may differ).
    """
    _check(num_samples, num_shards)
    policy = _policy(last_batch_policy)
    positive(batch_size, "batch_size")
    most = math.ceil(num_samples / num_shards)
    if policy == "drop":
        size = num_samples // num_shards
        return size, size // batch_size
    batches = math.ceil(most / batch_size)
    return (most if pad_last_batch else batches * batch_size), batches


def _policy(name: str) -> str:
    policy = str(name).lower()
    if policy not in POLICIES:
        raise UsageError(
            f"last_batch_policy {name!r} is not a DALI policy — use fill, drop or partial"
        )
    return policy


def _stream(
    bounds: list[tuple[int, int]], shard_id: int, batch_size: int, most: int, pad: bool, stick: bool
) -> Iterator[int]:
    """Everything one reader emits, forever: its reader-epochs one after the other."""
    epoch = 0
    while True:
        start, size = bounds[reader_epoch_shard(shard_id, epoch, len(bounds), stick_to_shard=stick)]
        yield from range(start, start + size)
        if pad:  # repeat the last sample up to M, then to a batch boundary
            yield from [start + size - 1] * (math.ceil(most / batch_size) * batch_size - size)
        epoch += 1


def _fill_counts(
    bounds: list[tuple[int, int]], batch_size: int, epochs: int, stick: bool
) -> list[int]:
    """Batches per iterator epoch for FILL without padding: enough for the slowest reader to
    finish its current reader-epoch; a reader-epoch all readers already passed is skipped."""
    shards = len(bounds)
    totals = [0] * shards  # samples reader k has to emit to end its reader-epoch ``turn``
    emitted, turn, counts = 0, 0, []
    for _ in range(epochs):
        while True:
            for k in range(shards):
                totals[k] += bounds[reader_epoch_shard(k, turn, shards, stick_to_shard=stick)][1]
            turn += 1
            ahead = max(t - emitted for t in totals)
            if ahead > 0:
                break
        batches = math.ceil(ahead / batch_size)
        counts.append(batches)
        emitted += batches * batch_size
    return counts


def epoch_batches(
    num_samples: int,
    num_shards: int,
    shard_id: int,
    batch_size: int,
    epochs: int,
    *,
    pad_last_batch: bool = False,
    last_batch_policy: str = "fill",
    stick_to_shard: bool = False,
) -> list[list[list[int]]]:
    """The batches rank ``shard_id`` receives in each iterator epoch, as global sample indices.

    Models a non-shuffled DALI reader (``shard_id``, ``num_shards``, ``pad_last_batch``,
    ``stick_to_shard``) behind an iterator built with ``reader_name`` and
    ``last_batch_policy``. Padding duplicates are included; PARTIAL batches are trimmed (a
    batch may be empty); DROP's discarded batch is left out. The reader's stream carries
    over between epochs exactly as DALI's does (FILL's read-ahead, DROP's undrained padding).

    Raises:
        UsageError: a bad count, shard id or policy, or fewer samples than shards.
    """
    bounds = shard_bounds(num_samples, num_shards)
    index(shard_id, num_shards, "shard_id", "num_shards")
    positive(batch_size, "batch_size")
    non_negative(epochs, "epochs")
    policy = _policy(last_batch_policy)
    most = math.ceil(num_samples / num_shards)
    stream = _stream(bounds, shard_id, batch_size, most, pad_last_batch, stick_to_shard)
    fill = policy == "fill" and not pad_last_batch
    counts = _fill_counts(bounds, batch_size, epochs, stick_to_shard) if fill else []
    size, _ = iterator_size(
        num_samples, num_shards, batch_size, pad_last_batch=pad_last_batch, last_batch_policy=policy
    )
    smallest = min(s for _, s in bounds)
    out: list[list[list[int]]] = []
    for epoch in range(epochs):
        shard_size = bounds[
            reader_epoch_shard(shard_id, epoch, num_shards, stick_to_shard=stick_to_shard)
        ][1]
        batches: list[list[int]] = []
        counter = 0
        while (len(batches) < counts[epoch]) if fill else counter < size:
            batch = [next(stream) for _ in range(batch_size)]
            counter += batch_size
            if policy == "drop" and counter > smallest:
                break  # fetched, then thrown away: every rank stops together
            if policy == "partial" and counter > shard_size:
                batch = batch[: max(0, batch_size - (counter - shard_size))]
            batches.append(batch)
        out.append(batches)
    return out
