"""``ishard ls``: an archive's members, or its samples as WebDataset readers group them."""

from __future__ import annotations

import sys

import click

from ..errors import UsageError
from ..inspection import shard_urls
from ..names import shown
from ..readback import archive
from ..readback.urls import brace_patterns
from ..render import samples_text, warnings_text
from ..run.report import samples_document
from ..sizes import format_size
from .environment import environment_named
from .help import PATH, reads_stored_shards
from .output import emit_json


@click.command(
    "ls",
    epilog="""\b
Examples:
  ishard ls out/shard-000000.tar
  ishard ls out/shard-000000.tar --samples   # as WebDataset readers group the members
  ishard ls s3://shards/imagenet/shard-000000.tar.lz4 --json
  ishard ls out/ --urls                      # the dataset's shard URLs, as brace patterns""",
)
@click.argument("archive_path", metavar="ARCHIVE", type=PATH)
@click.option(
    "--samples", is_flag=True, help="Group members into samples as WebDataset readers do."
)
@click.option(
    "--urls",
    is_flag=True,
    help="ARCHIVE is a dataset (DST or its manifest.json): print its shards' URLs from the "
    "manifest, one brace pattern per run of consecutive names (--json: every URL too).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the members as JSON.")
@reads_stored_shards
@environment_named
def ls_command(archive_path, samples, urls, as_json, debug, endpoint_url, storage_options) -> None:
    """List an archive's members with their sizes (a file, or a store URL); with --urls, a
    dataset's shard URLs."""
    if urls:
        if samples:
            raise UsageError(
                "--urls lists a dataset's shards and --samples one shard's samples — "
                "give one of them"
            )
        _urls(archive_path, as_json, endpoint_url, storage_options)
        return
    found = list(
        archive.members(archive_path, endpoint_url=endpoint_url, storage_options=storage_options)
    )
    if samples:
        grouped = archive.reader_samples(found)
        if as_json:
            emit_json(samples_document(grouped))
        else:
            samples_text(grouped, sys.stdout)
        warnings_text(grouped.problems())
        return
    if as_json:
        emit_json({"members": [{"name": m.name, "size": m.size} for m in found]})
        return
    for m in found:
        click.echo(f"{m.size:>12}  {format_size(m.size):>10}  {shown(m.name)}")


def _urls(dst, as_json, endpoint_url, storage_options) -> None:
    """``ishard ls DST --urls``: the brace patterns, a line each; with ``--json`` every URL
    and the patterns."""
    every = shard_urls(dst, endpoint_url=endpoint_url, storage_options=storage_options)
    patterns = brace_patterns(every)
    if as_json:
        emit_json({"urls": every, "patterns": patterns})
        return
    for pattern in patterns:
        click.echo(shown(pattern))
