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


ENERGON_PARTS = ("train", "val", "test")  # the split parts Energon's loaders ask for
SPLIT_CHOICES = "train, folders, or TRAIN,VAL,TEST ratios such as 8,1,1"


def energon_split_value(value: object) -> str:
    """``--energon-split`` as a run records it: ``train`` (every shard in it), ``folders``
    (each shard's first folder names its part) or three ratios (``8,1,1``: whole numbers).

    Raises:
        UsageError: anything else.
    """
    text = str(value).strip().lower()
    if text in ("train", "folders"):
        return text
    parts = [p.strip() for p in text.split(",")]
    if len(parts) == 3 and all(p.isdigit() for p in parts) and any(int(p) for p in parts):
        return ",".join(str(int(p)) for p in parts)
    raise UsageError(
        f"--energon-split {value!r} is not a split — give {SPLIT_CHOICES} (shards of the "
        "dataset, in its order, split by those ratios)"
    )


def split_parts(shards: list[str], split: str) -> dict[str, list[str]]:
    """Energon's split parts of ``shards`` (in the manifest's order) under the recorded
    ``--energon-split``: all in ``train``; by each shard's first folder; or the first
    shards in ``train``, the next in ``val``, the rest in ``test``, by the ratios (each part
    with a ratio above 0 gets at least one shard where there are enough).

    Raises:
        UsageError: ``folders``, and a shard in no folder.
    """
    parts: dict[str, list[str]] = {name: [] for name in ENERGON_PARTS}
    if split == "train":
        parts["train"] = list(shards)
    elif split == "folders":
        for shard in shards:
            folder, slash, _ = shard.partition("/")
            if not slash:
                raise UsageError(
                    f"--energon-split folders takes each shard's folder for its split part, "
                    f"and {shard!r} is in none — put the shards in train/, val/ and test/, or "
                    "give another --energon-split"
                )
            parts.setdefault(folder, []).append(shard)
    else:
        ratios = [int(r) for r in split.split(",")]
        counts = _apportioned(len(shards), ratios)
        at = 0
        for name, count in zip(ENERGON_PARTS, counts):
            parts[name] = list(shards[at : at + count])
            at += count
    return parts


def _apportioned(total: int, ratios: list[int]) -> list[int]:
    """``total`` shards cut by ``ratios`` (largest remainders), every part with a ratio above 0
    given one first where there are enough."""
    weight = sum(ratios)
    counts = [total * r // weight for r in ratios]
    order = sorted(range(len(ratios)), key=lambda i: (-(total * ratios[i] % weight), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    for i, ratio in enumerate(ratios):  # a part asked for and left empty takes one
        if ratio and not counts[i] and total >= sum(1 for r in ratios if r):
            donor = max(range(len(counts)), key=lambda j: counts[j])
            counts[donor] -= 1
            counts[i] += 1
    return counts
