"""``ishard split``: how a manifest's shards divide over ranks, workers and epochs under a
reader's policy."""

from __future__ import annotations

import sys
from dataclasses import replace

import click

from .. import inspection
from ..options.table import OPTIONS_BY_NAME, OptionSpec
from ..render import split_text
from ..split import POLICIES
from ..split.dali import POLICIES as DALI_LAST_BATCH
from ..split.streaming import ALGOS as STREAMING_SHUFFLES
from .environment import environment_named
from .help import PATH, sectioned, table_options, table_sections
from .output import emit_json

JOB, READER = "The training job", "The reader"  # headings of --help

# ``ishard split``'s options in the order of its --help
SPLIT_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "shard_sizes",
        "Samples per shard instead of a manifest: 100,100,80",
        "What to divide",
    ),
    OptionSpec(
        "nodes",
        "Physical nodes (Whale: worker tasks).",
        JOB,
        "int",
        default=1,
    ),
    OptionSpec(
        "ranks_per_node",
        "Ranks (GPUs) per node.",
        JOB,
        "int",
        default=1,
    ),
    OptionSpec(
        "workers",
        "DataLoader workers per rank.",
        JOB,
        "int",
        default=1,
    ),
    OptionSpec(
        "batch_size",
        "Per-rank batch size.",
        JOB,
        "int",
        default=1,
    ),
    OptionSpec("epochs", "Epochs to show.", JOB, "int", default=1),
    OptionSpec(
        "policy",
        "Whose way of dividing shards to show.",
        READER,
        "choice",
        POLICIES,
        "webdataset",
    ),
    OptionSpec(
        "last_batch_policy",
        "dali: what a shard's last, short batch becomes (default: fill).",
        READER,
        "choice",
        DALI_LAST_BATCH,
    ),
    # a reader's flag is unset unless given (None): the policy's own default then
    OptionSpec(
        "pad_last_batch",
        "dali: pad each shard to a full batch.",
        READER,
        "flag",
    ),
    OptionSpec(
        "stick_to_shard",
        "dali: read the same shard every epoch.",
        READER,
        "flag",
    ),
    OptionSpec(
        "drop_last",
        "torch sampler, webdataset loader, whale io.drop_last_files.",
        READER,
        "flag",
    ),
    OptionSpec(
        "drop_last_batch",
        "torch: the DataLoader's drop_last.",
        READER,
        "flag",
    ),
    OptionSpec("unbalanced", "whale: io.unbalanced_io_slicing.", READER, "flag"),
    OptionSpec(
        "shuffle",
        "streaming: the shuffle algorithm (default: none).",
        READER,
        "choice",
        STREAMING_SHUFFLES,
    ),
    OptionSpec(
        "seed",
        "streaming shuffle seed (9176), whale replication seed.",
        READER,
        "int",
    ),
    OptionSpec(
        "canonical_nodes",
        "streaming: num_canonical_nodes.",
        READER,
        "int",
    ),
    OptionSpec(
        "as_json", "Print the division as JSON.", "Output", "flag", default=False, flags=("--json",)
    ),
    replace(OPTIONS_BY_NAME["endpoint_url"], section="Where the manifest is"),
    replace(OPTIONS_BY_NAME["storage_options"], section="Where the manifest is"),
    replace(OPTIONS_BY_NAME["debug"], section="Output"),
)
SPLIT_SECTIONS = table_sections(SPLIT_OPTIONS)
SPLIT_EXAMPLES = """\b
Examples:
  ishard split out/manifest.json --policy dali --nodes 2 --ranks-per-node 8
  ishard split --shard-sizes 100,100,80 --nodes 2 --batch-size 10
  ishard split out/manifest.json --policy streaming --workers 4 --epochs 2 --json
  ishard split s3://shards/imagenet/ --endpoint-url http://127.0.0.1:9000 --nodes 2"""


@sectioned("split", SPLIT_SECTIONS, SPLIT_EXAMPLES)
@click.argument("manifest", required=False, type=PATH)
@table_options(SPLIT_OPTIONS)
@environment_named
def split_command(manifest, shard_sizes, policy, as_json, debug, **options) -> None:
    """Show how MANIFEST's shards divide over ranks, workers and epochs under a policy
    (MANIFEST: a manifest.json, or the DST folder or store URL that holds one)."""
    doc = inspection.split(manifest, shard_sizes=shard_sizes, policy=policy, **options)
    if as_json:
        emit_json(doc)
    else:
        split_text(doc, sys.stdout)
