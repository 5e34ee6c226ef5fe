"""``ishard diff``: what differs between two destinations; exit 1 when anything does."""

from __future__ import annotations

import click

from .. import inspection
from ..names import shown
from ..readback.diff import Difference, SampleChange
from .environment import environment_named
from .help import PATH, reads_stored_shards
from .output import emit_json


@click.command(
    "diff",
    epilog="""\b
Examples:
  ishard diff out-monday out-tuesday
  ishard diff out-monday out-tuesday --samples    # a line per shard and sample that differs
  ishard diff out/manifest.json s3://shards/imagenet/ --json""",
)
@click.argument("old", type=PATH)
@click.argument("new", type=PATH)
@click.option(
    "--samples",
    "each",
    is_flag=True,
    help="After the counts, list each shard and sample that differs, a line each.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the differences as JSON, each one named."
)
@reads_stored_shards
@environment_named
def diff_command(old, new, each, as_json, debug, endpoint_url, storage_options) -> int:
    """Compare two destinations (or their manifest.json): how many shards were added, removed
    or rewritten, and samples added, removed, changed or moved; exit 0 when they are the same,
    1 when not."""
    found = inspection.diff(old, new, endpoint_url=endpoint_url, storage_options=storage_options)
    if as_json:
        emit_json(found.to_dict())
    else:
        for line in diff_lines(found, each=each):
            click.echo(line)
    return 0 if found.same else 1


def diff_lines(found: Difference, *, each: bool = False) -> list[str]:
    """``ishard diff``'s text: the totals; with ``each`` (``--samples``), then a line a shard
    and a sample that differ (a re-cut moves every sample: that many lines)."""
    if found.same:
        return [f"no differences: {found.shards_same} shards hold the same samples"]
    shards = (
        f"shards: {len(found.shards_added)} added, {len(found.shards_removed)} removed, "
        f"{len(found.shards_rewritten)} rewritten, {found.shards_same} the same"
    )
    samples = (
        f"samples: {len(found.samples_added)} added, {len(found.samples_removed)} removed, "
        f"{len(found.samples_changed)} changed, {len(found.samples_moved)} moved"
    )
    lines = [shards, samples]
    if not each:
        return lines
    lines += [f"+ shard {shown(n)}" for n in found.shards_added]
    lines += [f"- shard {shown(n)}" for n in found.shards_removed]
    lines += [f"~ shard {shown(n)}" for n in found.shards_rewritten]
    for mark, changes in (
        ("+", found.samples_added),
        ("-", found.samples_removed),
        ("~", found.samples_changed),
        (">", found.samples_moved),
    ):
        lines += [f"{mark} sample {shown(c.key)!r} {_where(c)}" for c in changes]
    return lines


def _where(change: SampleChange) -> str:
    if change.old is None:
        return f"in {shown(change.new or '')}"
    if change.new is None:
        return f"in {shown(change.old)}"
    if change.old == change.new:
        return f"in {shown(change.old)}"
    return f"{shown(change.old)} -> {shown(change.new)}"
