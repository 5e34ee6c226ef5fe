"""Each option's value checked on its own, as ``make_options`` runs them: sizes and counts,
the lists, the temp folder, the executor, the template's extension, the balance options, the
member names and index; a bad value is a ``UsageError`` naming the flag and the fix."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..errors import UsageError
from ..formats import extensions
from ..formats.indexes import energon_split_value, indexes_of
from ..planning.engine import LEAST_MEMORY_LIMIT
from ..planning.engine import MEMORY_LIMIT as DEFAULT_MEMORY_LIMIT
from ..planning.naming import MEMBER_NAMES
from ..planning.templates import NameTemplate
from ..sizes import ShardSize, parse_shard_size, parse_size
from ..store.location import parse_storage_options

DIGITS = re.compile(r"[0-9]+")
EXECUTORS = ("local", "dask")
_SCHEDULER = re.compile(r"(tcp|tls|ucx|ws|wss)://(\[[0-9a-fA-F:]+\]|[^/\s:\[\]]+)(:\d{1,5})?/?")
READERS_OF = {"dali": "DALI", "energon": "Megatron-Energon"}


def shard_target(shard_size, samples_per_shard) -> ShardSize:
    """The byte and count bounds from ``--shard-size`` and ``--samples-per-shard``."""
    target = parse_shard_size(shard_size)
    count = positive_int(samples_per_shard, "--samples-per-shard", allow_none=True)
    if target.count is not None and count is not None:
        raise UsageError(
            f"--shard-size {str(shard_size)!r} is a sample count (a number without a unit counts "
            f"samples) and --samples-per-shard {count} is one too — give one of them, or write "
            f"the size with a unit for a byte bound ({target.count}B, 512MiB)"
        )
    return ShardSize(target.size, target.count if count is None else count)


def checked_exts(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None or value == "" or value == ():
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    for item in items:
        if item.strip() == "":
            raise UsageError(
                f"--sample-exts {','.join(items)!r} has an empty item — list extensions like .jpg,.xml"
            )
        if not item.startswith("."):
            raise UsageError(
                f"--sample-exts item {item!r} must start with a dot — write e.g. .{item.strip().lstrip('.')}"
            )
    return tuple(items)


def positive_int(
    value, option: str, *, allow_none: bool, least: int = 1, zero: str = ""
) -> int | None:
    """``value`` as a whole number >= ``least`` (None passes when allowed), else a
    ``UsageError``; ``zero``: what 0 means where it is allowed below ``least``."""
    if value is None and allow_none:
        return None
    whole = not isinstance(value, bool) and DIGITS.fullmatch(str(value).strip())
    if whole and zero and int(value) == 0:
        return 0
    if not whole or int(value) < least:
        also = f", or 0 for {zero}" if zero else ""
        raise UsageError(
            f"{option} {str(value)!r} must be a whole number of at least {least}{also}"
        )
    return int(value)


MAX_REMOVE = 50  # --max-remove's default: an --update removes at most half the samples


def max_remove_percent(value: int | str) -> int:
    """``--max-remove``: a whole percent from 0 to 100, or ``all`` (100)."""
    if isinstance(value, str) and value.strip().lower() == "all":
        return 100
    text = str(value).strip().removesuffix("%").strip()
    if isinstance(value, bool) or not DIGITS.fullmatch(text) or int(text) > 100:
        raise UsageError(
            f"--max-remove {str(value)!r} is not a share of the dataset — give a whole percent "
            "from 0 to 100 (50), or all"
        )
    return int(text)


JOBS_DEFAULT = "the default (the CPUs, at most 8; 8 with an object store)"


def jobs_option(value) -> int:
    """``--jobs``: shards handled at once, or 0 for the default (``Options.workers``)."""
    return positive_int(value, "--jobs", allow_none=False, zero=JOBS_DEFAULT) or 0


COMPOSE_MODES = ("auto", "never")
COMPOSE_MIN = 10 << 20  # a copied rest of at least 5 MiB once a part's first bytes are borrowed


def compose_mode(value) -> str:
    """``--compose``: auto or never."""
    mode = str(value).lower()
    if mode not in COMPOSE_MODES:
        raise UsageError(f"--compose {str(value)!r} is not a mode — use auto or never")
    return mode


def compose_min_bytes(value) -> int:
    """``--compose-min-size``: at least 10MiB (a first part of 5MiB, a copied rest as big)."""
    size = parse_size(value, option="--compose-min-size")
    if size < COMPOSE_MIN:
        raise UsageError(
            f"--compose-min-size {str(value)!r} is below 10MiB — a member copied in the store "
            "needs 5MiB for the part its header goes in and 5MiB for the copy"
        )
    return size


def part_size_bytes(value) -> int:
    size = parse_size(value, option="--part-size")
    if size < 5 << 20:
        raise UsageError(f"--part-size {str(value)!r} is below S3's minimum part of 5MiB")
    return size


def memory_limit_bytes(value) -> int:
    if value is None:
        return DEFAULT_MEMORY_LIMIT
    limit = parse_size(value, option="--memory-limit")
    if limit < LEAST_MEMORY_LIMIT:
        raise UsageError(
            f"--memory-limit {str(value)!r} is below {LEAST_MEMORY_LIMIT >> 20}MiB, the least "
            "the column engine reads an inventory in — give more, e.g. 512MiB"
        )
    return limit


def checked_storage_options(value) -> tuple[str, ...] | dict:
    parse_storage_options(value)  # a malformed item fails here
    if isinstance(value, dict):
        return value
    return tuple([value] if isinstance(value, str) else value or ())


def checked_tmp_dir(path: str) -> str:
    """``--tmp-dir``: an existing folder this process may create files in."""
    if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(
            f"--tmp-dir {path!r} is not a folder ishard can write to — give an existing, "
            "writable folder (a big inventory's sorting spills there)"
        )
    return path


def check_template_ext(template: NameTemplate, ext: str) -> None:
    """A template ending in an archive extension: ``ext`` itself (kept, never doubled) or
    another one, refused."""
    tail = template.gaps[-1]
    own = max((e for e in extensions() if tail.endswith(e)), key=len, default=None)
    if own is not None and own != ext:
        raise UsageError(
            f"--shard-template {template.text!r} ends in {own!r} but --ext is {ext!r} — "
            f"use --ext {own}, or drop {own!r} from the template"
        )


def check_executor(executor: str, scheduler: str | None) -> None:
    if str(executor).lower() not in EXECUTORS:
        raise UsageError(f"--executor {executor!r} must be local or dask")
    if scheduler is None:
        return
    if str(executor).lower() != "dask":
        raise UsageError(f"--scheduler {scheduler!r} needs --executor dask")
    if not _SCHEDULER.fullmatch(scheduler):
        raise UsageError(
            f"--scheduler {scheduler!r} is not a scheduler address — use tcp://HOST:PORT "
            "(or tls://HOST:PORT), as `dask scheduler` prints it"
        )


def check_balance(
    num_shards, shards_multiple_of, ekm, samples_per_shard, shard_size, count: int | None
) -> dict:
    """--num-shards / --shards-multiple-of: positive, one at a time, flat (single-group) plans."""
    out = {
        "num_shards": positive_int(num_shards, "--num-shards", allow_none=True),
        "shards_multiple_of": positive_int(
            shards_multiple_of, "--shards-multiple-of", allow_none=True
        ),
    }
    if out["num_shards"] and out["shards_multiple_of"]:
        raise UsageError(
            "--num-shards and --shards-multiple-of both set the shard count — give one"
        )
    flag = "--num-shards" if out["num_shards"] else "--shards-multiple-of"
    if any(out.values()) and ekm:
        raise UsageError(f"{flag} cannot be combined with --ekm — balance one category at a time")
    if out["num_shards"] and count is not None:
        given = (
            "--samples-per-shard"
            if samples_per_shard is not None
            else f"the sample count --shard-size {str(shard_size)!r}"
        )
        raise UsageError(f"--num-shards fixes the samples per shard — leave out {given}")
    return out


def check_energon_split(split: object, index: str) -> None:
    """``--energon-split`` is a split, and given only where Energon's files are written."""
    value = energon_split_value(split)
    if value != "train" and "energon" not in indexes_of(index):
        raise UsageError(
            f"--energon-split {split} says how .nv-meta/split.yaml splits the shards, which "
            "only --index energon writes — add --index energon, or drop --energon-split"
        )


def check_naming(
    member_names: str, index: str, ext: str, sample_index: bool = True, energon_split="train"
) -> None:
    if member_names not in MEMBER_NAMES:
        raise UsageError(f"--member-names {member_names!r} must be original or sample")
    for name in sorted(indexes_of(index)):  # a name that is no index fails here
        reader = READERS_OF[name]
        if ext != ".tar":
            raise UsageError(
                f"--index {name} indexes plain tar shards, not {ext!r} — use --ext .tar "
                f"({reader} reads uncompressed tar), or drop {name} from --index"
            )
    if "energon" in indexes_of(index) and not sample_index:
        raise UsageError(
            "--index energon is made from the sample index, with no shard read again — "
            "drop --no-sample-index"
        )
    check_energon_split(energon_split, index)
