"""Read one rank's and worker's samples of an ishard manifest, divided as a training framework
does: the manifest read and checked as ``ishard verify`` does, the division ``ishard split``
shows (its policy registry), the members read by ``ishard ls``'s archive reader."""

from __future__ import annotations

import bisect
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from ishard.errors import SourceError, UsageError
from ishard.planning.keys import KeyFunction, extension
from ishard.readback.archive import contents
from ishard.readback.dataset import ROLE, dataset
from ishard.run.manifest import MANIFEST_NAME, check_manifest, member_key_function
from ishard.run.manifest import read_manifest as read_dataset_manifest
from ishard.split import POLICIES
from ishard.split import webdataset as wds
from ishard.split._check import index, positive
from ishard.split.world import World, offsets, policy_options, worker_ids
from ishard.store import Location, open_url


class ReadSample(NamedTuple):
    """One sample: its key and its files' bytes by extension (``{"jpg": b"...", "cls": b"3"}``)."""

    key: str
    files: dict[str, bytes]


def read_manifest(
    url: str, storage_options=None, endpoint_url: str | None = None
) -> tuple[list[str], list[int], Mapping]:
    """Shard URLs (next to the manifest), samples per shard and the options the run recorded
    (its key pattern and member names say what a member's sample is).

    ``url``: a manifest.json, or the folder (or store prefix) a run wrote, which holds one.

    Raises:
        UsageError: a local manifest path that does not exist, a folder without one.
        IshardError: the manifest cannot be read (worded as a read of it).
        DataError: it is not an ishard manifest (checked as ``ishard verify`` checks it).
    """
    given = _manifest_path(url)
    where = dataset(given, endpoint_url=endpoint_url, storage_options=storage_options)
    local = Location.local_path(given) is not None
    if local and os.path.basename(given) != MANIFEST_NAME:  # a manifest under another name
        try:
            with open(given, "rb") as f:
                doc = check_manifest(f.read(), given)
        except OSError as err:
            raise where.error(err, ROLE) from None
    else:
        doc = read_dataset_manifest(where)
    # shards lie beside the manifest (a local one's named by absolute paths)
    if local:
        folder = os.path.dirname(os.path.abspath(given))
        urls = [os.path.join(folder, e["url"]) for e in doc["shardlist"]]
    else:
        urls = [where.child(e["url"]) for e in doc["shardlist"]]
    counts = [int(e["nsamples"]) for e in doc["shardlist"]]
    record = doc.get("ishard") or {}
    return urls, counts, record.get("options", {})


def _manifest_path(url: str) -> str:
    """A local manifest's path: ``url`` itself, or ``url/manifest.json`` for the folder a run
    wrote (what ``ishard verify`` takes); a store URL as it is.

    Raises:
        UsageError: no such file, or a folder without a manifest.json.
    """
    if Location.local_path(url) is None or os.path.isfile(url):
        return url
    if os.path.isdir(url):
        inside = os.path.join(url, MANIFEST_NAME)
        if os.path.isfile(inside):
            return inside
        raise UsageError(
            f"folder {url!r} has no {MANIFEST_NAME} (a run writes it when it ends) — shard into "
            f"it first (ishard shard SRC {url}), finish its run with --resume, or give the path "
            f"of a {MANIFEST_NAME}"
        )
    raise UsageError(f"manifest {url!r} does not exist — give DST/manifest.json of a shard run")


def _env_world(rank, world_size, worker, num_workers) -> tuple[int, int, int, int]:
    """Missing rank/world from RANK/WORLD_SIZE or torch.distributed, workers from torch's
    worker info — torch only when it is already imported (a DataLoader worker has it)."""
    if rank is None or world_size is None:
        dist = sys.modules.get("torch.distributed")
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        elif dist is not None and dist.is_available() and dist.is_initialized():
            rank, world_size = dist.get_rank(), dist.get_world_size()
        else:
            rank, world_size = 0, 1
    if worker is None or num_workers is None:
        data = sys.modules.get("torch.utils.data")
        info = data.get_worker_info() if data is not None else None
        worker, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank, world_size, worker, num_workers


def _world(policy: str, world_size: int, nodes: int, num_workers: int, batch_size: int) -> World:
    """``ishard split``'s world for a reader's ranks: Whale's worker tasks are the ranks (one
    GPU each); Streaming's ranks sit on ``nodes`` nodes; the others need only the count."""
    if policy == "whale":
        return World(nodes=world_size, workers=num_workers, batch_size=batch_size)
    if policy == "streaming":
        per_node = world_size // positive(nodes, "nodes")
        if per_node * nodes != world_size:
            raise UsageError(
                f"world_size {world_size} is not a multiple of nodes {nodes} — "
                "give the ranks of every node"
            )
        return World(nodes, per_node, num_workers, batch_size)
    return World(ranks_per_node=world_size, workers=num_workers, batch_size=batch_size)


# fmt: off
def assigned_ids(counts: Sequence[int], *, rank: int, world_size: int, worker: int = 0,
                 num_workers: int = 1, epoch: int = 0, policy: str = "webdataset",
                 shuffle: str | None = None, seed: int | None = None,
                 batch_size: int = 1, nodes: int = 1, **options) -> list[int]:
    # fmt: on
    """The global sample ids (shard order, 0-based) one worker of one rank reads in ``epoch``:
    the division ``ishard split`` shows for the same policy and options.

    Shard-level policies (webdataset, whale) give whole shards; sample-level ones (torch, dali,
    streaming) give batches, worker w taking batches w, w+W, ... as a DataLoader does.
    ``shuffle``: a Streaming algorithm for ``streaming``, ``"detshuffle"`` for webdataset.
    ``seed``: the policy's (Streaming's default 9176, Whale's and webdataset's 0).
    ``options``: the policy's own, as ``ishard split`` takes them (``drop_last``,
    ``drop_last_batch``, ``pad_last_batch``, ``last_batch_policy``, ``stick_to_shard``,
    ``unbalanced``, ``canonical_nodes``).
    """
    if policy not in POLICIES:
        raise UsageError(f"policy {policy!r} is unknown — use one of {', '.join(POLICIES)}")
    index(rank, positive(world_size, "world_size"), "rank", "world_size")
    index(worker, positive(num_workers, "num_workers"), "worker", "num_workers")
    positive(batch_size, "batch_size")
    detshuffle = policy == "webdataset" and shuffle == "detshuffle"
    if shuffle is not None and policy != "streaming" and not detshuffle:
        raise UsageError(
            f"shuffle {shuffle!r} does not apply to policy {policy} — use a Streaming "
            "algorithm with policy streaming, or 'detshuffle' with webdataset"
        )
    if "num_canonical_nodes" in options:  # Streaming's own name for it
        canonical = options.pop("num_canonical_nodes")
        options = {**options, "canonical_nodes": canonical}
    if policy == "streaming":
        options = {**options, "shuffle": shuffle}
    if seed is not None and policy in ("streaming", "whale"):
        options = {**options, "seed": seed}
    opts = policy_options(policy, options)
    world = _world(policy, world_size, nodes, num_workers, batch_size)
    if detshuffle:
        shards = wds.assign(len(counts), world_size, num_workers)[rank][worker]
        starts = offsets(counts)
        order = wds.detshuffle(shards, seed or 0, epoch, bufsize=100, initial=100)
        return [i for s in order for i in range(starts[s], starts[s + 1])]
    return worker_ids(counts, policy, world, opts, epoch=epoch, rank=rank, worker=worker)


def _shard_samples(url: str, key_of: KeyFunction, storage_options: dict) -> Iterator[ReadSample]:
    """A shard's samples: consecutive members with one sample key (``key_of`` a member's, from
    the manifest's options: its pattern, or the key in a ``<key>.<extension>`` name)."""
    current: ReadSample | None = None
    with open_url(url, storage_options=storage_options) as raw:
        for name, data in contents(url, raw):
            key = key_of(name)
            if current is None or key != current.key:
                if current is not None:
                    yield current
                current = ReadSample(key, {})
            current.files[extension(name).lstrip(".") or name] = data
    if current is not None:
        yield current


class ShardedSamples:
    """The samples one rank (and DataLoader worker) reads in one epoch of an ishard manifest.

    Iterable (usable as the source of a PyTorch ``IterableDataset``); torch is never imported:
    when ``rank``/``world_size`` are None they come from ``RANK``/``WORLD_SIZE`` or an
    initialised ``torch.distributed``, and ``worker``/``num_workers`` from torch's worker
    info, each only if torch is already loaded.

    Args:
        manifest_url: ``DST/manifest.json`` of ``ishard shard``, a path or fsspec URL.
        rank, world_size, worker, num_workers: who reads.
        epoch: from 0.
        policy: webdataset, whale, torch, dali or streaming (see :func:`assigned_ids`).
        shuffle: a Streaming shuffle algorithm, or ``"detshuffle"`` for webdataset.
        seed: the shuffle seed (default: the policy's, Streaming's 9176, Whale's 0).
        batch_size: per-rank batch size (sample-level policies batch before dividing).
        nodes: physical nodes (streaming).
        storage_options: passed to fsspec when opening the manifest and shards.
        **options: the policy's own (``drop_last``, ``pad_last_batch``, ``last_batch_policy``,
            ``num_canonical_nodes`` …).
    """

    def __init__(
        self,
        manifest_url: str,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        worker: int | None = None,
        num_workers: int | None = None,
        epoch: int = 0,
        policy: str = "webdataset",
        shuffle: str | None = None,
        seed: int | None = None,
        batch_size: int = 1,
        nodes: int = 1,
        storage_options: dict | None = None,
        **options,
    ) -> None:
        self.manifest_url, self.storage_options = manifest_url, dict(storage_options or {})
        self.who = (rank, world_size, worker, num_workers)
        self.settings = dict(
            epoch=epoch,
            policy=policy,
            shuffle=shuffle,
            seed=seed,
            batch_size=batch_size,
            nodes=nodes,
            **options,
        )
        self.urls, self.counts, recorded = read_manifest(manifest_url, self.storage_options)
        self.key_of = member_key_function(recorded)

    def ids(self) -> list[int]:
        """The global sample ids this reader yields, in order."""
        rank, world_size, worker, num_workers = _env_world(*self.who)
        return assigned_ids(
            self.counts,
            rank=rank,
            world_size=world_size,
            worker=worker,
            num_workers=num_workers,
            **self.settings,
        )

    def __iter__(self) -> Iterator[ReadSample]:
        starts = offsets(self.counts)
        ids = self.ids()
        at = 0
        while at < len(ids):  # a run of ids in one shard: read that shard once
            shard = _shard_of(starts, ids[at])
            end = at
            while end < len(ids) and starts[shard] <= ids[end] < starts[shard + 1]:
                end += 1
            wanted = {i - starts[shard] for i in ids[at:end]}
            got = {}
            for local, sample in enumerate(
                _shard_samples(self.urls[shard], self.key_of, self.storage_options)
            ):
                if local in wanted:
                    got[local] = sample
            if len(got) < len(wanted):
                raise SourceError(
                    f"shard {self.urls[shard]!r} holds fewer samples than the "
                    f"manifest's {self.counts[shard]} — rewrite the shards"
                )
            yield from (got[i - starts[shard]] for i in ids[at:end])
            at = end


def _shard_of(starts: list[int], sample: int) -> int:
    return bisect.bisect_right(starts, sample) - 1
