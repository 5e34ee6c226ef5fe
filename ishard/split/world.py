"""One policy over one world: per epoch, rank and worker, what is read, batched, repeated, dropped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ishard.errors import UsageError
from ishard.split import POLICIES, advice, dali, streaming, whale
from ishard.split import torch as sampler
from ishard.split import webdataset as wds
from ishard.split._check import non_negative, positive


@dataclass(frozen=True)
class World:
    """Who reads: nodes × ranks per node, each with DataLoader workers, batch size B."""

    nodes: int = 1
    ranks_per_node: int = 1
    workers: int = 1
    batch_size: int = 1
    epochs: int = 1

    @property
    def ranks(self) -> int:
        """All ranks (the world size)."""
        return self.nodes * self.ranks_per_node

    def check(self) -> World:
        """Self, once every count is a positive whole number."""
        for name in ("nodes", "ranks_per_node", "workers", "batch_size", "epochs"):
            positive(getattr(self, name), f"--{name.replace('_', '-')}")
        return self


@dataclass
class Part:
    """What one rank (or one of its workers) reads in an epoch."""

    ids: list[int] = field(default_factory=list)
    batches: int = 0
    shards: list[int] | None = None


def ranges(ids: Sequence[int]) -> list[list[int]]:
    """Distinct ids as sorted half-open ``[start, stop)`` runs."""
    out: list[list[int]] = []
    for i in sorted(set(ids)):
        if out and out[-1][1] == i:
            out[-1][1] += 1
        else:
            out.append([i, i + 1])
    return out


def offsets(sizes: Sequence[int]) -> list[int]:
    out = [0]
    for size in sizes:
        out.append(out[-1] + size)
    return out


def _shard_parts(sizes, shards: list[int], batch: int, drop_last: bool) -> Part:
    starts = offsets(sizes)
    ids = [i for s in shards for i in range(starts[s], starts[s + 1])]
    batches = len(ids) // batch if drop_last else math.ceil(len(ids) / batch)
    return Part(ids, batches, shards)


def _dali(sizes, world: World, epoch: int, opts: dict) -> list[list[Part]]:
    n = sum(sizes)
    out = []
    for rank in range(world.ranks):
        got = dali.epoch_batches(
            n,
            world.ranks,
            rank,
            world.batch_size,
            epoch + 1,
            pad_last_batch=opts.get("pad_last_batch", False),
            last_batch_policy=opts.get("last_batch_policy", "fill"),
            stick_to_shard=opts.get("stick_to_shard", False),
        )[epoch]
        out.append([Part([i for batch in got for i in batch], len(got))])
    return out


def _whale(sizes, world: World, epoch: int, opts: dict) -> list[list[Part]]:
    names = [str(i) for i in range(len(sizes))]
    tasks = whale.assign(
        names,
        [world.ranks_per_node] * world.nodes,
        unbalanced=opts.get("unbalanced", False),
        drop_last=opts.get("drop_last", False),
        seed=opts.get("seed", 0),
    )
    return [
        [_shard_parts(sizes, [int(f) for f in task], world.batch_size, False)] for task in tasks
    ]


def _webdataset(sizes, world: World, epoch: int, opts: dict) -> list[list[Part]]:
    owners = wds.assign(len(sizes), world.ranks, world.workers)
    return [
        [
            _shard_parts(sizes, owners[r][w], world.batch_size, opts.get("drop_last", False))
            for w in range(world.workers)
        ]
        for r in range(world.ranks)
    ]


def _torch(sizes, world: World, epoch: int, opts: dict) -> list[list[Part]]:
    n, b, w = sum(sizes), world.batch_size, world.workers
    out = []
    for rank in range(world.ranks):
        ids = sampler.indices(n, world.ranks, rank, drop_last=opts.get("drop_last", False))
        chunks = [ids[i : i + b] for i in range(0, len(ids), b)]
        if opts.get("drop_last_batch", False) and chunks and len(chunks[-1]) < b:
            chunks.pop()
        out.append(
            [Part([i for c in chunks[k::w] for i in c], len(chunks[k::w])) for k in range(w)]
        )
    return out


def _streaming(sizes, world: World, epoch: int, opts: dict) -> list[list[Part]]:
    ids = streaming.epoch_sample_ids(
        sizes,
        world.nodes,
        world.ranks_per_node,
        world.workers,
        world.batch_size,
        num_canonical_nodes=opts.get("canonical_nodes"),
        shuffle_algo=opts.get("shuffle"),
        seed=opts.get("seed", streaming.DEFAULT_SEED),
        epoch=epoch,
    )
    out = []
    for p in range(world.nodes):
        for r in range(world.ranks_per_node):
            parts = []
            for w in range(world.workers):
                real = [int(i) for i in ids[p, r, w].reshape(-1) if i >= 0]
                parts.append(Part(real, math.ceil(len(real) / world.batch_size)))
            out.append(parts)
    return out


_POLICY = {
    "dali": _dali,
    "whale": _whale,
    "webdataset": _webdataset,
    "torch": _torch,
    "streaming": _streaming,
}


def worker_ids(
    sizes: Sequence[int], policy: str, world: World, opts: dict, *, epoch: int, rank: int,
    worker: int
) -> list[int]:  # fmt: skip
    """The global sample ids one DataLoader worker of one rank reads in ``epoch``, from the
    same division ``ishard split`` shows (``opts`` from :func:`policy_options`). Where the
    framework divides among ranks only (DALI, Whale), a rank's batches (DALI) or shards (Whale)
    go to its workers in turn, as a DataLoader hands them out."""
    parts = _POLICY[policy](list(sizes), world, epoch, opts)[rank]
    if len(parts) == world.workers:
        return parts[worker].ids
    (part,) = parts
    if part.shards is not None:
        return _shard_parts(sizes, part.shards[worker :: world.workers], 1, False).ids
    b = world.batch_size
    batches = [part.ids[i : i + b] for i in range(0, len(part.ids), b)]
    return [i for batch in batches[worker :: world.workers] for i in batch]


def describe(shard_sizes: Sequence[int], policy: str, world: World, **options) -> dict:
    """Per epoch, rank and worker: ids read, batches, duplicates, drops and the batch spread.

    Args:
        shard_sizes: samples per shard, in shard order.
        policy: dali, whale, webdataset, torch or streaming.
        world: nodes, ranks per node, workers, batch size and epochs.
        **options: the policy's own (``last_batch_policy``, ``pad_last_batch``,
            ``stick_to_shard``, ``drop_last``, ``unbalanced``, ``shuffle``, ``seed``,
            ``canonical_nodes``, ``drop_last_batch``).

    Returns:
        A JSON-ready dict; ``epochs[e]["hang_risk"]`` is true when ranks' batch counts differ.
    """
    if policy not in POLICIES:
        raise UsageError(f"--policy {policy!r} is not a policy — use one of {', '.join(POLICIES)}")
    world.check()
    for size in shard_sizes:
        non_negative(size, "shard size")
    if not shard_sizes or sum(shard_sizes) == 0:
        raise UsageError("the shards hold no samples — give shard sizes above 0")
    epochs = [_epoch(shard_sizes, policy, world, e, options) for e in range(world.epochs)]
    if any(e["hang_risk"] for e in epochs):  # the same advice for every epoch: compute it once
        fix = _fix(list(shard_sizes), policy, world, options)
        for e in epochs:
            e["fix"] = fix if e["hang_risk"] else None
    return {
        "policy": policy,
        "options": options,
        "world": world.__dict__ | {"ranks": world.ranks},
        "shards": len(shard_sizes),
        "samples": sum(shard_sizes),
        "epochs": epochs,
    }


def _epoch(sizes, policy: str, world: World, epoch: int, opts: dict) -> dict:
    per_rank = _POLICY[policy](list(sizes), world, epoch, opts)
    seen: set[int] = set()
    ranks: list[dict[str, Any]] = []
    for rank, parts in enumerate(per_rank):
        ids = [i for part in parts for i in part.ids]
        repeats = 0
        for i in ids:
            repeats += i in seen
            seen.add(i)
        ranks.append(
            {
                "rank": rank,
                "samples": len(ids),
                "batches": sum(p.batches for p in parts),
                "duplicates": repeats,
                "ranges": ranges(ids),
                "workers": [
                    {
                        "worker": w,
                        "shards": p.shards,
                        "samples": len(p.ids),
                        "batches": p.batches,
                        "ranges": ranges(p.ids),
                    }
                    for w, p in enumerate(parts)
                ],
            }
        )
    counts = [r["batches"] for r in ranks]
    spread = max(counts) - min(counts)
    return {
        "epoch": epoch,
        "ranks": ranks,
        "dropped": sum(sizes) - len(seen),
        "batch_spread": spread,
        "hang_risk": spread > 0,
        "fix": None,
    }


def _fix(sizes: list[int], policy: str, world: World, opts: dict) -> str:
    """Only options that, recomputed, give every rank the same batch count (or why none)."""
    if policy == "webdataset":
        return advice.webdataset(
            sizes, world.ranks, world.workers, world.batch_size, opts.get("drop_last", False)
        )
    if policy == "whale":
        return advice.whale_tasks(
            sizes,
            world.nodes,
            world.ranks_per_node,
            world.batch_size,
            opts.get("unbalanced", False),
            opts.get("drop_last", False),
        )
    return "ishard knows no option of this policy that evens it out"  # they pad or drop


OPTIONS: dict[str, dict[str, Any]] = {
    "dali": {"last_batch_policy": "fill", "pad_last_batch": False, "stick_to_shard": False},
    "whale": {"unbalanced": False, "drop_last": False, "seed": 0},
    "webdataset": {"drop_last": False},
    "torch": {"drop_last": False, "drop_last_batch": False},
    "streaming": {"shuffle": None, "seed": streaming.DEFAULT_SEED, "canonical_nodes": None},
}


def policy_options(policy: str, options: dict) -> dict:
    """The policy's options with defaults filled in; one that belongs to another policy is an
    error (``None`` values count as not given)."""
    if policy not in OPTIONS:
        raise UsageError(f"--policy {policy!r} is not a policy — use one of {', '.join(POLICIES)}")
    given = {k: v for k, v in options.items() if v is not None and v is not False}
    for name in given:
        if name not in OPTIONS[policy]:
            owners = [p for p, known in OPTIONS.items() if name in known]
            flag = "--" + name.replace("_", "-")
            raise UsageError(
                f"{flag} does not apply to --policy {policy} — it is for --policy "
                f"{' or '.join(owners) or 'none'}; leave it out"
            )
    out = {**OPTIONS[policy], **given}
    if policy == "dali" and str(out["last_batch_policy"]).lower() not in dali.POLICIES:
        raise UsageError(
            f"--last-batch-policy {out['last_batch_policy']!r} must be fill, drop or partial"
        )
    if policy == "streaming":
        if out["shuffle"] is not None and out["shuffle"] not in streaming.ALGOS:
            raise UsageError(
                f"--shuffle {out['shuffle']!r} is not a Streaming shuffle — use one "
                f"of {', '.join(streaming.ALGOS)}"
            )
        if out["canonical_nodes"] is not None:
            positive(out["canonical_nodes"], "--canonical-nodes")
    return out


def parse_shard_sizes(text: str | Sequence[int]) -> list[int]:
    """``"100,100,80"`` (or a list) → ``[100, 100, 80]``."""
    items = str(text).split(",") if isinstance(text, str) else list(text)
    try:
        sizes = [int(str(i).strip()) for i in items]
    except ValueError:
        sizes = [-1]
    if not sizes or any(s < 0 for s in sizes):
        raise UsageError(
            f"--shard-sizes {text!r} is not a list of sample counts — write e.g. "
            "--shard-sizes 100,100,80"
        )
    return sizes
