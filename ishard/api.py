"""The Python API and the only orchestrator: list, group, plan, write, record."""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from typing import Any
from warnings import warn

from . import choices
from .errors import DataError, IshardError, IshardWarning, StrictError, UsageError
from .formats import check_names, format_of
from .model import WRITING_ONLY, Plan, Report, ShardPlan, ShardResult, Tally
from .options import Options, count_warning, make_options, option_warnings, parse_sort
from .planning.cut import SampleRun, balance, check_unique, cut_indices, shard_names
from .planning.extraction import check_extraction_names
from .planning.inventory import list_inventory
from .planning.keys import key_function
from .planning.naming import KeyCheck, check_index_shards, check_reader_names
from .planning.record import plan_record
from .planning.samples import apply_sample_exts_table, group_table, route_table
from .planning.table import FileTable, SampleTable, ShardList
from .run.destination import (
    check_claimed,
    check_destination,
    check_name_room,
    first_names,
    still_held,
    untouched,
)
from .run.executors import dask_client, write_with_dask
from .run.manifest import MANIFEST_NAME, manifest_bytes, remove_manifest
from .run.progress import SILENT, Progress
from .run.replaced import earlier_archives, remove_archives, stale, tell_ignored
from .run.resume import Recorder, Remaining, earlier_manifest_seed, finished_earlier
from .run.state import RunState, remove_leftovers, remove_temp_files
from .run.state import fingerprint as run_fingerprint
from .run.write import Cancel, write_one, write_shards
from .sizes import counted
from .store import Location, open_url, parse_storage_options, resolve
from .store.lease import LeaseCheck, LeaseLock
from .store.lock import acquire
from .store.readers import Reader, open_reader
from .store.retry import Retrier
from .store.sinks import Guard, abort_dangling_uploads, open_sink, put_file

LOG = logging.getLogger("ishard")  # what a run does, a line per step (`ishard -v` shows it)

LISTING_REPORT_EVERY = 1000
CLEANUP_RETRIES = 11  # aborting uploads after a failure: about 40 s of patience


SHARD_ONLY = WRITING_ONLY  # shard() takes every option; plan() all but these
DEFAULTS = Options()  # the defaults of plan() and shard(): Options' own, one place to change them


def plan(
    src: str | PathLike[str],
    *,
    prefix: str = DEFAULTS.prefix,
    shard_size: float | str | None = DEFAULTS.shard_size,  # an int is a float to type checkers
    samples_per_shard: int | None = DEFAULTS.samples_per_shard,
    sample_key_pattern: str = DEFAULTS.sample_key_pattern,
    sample_exts: str | Sequence[str] = DEFAULTS.sample_exts,
    missing_extension_action: choices.MissingExtensionAction = DEFAULTS.missing_extension_action,
    collapse: bool = DEFAULTS.collapse,
    ekm: str | PathLike[str] | Mapping[str, str | Sequence[str]] | None = DEFAULTS.ekm,
    ext: choices.Ext = DEFAULTS.ext,
    shard_template: str = DEFAULTS.shard_template,
    sort: str | None = DEFAULTS.sort,
    include_hidden: bool = DEFAULTS.include_hidden,
    follow_symlinks: bool = DEFAULTS.follow_symlinks,
    compress_level: int | None = DEFAULTS.compress_level,
    zip_compression: choices.ZipCompression = DEFAULTS.zip_compression,
    src_list: str | PathLike[str] | None = DEFAULTS.src_list,
    endpoint_url: str | None = DEFAULTS.endpoint_url,
    storage_options: Mapping[str, object] | Sequence[str] = DEFAULTS.storage_options,
    gzip_library: choices.GzipLibrary = DEFAULTS.gzip_library,
    num_shards: int | None = DEFAULTS.num_shards,
    shards_multiple_of: int | None = DEFAULTS.shards_multiple_of,
    member_names: choices.MemberNames = DEFAULTS.member_names,
    index: choices.Index = DEFAULTS.index,
    strict: bool = DEFAULTS.strict,
    lookalike_names: str = DEFAULTS.lookalike_names,
    tmp_dir: str | PathLike[str] | None = DEFAULTS.tmp_dir,
    memory_limit: int | str = DEFAULTS.memory_limit,
    progress: Progress | None = None,
) -> Plan:
    """Plan the shards of ``src`` without writing anything (what ``--dry-run`` prints).

    Every option is keyword-only and means what the command-line option of the same name
    (dashes for underscores) means; its default is in the signature.

    Args:
        src: the dataset: a directory, or a URL such as ``s3://bucket/prefix``.
        prefix: only files whose name relative to ``src`` starts with this text.
        shard_size: where shards are cut: bytes as an int (or a whole float, ``3e9``), or a
            string read as on the command line: ``"512MiB"``, ``"100KB"`` are sizes, ``"10"``
            is 10 samples per shard.
        samples_per_shard: also cut a shard at this many samples.
        sample_key_pattern: how file names become sample keys: ``"base_file_name"``,
            ``"full_name"``, ``"collapse_all_dir"`` or a regex whose group 1 is the key.
        sample_exts: the extensions every sample should have: ``[".jpg", ".xml"]`` (or
            ``".jpg,.xml"``).
        missing_extension_action: a sample without one of ``sample_exts``: ``"ignore"``,
            ``"warn"``, ``"abort"`` or ``"exclude"``.
        collapse: let a directory's remainder move up into its parent's shards.
        ekm: an external key map routing samples to shard-name formats: a dict such as
            ``{"fish-%d.tar": ["^n01440764/"]}``, its JSON text, or the path of a JSON file.
        ext: ``".tar"``, ``".tgz"``, ``".tar.gz"``, ``".zip"`` or ``".tar.lz4"``.
        shard_template: shard names: ``"shard-%06d"``, ``"shard-{0000..9999}"`` or
            ``"shard-@0999"``.
        sort: ``"alpha:inc"``, ``"alpha:dec"``, ``"shuffle"`` or ``"shuffle:SEED"``; None keeps
            the listing order.
        include_hidden: keep files and directories whose name starts with ``"."``.
        follow_symlinks: list what symbolic links point to (inside ``src`` only).
        compress_level: gzip 0-9 (None: 6), lz4 0-9 (None: 0), zip with ``"deflated"``.
        zip_compression: ``"stored"`` or ``"deflated"``.
        src_list: take the listing from an inventory file (CSV with a header, JSON Lines,
            Parquet, or an S3 Inventory report's ``manifest.json``), a path or a URL.
        endpoint_url: an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.
        storage_options: passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings
            (``"a.b=c"`` nests).
        gzip_library: the gzip compressor for ``.tgz``: ``"auto"`` (the fastest installed),
            ``"isal"``, ``"zlib-ng"`` or ``"zlib"``.
        num_shards: exactly this many shards, their sample counts differing by at most one.
        shards_multiple_of: round the shard count up to a multiple of this.
        member_names: ``"original"`` (paths as listed) or ``"sample"`` (``<key>.<ext>``, one
            WebDataset sample per ishard sample).
        index: ``"none"``, or ``"dali"``: a DALI index beside each ``.tar`` shard.
        strict: any warning of the plan (readers would misread it, an option has no effect)
            raises :class:`ishard.StrictError` before anything is written.
        lookalike_names: member names that differ only in case or Unicode form (``A.jpg``,
            ``a.jpg``; distinct files on Linux, one on macOS and Windows): ``"refuse"``
            (a ``DataError``) or ``"warn"`` (a warning of the plan, as Go ishard's spelling).
        tmp_dir: the folder where the column engine spills while it sorts a big inventory
            (``src_list``); None: the system's temporary folder.
        memory_limit: bytes (or ``"1GiB"``) the column engine may hold while it sorts and
            groups a big inventory, past which it spills to ``tmp_dir``; 128 MiB at least.
        progress: hooks told about listing progress (a :class:`ishard.run.progress.Progress`);
            None: silent.

    A plan over an inventory the column engine read keeps the files' names and mtimes, and
    the samples' keys, in the engine (at most 64 MiB, the rest in its folder under
    ``tmp_dir``) until one is read — reading a shard's files fetches them all and closes it
    — or the plan goes.

    Warns:
        IshardWarning: each of the plan's warnings (also in ``Plan.warnings``).

    Raises:
        UsageError: an option of the wrong type or value (the message names the keyword),
            before anything is listed.
        StrictError: ``strict=True`` and the plan has warnings.
        IshardError: the source cannot be listed or the data breaks an option's rule.
    """
    opts = _checked(locals())
    return plan_with(src, opts, SILENT if progress is None else progress)


def plan_with(src: str | PathLike[str], opts: Options, progress: Progress = SILENT) -> Plan:
    """:func:`plan` under options already checked by :func:`make_options` (the command's
    way in: its messages name flags, not keywords)."""
    the_plan = make_plan(_location(str(src), opts, "source"), opts, progress)
    _announce(the_plan, opts, progress)
    return the_plan


def shard(
    src: str | PathLike[str],
    dst: str | PathLike[str],
    *,
    prefix: str = DEFAULTS.prefix,
    shard_size: float | str | None = DEFAULTS.shard_size,  # an int is a float to type checkers
    samples_per_shard: int | None = DEFAULTS.samples_per_shard,
    sample_key_pattern: str = DEFAULTS.sample_key_pattern,
    sample_exts: str | Sequence[str] = DEFAULTS.sample_exts,
    missing_extension_action: choices.MissingExtensionAction = DEFAULTS.missing_extension_action,
    collapse: bool = DEFAULTS.collapse,
    ekm: str | PathLike[str] | Mapping[str, str | Sequence[str]] | None = DEFAULTS.ekm,
    ext: choices.Ext = DEFAULTS.ext,
    shard_template: str = DEFAULTS.shard_template,
    sort: str | None = DEFAULTS.sort,
    include_hidden: bool = DEFAULTS.include_hidden,
    follow_symlinks: bool = DEFAULTS.follow_symlinks,
    jobs: int = DEFAULTS.jobs,
    overwrite: bool = DEFAULTS.overwrite,
    resume: bool = DEFAULTS.resume,
    compress_level: int | None = DEFAULTS.compress_level,
    zip_compression: choices.ZipCompression = DEFAULTS.zip_compression,
    src_list: str | PathLike[str] | None = DEFAULTS.src_list,
    endpoint_url: str | None = DEFAULTS.endpoint_url,
    storage_options: Mapping[str, object] | Sequence[str] = DEFAULTS.storage_options,
    part_size: int | str = DEFAULTS.part_size,
    read_buffer: int | str = DEFAULTS.read_buffer,
    retries: int = DEFAULTS.retries,
    checksum: choices.Checksum = DEFAULTS.checksum,
    executor: choices.Executor = DEFAULTS.executor,
    gzip_library: choices.GzipLibrary = DEFAULTS.gzip_library,
    scheduler: str | None = DEFAULTS.scheduler,
    num_shards: int | None = DEFAULTS.num_shards,
    shards_multiple_of: int | None = DEFAULTS.shards_multiple_of,
    member_names: choices.MemberNames = DEFAULTS.member_names,
    index: choices.Index = DEFAULTS.index,
    strict: bool = DEFAULTS.strict,
    lookalike_names: str = DEFAULTS.lookalike_names,
    tmp_dir: str | PathLike[str] | None = DEFAULTS.tmp_dir,
    memory_limit: int | str = DEFAULTS.memory_limit,
    progress: Progress | None = None,
) -> Report:
    """Shard ``src`` into ``dst`` and write ``dst/manifest.json`` last.

    Every option is keyword-only and means what the command-line option of the same name
    (dashes for underscores) means; its default is in the signature.

    Args:
        src: the dataset: a directory or a store URL (``s3://``, ``gs://``, ``ais://`` …).
        dst: where shards go, a directory (created if missing) or a store URL; it must be empty
            unless ``overwrite=True``.
        prefix: only files whose name relative to ``src`` starts with this text.
        shard_size: where shards are cut: bytes as an int (or a whole float, ``3e9``), or a
            string read as on the command line: ``"512MiB"``, ``"100KB"`` are sizes, ``"10"``
            is 10 samples per shard.
        samples_per_shard: also cut a shard at this many samples.
        sample_key_pattern: how file names become sample keys: ``"base_file_name"``,
            ``"full_name"``, ``"collapse_all_dir"`` or a regex whose group 1 is the key.
        sample_exts: the extensions every sample should have: ``[".jpg", ".xml"]`` (or
            ``".jpg,.xml"``).
        missing_extension_action: a sample without one of ``sample_exts``: ``"ignore"``,
            ``"warn"``, ``"abort"`` or ``"exclude"``.
        collapse: let a directory's remainder move up into its parent's shards.
        ekm: an external key map routing samples to shard-name formats: a dict such as
            ``{"fish-%d.tar": ["^n01440764/"]}``, its JSON text, or the path of a JSON file.
        ext: ``".tar"``, ``".tgz"``, ``".tar.gz"``, ``".zip"`` or ``".tar.lz4"``.
        shard_template: shard names: ``"shard-%06d"``, ``"shard-{0000..9999}"`` or
            ``"shard-@0999"``.
        sort: ``"alpha:inc"``, ``"alpha:dec"``, ``"shuffle"`` or ``"shuffle:SEED"``; None keeps
            the listing order.
        include_hidden: keep files and directories whose name starts with ``"."``.
        follow_symlinks: list what symbolic links point to (inside ``src`` only).
        compress_level: gzip 0-9 (None: 6), lz4 0-9 (None: 0), zip with ``"deflated"``.
        zip_compression: ``"stored"`` or ``"deflated"``.
        src_list: take the listing from an inventory file (CSV with a header, JSON Lines,
            Parquet, or an S3 Inventory report's ``manifest.json``), a path or a URL.
        endpoint_url: an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.
        storage_options: passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings
            (``"a.b=c"`` nests).
        gzip_library: the gzip compressor for ``.tgz``: ``"auto"`` (the fastest installed),
            ``"isal"``, ``"zlib-ng"`` or ``"zlib"``.
        num_shards: exactly this many shards, their sample counts differing by at most one.
        shards_multiple_of: round the shard count up to a multiple of this.
        member_names: ``"original"`` (paths as listed) or ``"sample"`` (``<key>.<ext>``, one
            WebDataset sample per ishard sample).
        index: ``"none"``, or ``"dali"``: a DALI index beside each ``.tar`` shard.
        strict: any warning of the plan (readers would misread it, an option has no effect)
            raises :class:`ishard.StrictError` before anything is written.
        lookalike_names: member names that differ only in case or Unicode form (``A.jpg``,
            ``a.jpg``; distinct files on Linux, one on macOS and Windows): ``"refuse"``
            (a ``DataError``) or ``"warn"`` (a warning of the plan, as Go ishard's spelling).
        tmp_dir: the folder where the column engine spills while it sorts a big inventory
            (``src_list``); None: the system's temporary folder.
        memory_limit: bytes (or ``"1GiB"``) the column engine may hold while it sorts and
            groups a big inventory, past which it spills to ``tmp_dir``; 128 MiB at least.
        jobs: shards written at once; 0: the CPUs (at most 8), or 8 with a store.
        overwrite: allow a non-empty ``dst``; same-named files are replaced.
        resume: finish an interrupted run into ``dst``: keep its complete shards (checked),
            write the rest.
        part_size: the multipart upload part size for store destinations (at least 5MiB).
        read_buffer: bytes fetched ahead from a store, across all writers.
        retries: retries of a failed store request after its first try (0: none).
        checksum: the algorithm of every shard's checksum in the manifest (``"xxh128"``,
            ``"blake3"``, ``"sha256"``, ``"md5"``), or ``"none"``.
        executor: ``"local"``, or ``"dask"``: shards are Dask tasks.
        scheduler: with ``executor="dask"``, a running scheduler's ``"tcp://HOST:PORT"``
            (None: a local cluster of ``jobs`` processes).
        progress: hooks told about listing and writing progress (a
            :class:`ishard.run.progress.Progress`); None: silent.

    Returns:
        The plan, the written shards (name, size, md5), retries and the manifest location.

    Warns:
        IshardWarning: each of the plan's warnings, after planning and before anything is
            written (also in ``Report.warnings``).

    Raises:
        UsageError: an option of the wrong type or value (the message names the keyword), or
            a bad destination, before anything is listed.
        StrictError: ``strict=True`` and the plan has warnings; DST is left as it was.
        IshardError: a failure while listing or writing; complete shards stay, partial ones
            never appear under their final names.
    """
    opts = _checked(locals())
    return shard_with(src, dst, opts, progress=SILENT if progress is None else progress, sort=sort)


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
    source = _location(str(src), opts, "source")
    dest = _location(str(dst), opts, "destination")
    retrier = Retrier(opts.retries)
    # everything that can be checked before DST is touched is: a failure after the claim
    # would leave the run's records and ask for --resume or --overwrite
    was_empty = check_destination(
        source, dest, overwrite=opts.overwrite, resume=opts.resume, retrier=retrier
    )
    check_name_room(dest, first_names(opts))
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
    try:
        check_claimed(
            dest,
            overwrite=opts.overwrite,
            resume=opts.resume,
            was_empty=claim.was_empty,
            retrier=retrier,
        )
        if drawn is not None:
            opts, drawn = _shuffle_seed(opts, drawn, state, dest, progress)
        the_plan = make_plan(source, opts, progress)
        _announce(the_plan, opts, progress, stacklevel=5)
        check_name_room(dest, the_plan.shard_names)  # the last names may be the longest
        fingerprint = run_fingerprint(the_plan)
        earlier = state.earlier()  # read before a fresh start forgets it
        recorded = state.recorded() if earlier and opts.overwrite else {}
        old, ignored = earlier_archives(
            dest, earlier, recorded, overwrite=opts.overwrite, retrier=retrier
        )
        tell_ignored(dest, ignored, progress)
        done = finished_earlier(dest, the_plan, fingerprint, state, retrier) if opts.resume else {}
        if not done:  # else a failed run would leave a manifest describing replaced shards
            remove_manifest(dest, retrier)
            state.forget_shards()
        if opts.overwrite and not opts.resume:  # a killed run's leftovers go too
            remove_temp_files(dest, the_plan.shard_names)
            abort_dangling_uploads(dest, the_plan.shard_names, retrier)
        state.begin(fingerprint, len(the_plan.shards), drawn, old, plan_record(the_plan))
        begun = mine = True  # the records are this run's
        todo = Remaining(the_plan.shards, done)
        progress.planned(len(todo), sum(the_plan.shard_sizes[i] for i in todo.indices))
        if done:
            LOG.info("kept %d shards an earlier run completed (checked)", len(done))
            progress.notice(
                f"resuming: {len(done)} of {len(the_plan.shards)} shards were "
                "already complete (checked); writing the rest"
            )
        recorder = Recorder(progress, the_plan.shard_names, state.record)
        written = _write(source, dest, opts, todo, recorder, retrier, guard, client)
        slots = [done.get(i) for i in range(len(the_plan.shards))]
        for i, result in zip(todo.indices, written):
            slots[i] = result
        results = [r for r in slots if r is not None]  # every shard: kept or written
        assert len(results) == len(slots)
        manifest = put_file(
            dest, MANIFEST_NAME, manifest_bytes(the_plan, results, fingerprint), retrier, guard
        )
        LOG.info("wrote the manifest %s", manifest)
        removed = _remove_replaced(dest, old, the_plan, opts, retrier, progress)
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


def _checked(given: dict[str, object]) -> Options:
    """The options among a call's arguments, checked; a bad one's message names its keyword
    (``shard_size='1.5'``) where the command line's names its flag (``--shard-size '1.5'``)."""
    options = {k: v for k, v in given.items() if k not in ("src", "dst", "progress")}
    try:
        return make_options(**options)
    except UsageError as err:
        raise UsageError(keyword_spelling(str(err))) from None


_FLAG = re.compile(r"(?<![^\s(])--([a-z][a-z-]*[a-z])( (?=['\"]|-?[0-9]))?")


def keyword_spelling(message: str) -> str:
    """``message`` with each option's flag (``--shard-size '0'``) spelt as its Python keyword
    (``shard_size='0'``); other words are kept."""

    def keyword(match: re.Match) -> str:
        name = match.group(1).replace("-", "_")
        name = "storage_options" if name == "storage_option" else name
        if name not in Options.__dataclass_fields__:
            return match.group(0)
        return name + ("=" if match.group(2) else "")

    return _FLAG.sub(keyword, message)


def _announce(the_plan: Plan, opts: Options, progress: Progress, stacklevel: int = 4) -> None:
    """Tell the plan's warnings now, after planning and before anything is written: to the
    progress hooks (the command line prints them) and as ``IshardWarning``; under ``strict``,
    stop here."""
    LOG.info(
        "planned %s: %s, %s, %d bytes",
        counted(len(the_plan.shards), "shard"),
        counted(the_plan.sample_count, "sample"),
        counted(the_plan.file_count, "file"),
        the_plan.size,
    )
    for line in the_plan.warnings:
        progress.warning(line)
        warn(line, IshardWarning, stacklevel=stacklevel)  # the caller of plan() or shard()
    count = len(the_plan.warnings)
    if opts.strict and count:
        raise StrictError(
            f"--strict and the plan has {count} warning{'s' * (count != 1)}, so nothing was "
            f"written — do what {'they say' if count != 1 else 'it says'}, or drop --strict",
            the_plan.warnings,
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
    guard: LeaseLock | None = None,
    client: Any = None,
) -> list[ShardResult]:
    """Write ``shards`` with the chosen executor (``client``: Dask's, connected before DST
    was claimed); results in their order."""
    if opts.executor == "dask":
        lease = guard.for_workers() if guard is not None else None
        task = functools.partial(
            _write_on_worker, src=source.url, dst=dest.url, opts=opts, lease=lease
        )
        return write_with_dask(
            shards,
            task,
            scheduler=opts.scheduler,
            workers=opts.workers(remote=False),
            progress=progress,
            client=client,
            cleanup=functools.partial(remove_leftovers, dest, retrier),
        )
    reader, sink_for, settings = _writer_parts(source, dest, opts, retrier, progress.notice, guard)
    try:
        return write_shards(
            shards,
            reader,
            sink_for,
            jobs=_jobs(opts, source, dest),
            settings=settings,
            progress=progress,
            processes=source.store.forkable and dest.store.forkable,
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
    return opts.workers(remote=not (source.store.forkable and dest.store.forkable))


def _writer_parts(
    source: Location,
    dest: Location,
    opts: Options,
    retrier: Retrier,
    notice: Callable[[str], None],
    guard: Guard | None = None,
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
) -> ShardResult:
    """One shard, written by a Dask worker: it opens SRC and DST itself (through fsspec), and
    re-reads the run's lease before it commits."""
    source = _location(src, opts, "source")
    dest = _location(dst, opts, "destination")
    guard = lease.bind(dest) if lease is not None else None
    reader, sink_for, settings = _writer_parts(
        source, dest, opts, Retrier(opts.retries), SILENT.notice, guard
    )
    try:
        return write_one(shard_plan, reader, sink_for, settings, cancel, SILENT)
    finally:
        reader.close()


def _location(url: str, opts: Options, role: str) -> Location:
    return resolve(
        url,
        endpoint_url=opts.endpoint_url,
        storage_options=parse_storage_options(opts.storage_options),
        role=role,
    )


def _open_url(url: str, opts: Options):
    """A stream of the object ``url`` names (an inventory file in a store)."""
    return open_url(
        url,
        endpoint_url=opts.endpoint_url,
        storage_options=parse_storage_options(opts.storage_options),
        role="--src-list",
    )


def _list(source: Location, opts: Options, tally: Tally, progress: Progress) -> FileTable:
    seen = [0, 0]

    def on_file(size: int, count: int = 1) -> None:  # a file, or a run of files
        before = seen[0]
        seen[0] += count
        seen[1] += size
        if seen[0] // LISTING_REPORT_EVERY != before // LISTING_REPORT_EVERY:
            progress.listing(*seen)

    common: dict[str, Any] = {
        "prefix": opts.prefix,
        "include_hidden": opts.include_hidden,
        "tally": tally,
        "on_file": on_file,
    }
    if opts.src_list:
        entries = list_inventory(
            opts.src_list,
            list_prefix=source.prefix,
            opener=lambda url: _open_url(url, opts),
            tmp_dir=opts.tmp_dir,
            memory_limit=opts.memory_limit,
            key=key_function(opts.sample_key_pattern),
            renamed=opts.member_names == "sample",
            **common,
        )
    else:
        entries = source.store.list_source(
            source, follow_symlinks=opts.follow_symlinks, retrier=Retrier(opts.retries), **common
        )
    progress.listing(*seen)
    LOG.info("listed %d files, %d bytes, from %s", seen[0], seen[1], opts.src_list or source.url)
    return entries


def make_plan(source: Location, opts: Options, progress: Progress = SILENT) -> Plan:
    """List the source and plan its shards under checked options."""
    tally = Tally()
    files = _list(source, opts, tally, progress)
    ekm = opts.parsed_ekm
    warnings: list[str] = []
    key = key_function(opts.sample_key_pattern)
    groups = route_table(group_table(files, key), ekm, tally)
    names: list[str] = []
    members: list[SampleRun] = []
    tables: list[SampleTable] = []
    check = KeyCheck()
    planned: list[SampleTable] = []
    fullest = 0  # the most samples in one shard
    for index, table in enumerate(groups):
        table = apply_sample_exts_table(
            table, opts.sample_exts, opts.missing_extension_action, tally, warnings
        )
        planned.append(table)
        check_reader_names(table, opts.member_names == "sample", opts.index, check, key)
        if index == len(groups) - 1:
            files.readers = None  # the key check is done: its arrays (9 bytes a file) go
        cuts = cut_indices(
            table.keys, table.sizes, opts.bounds, opts.order, opts.collapse, table.flat
        )
        fullest = max(fullest, *map(len, cuts), 0)
        cuts = balance(
            cuts,
            table.keys,
            opts.collapse,
            num_shards=opts.num_shards,
            multiple_of=opts.shards_multiple_of,
            flat=table.flat,
        )
        if ekm is None:
            names += shard_names(len(cuts), opts.template, opts.ext, own_ext=True)
        else:
            template = ekm.categories[index].template
            names += shard_names(len(cuts), template, opts.ext, own_ext=True)
        members += cuts
        tables += [table] * len(cuts)
    check_unique(names)
    alike = check_extraction_names(planned, opts.member_names == "sample", opts.lookalike_names)
    del planned
    warnings += check.warnings() + alike + option_warnings(opts, names)
    warnings += count_warning(opts, fullest)
    shards = ShardList(names, members, tables, rename=opts.member_names == "sample")
    del members
    if opts.index == "dali":
        check_index_shards(names)
    if any(format_of(n).utf8_names for n in names):
        for shard_plan in shards:
            check_names(shard_plan)
    skipped = tally.freeze()
    if not shards:
        where = f" with prefix {opts.prefix!r}" if opts.prefix else ""
        if skipped:
            found = "every file was left out: " + "; ".join(
                f"{s.count} {s.reason}" for s in skipped
            )
        else:
            found = "no file matches the prefix" if opts.prefix else "the source has no files"
        raise DataError(
            f"nothing to shard under {source.url!r}{where}: {found} — check the source, --prefix "
            "and the filtering options"
        )
    return Plan(
        source=source.url,
        shards=shards,
        skipped=skipped,
        warnings=tuple(warnings),
        seed=opts.order.seed,
        options=opts.to_dict(),
        spilled=files.spilled,
    )
