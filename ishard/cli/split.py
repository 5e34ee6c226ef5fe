"""``ishard split``: how a manifest's shards divide over ranks, workers and epochs under a
reader's policy."""

from __future__ import annotations

import sys

import click

from .. import inspection
from ..render import split_text
from ..split import POLICIES
from ..split.dali import POLICIES as DALI_LAST_BATCH
from ..split.streaming import ALGOS as STREAMING_SHUFFLES
from .environment import environment_named
from .help import DEBUG, PATH, Choices, sectioned
from .output import emit_json

SPLIT_SECTIONS = {
    "What to divide": ("manifest", "shard_sizes"),
    "The training job": ("nodes", "ranks_per_node", "workers", "batch_size", "epochs"),
    "The reader": (
        "policy",
        "last_batch_policy",
        "pad_last_batch",
        "stick_to_shard",
        "drop_last",
        "drop_last_batch",
        "unbalanced",
        "shuffle",
        "seed",
        "canonical_nodes",
    ),
    "Output": ("as_json", "debug", "help"),
}
SPLIT_EXAMPLES = """\b
Examples:
  ishard split out/manifest.json --policy dali --nodes 2 --ranks-per-node 8
  ishard split --shard-sizes 100,100,80 --nodes 2 --batch-size 10
  ishard split out/manifest.json --policy streaming --workers 4 --epochs 2 --json"""


def _policy_choice(name: str, choices: tuple[str, ...], help: str):
    """An option naming one of a reader policy's ``choices``, unset unless given (the policy's
    own default then)."""
    return click.option(name, type=Choices(choices), default=None, help=help)


@sectioned("split", SPLIT_SECTIONS, SPLIT_EXAMPLES)
@click.argument("manifest", required=False, type=PATH)
@click.option(
    "--shard-sizes", default=None, help="Samples per shard instead of a manifest: 100,100,80"
)
@click.option(
    "--policy",
    type=Choices(POLICIES),
    default="webdataset",
    help="Whose way of dividing shards to show.",
)
@click.option(
    "--nodes", type=int, default=1, show_default=True, help="Physical nodes (Whale: worker tasks)."
)
@click.option(
    "--ranks-per-node", type=int, default=1, show_default=True, help="Ranks (GPUs) per node."
)
@click.option(
    "--workers", type=int, default=1, show_default=True, help="DataLoader workers per rank."
)
@click.option("--batch-size", type=int, default=1, show_default=True, help="Per-rank batch size.")
@click.option("--epochs", type=int, default=1, show_default=True, help="Epochs to show.")
@_policy_choice(
    "--last-batch-policy",
    DALI_LAST_BATCH,
    "dali: what a shard's last, short batch becomes (default: fill).",
)
@click.option(
    "--pad-last-batch", is_flag=True, default=None, help="dali: pad each shard to a full batch."
)
@click.option(
    "--stick-to-shard", is_flag=True, default=None, help="dali: read the same shard every epoch."
)
@click.option(
    "--drop-last",
    is_flag=True,
    default=None,
    help="torch sampler, webdataset loader, whale io.drop_last_files.",
)
@click.option(
    "--drop-last-batch", is_flag=True, default=None, help="torch: the DataLoader's drop_last."
)
@click.option("--unbalanced", is_flag=True, default=None, help="whale: io.unbalanced_io_slicing.")
@_policy_choice(
    "--shuffle", STREAMING_SHUFFLES, "streaming: the shuffle algorithm (default: none)."
)
@click.option(
    "--seed", type=int, default=None, help="streaming shuffle seed (9176), whale replication seed."
)
@click.option("--canonical-nodes", type=int, default=None, help="streaming: num_canonical_nodes.")
@click.option("--json", "as_json", is_flag=True, help="Print the division as JSON.")
@DEBUG
@environment_named
def split_command(manifest, shard_sizes, policy, as_json, debug, **options) -> None:
    """Show how MANIFEST's shards divide over ranks, workers and epochs under a policy
    (MANIFEST: a manifest.json, or the DST folder that holds one)."""
    doc = inspection.split(manifest, shard_sizes=shard_sizes, policy=policy, **options)
    if as_json:
        emit_json(doc)
    else:
        split_text(doc, sys.stdout)
