"""``ishard shard``: plan SRC's shards and print the plan (a dry run), or write them to DST."""

from __future__ import annotations

import sys
import warnings

import click

from .. import api
from ..checksums import ALGORITHMS
from ..errors import IshardWarning, UsageError
from ..formats import ARCHIVE_EXTS, level_help
from ..formats.compress import GZIP_LIBRARIES
from ..options.checks import EXECUTORS, INDEXES
from ..options.record import DEFAULT_SHARD_SIZE, GO_SHARD_SIZE, ZIP_METHODS, make_options
from ..planning.extraction import LOOKALIKES
from ..planning.keys import BUILT_IN
from ..planning.naming import MEMBER_NAMES
from ..planning.samples import ACTIONS
from ..render import (
    NoticesOnly,
    histogram_text,
    make_progress,
    plan_headers,
    plan_text,
    shard_table,
    summary_text,
)
from ..run.report import plan_document, plan_summary, run_summary, size_histogram
from .environment import environment_named, variable_of
from .gospelling import DRY_RUN_MODES
from .help import (
    DEBUG,
    ENDPOINT_URL,
    PATH,
    PROGRESS,
    QUIET,
    STORAGE_OPTION,
    VERBOSE,
    Choices,
    sectioned,
)
from .output import emit_json, talk

SHARD_SECTIONS = {
    "What to shard": ("prefix", "src_list", "include_hidden", "follow_symlinks"),
    "Grouping files into samples": (
        "sample_key_pattern",
        "sample_exts",
        "missing_extension_action",
        "ekm",
        "collapse",
    ),
    "Cutting and naming shards": (
        "shard_size",
        "samples_per_shard",
        "num_shards",
        "shards_multiple_of",
        "sort",
        "shard_template",
    ),
    "Archives": ("ext", "compress_level", "gzip_library", "zip_compression"),
    "Reader compatibility": ("member_names", "index", "checksum", "lookalike_names", "strict"),
    "Object stores": ("endpoint_url", "storage_options", "part_size", "read_buffer", "retries"),
    "Running": (
        "dry_run",
        "overwrite",
        "resume",
        "jobs",
        "executor",
        "scheduler",
        "tmp_dir",
        "memory_limit",
        "progress",
        "as_json",
        "quiet",
        "verbose",
        "debug",
        "help",
    ),
}
SHARD_EXAMPLES = """\b
Examples:
  ishard shard data/ --dry-run                          # the plan, a line per shard
  ishard shard data/ out/ --shard-size 512MiB --sample-exts .jpg,.json
  ishard shard s3://raw/imagenet/ s3://shards/imagenet/ --ext .tar.lz4
  ishard shard data/ out/ --resume                      # finish an interrupted run
  ishard -src_bck=data -dst_bck=out -shard_size=512MiB  # Go ishard's spelling

The user guide (docs/user-guide.md) explains every option."""


@sectioned("shard", SHARD_SECTIONS, SHARD_EXAMPLES)
@click.argument("src", type=PATH)
@click.argument("dst", required=False, type=PATH)
@click.option(
    "--prefix",
    default="",
    show_default=False,
    help="Only files whose relative name starts with this.",
)
@click.option(
    "--shard-size",
    default=f"{DEFAULT_SHARD_SIZE >> 20}MiB",
    show_default=True,
    help="Target payload per shard (512MiB, 100KB, 1048576B); a number without a unit is "
    f"samples per shard (10), as in Go ishard (whose spelling's default is {GO_SHARD_SIZE}).",
)
@click.option(
    "--samples-per-shard",
    type=int,
    default=None,
    help="Also cut a shard at this many samples (with a size as --shard-size).",
)
@click.option(
    "--sample-key-pattern",
    default="base_file_name",
    show_default=True,
    help=f"{', '.join(BUILT_IN)} or a regex (group 1 = key).",
)
@click.option("--sample-exts", default=None, help="Extensions every sample should have: .jpg,.xml")
@click.option(
    "--missing-extension-action",
    type=Choices(ACTIONS),
    default="ignore",
    help="What to do with a sample that lacks one of --sample-exts (exclude: leave it out).",
)
@click.option(
    "--collapse/--no-collapse",
    default=False,
    help="Let a directory's remainder move up into its parent's shards.",
)
@click.option("--ekm", default=None, help="External key map: a JSON file or inline JSON.")
@click.option("--ext", type=Choices(ARCHIVE_EXTS), default=".tar", help="Archive format.")
@click.option(
    "--shard-template",
    default="shard-%06d",
    show_default=True,
    help="Shard names: %06d, {0000..9999} or @0999.",
)
@click.option(
    "--sort",
    type=Choices(("alpha:inc", "alpha:dec", "shuffle", "shuffle:SEED")),
    default=None,
    help="Sample order (default: as listed, which is name order).",
)
@click.option(
    "--dry-run",
    "dry_run",
    is_flag=False,
    flag_value="shards",
    default=None,
    metavar="[=files|show_keys|json|summary]",
    help="Print the plan, write nothing: a line per shard and a histogram; =files adds every "
    "member, =show_keys their sample keys, =json all as JSON, =summary the totals.",
)
@PROGRESS
@click.option(
    "--jobs",
    type=int,
    default=0,
    show_default=False,
    help="Shards written at once (default, or 0: CPUs, at most 8; 8 with an object store).",
)
@click.option(
    "--follow-symlinks",
    is_flag=True,
    help="List what symbolic links point to (inside SRC only; each directory once).",
)
@click.option(
    "--include-hidden", is_flag=True, help="Keep files and directories whose name starts with '.'."
)
@click.option(
    "--overwrite", is_flag=True, help="Allow a non-empty DST; same-named files are replaced."
)
@click.option(
    "--resume",
    is_flag=True,
    help="Finish an interrupted run into DST: keep its complete shards (checked), write the rest.",
)
@click.option(
    "--compress-level",
    type=int,
    default=None,
    help=level_help(),
)
@click.option(
    "--gzip-library",
    type=Choices(("auto", *GZIP_LIBRARIES)),
    default="auto",
    help="gzip compressor for .tgz (auto: the fastest installed); pin one for the same bytes on every machine.",
)
@click.option(
    "--zip-compression", type=Choices(ZIP_METHODS), default="stored", help="Method of .zip members."
)
@click.option(
    "--src-list",
    default=None,
    help="Take the listing from an inventory file (CSV with header, JSON Lines, Parquet, an S3 "
    "Inventory report's manifest.json: CSV, Parquet, or ORC with ishard[orc]).",
)
@ENDPOINT_URL
@STORAGE_OPTION
@click.option(
    "--part-size",
    default="16MiB",
    show_default=True,
    help="Multipart upload part size for S3 destinations.",
)
@click.option(
    "--read-buffer",
    default="256MiB",
    show_default=True,
    help="Bytes fetched ahead from a store, across all writers.",
)
@click.option(
    "--retries",
    type=int,
    default=5,
    show_default=True,
    help="Retries of a failed store request after its first try (0: none).",
)
@click.option(
    "--checksum",
    type=Choices((*ALGORITHMS, "none")),
    default="xxh128",
    help="Checksum of every shard for the manifest (md5: wids' md5sum, the Go spelling's default).",
)
@click.option(
    "--executor",
    type=Choices(EXECUTORS),
    default="local",
    help="Where shards are written: here, or as Dask tasks on a cluster's workers.",
)
@click.option(
    "--scheduler",
    default=None,
    help="With --executor dask: tcp://HOST:PORT of a running Dask scheduler (default: a local cluster of --jobs processes).",
)
@click.option(
    "--num-shards",
    type=int,
    default=None,
    help="Exactly N shards whose sample counts differ by at most one (flat keys or --collapse).",
)
@click.option(
    "--shards-multiple-of",
    type=int,
    default=None,
    help="Round the shard count up to a multiple of K, samples spread evenly (flat keys or --collapse).",
)
@click.option(
    "--member-names",
    type=Choices(MEMBER_NAMES),
    default="sample",
    help="sample: <sample key>.<extension>, read by WebDataset, wids and DALI as one sample per ishard sample; or original (paths as listed; the Go spelling's default).",
)
@click.option(
    "--index",
    type=Choices(INDEXES),
    default="none",
    help="dali: write <shard>.idx (DALI v1.2) beside each .tar shard.",
)
@click.option(
    "--tmp-dir",
    type=PATH,
    default=None,
    help="Folder for the temporary files of sorting a big --src-list inventory (default: the "
    "system's, $TMPDIR).",
)
@click.option(
    "--memory-limit",
    default="512MiB",
    show_default=True,
    help="Memory the column engine may hold while it sorts and groups a big --src-list "
    "inventory; past it, it spills to --tmp-dir (128MiB at least).",
)
@click.option(
    "--lookalike-names",
    type=Choices(LOOKALIKES),
    default="refuse",
    help="Member names that differ only in case or Unicode form (A.jpg, a.jpg): distinct files "
    "on Linux, one on macOS and Windows; refuse, or warn (the Go spelling's default).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Any warning is an error (exit 1), before anything is written; in a dry run too (for CI).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the summary as one JSON object on stdout."
)
@QUIET
@VERBOSE
@DEBUG
@environment_named
def shard_command(src, dst, dry_run, progress, as_json, quiet, verbose, debug, **options) -> None:
    """Shard the files under SRC into archives in DST."""
    talk(quiet, verbose)
    with warnings.catch_warnings():  # the progress hooks print them, as 'ishard: warning:'
        warnings.simplefilter("ignore", IshardWarning)
        _shard(src, dst, dry_run, False if quiet else progress, as_json, quiet, options)


def _shard(src, dst, dry_run, progress, as_json, quiet, options) -> None:
    ctx = click.get_current_context()
    if (
        dry_run is not None
        and dry_run not in DRY_RUN_MODES
        and (
            variable := next(variable_of(ctx, p) for p in ctx.command.params if p.name == "dry_run")
        )
    ):
        raise UsageError(
            f"{variable}={dry_run!r} is not a dry-run mode — set it to shards, files, show_keys, "
            "json or summary, or unset it"
        )
    if dry_run is not None and dry_run not in DRY_RUN_MODES:
        raise click.UsageError(
            f"--dry-run={dry_run!r} is not a dry-run mode — use --dry-run, --dry-run=files, "
            "--dry-run=show_keys, --dry-run=json or --dry-run=summary"
        )
    if dry_run is None and dst is None:
        raise click.UsageError("missing DST — say where the shards go: ishard shard SRC DST")
    opts = make_options(**options)  # every option checked, a dry run's too
    if dry_run is not None:
        the_plan = api.plan_with(src, opts, NoticesOnly())
        if dry_run == "json":
            emit_json(plan_document(the_plan))
            return
        if quiet:
            return
        if dry_run == "shards":
            shard_table(the_plan, sys.stdout)
        elif dry_run == "summary":
            plan_headers(the_plan, sys.stdout)
        else:
            plan_text(the_plan, dry_run == "show_keys", sys.stdout)
        summary_text(plan_summary(the_plan), sys.stdout, dry_run=True)
        if dry_run == "shards":
            histogram_text(size_histogram(the_plan.shard_sizes), sys.stdout)
        return
    bar = make_progress(progress)
    try:
        report = api.shard_with(src, dst, opts, progress=bar, sort=options["sort"])
    finally:
        bar.close()
    summary = run_summary(report)
    if as_json:
        emit_json(summary)
    elif not quiet:
        summary_text(summary, sys.stdout, dry_run=False)
