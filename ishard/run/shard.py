"""The run: claim DST, plan, write the shards, record them (the manifest last), and leave DST
as it was where nothing was begun."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from typing import Any

from ..errors import IshardError, SizeChanged
from ..formats.dali_index import index_name
from ..formats.indexes import companions, indexes_of, split_parts
from ..model import Plan, Report, ShardResult
from ..names import shown
from ..options.record import Options, parse_sort
from ..options.settings import located, plan_settings
from ..options.table import EXECUTION_ONLY
from ..planning.planner import announce, make_plan
from ..planning.record import plan_record
from ..planning.table import ShardList
from ..progress import SILENT, Progress
from ..sizes import counted
from ..store import Location
from ..store.base import Lock
from ..store.lockrecord import acquire
from ..store.retry import Retrier
from ..store.sinks import abort_dangling_uploads, put_file
from ..store.urls import redacted
from .destination import (
    check_before_claim,
    check_claimed,
    check_name_room,
    still_held,
    untouched,
)
from .executors import dask_client
from .grow import (
    Holding,
    check_free,
    holding,
    keep_held,
    mode_of,
    tell_unchanged,
)
from .manifest import MANIFEST_NAME, Kept, manifest_bytes, manifest_document, remove_manifest
from .replaced import (
    earlier_archives,
    remove_archives,
    stale,
    stopped_leftovers,
    tell_ignored,
)
from .resume import Recorder, Remaining, earlier_manifest_seed, finished_earlier, with_offsets
from .sampleindex import INDEX_NAME, IndexWriter
from .settled import settled
from .state import RunState, remove_temp_files
from .state import fingerprint as run_fingerprint
from .writers import CLEANUP_RETRIES, Publish, write_planned

LOG = logging.getLogger("ishard")  # what a run does, a line per step (`ishard -v` shows it)
# A warning told by a stage is the caller's of shard(): warn ← its teller ← the stage ← Run.go
# ← shard_with ← api.shard ← the caller.
CALLER = 6


def shard_with(
    src: str | PathLike[str],
    dst: str | PathLike[str],
    opts: Options,
    *,
    progress: Progress = SILENT,
    sort: str | None = None,
    given: Collection[str] | None = None,
) -> Report:
    """:func:`shard` under options already checked by :func:`make_options` (the command's way
    in); ``sort``: the order as given, which tells whether a shuffle's seed was drawn;
    ``given``: the names of the options the caller gave (None: every one) — a run that
    continues a dataset takes the others that shape shards from what DST records."""
    started = time.monotonic()
    source = located(str(src), opts, "source")
    dest = located(str(dst), opts, "destination")
    retrier = Retrier(opts.retries)
    # everything that can be checked before DST is touched is: a failure after the claim
    # would leave the run's records and ask for --resume or --overwrite
    was_empty = check_before_claim(source, dest, opts, retrier)
    opts, sort = settled(
        dest, opts, given=given, sort=sort, was_empty=was_empty, progress=progress, retrier=retrier
    )
    drawn = _drawn_seed(sort, opts)  # an unseeded shuffle's seed, drawn now
    with dask_client(opts.scheduler, opts.workers(remote=False), opts.executor == "dask") as client:
        created = dest.store.make_root()
        lock = acquire(dest, retrier)
        claim = _Claim(lock, created, was_empty, retrier, started)
        return Run(source, dest, opts, progress, claim, drawn, client).go()


@dataclass(frozen=True)
class _Claim:
    """A run's hold on DST: its lock, whether it made DST, whether DST was empty before."""

    lock: Lock
    created: bool
    was_empty: bool
    retrier: Retrier
    started: float


class Run:
    """One run once DST is locked, its stages in order (:meth:`go`): :meth:`recheck`,
    :meth:`seed`, :meth:`plan` (or grow), :meth:`decide` (resume, or nothing changed),
    :meth:`begin`, :meth:`write` (the sample index meanwhile), :meth:`publish` (the index, then
    the manifest), :meth:`remove_replaced`, :meth:`leave`. What a stage finds, the next takes
    from here."""

    def __init__(
        self,
        source: Location,
        dest: Location,
        opts: Options,
        progress: Progress,
        claim: _Claim,
        drawn: int | None,
        client: Any,
    ) -> None:
        self.source, self.dest, self.opts, self.progress = source, dest, opts, progress
        self.claim, self.drawn, self.client = claim, drawn, client
        self.retrier = claim.retrier
        self.state = RunState(dest, claim.retrier)
        self.grows = mode_of(opts) is not None
        self.begun = True  # an earlier run's records are there (kept) until read otherwise
        self.mine = False  # the records are this run's
        self.manifest: str | None = None
        self.the_plan: Plan
        self.found: Holding | None = None
        self.fingerprint = ""
        self.exclusive = False
        self.old: list[str] = []  # the earlier run's archives, removed once this one is done
        self.replaced: list[str] = []  # a growing dataset's shards this run replaces
        self.done: dict[int, ShardResult] = {}  # shards an earlier run completed (checked)
        self.todo: Remaining | None = None
        self.index_writer: IndexWriter | None = None
        self.written: list[ShardResult] = []
        self.results: list[ShardResult] = []
        self.removed = 0

    def go(self) -> Report:
        """The stages in order; the lock is released and, where nothing was begun, DST left
        as it was, however they end."""
        try:
            self.begun = self.state.earlier_fingerprint() is not None
            self.recheck()
            self.seed()
            with contextlib.ExitStack() as stack:
                self.plan(stack)
                if not self.decide():
                    return self.report()
                self.begin()
                self.write(stack)
                self.publish()
            self.remove_replaced()
        finally:
            self.leave()
        return self.report()

    def recheck(self) -> None:
        """DST again, under the lock: the first check could not see a run that finished
        between it and the lock."""
        check_claimed(
            self.dest,
            overwrite=self.opts.overwrite or self.grows,
            resume=self.opts.resume,
            was_empty=self.claim.was_empty,
            retrier=self.retrier,
        )

    def seed(self) -> None:
        """An unseeded shuffle's seed: a resumed run's recorded one, or the one drawn; told."""
        if self.drawn is not None:
            self.opts, self.drawn = _shuffle_seed(
                self.opts, self.drawn, self.state, self.dest, self.progress
            )

    def plan(self, stack: contextlib.ExitStack) -> None:
        """Plan the run: a growing dataset's from what DST holds (fetched for as long as the
        run lasts); the plan's warnings told (under ``strict``, the run stops here)."""
        if self.grows:
            self.found = stack.enter_context(holding(self.dest, self.opts))
        held = self.found.held if self.found is not None else None
        settings = plan_settings(self.opts)
        self.the_plan = make_plan(self.source, settings, self.progress, held)
        announce(self.the_plan, settings, self.progress, stacklevel=CALLER)

    def decide(self) -> bool:
        """What is left to do: nothing when a growing dataset's source did not change (a
        stopped run's leftovers are removed); else which shards an earlier run completed
        (``--resume``, checked), and which earlier archives this run replaces."""
        growth = self.the_plan.growth
        if self.found is not None and growth is not None and growth.unchanged:
            tell_unchanged(growth, self.dest, self.progress)
            if self.begun:
                self.removed = _finish_stopped(self.dest, self.state, self.found, self.retrier)
            return False
        check_name_room(self.dest, self.the_plan.shard_names)  # the last names may be longest
        if "energon" in indexes_of(self.opts.index):  # a split of shards in no folder: now
            split_parts(list(self.the_plan.shard_names), self.opts.energon_split)
        self.fingerprint = run_fingerprint(self.the_plan)
        self.exclusive = self._free_names()
        earlier = self.state.earlier()  # read before a fresh start forgets it
        recorded = self.state.recorded() if earlier and self.opts.overwrite else {}
        self.old, ignored = earlier_archives(
            self.dest, earlier, recorded, overwrite=self.opts.overwrite, retrier=self.retrier
        )
        tell_ignored(self.dest, ignored, self.progress, stacklevel=CALLER)
        if self.opts.resume:
            self.done = finished_earlier(
                self.dest, self.the_plan, self.fingerprint, self.state, self.retrier, self.grows
            )
        if self.opts.sample_index:
            self.done = with_offsets(self.dest, self.done, self.retrier, self.opts.tmp_dir)
        return True

    def begin(self) -> None:
        """Record the run in DST before any shard is written: an earlier manifest goes (unless
        shards are kept), a killed run's leftovers too, and the run's records are written."""
        if not self.done:  # else a failed run would leave a manifest describing replaced shards
            if not self.grows:  # a growing dataset's stays: its shards are not touched
                remove_manifest(self.dest, self.retrier)
            self.state.forget_shards()
        names = self.the_plan.shard_names
        if self.opts.overwrite and not self.opts.resume:  # a killed run's leftovers go too
            remove_temp_files(self.dest, names)
            abort_dangling_uploads(self.dest, names, self.retrier)
        self.replaced = _replaced(self.the_plan, self.opts)
        self.state.begin(
            self.fingerprint,
            len(self.the_plan.shards),
            self.drawn,
            sorted({*self.old, *self.replaced}),
            plan_record(self.the_plan, EXECUTION_ONLY),
        )
        self.begun = self.mine = True  # the records are this run's
        if self.found is not None:
            keep_held(self.dest, self.found.held.index, self.retrier, self.opts)

    def write(self, stack: contextlib.ExitStack) -> None:
        """Write the shards not done yet, each recorded as it is published; the sample
        index's plan rows are prepared meanwhile."""
        plan, progress = self.the_plan, self.progress
        self.todo = todo = Remaining(plan.shards, self.done)
        progress.planned(len(todo), sum(plan.shard_sizes[i] for i in todo.indices))
        if self.done:
            LOG.info("kept %d shards an earlier run completed (checked)", len(self.done))
            progress.notice(
                f"resuming: {len(self.done)} of {len(plan.shards)} shards were "
                "already complete (checked); writing the rest"
            )
        recorder = Recorder(progress, plan.shard_names, self.state.record)
        if self.opts.sample_index:
            assert isinstance(plan.shards, ShardList)
            self.index_writer = IndexWriter(plan.shards, self.opts.tmp_dir, self.opts.memory_limit)
            stack.callback(self.index_writer.close)
        try:
            self.written = write_planned(
                self.source,
                self.dest,
                self.opts,
                todo,
                recorder,
                retrier=self.retrier,
                publish=Publish(self.claim.lock, self.exclusive),
                client=self.client,
                meanwhile=self.index_writer.prepare if self.index_writer is not None else None,
            )
        except SizeChanged as err:  # the size came from --src-list: the inventory is stale
            if not self.opts.src_list:
                raise
            raise err.stale(redacted(os.fspath(self.opts.src_list))) from None

    def publish(self) -> None:
        """Publish the dataset: the sample index, then the manifest that names it (kept and
        written shards in plan order)."""
        assert self.todo is not None
        slots = [self.done.get(i) for i in range(len(self.the_plan.shards))]
        for i, result in zip(self.todo.indices, self.written):
            slots[i] = result
        self.results = [r for r in slots if r is not None]  # every shard: kept or written
        assert len(self.results) == len(slots)
        growth = self.the_plan.growth
        dropped = growth.replaced if growth is not None else ()
        kept = Kept.of(self.found.manifest, dropped) if self.found is not None else None
        index = self._write_index(dropped, kept)
        document = manifest_bytes(
            manifest_document(
                self.the_plan, self.results, self.fingerprint, index=index, earlier=kept
            )
        )
        guard = self.claim.lock.guard
        self.manifest = put_file(self.dest, MANIFEST_NAME, document, self.retrier, guard)
        LOG.info("wrote the manifest %s", self.manifest)

    def remove_replaced(self) -> None:
        """Remove the earlier archives this run did not rewrite (the manifest no longer lists
        them), then the run's records; a failure of either is a notice: the dataset is
        complete."""
        names = stale(
            [*self.old, *self.replaced],
            self.the_plan.shard_names,
            indexes_of(self.opts.index),
        )
        try:
            self.removed = remove_archives(self.dest, names, self.retrier)
        except (IshardError, OSError) as err:
            self.progress.notice(
                f"the dataset is complete, but archives of the earlier run that this "
                f"run did not rewrite could not all be removed from {self.dest.url!r} "
                f"({err}); they are not in manifest.json — remove them by hand"
            )
        try:
            self.state.clear()
        except IshardError as err:  # the dataset is complete: that is what counts
            self.progress.notice(
                f"the dataset is complete, but this run's records in "
                f"{self.dest.url!r} could not be removed ({err}); they do no harm"
            )

    def leave(self) -> None:
        """Under the lock still (the next run's records are never the ones removed): where
        nothing was begun, or this run's records stand alone in a DST it found empty, they go
        (and DST, if the run made it); then the lock is released."""
        try:
            mine_alone = self.mine and self.manifest is None and self.claim.was_empty
            leave = not self.begun or mine_alone
            guard = self.claim.lock.guard
            if (
                leave
                and still_held(guard)
                and (not self.begun or untouched(self.dest, self.retrier))
            ):
                with contextlib.suppress(IshardError):
                    self.state.clear()
                if self.claim.created:
                    self.dest.store.remove_root_if_empty()
        finally:
            self.claim.lock.release()

    def report(self) -> Report:
        """What the run did (with nothing to do: the dataset as it was)."""
        if self.todo is None:
            return Report(
                self.the_plan,
                self.dest.url,
                (),
                time.monotonic() - self.claim.started,
                self.dest.child(MANIFEST_NAME),
                self.retrier.retries,
                removed=self.removed,
            )
        assert self.manifest is not None
        return Report(
            self.the_plan,
            self.dest.url,
            tuple(self.results),
            time.monotonic() - self.claim.started,
            self.manifest,
            self.retrier.retries,
            kept=len(self.done),
            removed=self.removed,
            written_payload=sum(r.payload for r in self.written),
        )

    def _free_names(self) -> bool:
        """Whether the run's shards must go to free names, checked free now: a growing
        dataset's new names, unless this very plan's stopped run (its records say so)
        published some. A stopped run of another plan (an earlier night, the source changed
        since) leaves shards no manifest lists: those still as its records say are removed
        first (``stopped_leftovers``), told; anything else at a new name stops the run."""
        exclusive = self.grows and self.state.earlier_fingerprint() != self.fingerprint
        if not exclusive:
            return False
        leftovers: list[str] = []
        if self.begun and self.found is not None:
            listed = [e.get("url") for e in self.found.manifest.get("shardlist", [])]
            leftovers = stopped_leftovers(self.dest, self.state.recorded(), listed, self.retrier)
        ours = set(_with_indexes(leftovers, self.opts))
        names = _with_indexes(self.the_plan.shard_names, self.opts)
        check_free(self.dest, [n for n in names if n not in ours], self.retrier)
        if ours:  # nothing is removed unless every other new name is free
            remove_archives(self.dest, ours, self.retrier)
            self.progress.notice(
                f"removed {counted(len(leftovers), 'shard')} a stopped run published and no "
                f"manifest lists ({_first_few(leftovers)}): its records show them as it wrote "
                "them; this run plans from the source as it is now"
            )
        return True

    def _write_index(self, replaced: Sequence[str], kept: Kept | None) -> dict | None:
        """Write ``DST/samples.parquet`` (none with ``--no-sample-index``), before the
        manifest that names it: a growing dataset's rows, but those of its replaced shards,
        then the plan's; the manifest's record of it. Without one, an earlier run's index
        goes."""
        dest, retrier = self.dest, self.retrier
        if self.index_writer is None:
            with dest.translated("destination"):
                retrier.run(lambda: dest.store.delete([dest.key(INDEX_NAME)]))
            return None
        from .energon import EnergonDataset  # its modules loaded by a run that writes it

        return self.index_writer.write(
            dest,
            self.results,
            earlier=self.found.held.index if self.found is not None else None,
            dropped=replaced,
            energon=EnergonDataset(self._dataset_shards(kept), self.opts.energon_split)
            if "energon" in indexes_of(self.opts.index)
            else None,
            retrier=retrier,
            cleanup=Retrier(CLEANUP_RETRIES, cap=4.0),
            part_size=self.opts.part_size,
            guard=self.claim.lock.guard,
        )

    def _dataset_shards(self, kept: Kept | None) -> list[str]:
        """The dataset's shards as the manifest about to be published lists them: a growing
        dataset's kept ones, then the plan's."""
        earlier = [e["url"] for e in kept.entries] if kept is not None else []
        return [*earlier, *(r.name for r in self.results)]


def _replaced(the_plan: Plan, opts: Options) -> list[str]:
    """The shards (and their DALI indexes) a growing dataset's plan replaces: removed once
    the manifest that no longer lists them is published."""
    return _with_indexes(the_plan.growth.replaced if the_plan.growth is not None else (), opts)


def _with_indexes(shards: Sequence[str], opts: Options) -> list[str]:
    """These shard names and the index files beside them that ``--index`` writes."""
    return [*shards, *companions(list(shards), indexes_of(opts.index))]


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


def _first_few(names: Sequence[str], few: int = 3) -> str:
    """``'a', 'b', 'c', …``: the first names, shown escaped."""
    more = ", …" if len(names) > few else ""
    return ", ".join(repr(shown(n)) for n in names[:few]) + more


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
