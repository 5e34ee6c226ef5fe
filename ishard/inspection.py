"""The Python API over what a run wrote: :func:`verify` a destination, :func:`ls` a shard,
:func:`shard_urls` a dataset's shards, :func:`split` a manifest's shards over a training job,
:func:`diff` two destinations, :func:`find` samples and :func:`read_sample` one (``ishard
verify``, ``ls``, ``ls --urls``, ``split``, ``diff``, ``find``, ``cat``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from os import PathLike, fspath
from typing import Literal, overload

from .options import choices
from .progress import SILENT, Progress
from .readback import archive
from .readback import lookup as _lookup
from .readback.archive import Member, ReaderSamples
from .readback.diff import Difference
from .readback.diff import diff as _diff
from .readback.lookup import Found, Lookup, MemberPlace
from .readback.urls import brace_patterns
from .readback.urls import shard_urls as _shard_urls
from .readback.verify import Verification
from .readback.verify import verify as _verify

# The subpackage ishard.split, loaded before ishard/__init__ gives its name to split(): loaded
# later, it would take the name back (a first import sets its parent's attribute).
from .split import POLICIES  # noqa: F401

StorageOptions = Mapping[str, object] | Sequence[str] | None


def verify(
    dst: str | PathLike[str],
    *,
    deep: bool = False,
    jobs: int = 0,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
    progress: Progress | None = None,
) -> Verification:
    """Check the shards in ``dst`` against ``dst/manifest.json`` (what ``ishard verify`` does).

    Args:
        dst: the destination of a finished run: a directory or a store URL.
        deep: also read every member back in full and check payload bytes, sample counts
            and that each sample's members sit side by side in exactly one shard.
        jobs: shards checked at once; 0: the CPUs (at most 8), or 8 for a store.
        endpoint_url: an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.
        storage_options: passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings.
        progress: hooks told how many bytes and shards are checked; None: silent.

    Returns:
        The :class:`Verification`: ``ok``, every ``problems`` entry, warnings and totals.
        Nothing is printed.

    Raises:
        UsageError: a bad ``jobs`` value, or ``dst`` does not exist.
        IshardError: no manifest or a broken one; the store cannot be reached.
    """
    return _verify(
        fspath(dst),
        deep=deep,
        jobs=jobs,
        progress=SILENT if progress is None else progress,
        endpoint_url=endpoint_url,
        storage_options=storage_options,
    )


def diff(
    old: str | PathLike[str],
    new: str | PathLike[str],
    *,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> Difference:
    """Compare two destinations (what ``ishard diff`` does): shards added, removed or
    rewritten, samples added, removed, changed or moved between shards.

    Args:
        old, new: destinations of finished runs (directories or store URLs), or their
            ``manifest.json``.
        endpoint_url: an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.
        storage_options: passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings.

    Returns:
        The :class:`Difference`; ``same`` when nothing differs. Shards both manifests list
        with one checksum and size are not read; every other shard is read in full.

    Raises:
        UsageError: a destination does not exist.
        IshardError: no manifest or a broken one; a damaged shard; the store cannot be
            reached.
    """
    return _diff(
        fspath(old), fspath(new), endpoint_url=endpoint_url, storage_options=storage_options
    )


@overload
def ls(
    shard_url: str | PathLike[str],
    *,
    samples: Literal[False] = False,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> list[Member]: ...


@overload
def ls(
    shard_url: str | PathLike[str],
    *,
    samples: Literal[True],
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> ReaderSamples: ...


def ls(
    shard_url: str | PathLike[str],
    *,
    samples: bool = False,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> list[Member] | ReaderSamples:
    """The members of one shard, in archive order (what ``ishard ls`` prints).

    Args:
        shard_url: a shard file, or a store URL such as ``"s3://bucket/shard-000000.tar"``.
        samples: group the members as WebDataset readers do (``ishard ls --samples``).
        endpoint_url: an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.
        storage_options: passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings.

    Returns:
        Each regular-file :class:`Member` (``name``, ``size``); with ``samples=True`` a
        :class:`ReaderSamples`: ``samples`` as ``(key, members)``, the members readers skip,
        and ``problems()``, the lines ``ishard ls --samples`` warns with.

    Raises:
        UsageError: the path is missing, a directory, or not an archive ishard reads.
        IshardError: the archive is damaged, or the store cannot be read.
    """
    found = list(
        archive.members(
            fspath(shard_url), endpoint_url=endpoint_url, storage_options=storage_options
        )
    )
    return archive.reader_samples(found) if samples else found


def shard_urls(
    dst: str | PathLike[str],
    *,
    patterns: bool = False,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> list[str]:
    """The URLs of the dataset's shards, as its manifest lists them (what ``ishard ls DST
    --urls`` prints): the list to hand a reader, never a range of numbers — an ``--update``
    retires the names of the shards it replaces, so the numbers have gaps.

    Args:
        dst: the destination of a finished run (a directory or a store URL), or its
            ``manifest.json``.
        patterns: one brace pattern per run of consecutive names instead
            (``"out/shard-{000000..000004}.tar"``); WebDataset expands them, and takes several
            joined by ``"::"`` as one string.
        endpoint_url: an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.
        storage_options: passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings.

    Returns:
        Each shard's path (for a local ``dst``) or URL, in the manifest's order; or the
        patterns.

    Raises:
        UsageError: ``dst`` does not exist.
        IshardError: no manifest or a broken one; the store cannot be reached.
    """
    urls = _shard_urls(dst, endpoint_url=endpoint_url, storage_options=storage_options)
    return brace_patterns(urls) if patterns else urls


def split(
    manifest: str | PathLike[str] | None = None,
    *,
    shard_sizes: str | Sequence[int] | None = None,
    policy: choices.Policy = "webdataset",
    nodes: int = 1,
    ranks_per_node: int = 1,
    workers: int = 1,
    batch_size: int = 1,
    epochs: int = 1,
    last_batch_policy: choices.LastBatchPolicy | None = None,
    pad_last_batch: bool | None = None,
    stick_to_shard: bool | None = None,
    drop_last: bool | None = None,
    drop_last_batch: bool | None = None,
    unbalanced: bool | None = None,
    shuffle: choices.StreamingShuffle | None = None,
    seed: int | None = None,
    canonical_nodes: int | None = None,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> dict:
    """How a run's shards divide over ranks, workers and epochs under a reader's rule (what
    ``ishard split --json`` prints). Every keyword means the option of the same name.

    Args:
        manifest: a run's ``manifest.json`` (a path or URL); or give ``shard_sizes``.
        shard_sizes: samples per shard instead of a manifest: ``[100, 100, 80]`` or
            ``"100,100,80"``.
        policy: whose way of dividing shards: ``"dali"``, ``"whale"``, ``"webdataset"``,
            ``"torch"`` or ``"streaming"``.
        nodes: physical nodes (Whale: worker tasks).
        ranks_per_node: ranks (GPUs) per node.
        workers: DataLoader workers per rank.
        batch_size: the per-rank batch size.
        epochs: epochs to show.
        last_batch_policy: dali: a shard's last, short batch: ``"fill"`` (None),
            ``"drop"`` or ``"partial"``.
        pad_last_batch: dali: pad each shard to a full batch.
        stick_to_shard: dali: read the same shard every epoch.
        drop_last: torch's sampler, the webdataset loader, whale's ``io.drop_last_files``.
        drop_last_batch: torch: the DataLoader's ``drop_last``.
        unbalanced: whale: ``io.unbalanced_io_slicing``.
        shuffle: streaming: the shuffle algorithm (None: no shuffle).
        seed: the streaming shuffle's seed, or whale's replication seed.
        canonical_nodes: streaming: ``num_canonical_nodes``.
        endpoint_url: an S3-compatible endpoint, as for :func:`ishard.shard`.
        storage_options: ``KEY=VALUE`` strings or a dict for the store of ``manifest``.

    Returns:
        A JSON-ready dict: per epoch, rank and worker, the sample ids read, batches,
        duplicates and drops; ``epochs[e]["hang_risk"]`` is true when ranks' batch counts
        differ, and ``epochs[e]["fix"]`` then names the option that fixes it.

    Raises:
        UsageError: neither or both of ``manifest`` and ``shard_sizes``; a count below 1;
            an option of another policy.
        IshardError: the manifest cannot be read or is not an ishard manifest.
    """
    from .errors import UsageError
    from .split.read import read_manifest
    from .split.world import World, describe, parse_shard_sizes, policy_options

    world = World(nodes, ranks_per_node, workers, batch_size, epochs).check()
    opts = policy_options(
        policy,
        {
            "last_batch_policy": last_batch_policy,
            "pad_last_batch": pad_last_batch,
            "stick_to_shard": stick_to_shard,
            "drop_last": drop_last,
            "drop_last_batch": drop_last_batch,
            "unbalanced": unbalanced,
            "shuffle": shuffle,
            "seed": seed,
            "canonical_nodes": canonical_nodes,
        },
    )
    if manifest is not None and shard_sizes is None:
        sizes = read_manifest(fspath(manifest), storage_options, endpoint_url)[1]
    elif shard_sizes is not None and manifest is None:
        sizes = parse_shard_sizes(shard_sizes)
    else:
        raise UsageError(
            "give a MANIFEST or --shard-sizes, one of them — e.g. ishard split DST/manifest.json"
        )
    return describe(sizes, policy, world, **opts)


def find(
    dst: str | PathLike[str],
    keys: str | Iterable[str],
    *,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> tuple[list[Found], list[str]]:
    """Where each sample of ``keys`` is in ``dst``'s shards, from ``dst/samples.parquet``
    (what ``ishard find`` does): the samples found, in the order asked, and the keys the
    index does not hold. ``keys`` is one sample key or an iterable of them. Each sample's rows
    are checked before they are returned: a shard the manifest lists, one shard a sample,
    offsets and sizes inside it. Each :class:`Found` names the shard, its members with their header
    and data offsets and sizes, and the byte range of the shard that holds the sample
    (``start``, ``end``; None for a ``.tgz``, ``.tar.lz4`` or deflated ``.zip``, which have
    no random access).

    Raises:
        UsageError: ``keys`` is not a key (``str``) or keys; no manifest, or a manifest that
            names no sample index.
        DataError: the index is not the one the manifest names, or says what cannot be so.
    """
    return _lookup.find(
        fspath(dst), keys, endpoint_url=endpoint_url, storage_options=storage_options
    )


def search(
    dst: str | PathLike[str],
    keys: str | Iterable[str],
    *,
    near: int = 0,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> Lookup:
    """:func:`find`, and with ``near`` the keys the index holds nearest to the keys it does
    not (what ``ishard find`` names when a key is not there): up to ``near`` for each of the
    first three missing keys — those that share the longest start with it (a typo at the
    end, a key cut short or given with its extension) ranked by ``difflib``, and those that
    are it under a folder — at the cost of one more pass over the index's keys.

    Returns:
        A :class:`Lookup`: ``found``, ``missing`` (as :func:`find` returns them), ``near``
        (missing key → its nearest keys; a key with none is left out) and ``index`` (the
        sample index's path or URL).

    Raises:
        As :func:`find`.
    """
    return _lookup.search(
        fspath(dst),
        keys,
        near=near,
        endpoint_url=endpoint_url,
        storage_options=storage_options,
    )


def read_sample(
    dst: str | PathLike[str],
    found: Found,
    *,
    endpoint_url: str | None = None,
    storage_options: StorageOptions = None,
) -> list[tuple[MemberPlace, bytes]]:
    """The members of a sample :func:`find` found, with their bytes, read with one ranged
    read of its shard (a seekable ``.tar.zst``'s frames decompressed), or for a format
    without random access by reading the shard forward to it.

    Raises:
        UsageError: ``found`` is not a sample :func:`find` found.
        DataError: the shard does not hold the member where the index says (its header
            names another member or size, or the bytes run short).
    """
    return _lookup.read_sample(
        fspath(dst), found, endpoint_url=endpoint_url, storage_options=storage_options
    )


extract = _lookup.extract
write_tar = _lookup.write_tar
