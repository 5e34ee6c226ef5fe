"""The run: claim DST, plan, write the shards, record them (the manifest last), and leave DST
as it was where nothing was begun."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from typing import Any

from ..errors import IshardError
from ..formats.dali_index import index_name
from ..model import Plan, Report, ShardPlan, ShardResult
from ..options.record import Options, parse_sort
from ..planning.planner import announce, located, make_plan
from ..planning.record import plan_record
from ..planning.table import ShardList
from ..progress import SILENT, Progress
from ..store import Location
from ..store.lease import LeaseCheck, LeaseLock
from ..store.lockrecord import acquire
from ..store.readers import Reader, open_reader
from ..store.retry import Retrier
from ..store.sinks import Guard, abort_dangling_uploads, open_sink, put_file
from .destination import (
    check_before_claim,
    check_claimed,
    check_name_room,
    still_held,
    untouched,
)
from .executors import dask_client, write_with_dask
from .grow import (
    Holding,
    check_free,
    holding,
    keep_held,
    mode_of,
    tell_unchanged,
    unchanged,
)
from .manifest import MANIFEST_NAME, Kept, manifest_bytes, remove_manifest
from .replaced import earlier_archives, remove_archives, stale, tell_ignored
from .resume import Recorder, Remaining, earlier_manifest_seed, finished_earlier, with_offsets
from .sampleindex import INDEX_NAME, IndexWriter
from .state import RunState, remove_leftovers, remove_temp_files
from .state import fingerprint as run_fingerprint
from .write import Cancel, write_one, write_shards

LOG = logging.getLogger("ishard")  # what a run does, a line per step (`ishard -v` shows it)

CLEANUP_RETRIES = 11  # aborting uploads after a failure: about 40 s of patience


def shard_with(
    src: str | PathLike[str],
    dst: str | PathLike[str],
    opts: Options,
    *,
    progress: Progress = SILENT,
    sort: str | None = None,
) -> Report:
    """:func:`shard` under options already checked by :func:`make_options` (the command's way
    in); ``sort``: the order as given, which tells whether a shuffle's seed was drawn."""
    drawn = _drawn_seed(sort, opts)  # an unseeded shuffle's seed, drawn now
    started = time.monotonic()
    source = located(str(src), opts, "source")
    dest = located(str(dst), opts, "destination")
    retrier = Retrier(opts.retries)
    # everything that can be checked before DST is touched is: a failure after the claim
    # would leave the run's records and ask for --resume or --overwrite
    was_empty = check_before_claim(source, dest, opts, retrier)
    with dask_client(opts.scheduler, opts.workers(remote=False), opts.executor == "dask") as client:
        created = dest.store.make_root()
        lock = acquire(dest, retrier)
        claim = _Claim(lock, created, was_empty, retrier, started)
        return _shard_claimed(source, dest, opts, progress, claim, drawn, client)


@dataclass(frozen=True)
class _Claim:
    """A run's hold on DST: its lock, whether it made DST, whether DST was empty before."""

    lock: Any
    created: bool
    was_empty: bool
    retrier: Retrier
    started: float


def _shard_claimed(
    source: Location,
    dest: Location,
    opts: Options,
    progress: Progress,
    claim: _Claim,
    drawn: int | None,
    client: Any,
) -> Report:
    """The run, once DST is locked: check DST again, plan, write, record; then the lock is
    released and, where nothing was begun, DST left as it was."""
    lock, created, retrier = claim.lock, claim.created, claim.retrier
    guard = lock if isinstance(lock, LeaseLock) else None  # a local flock cannot be lost
    manifest, mine = None, False
    state = RunState(dest, retrier)
    begun = state.earlier_fingerprint() is not None  # an earlier run's records: keep them
    grows = mode_of(opts) is not None
    try:
        check_claimed(
            dest,
            overwrite=opts.overwrite or grows,
            resume=opts.resume,
            was_empty=claim.was_empty,
            retrier=retrier,
        )
        if drawn is not None:
            opts, drawn = _shuffle_seed(opts, drawn, state, dest, progress)
        with contextlib.ExitStack() as stack:
            found = stack.enter_context(holding(dest, opts)) if grows else None
            the_plan = make_plan(source, opts, progress, found.held if found else None)
            announce(the_plan, opts, progress, stacklevel=5)
            if found is not None and the_plan.growth is not None and unchanged(the_plan.growth):
                tell_unchanged(the_plan.growth, dest, progress)
                removed = _finish_stopped(dest, state, found, retrier) if begun else 0
                return Report(
                    the_plan,
                    dest.url,
                    (),
                    time.monotonic() - claim.started,
                    dest.child(MANIFEST_NAME),
                    retrier.retries,
                    removed=removed,
                )
            check_name_room(dest, the_plan.shard_names)  # the last names may be the longest
            fingerprint = run_fingerprint(the_plan)
            exclusive = _free_names(dest, the_plan, opts, state, fingerprint, retrier)
            earlier = state.earlier()  # read before a fresh start forgets it
            recorded = state.recorded() if earlier and opts.overwrite else {}
            old, ignored = earlier_archives(
                dest, earlier, recorded, overwrite=opts.overwrite, retrier=retrier
            )
            tell_ignored(dest, ignored, progress)
            done = (
                finished_earlier(dest, the_plan, fingerprint, state, retrier, grows)
                if opts.resume
                else {}
            )
            if opts.sample_index:
                done = with_offsets(dest, done, retrier, opts.tmp_dir)
            if not done:  # else a failed run would leave a manifest describing replaced shards
                if not grows:  # a growing dataset's stays: its shards are not touched
                    remove_manifest(dest, retrier)
                state.forget_shards()
            if opts.overwrite and not opts.resume:  # a killed run's leftovers go too
                remove_temp_files(dest, the_plan.shard_names)
                abort_dangling_uploads(dest, the_plan.shard_names, retrier)
            replaced = _replaced(the_plan, opts)
            state.begin(
                fingerprint,
                len(the_plan.shards),
                drawn,
                sorted({*old, *replaced}),
                plan_record(the_plan),
            )
            begun = mine = True  # the records are this run's
            if found is not None:
                keep_held(dest, found.held.index, retrier, opts)
            todo = Remaining(the_plan.shards, done)
            progress.planned(len(todo), sum(the_plan.shard_sizes[i] for i in todo.indices))
            if done:
                LOG.info("kept %d shards an earlier run completed (checked)", len(done))
                progress.notice(
                    f"resuming: {len(done)} of {len(the_plan.shards)} shards were "
                    "already complete (checked); writing the rest"
                )
            recorder = Recorder(progress, the_plan.shard_names, state.record)
            index_writer = None
            if opts.sample_index:
                assert isinstance(the_plan.shards, ShardList)
                index_writer = IndexWriter(the_plan.shards, opts.tmp_dir, opts.memory_limit)
                stack.callback(index_writer.close)
            written = _write(
                source,
                dest,
                opts,
                todo,
                recorder,
                retrier,
                _Publish(guard, exclusive),
                client,
                index_writer,
            )
            slots = [done.get(i) for i in range(len(the_plan.shards))]
            for i, result in zip(todo.indices, written):
                slots[i] = result
            results = [r for r in slots if r is not None]  # every shard: kept or written
            assert len(results) == len(slots)
            dropped = the_plan.growth.replaced if the_plan.growth is not None else ()
            index = _write_index(dest, index_writer, results, opts, retrier, guard, found, dropped)
            kept = Kept.of(found.manifest, dropped) if found is not None else None
            document = manifest_bytes(the_plan, results, fingerprint, index=index, earlier=kept)
            manifest = put_file(dest, MANIFEST_NAME, document, retrier, guard)
            LOG.info("wrote the manifest %s", manifest)
        removed = _remove_replaced(dest, [*old, *replaced], the_plan, opts, retrier, progress)
        try:
            state.clear()
        except IshardError as err:  # the dataset is complete: that is what counts
            progress.notice(
                f"the dataset is complete, but this run's records in "
                f"{dest.url!r} could not be removed ({err}); they do no harm"
            )
    finally:
        try:  # under the lock still: the next run's records are never the ones removed
            # nothing begun; or this run's records alone in a DST it found empty: both go
            leave = not begun or (mine and manifest is None and claim.was_empty)
            if leave and still_held(guard) and (not begun or untouched(dest, retrier)):
                with contextlib.suppress(IshardError):
                    state.clear()
                if created:
                    dest.store.remove_root_if_empty()
        finally:
            lock.release()
    return Report(
        the_plan,
        dest.url,
        tuple(results),
        time.monotonic() - claim.started,
        manifest,
        retrier.retries,
        kept=len(done),
        removed=removed,
        written_payload=sum(r.payload for r in written),
    )


def _replaced(the_plan: Plan, opts: Options) -> list[str]:
    """The shards (and their DALI indexes) a growing dataset's plan replaces: removed once
    the manifest that no longer lists them is published."""
    return _with_indexes(the_plan.growth.replaced if the_plan.growth is not None else (), opts)


def _free_names(
    dest: Location,
    the_plan: Plan,
    opts: Options,
    state: RunState,
    fingerprint: str,
    retrier: Retrier,
) -> bool:
    """Whether the run's shards must go to free names, checked free now: a growing dataset's
    new names, unless this very plan's stopped run (its records say so) published some."""
    exclusive = mode_of(opts) is not None and state.earlier_fingerprint() != fingerprint
    if exclusive:
        check_free(dest, _with_indexes(the_plan.shard_names, opts), retrier)
    return exclusive


def _with_indexes(shards: Sequence[str], opts: Options) -> list[str]:
    """These shard names and, with ``--index dali``, their DALI indexes'."""
    names = list(shards)
    if opts.index == "dali":
        names += [index_name(n) for n in names if n.endswith(".tar")]
    return names


@dataclass(frozen=True)
class _Publish:
    """How the run's shards are published: under the destination's lease (``guard``; None for
    a local flock, which cannot be lost), and ``exclusive``ly (never over a name taken)."""

    guard: LeaseLock | None = None
    exclusive: bool = False


def _finish_stopped(dest: Location, state: RunState, found: Holding, retrier: Retrier) -> int:
    """A growing run stopped after it published its manifest left its records and maybe
    the shards it replaced: remove those the manifest does not list, then the records; how
    many archives were removed."""
    old, _ = earlier_archives(dest, state.earlier(), {}, overwrite=False, retrier=retrier)
    listed = {e["url"] for e in found.manifest["shardlist"]}
    listed |= {index_name(n) for n in listed}
    removed = remove_archives(dest, [n for n in old if n not in listed], retrier)
    state.clear()
    return removed


def _write_index(
    dest: Location,
    index_writer: IndexWriter | None,
    results: Sequence[ShardResult],
    opts: Options,
    retrier: Retrier,
    guard: LeaseLock | None,
    found: Holding | None,
    replaced: Sequence[str],
) -> dict | None:
    """Write ``DST/samples.parquet`` (none with ``--no-sample-index``), before the manifest
    that names it: a growing dataset's rows, but those of its replaced shards, then the
    plan's; the manifest's record of it. Without one, an earlier run's index goes."""
    if index_writer is None:
        with dest.translated("destination"):
            retrier.run(lambda: dest.store.delete([dest.key(INDEX_NAME)]))
        return None
    return index_writer.write(
        dest,
        results,
        earlier=found.held.index if found is not None else None,
        dropped=replaced,
        retrier=retrier,
        cleanup=Retrier(CLEANUP_RETRIES, cap=4.0),
        part_size=opts.part_size,
        guard=guard,
    )


def _remove_replaced(
    dest: Location,
    old: list[str],
    the_plan: Plan,
    opts: Options,
    retrier: Retrier,
    progress: Progress,
) -> int:
    """Remove the earlier run's archives this run did not rewrite (its manifest is written:
    they are no part of the dataset any more); how many were removed."""
    names = stale(old, the_plan.shard_names, opts.index == "dali")
    try:
        return remove_archives(dest, names, retrier)
    except (IshardError, OSError) as err:
        progress.notice(
            f"the dataset is complete, but archives of the earlier run that this "
            f"run did not rewrite could not all be removed from {dest.url!r} "
            f"({err}); they are not in manifest.json — remove them by hand"
        )
        return 0


def _write(
    source: Location,
    dest: Location,
    opts: Options,
    shards: Sequence[ShardPlan],
    progress: Progress,
    retrier: Retrier,
    publish: _Publish,
    client: Any = None,
    index_writer: IndexWriter | None = None,
) -> list[ShardResult]:
    """Write ``shards`` with the chosen executor (``client``: Dask's, connected before DST
    was claimed); results in their order. The sample index's plan rows go into its engine
    meanwhile."""
    guard = publish.guard
    if opts.executor == "dask":
        lease = guard.for_workers() if guard is not None else None
        task = functools.partial(
            _write_on_worker,
            src=source.url,
            dst=dest.url,
            opts=opts,
            lease=lease,
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
            meanwhile=index_writer.prepare if index_writer is not None else None,
        )
    reader, sink_for, settings = _writer_parts(
        source, dest, opts, retrier, progress.notice, guard, publish.exclusive
    )
    try:
        return write_shards(
            shards,
            reader,
            sink_for,
            jobs=_jobs(opts, source, dest),
            settings=settings,
            progress=progress,
            processes=source.store.capabilities.forkable and dest.store.capabilities.forkable,
            meanwhile=index_writer.prepare if index_writer is not None else None,
        )
    finally:
        reader.close()


def _drawn_seed(sort: object, opts: Options) -> int | None:
    """The seed ``make_options`` drew for an unseeded ``--sort shuffle``; None otherwise."""
    order = parse_sort(sort) if isinstance(sort, str) else None
    unseeded = order is not None and order.kind == "shuffle" and order.seed is None
    return opts.order.seed if unseeded else None


def _shuffle_seed(
    opts: Options, drawn: int, state: RunState, dest: Location, progress: Progress
) -> tuple[Options, int]:
    """An unseeded shuffle's seed: with ``--resume`` the one the earlier run recorded (in its
    run state, or its manifest), else the one just drawn; told to the user either way."""
    earlier = state.earlier().get("shuffle_seed") if opts.resume else None
    if opts.resume and not isinstance(earlier, int):
        earlier = earlier_manifest_seed(dest)
    if isinstance(earlier, int) and earlier >= 0:
        progress.notice(f"shuffle seed: {earlier} (the interrupted run's, reused by --resume)")
        return replace(opts, sort=f"shuffle:{earlier}"), earlier
    progress.notice(
        f"shuffle seed: {drawn} (drawn for this run; --resume reuses it, "
        f"--sort shuffle:{drawn} repeats the order)"
    )
    return opts, drawn


def _jobs(opts: Options, source: Location, dest: Location) -> int:
    many = source.store.capabilities.many_at_once or dest.store.capabilities.many_at_once
    return opts.workers(remote=many)


def _writer_parts(
    source: Location,
    dest: Location,
    opts: Options,
    retrier: Retrier,
    notice: Callable[[str], None],
    guard: Guard | None = None,
    exclusive: bool = False,
) -> tuple[Reader, Callable, dict]:
    """The reader of member bytes, the shard sink factory and the archive writer settings."""
    cleanup = Retrier(CLEANUP_RETRIES, cap=4.0)
    reader = open_reader(
        source,
        retrier,
        jobs=_jobs(opts, source, dest),
        budget=opts.read_buffer,
        follow_symlinks=opts.follow_symlinks,
    )

    def sink_for(shard_plan: ShardPlan):
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

    settings = {
        "compress_level": opts.compress_level,
        "zip_deflate": opts.zip_compression == "deflated",
        "gzip_library": opts.gzip_library,
        "dali_index": opts.index == "dali",
    }
    return reader, sink_for, settings


def _write_on_worker(
    shard_plan: ShardPlan,
    cancel: Cancel,
    *,
    src: str,
    dst: str,
    opts: Options,
    lease: LeaseCheck | None = None,
    exclusive: bool = False,
) -> ShardResult:
    """One shard, written by a Dask worker: it opens SRC and DST itself (through fsspec), and
    re-reads the run's lease before it commits."""
    source = located(src, opts, "source")
    dest = located(dst, opts, "destination")
    guard = lease.bind(dest) if lease is not None else None
    reader, sink_for, settings = _writer_parts(
        source, dest, opts, Retrier(opts.retries), SILENT.notice, guard, exclusive
    )
    try:
        return write_one(shard_plan, reader, sink_for, settings, cancel, SILENT)
    finally:
        reader.close()
