"""Pure planning: order samples, cut them into shards (flat or by virtual directory), name shards."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from .errors import UsageError
from .listing import sort_key
from .model import Sample, ShardPlan
from .templates import NameTemplate


@dataclass(frozen=True)
class Order:
    """How samples are ordered before packing: listing order, by key, or a seeded shuffle."""

    kind: str = "listing"  # listing | alpha | shuffle
    descending: bool = False
    seed: int | None = None


@dataclass(frozen=True)
class Bounds:
    """When a shard is cut: payload bytes reached ``size``, or ``count`` samples reached."""

    size: int
    count: int | None = None


@dataclass
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)


def _tree(samples: Sequence[Sample]) -> _Node:
    """Virtual directories from the keys: ``a/b/c`` is sample ``c`` in directory ``a/b``."""
    root = _Node()
    for sample in samples:
        node = root
        parts = sample.key.split("/")
        for part in parts[:-1]:
            child = node.children.get(part)
            if child is None:
                child = node.children[part] = _Node()
            node = child
        node.samples.append(sample)
    return root


def _ordered(node: _Node, order: Order, rng: random.Random | None) -> tuple[list, list[Sample]]:
    children = sorted(node.children.items(), key=lambda kv: sort_key(kv[0]))
    samples = list(node.samples)
    if order.kind == "alpha":
        samples.sort(key=lambda s: sort_key(s.key))
    elif rng is not None:
        rng.shuffle(samples)
    if order.descending:
        children.reverse()
        samples.reverse()
    return [c for _, c in children], samples


class _Cutter:
    """Greedy packing: add a sample, then cut once the shard reaches a bound."""

    def __init__(self, bounds: Bounds, out: list[list[Sample]]) -> None:
        self.bounds, self.out = bounds, out

    def pack(self, pending: list[Sample], size: int, sample: Sample) -> tuple[list[Sample], int]:
        pending.append(sample)
        size += sample.size
        if size >= self.bounds.size or (
            self.bounds.count is not None and len(pending) >= self.bounds.count
        ):
            self.out.append(pending)
            return [], 0
        return pending, size

    def visit(self, node: _Node, order: Order, rng, collapse: bool, root: bool) -> list[Sample]:
        """Children (in order) before the directory's own samples; returns the unflushed rest."""
        children, samples = _ordered(node, order, rng)
        pending: list[Sample] = []
        size = 0
        for child in children:
            for sample in self.visit(child, order, rng, collapse, False):
                pending, size = self.pack(pending, size, sample)
        for sample in samples:
            pending, size = self.pack(pending, size, sample)
        if root or not collapse:
            if pending:
                self.out.append(pending)
            return []
        return pending


def cut(samples: Sequence[Sample], bounds: Bounds, order: Order, collapse: bool) -> list[list[Sample]]:
    """Cut samples into shards.

    Flat keys (no ``/``) are one greedy run over all samples. Keys with ``/`` form virtual
    directories, visited in sorted order, children first: without ``collapse`` each directory
    is packed on its own and a shard never mixes directories; with it, a directory's remainder
    moves up into its parent, so only the last shard may be below the size bound.
    """
    rng = random.Random(order.seed) if order.kind == "shuffle" else None
    out: list[list[Sample]] = []
    _Cutter(bounds, out).visit(_tree(samples), order, rng, collapse, True)
    return out


def name_shards(
    groups: Sequence[list[Sample]], template: NameTemplate, ext: str, *, own_ext: bool = False
) -> list[ShardPlan]:
    """Give each group the next template name plus ``ext``.

    With ``own_ext`` (EKM formats such as ``fish-%d.tar``) a name that already ends in an
    archive extension keeps it and ``ext`` is not added.

    Raises:
        UsageError: the template yields fewer names than there are shards.
    """
    if len(groups) > template.count:
        raise UsageError(
            f"shard template {template.text!r} yields {template.count} name(s) but the plan "
            f"needs {len(groups)} shards — widen its range or raise --shard-size"
        )
    shards = []
    for index, samples in enumerate(groups):
        name = template.name(index)
        if not (own_ext and has_archive_ext(name)):
            name += ext
        shards.append(ShardPlan(name, tuple(samples), sum(s.size for s in samples)))
    return shards


ARCHIVE_EXTS = (".tar", ".tgz", ".tar.gz", ".zip", ".tar.lz4")


def has_archive_ext(name: str) -> bool:
    """Does ``name`` already end in an archive extension ishard writes?"""
    return name.endswith(ARCHIVE_EXTS)


def check_unique(shards: Sequence[ShardPlan]) -> None:
    """Raise UsageError if two shards (say, of different EKM formats) would get one name."""
    seen: set[str] = set()
    for shard in shards:
        if shard.name in seen:
            raise UsageError(
                f"two shards would both be named {shard.name!r} — give the --ekm formats "
                "distinct prefixes"
            )
        seen.add(shard.name)
