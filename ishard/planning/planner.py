"""Planning a run: list the source, group its files into samples, route and check them, cut
and name the shards — a ``Plan``, with nothing written; its warnings told."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any
from warnings import warn

from ..errors import DataError, IshardWarning, StrictError
from ..formats import check_names, format_of
from ..formats.indexes import indexes_of
from ..model import Plan, Tally
from ..progress import SILENT, Progress
from ..sizes import counted
from ..store import Location, open_url, parse_storage_options
from ..store.retry import Retrier
from .cut import SampleRun, balance, check_unique, cut_indices, shard_names
from .duplicates import DROPPED, find_duplicates
from .engine.growth import Held, check_new_names, compare
from .extraction import check_extraction_names
from .inventory import list_inventory
from .keys import KeyFunction, key_function
from .listing import list_source
from .naming import KeyCheck, check_index_shards, check_reader_names
from .samples import apply_sample_exts_table, group_table, route_table
from .settings import PlanSettings
from .table import FileTable, SampleTable, ShardList

LOG = logging.getLogger("ishard")  # what a run does, a line per step (`ishard -v` shows it)

LISTING_REPORT_EVERY = 1000


def _open_url(url: str, opts: PlanSettings):
    """A stream of the object ``url`` names (an inventory file in a store)."""
    return open_url(
        url,
        endpoint_url=opts.endpoint_url,
        storage_options=parse_storage_options(opts.storage_options),
        role="--src-list",
    )


def _sizes(source: Location, opts: PlanSettings):
    """What a list of names alone (``--src-list``) asks each batch of its names' sizes of:
    the source, each request retried, a failure worded as the source's."""
    retrier = Retrier(opts.retries)

    def sizes(names):
        with source.translated("source"):
            return source.store.sizes(names, retrier, opts.follow_symlinks)

    return sizes


def _list(source: Location, opts: PlanSettings, tally: Tally, progress: Progress) -> FileTable:
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
            renamed=opts.renamed,
            duplicates=opts.duplicates,
            sizes=_sizes(source, opts),
            **common,
        )
    else:
        entries = list_source(
            source,
            follow_symlinks=opts.follow_symlinks,
            retrier=Retrier(opts.retries),
            etags=opts.duplicates != "off",
            **common,
        )
    progress.listing(*seen)
    LOG.info("listed %d files, %d bytes, from %s", seen[0], seen[1], opts.src_list or source.url)
    return entries


def make_plan(
    source: Location, opts: PlanSettings, progress: Progress = SILENT, held: Held | None = None
) -> Plan:
    """List the source and plan its shards under the settings made of the checked options;
    with ``held`` (a growing dataset's destination), only the samples it does not hold as they
    are now."""
    tally = Tally()
    files = _list(source, opts, tally, progress)
    duplicates = _duplicates(files, source, opts, tally)
    warnings: list[str] = []
    key = key_function(opts.sample_key_pattern)
    check = KeyCheck()
    planned = _sample_tables(files, key, opts, tally, warnings, check)
    files.handover = replace(files.handover, readers=None)  # checked: 9 bytes a file go
    alike = check_extraction_names(planned, opts.renamed, opts.lookalike_names)
    growth = None
    if held is not None and not any(len(t) for t in planned):  # an empty mount grows nothing
        raise DataError(_nothing_to_shard(source, opts, tally.freeze()))
    if held is not None:
        chosen, growth = compare(planned, held, opts.tmp_dir, opts.memory_limit)
        planned = [t.subset(c) for t, c in zip(planned, chosen)]
    names, members, tables, numbering, fullest = _cut(planned, opts, held)
    del planned
    check_unique(names)
    if held is not None:
        check_new_names(names, held)
    warnings += check.warnings() + alike + opts.idle_warnings(names)
    warnings += opts.count_warning(fullest) if names else []  # no shard: nothing to say
    shards = ShardList(names, members, tables, rename=opts.renamed)
    del members
    if "dali" in indexes_of(opts.index):
        check_index_shards(names)
    if any(format_of(n).utf8_names for n in names):
        for shard_plan in shards:
            check_names(shard_plan)
    skipped = tally.freeze()
    if not shards and held is None:  # a fresh run: after the cut, whose count rules speak first
        raise DataError(_nothing_to_shard(source, opts, skipped))
    return Plan(
        source=source.url,
        shards=shards,
        skipped=skipped,
        warnings=tuple(warnings),
        seed=opts.order.seed,
        options=opts.recorded,
        spilled=files.handover.spilled,
        numbering=tuple(numbering),
        growth=growth,
        duplicates=duplicates,
    )


def _duplicates(files: FileTable, source: Location, opts: PlanSettings, tally: Tally):
    """The listing's duplicates (``duplicates.find_duplicates``), the bytes of files read
    from ``source`` where that is how they are told; those dropped counted in ``tally``."""
    reader = None

    def read(entries):
        nonlocal reader
        retrier = Retrier(opts.retries)
        reader = source.store.reader(
            source, retrier, jobs=1, budget=64 << 20, follow_symlinks=opts.follow_symlinks
        )
        with source.translated("source"):
            yield from reader.read(entries)

    try:
        found = find_duplicates(files, opts.duplicates, read)
    finally:
        if reader is not None:
            reader.close()
    if found is not None and found.dropped and found.copies:
        tally.add_many(DROPPED, found.copies, [copy for copy, _ in found.pairs])
    return found


def _sample_tables(
    files: FileTable,
    key: KeyFunction,
    opts: PlanSettings,
    tally: Tally,
    warnings: list[str],
    check: KeyCheck,
) -> list[SampleTable]:
    """The listed files as samples, one table per EKM category (or one), their extensions
    applied and the names readers make of them checked (``check`` and ``warnings`` told)."""
    groups = route_table(group_table(files, key), opts.parsed_ekm, tally)
    planned: list[SampleTable] = []
    for table in groups:
        table = apply_sample_exts_table(
            table, opts.sample_exts, opts.missing_extension_action, tally, warnings
        )
        planned.append(table)
        check_reader_names(table, opts.renamed, opts.index, check, key)
    return planned


def _cut(
    planned: list[SampleTable], opts: PlanSettings, held: Held | None
) -> tuple[list[str], list[SampleRun], list[SampleTable], list[int], int]:
    """The shards of each table: their names, samples and tables, the numbering each table's
    shards reach, and the most samples in one shard."""
    ekm = opts.parsed_ekm
    names: list[str] = []
    members: list[SampleRun] = []
    tables: list[SampleTable] = []
    numbering: list[int] = []
    fullest = 0  # the most samples in one shard
    for index, table in enumerate(planned):
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
        template = opts.template if ekm is None else ekm.categories[index].template
        first = held.numbering[index] if held is not None else 0
        names += shard_names(len(cuts), template, opts.ext, own_ext=True, first=first)
        numbering.append(first + len(cuts))
        members += cuts
        tables += [table] * len(cuts)
    return names, members, tables, numbering, fullest


def _nothing_to_shard(source: Location, opts: PlanSettings, skipped: tuple) -> str:
    """The refusal of a listing that gives no sample (an empty or unmounted source, or every
    file left out), said alike by a fresh run and a growing one."""
    where = f" with prefix {opts.prefix!r}" if opts.prefix else ""
    if skipped:
        found = "every file was left out: " + "; ".join(f"{s.count} {s.reason}" for s in skipped)
    else:
        found = "no file matches the prefix" if opts.prefix else "the source has no files"
    return (
        f"nothing to shard under {source.url!r}{where}: {found} — check the source, --prefix "
        "and the filtering options"
    )


def announce(the_plan: Plan, opts: PlanSettings, progress: Progress, stacklevel: int = 4) -> None:
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
