"""The indexes a run writes beside its shards (``--index``): DALI's (``<shard>.idx``, written
with each shard) and Megatron-Energon's (``<shard>.tar.idx`` and ``.nv-meta/``, made from the
sample index when the dataset is published) — none, either or both, as one value
(``dali,energon``)."""

from __future__ import annotations

from ..errors import UsageError
from .dali_index import index_name

INDEXES = ("dali", "energon")  # each reads plain tar shards only
CHOICES = ("none", *INDEXES, ",".join(INDEXES))  # shown in --help


def indexes_of(value: str) -> frozenset[str]:
    """The indexes ``value`` names (``none``: none).

    Raises:
        UsageError: a name that is no index.
    """
    names = {n.strip() for n in str(value).split(",")} - {"none", ""}
    wrong = sorted(names - set(INDEXES))
    if wrong:
        raise UsageError(
            f"--index {value!r} names {wrong[0]!r}, which is no index — give none, dali, energon "
            "or dali,energon"
        )
    return frozenset(names)


def index_value(value: str) -> str:
    """``value`` as a run records it: its indexes in one order (``energon,dali`` →
    ``dali,energon``), or ``none``."""
    names = indexes_of(value)
    return ",".join(n for n in INDEXES if n in names) or "none"


def tar_index_name(shard: str) -> str:
    """Energon's index beside a tar: ``shard-000001.tar`` → ``shard-000001.tar.idx``."""
    return shard + ".idx"


COMPANIONS = {"dali": index_name, "energon": tar_index_name}  # each index's file beside a tar
ENERGON_FOLDER = ".nv-meta"
ENERGON_INFO = f"{ENERGON_FOLDER}/.info.json"  # Energon's files of the whole dataset
ENERGON_SPLIT = f"{ENERGON_FOLDER}/split.yaml"
ENERGON_DATASET = f"{ENERGON_FOLDER}/dataset.yaml"
ENERGON_SQLITE = f"{ENERGON_FOLDER}/index.sqlite"
ENERGON_UUID = f"{ENERGON_FOLDER}/index.uuid"
ENERGON_META = (ENERGON_INFO, ENERGON_SPLIT, ENERGON_DATASET, ENERGON_SQLITE, ENERGON_UUID)


def companions(shards: list[str] | tuple[str, ...], indexes: frozenset[str]) -> list[str]:
    """The index files beside these shards (their ``.tar`` ones) that ``indexes`` write."""
    return [
        COMPANIONS[kind](shard)
        for kind in INDEXES
        if kind in indexes
        for shard in shards
        if shard.endswith(".tar")
    ]


def dataset_files(indexes: frozenset[str]) -> tuple[str, ...]:
    """The files of the whole dataset that ``indexes`` write (Energon's ``.nv-meta/``)."""
    return ENERGON_META if "energon" in indexes else ()
