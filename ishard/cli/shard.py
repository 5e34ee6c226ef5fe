"""``ishard shard``: plan SRC's shards and print the plan (a dry run), or write them to DST."""

from __future__ import annotations

import sys
import warnings

import click

from .. import api
from ..errors import IshardWarning, UsageError
from ..model import Plan
from ..options.record import make_options
from ..options.table import SHARD_OPTIONS
from ..render import (
    NoticesOnly,
    histogram_text,
    make_progress,
    plan_text,
    shard_table,
    summary_text,
)
from ..run.report import (
    few_shards,
    nothing_written,
    plan_document,
    plan_summary,
    run_summary,
    size_histogram,
)
from .environment import environment_named, given_options, variable_of
from .gospelling import DRY_RUN_MODES
from .help import PATH, sectioned, table_options, table_sections
from .output import emit_json, talk

SHARD_SECTIONS = table_sections(SHARD_OPTIONS)
SHARD_EXAMPLES = """\b
Examples:
  ishard shard data/ --dry-run                          # the plan, a line per shard
  ishard shard data/ out/ --dry-run=summary             # the totals; out/ checked as the run would
  ishard shard data/ out/ --shard-size 512MiB --sample-exts .jpg,.json
  ishard shard s3://raw/imagenet/ s3://shards/imagenet/ --ext .tar.lz4
  ishard shard data/ out/ --resume                      # finish an interrupted run
  ishard -src_bck=data -dst_bck=out -shard_size=512MiB  # Go ishard's spelling

The user guide (docs/user-guide.md) explains every option."""


@sectioned("shard", SHARD_SECTIONS, SHARD_EXAMPLES)
@click.argument("src", type=PATH)
@click.argument("dst", required=False, type=PATH)
@table_options(SHARD_OPTIONS)
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
    given, sort = given_options(ctx), options["sort"]
    if dry_run is not None:
        the_plan = api.plan_with(src, opts, NoticesOnly(), dst, given=given, sort=sort)
        _dry_run(the_plan, dry_run, as_json, quiet)
        if dry_run != "json" and not as_json:  # a JSON document goes alone
            _note(the_plan, dst, quiet)
        return
    bar = make_progress(progress)
    try:
        report = api.shard_with(src, dst, opts, progress=bar, sort=sort, given=given)
    finally:
        bar.close()
    summary = run_summary(report)
    if as_json:
        emit_json(summary)
    elif not quiet and not nothing_written(report):  # its one line on stderr says so
        summary_text(summary, sys.stdout, dry_run=False)
    _note(report.plan, dst, quiet)


def _note(the_plan: Plan, dst, quiet: bool) -> None:
    """The line on stderr a dataset of fewer shards than a training job's readers gets
    (``-q``: none)."""
    note = None if quiet else few_shards(the_plan, dst)
    if note is not None:
        sys.stdout.flush()  # after what went to stdout, wherever both go
        NoticesOnly().notice(note)


def _dry_run(the_plan: Plan, mode: str, as_json: bool, quiet: bool) -> None:
    """Print the plan as ``mode`` asks: ``shards`` a row per shard, the totals and a histogram;
    ``summary`` the totals alone; ``files``/``text``/``show_keys`` every member. ``--json``
    prints the summary as JSON (what a run's ``--json`` prints), or with a mode that lists
    members the whole plan (``--dry-run=json``'s)."""
    if mode == "json" or as_json:
        whole = mode not in ("shards", "summary")
        emit_json(plan_document(the_plan) if whole else plan_summary(the_plan))
        return
    if quiet:
        return
    if mode == "shards":
        shard_table(the_plan, sys.stdout)
    elif mode != "summary":
        plan_text(the_plan, mode == "show_keys", sys.stdout)
    summary_text(plan_summary(the_plan), sys.stdout, dry_run=True)
    if mode == "shards":
        histogram_text(size_histogram(the_plan.shard_sizes), sys.stdout)
