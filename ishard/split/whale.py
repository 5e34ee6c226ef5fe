"""Whale (PAI) / EPL file slicing: which input files each worker task reads."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from functools import reduce

from ishard.errors import UsageError
from ishard.split._check import non_negative, positive


def units(gpus_per_task: Sequence[int]) -> list[range]:
    """The slicing units each task owns: L_t/g consecutive units, g = gcd of all L_t."""
    if not gpus_per_task:
        raise UsageError("gpus_per_task is empty — give the GPU count of every worker task")
    for count in gpus_per_task:
        positive(count, "gpus per task")
    g = reduce(math.gcd, gpus_per_task)
    out, start = [], 0
    for count in gpus_per_task:
        out.append(range(start, start + count // g))
        start += count // g
    return out


def assign(
    files: Sequence[str],
    gpus_per_task: Sequence[int],
    *,
    unbalanced: bool = False,
    drop_last: bool = False,
    seed: int = 0,
) -> list[list[str]]:
    """The files each worker task reads under EPL's ``io.slicing`` rule.

    Args:
        files: the input file names in list order.
        gpus_per_task: model replicas (GPUs) on each worker task, tasks in index order.
        unbalanced: ``io.unbalanced_io_slicing`` — slice even when files do not divide evenly.
        drop_last: ``io.drop_last_files`` — drop the last ``F mod U`` files, then slice.
        seed: seeds the shuffle of a replicated list (EPL's own is unseeded), per task.

    Returns:
        One list per task. Sliced: file i goes to unit i mod U, a task keeps its units' files
        in list order. Not sliced (fewer files than units, or uneven without a flag): every
        task gets all files, repeated L_t/g times and shuffled when it holds several units.
    """
    owned = units(gpus_per_task)
    non_negative(seed, "seed")
    count = owned[-1].stop
    files = list(files)
    if len(files) >= count and len(files) % count and drop_last and not unbalanced:
        files = files[: len(files) - len(files) % count]
    if len(files) < count or (len(files) % count and not unbalanced):
        return [_replicated(files, len(mine), seed, task) for task, mine in enumerate(owned)]
    return [[f for i, f in enumerate(files) if i % count in mine] for mine in owned]


def _replicated(files: list[str], copies: int, seed: int, task: int) -> list[str]:
    if copies == 1:
        return list(files)
    out = files * copies
    random.Random(f"epl:{seed}:{task}").shuffle(out)
    return out
