"""Pure planning: order samples, cut them into shards (flat or by virtual directory), name shards."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ..errors import UsageError
from ..formats import extensions
from ..model import Sample
from ..names import sort_key
from ..rules import Rule
from .table import held, int_view
from .templates import NameTemplate

if TYPE_CHECKING:  # numpy is imported where a plan is cut: the command starts without it
    import numpy as np


@dataclass(frozen=True)
class Order:
    """How samples are ordered before packing: listing order, by key, or a seeded shuffle."""

    kind: str = "listing"  # listing | alpha | shuffle
    descending: bool = False
    seed: int | None = None


@dataclass(frozen=True)
class Bounds:
    """When a shard is cut: payload bytes reached ``size``, or ``count`` samples reached
    (``size`` None: by count alone)."""

    size: int | None
    count: int | None = None


@dataclass
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    samples: list[int] = field(default_factory=list)


def _tree(keys: Sequence[str]) -> _Node:
    """Virtual directories from the keys: ``a/b/c`` is sample ``c`` in directory ``a/b``."""
    root = _Node()
    for index, key in enumerate(keys):
        node = root
        parts = key.split("/")
        for part in parts[:-1]:
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = _Node()
            node = child
        node.samples.append(index)
    return root


def _alpha_key(keys: Sequence[str]):
    if any(not k.isascii() and any("\udc80" <= c <= "\udcff" for c in k) for k in keys):
        return lambda i: sort_key(keys[i])
    return keys.__getitem__  # code-point order is UTF-8 byte order for valid text


def _ordered(samples: Iterable[int], keys: Sequence[str], order: Order, rng) -> list[int]:
    samples = list(samples)
    if order.kind == "alpha":
        samples.sort(key=_alpha_key(keys))
    elif rng is not None:
        rng.shuffle(samples)
    if order.descending:
        samples.reverse()
    return samples


class _Cutter:
    """Greedy packing: add a sample, then cut once the shard reaches a bound."""

    def __init__(self, sizes: Sequence[int], bounds: Bounds, out: list[list[int]]) -> None:
        self.sizes, self.out = sizes, out
        self.limit = bounds.size if bounds.size is not None else math.inf
        self.count = bounds.count or 0

    def run(self, samples: Iterable[int], pending: list[int], size: int) -> tuple[list[int], int]:
        """Pack ``samples`` after ``pending``; return what is left unflushed."""
        sizes, limit, count, out = self.sizes, self.limit, self.count, self.out
        for sample in samples:
            pending.append(sample)
            size += sizes[sample]
            if size >= limit or len(pending) == count:
                out.append(pending)
                pending, size = [], 0
        return pending, size

    def visit(self, node: _Node, keys, order: Order, rng, collapse: bool, root: bool) -> list[int]:
        """Children (in order) before the directory's own samples; returns the unflushed rest."""
        children = sorted(node.children.items(), key=lambda kv: sort_key(kv[0]))
        if order.descending:
            children.reverse()
        pending: list[int] = []
        size = 0
        for _, child in children:
            rest = self.visit(child, keys, order, rng, collapse, False)
            pending, size = self.run(rest, pending, size)
        pending, size = self.run(_ordered(node.samples, keys, order, rng), pending, size)
        if root or not collapse:
            if pending:
                self.out.append(pending)
            return []
        return pending


SampleRun: TypeAlias = "Sequence[int] | np.ndarray"  # the samples of one shard, by index

GREEDY_IN_PYTHON_BELOW = 64  # samples a shard: fewer, and a flat run is packed sample by sample
CUT_WINDOW = 1 << 20  # samples whose running sums a flat cut holds at once (more if a shard needs)


def _flat_cut(order: np.ndarray | None, sizes: Sequence[int], bounds: Bounds) -> list[SampleRun]:
    """What ``_Cutter.run`` packs from a flat run (``order``: sample indices; None: every
    sample in listing order, when each shard is a ``range`` of them, no array), found a shard
    at a time with numpy: a shard starting at sample ``i`` ends at the first sample where the
    running size reaches the size bound (a binary search in the running sums), or at the count
    bound. Slices of ``order``; a shard of fewer than ``GREEDY_IN_PYTHON_BELOW`` samples on
    average is packed sample by sample (cheaper than a search per shard)."""
    import numpy as np

    count = len(sizes) if order is None else len(order)
    run: Any = range(count) if order is None else order  # sliced into the shards
    listed = isinstance(sizes, (list, tuple))  # else an int column, read a window at a time
    weights = np.asarray(sizes, dtype=np.int64) if listed else int_view(sizes)
    if order is not None:
        weights = weights[order]  # the sizes in the run's order (a copy)
    total = int(weights.sum(dtype=np.int64))
    per_shard = bounds.count or count
    if bounds.size is not None and bounds.size > 0:
        per_shard = min(per_shard, count * bounds.size // max(total, 1))
    if bounds.size is None or bounds.size <= 0 or per_shard < GREEDY_IN_PYTHON_BELOW:
        if bounds.size is None:  # by count alone: equal runs
            step = bounds.count or max(count, 1)
            return [run[i : i + step] for i in range(0, count, step)]
        out: list = []
        pending, _ = _Cutter(held(sizes), bounds, out).run(list(run), [], 0)
        return [np.asarray(shard, dtype=np.int64) for shard in (*out, pending) if shard]
    shards: list[SampleRun] = []
    start, most, window = 0, bounds.count or count, CUT_WINDOW
    lo, ends = 0, _running_sums(weights, 0, window, 0)  # the sums before samples lo, lo + 1, …
    while start < count:
        target = int(ends[start - lo]) + bounds.size
        if target > total:  # no later shard reaches the size bound: by count alone
            shards += [run[i : i + most] for i in range(start, count, most)]
            break
        if target > ends[-1]:  # it may end past the window: one from this shard on
            window = max(window, 2 * (len(ends) - 1 - (start - lo)))  # a shard may need more
            lo, ends = start, _running_sums(weights, start, window, int(ends[start - lo]))
            continue
        stop = lo + int(np.searchsorted(ends, target, side="left"))
        stop = min(max(stop, start + 1), start + most, count)
        shards.append(run[start:stop])
        start = stop
    return shards


def _running_sums(weights: np.ndarray, start: int, window: int, before: int) -> np.ndarray:
    """The running sums of ``weights`` before samples ``start`` to ``start + window`` (or the
    last), the first ``before``."""
    import numpy as np

    part = weights[start : start + window]
    ends = np.empty(len(part) + 1, dtype=np.int64)
    ends[0] = before
    np.cumsum(part, out=ends[1:])
    ends[1:] += before
    return ends


def cut_indices(
    keys: Sequence[str],
    sizes: Sequence[int],
    bounds: Bounds,
    order: Order,
    collapse: bool,
    flat: bool | None = None,
) -> list[SampleRun]:
    """Cut samples (given by key and size) into shards of sample indices.

    Flat keys (no ``/``) are one greedy run over all samples (shards as numpy arrays). Keys
    with ``/`` form virtual directories, visited in sorted order, children first: without
    ``collapse`` each directory is packed on its own and a shard never mixes directories; with
    it, a directory's remainder moves up into its parent, so only the last shard may be below
    the size bound. ``flat``: whether no key holds a '/', when known (None: the keys are read).
    """
    rng = random.Random(order.seed) if order.kind == "shuffle" else None
    if order.kind == "alpha" and not isinstance(keys, list):
        keys = list(keys)  # sorting looks keys up at random: as str objects, for the sort only
    if not _folders(keys, flat):  # no tree to build
        import numpy as np

        if order.kind == "listing" and not order.descending:  # ranges of samples: no array
            return _flat_cut(None, sizes, bounds)
        run = np.array(_ordered(range(len(keys)), keys, order, rng), dtype=np.int64)
        return _flat_cut(run, sizes, bounds)
    out: list[list[int]] = []
    _Cutter(held(sizes), bounds, out).visit(_tree(keys), keys, order, rng, collapse, True)
    return list[SampleRun](out)


def in_a_folder(key: str) -> bool:
    """Is sample ``key`` in a virtual folder (``a/b/c``: sample ``c`` in ``a/b``)?"""
    return "/" in key


IN_A_FOLDER = Rule("a key in a folder", in_a_folder, "contains({key}, '/')")


def _folders(keys: Sequence[str], flat: bool | None) -> bool:
    """Whether some key holds a '/' (``flat`` says, when known)."""
    return not flat if flat is not None else any(map(in_a_folder, keys))


def balance(
    cuts: list[SampleRun],
    keys: Sequence[str],
    collapse: bool,
    *,
    num_shards: int | None = None,
    multiple_of: int | None = None,
    flat: bool | None = None,
) -> list[SampleRun]:
    """Re-cut planned shards into ``num_shards`` (or the planned count rounded up to a multiple
    of ``multiple_of``) shards of consecutive samples whose counts differ by at most one.

    Raises:
        UsageError: keys form directories and ``collapse`` is off, or too few samples.
    """
    if not num_shards and not multiple_of:
        return cuts
    flag = f"--num-shards {num_shards}" if num_shards else f"--shards-multiple-of {multiple_of}"
    if not collapse and _folders(keys, flat):
        raise UsageError(
            f"{flag} needs one flat run of samples, but the keys form directories "
            "— add --collapse, or a --sample-key-pattern without directories"
        )
    import numpy as np

    order = np.concatenate(
        [np.asarray(shard, dtype=np.int64) for shard in cuts] or [np.empty(0, np.int64)]
    )
    step = multiple_of or 1  # one of the two is given (checked above)
    count = num_shards or -(-len(cuts) // step) * step
    if count == 0:  # nothing to shard: no shards is a multiple of anything
        return []
    if count > len(order):
        raise UsageError(
            f"{flag} asks for {count} shards but there are only {len(order)} "
            "samples — ask for fewer shards"
        )
    bounds = [0, *itertools.accumulate(balanced_sizes(len(order), count))]
    return [order[bounds[k] : bounds[k + 1]] for k in range(count)]


def balanced_sizes(total: int, count: int) -> list[int]:
    """Samples in each of ``count`` balanced shards of ``total`` (what ``--num-shards`` and
    ``--shards-multiple-of`` make): the first ``total mod count`` hold one more."""
    per, extra = divmod(total, count)
    return [per + 1] * extra + [per] * (count - extra)


def cut(
    samples: Sequence[Sample], bounds: Bounds, order: Order, collapse: bool
) -> list[list[Sample]]:
    """:func:`cut_indices` on sample values: lists of samples per shard."""
    keys = [s.key for s in samples]
    shards = cut_indices(keys, [s.size for s in samples], bounds, order, collapse)
    return [[samples[i] for i in shard] for shard in shards]


def shard_names(
    count: int, template: NameTemplate, ext: str, *, own_ext: bool = False, first: int = 0
) -> list[str]:
    """``count`` template names from the ``first``-th on, each plus ``ext``.

    With ``own_ext`` (EKM formats such as ``fish-%d.tar``) a name that already ends in an
    archive extension keeps it and ``ext`` is not added.

    Raises:
        UsageError: the template yields fewer names than there are shards.
    """
    if first + count > template.count:
        used = f" ({first} of them used already)" if first else ""
        raise UsageError(
            f"shard template {template.text!r} yields {template.count} name(s){used} but the "
            f"plan needs {count} shards — widen its range or raise --shard-size"
        )
    names = []
    for index in range(first, first + count):
        name = template.name(index)
        names.append(name if own_ext and has_archive_ext(name) else name + ext)
    return names


def check_unique(names: Sequence) -> None:
    """Raise UsageError if two shards (say, of different EKM formats) would get one name."""
    seen: set[str] = set()
    for item in names:
        name = getattr(item, "name", item)
        if name in seen:
            raise UsageError(
                f"two shards would both be named {name!r} — give the --ekm formats "
                "distinct prefixes"
            )
        seen.add(name)


def has_archive_ext(name: str) -> bool:
    """Does ``name`` already end in an archive extension ishard writes?"""
    return name.endswith(extensions())
