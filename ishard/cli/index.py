"""``ishard index``: the sample index, DALI's and Energon's indexes for shards that exist."""

from __future__ import annotations

import sys
from dataclasses import replace

import click

from .. import api
from ..formats.indexes import CHOICES
from ..options.table import OPTIONS_BY_NAME
from ..render import make_progress
from ..sizes import counted
from .environment import environment_named
from .help import DEBUG, ENDPOINT_URL, PATH, PROGRESS, QUIET, STORAGE_OPTION, VERBOSE, click_option
from .output import emit_json, talk


@click.command(
    "index",
    epilog="""\b
Examples:
  ishard index out                          # a dataset ishard wrote: no shard is read
  ishard index wds/ --index energon         # WebDataset shards: their headers are read
  ishard index s3://b/wds train-{0000..0099}.tar --endpoint-url http://127.0.0.1:8333""",
)
@click.argument("dst", type=PATH)
@click.argument("shards", nargs=-1)
@click.option(
    "--index",
    "wanted",
    type=click.Choice(CHOICES),
    default=None,
    help="The indexes to write beside the .tar shards besides the sample index (default: "
    "dali,energon where the shards are .tar, else none).",
)
@click_option(
    replace(
        OPTIONS_BY_NAME["energon_split"],
        default=None,
        help=OPTIONS_BY_NAME["energon_split"].help + " Default: the manifest's, else train.",
    )
)
@click_option(
    replace(
        OPTIONS_BY_NAME["jobs"],
        help="Shards whose headers are read at once (default, or 0: CPUs, at most 8; 8 for "
        "a store).",
    )
)
@click.option(
    "--resume",
    is_flag=True,
    help="Go on from the shards a stopped ishard index of DST read (its records in "
    ".ishard-run/index/).",
)
@ENDPOINT_URL
@STORAGE_OPTION
@PROGRESS
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@QUIET
@VERBOSE
@DEBUG
@environment_named
def index_command(dst, shards, wanted, progress, as_json, quiet, verbose, debug, **options) -> int:
    """Write DST/samples.parquet, DALI's and Megatron-Energon's indexes and DST/manifest.json
    for the shards in DST: from a dataset's own sample index when it has one (no shard is
    read), else from the shards' member headers. SHARDs name the shards (relative to DST)
    where DST has no manifest; without them every tar shard under DST is indexed."""
    talk(quiet, verbose)
    bar = make_progress(False if quiet else progress)
    try:
        done = api.index(dst, shards or None, index=wanted, progress=bar, **options)
    finally:
        bar.close()
    if as_json:
        emit_json(done.to_dict())
    elif not quiet:
        how = (
            f"read the headers of {counted(done.headers_read, 'shard')}"
            if done.headers_read
            else "from its sample index, no shard read"
        )
        sys.stdout.write(
            f"indexed {counted(done.shards, 'shard')}, {counted(done.samples, 'sample')}, "
            f"{counted(done.members, 'member')} ({how}); indexes: {done.indexes}; wrote "
            f"{done.manifest}\n"
        )
    return 0
