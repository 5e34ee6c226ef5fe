"""The run's shards written by the chosen executor: local writers (threads, or forked processes)
over a reader, a sink factory and settings built once, or Dask workers that build their own."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..formats.registry import format_of
from ..model import ShardPlan, ShardResult
from ..options.record import Options
from ..options.settings import located
from ..progress import SILENT, Progress
from ..store import Location
from ..store.base import Composer, Guard, Lock, Upload, WorkerCheck
from ..store.readers import Reader, open_reader
from ..store.retry import Retrier
from ..store.sinks import open_sink
from .executors import write_with_dask
from .state import remove_leftovers
from .write import Cancel, WriterSettings, write_one, write_shards

LOG = logging.getLogger("ishard")
CLEANUP_RETRIES = 11
# the --checksum values a composed shard's CRC-32C stands in for: a check against damage
# (xxh128, the native default), or none asked; md5 (wids' md5sum, the Go spelling's),
# sha256 and blake3 are the shard's own digest, had only from every byte
COMPOSED_CHECKSUMS = ("xxh128", "none")  # aborting uploads after a failure: about 40 s of patience


@dataclass(frozen=True)
class Publish:
    """How the run's shards are published: under the destination's ``lock`` (its guard
    confirmed before each commit, where it can be lost) and ``exclusive``ly (never over a name
    taken)."""

    lock: Lock
    exclusive: bool = False


def write_planned(
    source: Location,
    dest: Location,
    opts: Options,
    shards: Sequence[ShardPlan],
    progress: Progress,
    *,
    retrier: Retrier,
    publish: Publish,
    client: Any,
    meanwhile: Callable[[], Iterator[object]] | None,
) -> list[ShardResult]:
    """Write ``shards`` with the chosen executor (``client``: Dask's, connected before DST
    was claimed); results in their order. ``meanwhile``: work done while they are written
    (the sample index's plan rows)."""
    if opts.executor == "dask":
        task = functools.partial(
            write_on_worker,
            src=source.url,
            dst=dest.url,
            opts=opts,
            lease=publish.lock.for_workers(),
            exclusive=publish.exclusive,
        )
        return write_with_dask(
            shards,
            task,
            scheduler=opts.scheduler,
            workers=opts.workers(remote=False),
            progress=progress,
            client=client,
            cleanup=functools.partial(remove_leftovers, dest, retrier),
            meanwhile=meanwhile,
        )
    parts = _Parts.open(
        source, dest, opts, retrier, progress.notice, publish.lock.guard, publish.exclusive
    )
    try:
        return write_shards(
            shards,
            parts.reader,
            parts.sink_for,
            jobs=parts.jobs,
            settings=parts.settings,
            progress=progress,
            processes=source.store.capabilities.forkable and dest.store.capabilities.forkable,
            meanwhile=meanwhile,
        )
    finally:
        parts.reader.close()


@dataclass(frozen=True)
class _Parts:
    """What the writers share: the reader of member bytes, the shard sink factory, the archive
    writers' settings, and how many shards are written at once."""

    reader: Reader
    sink_for: Callable[[ShardPlan], Any]
    settings: WriterSettings
    jobs: int

    @classmethod
    def open(
        cls,
        source: Location,
        dest: Location,
        opts: Options,
        retrier: Retrier,
        notice: Callable[[str], None],
        guard: Guard | None,
        exclusive: bool,
    ) -> _Parts:
        """The parts for writing from ``source`` to ``dest`` (the reader is open: close it)."""
        many = source.store.capabilities.many_at_once or dest.store.capabilities.many_at_once
        jobs = opts.workers(remote=many)
        cleanup = Retrier(CLEANUP_RETRIES, cap=4.0)
        reader = open_reader(
            source,
            retrier,
            jobs=jobs,
            budget=opts.read_buffer,
            follow_symlinks=opts.follow_symlinks,
        )

        composer = _composer(source, dest, opts)

        def sink_for(shard_plan: ShardPlan):
            if composer is not None and format_of(shard_plan.name).composable:
                upload = Upload(
                    retrier, cleanup, opts.part_size, shard_plan.size, notice, guard, exclusive
                )
                with dest.translated("destination"):
                    composing = composer.sink(shard_plan, dest.key(shard_plan.name), upload)
                if composing is not None:
                    return composing
            return open_sink(
                dest,
                shard_plan.name,
                retrier=retrier,
                cleanup=cleanup,
                part_size=opts.part_size,
                expected=shard_plan.size,
                notice=notice,
                checksum=opts.checksum,
                guard=guard,
                exclusive=exclusive,
            )

        return cls(reader, sink_for, WriterSettings.of(opts), jobs)


def _composer(source: Location, dest: Location, opts: Options) -> Composer | None:
    """What composes the run's shards inside the store (``--compose auto``), if it can (why
    not is said with ``-v``)."""
    if opts.compose == "never":
        return None
    got = dest.store.composer(
        source, dest, min_size=opts.compose_min_size, part_size=opts.part_size
    )
    why = got if isinstance(got, str) else None
    if got is not None and why is None and opts.checksum not in COMPOSED_CHECKSUMS:
        why = (
            f"--checksum {opts.checksum} needs every byte of a shard here (a composed "
            "shard's checksum is its CRC-32C)"
        )
    if why is not None:
        LOG.info("--compose auto: the shards are written through this machine: %s", why)
        return None
    return None if isinstance(got, str) else got


def write_on_worker(
    shard_plan: ShardPlan,
    cancel: Cancel,
    *,
    src: str,
    dst: str,
    opts: Options,
    lease: WorkerCheck | None = None,
    exclusive: bool = False,
) -> ShardResult:
    """One shard, written by a Dask worker: it opens SRC and DST itself (through fsspec), and
    re-reads the run's lease before it commits."""
    source = located(src, opts, "source")
    dest = located(dst, opts, "destination")
    guard = lease.bind(dest) if lease is not None else None
    parts = _Parts.open(source, dest, opts, Retrier(opts.retries), SILENT.notice, guard, exclusive)
    try:
        return write_one(shard_plan, parts.reader, parts.sink_for, parts.settings, cancel, SILENT)
    finally:
        parts.reader.close()
