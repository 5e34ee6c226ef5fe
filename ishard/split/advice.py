"""What would give every rank the same batch count: each option is tried before it is named."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ishard.planning.cut import balanced_sizes
from ishard.split import webdataset as wds
from ishard.split import whale


def _even(counts: Sequence[int]) -> bool:
    return max(counts) == min(counts)


def _reshard(
    sizes: Sequence[int], unit: int, readers: str, even: Callable[[list[int]], bool]
) -> tuple[str | None, str | None]:
    """A reshard tip for shards dealt round-robin to ``unit`` readers, or why there is none.

    Any balanced count that is a multiple of ``unit`` gives reader i ⌊N/unit⌋ samples, one
    more for the first N mod unit readers, so one count answers for all of them. It is the
    count ``--shards-multiple-of`` makes (named only if it changes the sizes), or the largest
    multiple of ``unit`` with a sample per shard when that would exceed N."""
    n, count = sum(sizes), len(sizes)
    if n < unit:
        return None, f"{n} samples are fewer than the {unit} shards it takes to feed all {readers}"
    rounded = math.ceil(count / unit) * unit
    flag = f"--shards-multiple-of {unit}"
    if rounded > n:
        rounded = n // unit * unit
        flag = f"--num-shards {rounded}"
    after = balanced_sizes(n, rounded)
    if not even(after):
        return None, (
            f"resharding cannot: with any multiple of {unit} shards the {unit} {readers} get "
            f"{n // unit} or {n // unit + 1} samples each"
        )
    if after == list(sizes):
        return None, None
    low, high = min(after), max(after)
    span = f"{low}" if low == high else f"{low}–{high}"
    return f"reshard with 'ishard shard {flag}' ({rounded} shards of {span} samples)", None


def _compose(lead: str, tips: list[str], note: str | None) -> str:
    text = "; or ".join(tips) if tips else "no option of this policy evens it out"
    return lead + text + (f" ({note})" if note else "")


def webdataset(sizes: Sequence[int], ranks: int, workers: int, batch: int, drop_last: bool) -> str:
    """Advice for ``split_by_node`` + ``split_by_worker`` with uneven batch counts."""
    n, unit = sum(sizes), ranks * workers
    owners = wds.assign(len(sizes), ranks, workers)
    per_worker = [
        [sum(sizes[s] for s in owners[r][w]) for w in range(workers)] for r in range(ranks)
    ]
    per_rank = [sum(ws) for ws in per_worker]
    lead = ""
    if len(sizes) % unit == 0:
        lead = (
            f"every worker already gets {len(sizes) // unit} shard(s) ({len(sizes)} shards over "
            f"{ranks} rank(s) × {workers} worker(s)), "
        )
        if not _even(per_rank):
            lead += (
                f"but ranks get {min(per_rank)} to {max(per_rank)} samples and equal batches "
                "need equal samples per rank — "
            )
        else:
            flat = [c for ws in per_worker for c in ws]
            lead += (
                f"but workers get {min(flat)} to {max(flat)} samples and each batches its own, "
                "so equal batches need equal samples per worker — "
            )

    def even(candidate: list[int], drop: bool = drop_last) -> bool:
        return _even(wds.batches_per_rank(candidate, ranks, workers, batch, drop_last=drop))

    tip, note = _reshard(sizes, unit, "workers", even)
    tips = [tip] if tip else []
    if not drop_last and even(list(sizes), True):
        lost = sum(c % batch for ws in per_worker for c in ws)
        tips.append(
            "pass --drop-last (DataLoader(drop_last=True): each worker drops its partial last "
            f"batch, {lost} sample(s) per epoch)"
        )
    least = min(wds.batches_per_rank(sizes, ranks, workers, batch, drop_last=drop_last))
    steps = n // (batch * ranks)
    if steps and 2 * least >= steps:
        tips.append(
            f"stop every rank after {steps} batches (N // (B·world) = {n} // ({batch}·{ranks})): "
            f"loader.repeat(2).with_epoch({steps}), or resampled=True and "
            f".with_epoch({steps}); some samples are then read twice or not at all"
        )
    return _compose(lead, tips, note)


def whale_tasks(
    sizes: Sequence[int], tasks: int, gpus: int, batch: int, unbalanced: bool, drop_last: bool
) -> str:
    """Advice for EPL's file slicing with uneven batch counts per worker task."""
    files, n = len(sizes), sum(sizes)
    unit = whale.units([gpus] * tasks)[-1].stop

    def samples(candidate: Sequence[int], unb: bool, drop: bool) -> list[int]:
        names = [str(i) for i in range(len(candidate))]
        got = whale.assign(names, [gpus] * tasks, unbalanced=unb, drop_last=drop)
        return [sum(candidate[int(f)] for f in task) for task in got]

    def even(candidate: Sequence[int], unb: bool = unbalanced, drop: bool = drop_last) -> bool:
        return _even([math.ceil(s / batch) for s in samples(candidate, unb, drop)])

    tips, lead = [], ""
    excess = files % unit
    if excess and unbalanced and even(sizes, False, True):  # EPL checks unbalanced first
        cut = sum(sizes[files - excess :])
        how = (
            "leave out --unbalanced (EPL applies it before --drop-last)"
            if drop_last
            else "pass --drop-last instead of --unbalanced"
        )
        tips.append(f"{how}: the last {excess} file(s) ({cut} samples) are dropped")
    if excess and (unbalanced or drop_last) and even(sizes, False, False):
        flags = (("--unbalanced", unbalanced), ("--drop-last", drop_last))
        given = " and ".join(flag for flag, on in flags if on)
        tips.append(
            f"leave out {given}: EPL then does not slice {files} files over {unit} tasks "
            f"and every task reads all {n} samples"
        )
    if not excess or (drop_last and not unbalanced):
        per_task = samples(sizes, unbalanced, drop_last)
        lead = (
            f"every task already gets {files // unit} file(s) ({files - excess} files over "
            f"{unit} tasks), but tasks get {min(per_task)} to {max(per_task)} samples and "
            "equal batches need equal samples per task — "
        )
    tip, note = _reshard(sizes, unit, "tasks", even)
    return _compose(lead, tips + ([tip] if tip else []), note)
