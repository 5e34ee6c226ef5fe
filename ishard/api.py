"""The Python API and the only orchestrator: list, group, plan, write, record."""

from __future__ import annotations

import time
from pathlib import Path

from .errors import DataError, UsageError
from .formats import check_names
from .keys import key_function
from .listing import check_source_dir, list_local
from .manifest import remove_manifest, write_manifest
from .model import FileEntry, Plan, Report, ShardPlan, Tally
from .options import Options, make_options
from .plan import check_unique, cut, name_shards
from .progress import SILENT, Progress
from .samples import apply_sample_exts, group, route
from .write import write_shards

LISTING_REPORT_EVERY = 1000


def plan(src: str | Path, *, progress: Progress = SILENT, **options) -> Plan:
    """Plan the shards of ``src`` without writing anything (what ``--dry-run`` prints).

    Args:
        src: the dataset's top directory; member names are relative to it.
        progress: hooks told about listing progress.
        **options: the same names as the command-line options (``shard_size="512MiB"``,
            ``sample_key_pattern``, ``sample_exts``, ``ext``, ``shard_template``, ``sort`` …).

    Raises:
        UsageError: a bad option value (before anything is listed).
        IshardError: the source cannot be listed or the data breaks an option's rule.
    """
    return make_plan(str(src), make_options(**options), progress)


def shard(src: str | Path, dst: str | Path, *, progress: Progress = SILENT, **options) -> Report:
    """Shard ``src`` into ``dst`` and write ``dst/manifest.json`` last.

    Args:
        src: the dataset's top directory.
        dst: the output directory; created if missing, must be empty unless ``overwrite=True``.
        progress: hooks told about listing and writing progress.
        **options: as for :func:`plan`, plus ``jobs`` and ``overwrite``.

    Returns:
        The plan, the written shards (name, size, md5) and the manifest path.

    Raises:
        UsageError: a bad option value or destination (before anything is listed).
        IshardError: a failure while listing or writing; complete shards stay, partial ones
            never appear under their final names.
    """
    opts = make_options(**options)
    started = time.monotonic()
    dst_path = check_destination(str(src), str(dst), overwrite=opts.overwrite)
    the_plan = make_plan(str(src), opts, progress)
    progress.planned(len(the_plan.shards), the_plan.size)
    dst_path.mkdir(parents=True, exist_ok=True)
    if opts.overwrite:
        remove_manifest(dst_path)  # else a failed run would leave it describing replaced shards
    settings = {
        "compress_level": opts.compress_level,
        "zip_deflate": opts.zip_compression == "deflated",
    }
    results = write_shards(
        the_plan.shards, Path(src), dst_path, jobs=opts.workers, settings=settings, progress=progress
    )
    manifest = write_manifest(dst_path, the_plan, results)
    return Report(the_plan, str(dst), tuple(results), time.monotonic() - started, str(manifest))


def check_destination(src: str, dst: str, *, overwrite: bool) -> Path:
    """Refuse a destination inside the source, a file, or a non-empty directory.

    Raises:
        UsageError: naming the destination and the fix.
    """
    src_path = check_source_dir(src).resolve()
    dst_path = Path(dst)
    resolved = dst_path.resolve()
    if resolved == src_path or src_path in resolved.parents:
        raise UsageError(
            f"destination {dst!r} is inside the source {src!r} — write the shards somewhere else"
        )
    if dst_path.exists() and not dst_path.is_dir():
        raise UsageError(f"destination {dst!r} is a file — give a directory")
    if dst_path.is_dir() and not overwrite and any(dst_path.iterdir()):
        raise UsageError(
            f"destination {dst!r} is not empty — use an empty directory, or --overwrite to "
            "replace same-named shards"
        )
    return dst_path


def make_plan(src: str, opts: Options, progress: Progress = SILENT) -> Plan:
    """List ``src`` and plan its shards under checked options."""
    tally = Tally()
    seen = [0, 0]

    def on_file(entry: FileEntry) -> None:
        seen[0] += 1
        seen[1] += entry.size
        if seen[0] % LISTING_REPORT_EVERY == 0:
            progress.listing(*seen)

    entries = list_local(
        src, prefix=opts.prefix, include_hidden=opts.include_hidden, tally=tally, on_file=on_file
    )
    progress.listing(*seen)
    ekm = opts.parsed_ekm
    warnings: list[str] = []
    groups = route(group(entries, key_function(opts.sample_key_pattern)), ekm, tally)
    shards: list[ShardPlan] = []
    for index, samples in enumerate(groups):
        samples = apply_sample_exts(
            samples, opts.sample_exts, opts.missing_extension_action, tally, warnings
        )
        cuts = cut(samples, opts.bounds, opts.order, opts.collapse)
        if ekm is None:
            shards += name_shards(cuts, opts.template, opts.ext)
        else:
            shards += name_shards(cuts, ekm.categories[index].template, opts.ext, own_ext=True)
    check_unique(shards)
    for shard_plan in shards:
        check_names(shard_plan)
    skipped = tally.freeze()
    if not shards:
        where = f" with prefix {opts.prefix!r}" if opts.prefix else ""
        if skipped:
            found = "every file was left out: " + "; ".join(f"{s.count} {s.reason}" for s in skipped)
        else:
            found = "no file matches the prefix" if opts.prefix else "the source has no files"
        raise DataError(
            f"nothing to shard under {src!r}{where}: {found} — check the source, --prefix and "
            "the filtering options"
        )
    return Plan(
        source=src,
        shards=tuple(shards),
        skipped=skipped,
        warnings=tuple(warnings),
        seed=opts.order.seed,
        options=opts.to_dict(),
    )
