"""``ishard verify``: check DST's shards against its manifest; exit 1 if anything is wrong."""

from __future__ import annotations

import sys
from dataclasses import replace

import click

from .. import inspection
from ..options.table import OPTIONS_BY_NAME
from ..render import make_progress, verify_text, warnings_text
from .environment import environment_named
from .help import (
    DEBUG,
    ENDPOINT_URL,
    PATH,
    PROGRESS,
    QUIET,
    STORAGE_OPTION,
    VERBOSE,
    click_option,
)
from .output import emit_json, talk


@click.command(
    "verify",
    epilog="""\b
Examples:
  ishard verify out
  ishard verify out --deep        # read every member back too
  ishard verify s3://shards/imagenet/ --json""",
)
@click.argument("dst", type=PATH)
@click.option(
    "--deep",
    is_flag=True,
    help="Also read every member back and check samples: counts, payload, grouping.",
)
@click_option(  # ishard shard's --jobs (-j), its help said of checking
    replace(
        OPTIONS_BY_NAME["jobs"],
        help="Shards checked at once (default, or 0: CPUs, at most 8; 8 for a store).",
    )
)
@ENDPOINT_URL
@STORAGE_OPTION
@PROGRESS
@click.option(
    "--json", "as_json", is_flag=True, help="Print the result as one JSON object on stdout."
)
@QUIET
@VERBOSE
@DEBUG
@environment_named
def verify_command(dst, progress, as_json, quiet, verbose, debug, **options) -> int:
    """Check the shards in DST against DST/manifest.json; exit 1 if anything is wrong."""
    talk(quiet, verbose)
    bar = make_progress(False if quiet else progress)
    try:
        result = inspection.verify(dst, progress=bar, **options)
    finally:
        bar.close()
    warnings_text(list(result.warnings))
    if as_json:
        emit_json(result.to_dict())
    elif not quiet:
        verify_text(result.to_dict(), sys.stdout)
    return 0 if result.ok else 1
