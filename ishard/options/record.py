"""The sharding options: each checked field of ``Options`` and its keyword type in the API's
``PlanKeywords`` or ``ShardKeywords``; ``make_options`` validates and normalises them once, for
the CLI and the Python API alike."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from os import PathLike
from typing import Any, TypedDict

from ..checksums import ALGORITHMS
from ..checksums import DEFAULT as DEFAULT_CHECKSUM
from ..errors import UsageError
from ..formats import extensions, exts_reading, level_range
from ..formats.compress import GZIP_LIBRARIES, gzip_library
from ..formats.indexes import energon_split_value, index_value
from ..planning.cut import Bounds, Order
from ..planning.duplicates import check_duplicates
from ..planning.ekm import Ekm, parse_ekm
from ..planning.engine import MEMORY_LIMIT as DEFAULT_MEMORY_LIMIT
from ..planning.extraction import check_lookalikes
from ..planning.keys import ALIASES, BUILT_IN, check_pattern
from ..planning.samples import ACTIONS
from ..planning.templates import NameTemplate, parse_template
from ..sizes import parse_size
from ..store.location import parse_storage_options
from . import choices
from .checks import (
    DIGITS,
    MAX_REMOVE,
    check_balance,
    check_executor,
    check_naming,
    check_template_ext,
    checked_exts,
    checked_storage_options,
    checked_tmp_dir,
    compose_min_bytes,
    compose_mode,
    jobs_option,
    max_remove_percent,
    memory_limit_bytes,
    part_size_bytes,
    positive_int,
    shard_target,
)
from .kinds import kind_of, typed

# 256 MiB, sized for training reads (docs/user-guide.md says why); Go ishard's spelling keeps
# Go's 1 MiB (GO_SHARD_SIZE)
DEFAULT_SHARD_SIZE = 256 << 20
GO_SHARD_SIZE = "1MiB"
DEFAULT_PART_SIZE = 16 << 20
DEFAULT_COMPOSE_MIN_SIZE = 16 << 20  # measured: docs/performance.md#composed-shards
DEFAULT_READ_BUFFER = 256 << 20
_SEED = re.compile(r"\+?[0-9]+")  # Go's ParseInt takes a '+'; a negative seed dsort refuses
ZIP_METHODS = ("stored", "deflated")
GZIP_CHOICES = ("auto", *GZIP_LIBRARIES)
CHECKSUMS = (*ALGORITHMS, "none")
MAX_SEED = (1 << 63) - 1  # Go ishard's -sort shuffle:<int64>; the manifest records it


@dataclass(frozen=True)
class Options:
    """Every sharding option, checked. Build it with :func:`make_options`."""

    prefix: str = ""
    shard_size: int | None = DEFAULT_SHARD_SIZE  # None: cut by sample count only
    samples_per_shard: int | None = None
    sample_key_pattern: str = "base_file_name"
    sample_exts: tuple[str, ...] = ()
    missing_extension_action: choices.MissingExtensionAction = "ignore"
    collapse: bool = False
    ekm: str | None = None
    ext: choices.Ext = ".tar"
    shard_template: str = "shard-%06d"
    sort: str | None = None
    include_hidden: bool = False
    follow_symlinks: bool = False
    jobs: int = 0
    overwrite: bool = False
    resume: bool = False
    compress_level: int | None = None
    zip_compression: choices.ZipCompression = "stored"
    src_list: str | None = None
    endpoint_url: str | None = None
    storage_options: tuple[str, ...] | dict = ()
    part_size: int = DEFAULT_PART_SIZE
    compose: str = "auto"
    compose_min_size: int = DEFAULT_COMPOSE_MIN_SIZE
    read_buffer: int = DEFAULT_READ_BUFFER
    retries: int = 5
    checksum: choices.Checksum = DEFAULT_CHECKSUM
    executor: choices.Executor = "local"
    gzip_library: choices.GzipLibrary = "auto"
    scheduler: str | None = None
    num_shards: int | None = None
    shards_multiple_of: int | None = None
    member_names: choices.MemberNames = "sample"
    index: choices.Index = "none"
    energon_split: str = "train"
    sample_index: bool = True
    append: bool = False
    update: bool = False
    max_remove: int | str = MAX_REMOVE  # checked: a whole percent, 100 for "all"
    strict: bool = False
    lookalike_names: str = "refuse"
    duplicates: str = "auto"
    tmp_dir: str | None = None
    memory_limit: int = DEFAULT_MEMORY_LIMIT

    @property
    def bounds(self) -> Bounds:
        """The size and count bounds for cutting."""
        return Bounds(self.shard_size, self.samples_per_shard)

    @property
    def template(self) -> NameTemplate:
        """The parsed shard-name template."""
        return parse_template(self.shard_template)

    @cached_property
    def parsed_ekm(self) -> Ekm | None:
        """The parsed external key map, if any (parsed once: a map may be megabytes)."""
        return parse_ekm(self.ekm) if self.ekm else None

    @property
    def order(self) -> Order:
        """The parsed sample order (an unseeded shuffle got its seed in make_options)."""
        return parse_sort(self.sort)

    def workers(self, remote: bool) -> int:
        """How many shards are written at once: ``--jobs``, else :func:`default_workers`."""
        return self.jobs or default_workers(remote)

    def to_dict(self) -> dict:
        """The options as plain JSON-ready values (for the manifest); storage option values,
        which may hold secrets, are reduced to their keys."""
        values = asdict(self)
        values["storage_options"] = sorted(parse_storage_options(self.storage_options))
        return values


# The API's keywords (``ishard.plan``, ``ishard.shard``) with the types they take from Python:
# one entry per field of ``Options`` above, in ``ShardKeywords`` when only a run takes it (its
# record in ``options/table.py`` says ``writing_only``), else in ``PlanKeywords``.
class PlanKeywords(TypedDict, total=False):
    """The options :func:`plan` takes, with their types (defaults: ``Options``')."""

    prefix: str
    shard_size: float | str | None  # an int is a float to type checkers
    samples_per_shard: int | None
    sample_key_pattern: str
    sample_exts: str | Sequence[str]
    missing_extension_action: choices.MissingExtensionAction
    collapse: bool
    ekm: str | PathLike[str] | Mapping[str, str | Sequence[str]] | None
    ext: choices.Ext
    shard_template: str
    sort: str | None
    include_hidden: bool
    follow_symlinks: bool
    compress_level: int | None
    zip_compression: choices.ZipCompression
    src_list: str | PathLike[str] | None
    endpoint_url: str | None
    storage_options: Mapping[str, object] | Sequence[str]
    gzip_library: choices.GzipLibrary
    num_shards: int | None
    shards_multiple_of: int | None
    member_names: choices.MemberNames
    index: choices.Index
    energon_split: str
    strict: bool
    lookalike_names: str
    duplicates: str
    tmp_dir: str | PathLike[str] | None
    memory_limit: int | str


class ShardKeywords(PlanKeywords, total=False):
    """The options :func:`shard` takes: :class:`PlanKeywords` and those of a run."""

    jobs: int
    overwrite: bool
    resume: bool
    append: bool
    update: bool
    max_remove: int | str
    sample_index: bool
    part_size: int | str
    compose: str
    compose_min_size: int | str
    read_buffer: int | str
    retries: int
    checksum: choices.Checksum
    executor: choices.Executor
    scheduler: str | None


def default_workers(remote: bool) -> int:
    """Shards worked on at once unless ``--jobs`` says: 8 when a store is involved (its
    requests wait on the network), else one a CPU, at most 8."""
    return 8 if remote else min(8, os.cpu_count() or 1)


def cut_description(options: dict) -> dict:
    """``{"by": "count" | "size" | "size or count" | "num_shards", ...}`` from checked options
    (an ``Options.to_dict()`` or a manifest's record)."""
    size, count = options.get("shard_size"), options.get("samples_per_shard")
    out = {
        "by": "count" if size is None else "size" if count is None else "size or count",
        "shard_size": size,
        "samples_per_shard": count,
    }
    if options.get("num_shards"):
        out = {"by": "num_shards", "num_shards": options["num_shards"]}
    elif options.get("shards_multiple_of"):
        out["shards_multiple_of"] = options["shards_multiple_of"]
    return out


def parse_sort(text: str | None) -> Order:
    """``alpha[:inc|:dec]``, ``alphanumeric[...]``, ``shuffle[:SEED]`` or None (listing order).

    As strict as Go ishard's ``-sort``: lower case, no spaces, no empty value.
    """
    if text is None:
        return Order()
    kind, colon, arg = text.partition(":")
    if kind in ("alpha", "alphanumeric") and arg in ("", "inc", "dec") and (arg or not colon):
        return Order("alpha", descending=arg == "dec")
    if kind == "shuffle":
        if not colon:
            return Order("shuffle", seed=None)
        if _SEED.fullmatch(arg):  # "shuffle:" with an empty seed is an error, as in Go ishard
            if len(arg) > 20 or int(arg) > MAX_SEED:
                raise UsageError(
                    f"--sort {text!r} has a seed over {MAX_SEED} (2^63-1, as Go's int64) — "
                    f"use shuffle:SEED with SEED from 0 to {MAX_SEED}"
                )
            return Order("shuffle", seed=int(arg))
    hint, plain = "", text.strip().lower()
    if plain != text and plain and _parses(plain):
        hint = f" (lower case, no spaces: {plain!r})"
    raise UsageError(
        f"--sort {text!r} is not a sort order{hint} — use alpha:inc, alpha:dec, shuffle or "
        "shuffle:SEED (SEED a whole number >= 0)"
    )


def _parses(sort: str) -> bool:
    try:
        parse_sort(sort)
    except UsageError:
        return False
    return True


def make_options(**kwargs) -> Options:
    """Check keyword options and return them normalised.

    Raises:
        UsageError: an unknown option, a value of the wrong type (named by its keyword: such
            a value comes only from Python) or a bad value, named with how to fix it.
    """
    opts = _given(kwargs)
    target = shard_target(opts.shard_size, opts.samples_per_shard)
    pattern = ALIASES.get(opts.sample_key_pattern, opts.sample_key_pattern)
    check_pattern(opts.sample_key_pattern)  # a typo or a bad regex fails here, before listing
    _check_choices(opts)
    _check_run_mode(opts)
    tmp_dir = None if opts.tmp_dir is None else checked_tmp_dir(os.fspath(opts.tmp_dir))
    _check_gzip_library(opts)
    balance = check_balance(
        opts.num_shards,
        opts.shards_multiple_of,
        opts.ekm,
        opts.samples_per_shard,
        opts.shard_size,
        target.count,
    )
    check_naming(opts.member_names, opts.index, opts.ext, opts.sample_index, opts.energon_split)
    level = _checked_level(opts)
    check_template_ext(opts.template, opts.ext)  # also parses: a bad template fails here
    _check_ekm_given(opts)
    ekm = opts.parsed_ekm
    sort = _recorded_sort(opts.sort)
    checked = Options(
        **{
            **asdict(opts),
            "sample_key_pattern": pattern if pattern in BUILT_IN else opts.sample_key_pattern,
            "shard_size": target.size,
            "samples_per_shard": target.count,
            "sample_exts": checked_exts(opts.sample_exts),
            "sort": sort,
            "jobs": jobs_option(opts.jobs),
            "compress_level": level,
            **_store_values(opts),
            "max_remove": max_remove_percent(opts.max_remove),
            "prefix": opts.prefix or "",
            "index": index_value(opts.index),
            "energon_split": energon_split_value(opts.energon_split),
            "checksum": str(opts.checksum).lower(),
            "executor": str(opts.executor).lower(),
            "tmp_dir": tmp_dir,
            "memory_limit": memory_limit_bytes(opts.memory_limit),
            **balance,
        }
    )
    checked.__dict__["parsed_ekm"] = ekm  # the cached_property's slot: parsed once per run
    return checked


def _store_values(opts: Options) -> dict:
    """How a run reaches and writes stores, checked: parts, composing, reading ahead, retries,
    the storage options."""
    return {
        "part_size": part_size_bytes(opts.part_size),
        "compose": compose_mode(opts.compose),
        "compose_min_size": compose_min_bytes(opts.compose_min_size),
        "read_buffer": parse_size(opts.read_buffer, option="--read-buffer"),
        "retries": positive_int(opts.retries, "--retries", allow_none=False, least=0),
        "storage_options": checked_storage_options(opts.storage_options),
    }


def _given(kwargs: dict) -> Options:
    """The keywords as an ``Options`` (each value of the type its option takes), unknown names
    refused; an option given as None is left at its default (``samples_per_shard`` but)."""
    known = Options.__dataclass_fields__
    for name in kwargs:
        if name not in known:
            raise UsageError(f"unknown option {name!r} — known options: {', '.join(known)}")
    values = {k: v for k, v in kwargs.items() if v is not None or k == "samples_per_shard"}
    return Options(**{k: _typed(k, v) for k, v in values.items()})


def _check_choices(opts: Options) -> None:
    """The options that take one of a set of values: --missing-extension-action, --ext,
    --zip-compression, --checksum, --lookalike-names, --duplicates."""
    check_lookalikes(opts.lookalike_names)
    check_duplicates(opts.duplicates)
    if opts.missing_extension_action not in ACTIONS:
        raise UsageError(
            f"--missing-extension-action {opts.missing_extension_action!r} is not an action — "
            f"use one of {', '.join(ACTIONS)}"
        )
    if opts.ext not in extensions():
        raise UsageError(
            f"--ext {opts.ext!r} is not supported — use one of {', '.join(extensions())}"
        )
    if opts.zip_compression not in ZIP_METHODS:
        raise UsageError(f"--zip-compression {opts.zip_compression!r} must be stored or deflated")
    if str(opts.checksum).lower() not in CHECKSUMS:
        raise UsageError(
            f"--checksum {opts.checksum!r} is not a checksum — use one of {', '.join(CHECKSUMS)}"
        )


def _check_run_mode(opts: Options) -> None:
    """How the run goes: --overwrite or --resume (not both), growth, the executor."""
    if opts.overwrite and opts.resume:
        raise UsageError(
            "--overwrite and --resume cannot be used together — --resume finishes "
            "the interrupted run as planned, --overwrite starts over: choose one"
        )
    _check_growth(opts)
    check_executor(opts.executor, opts.scheduler)


def _check_gzip_library(opts: Options) -> None:
    """--gzip-library: one of its choices, and installed where the format reads it."""
    if opts.gzip_library not in GZIP_CHOICES:
        raise UsageError(
            f"--gzip-library {opts.gzip_library!r} must be one of {', '.join(GZIP_CHOICES)}"
        )
    if opts.gzip_library != "auto" and opts.ext in exts_reading("gzip_library"):
        gzip_library(6, opts.gzip_library)  # not installed: say so before listing


def _checked_level(opts: Options) -> int | None:
    """--compress-level as a whole number within the format's range (None: not given)."""
    level, levels = opts.compress_level, level_range(opts.ext)
    if level is not None and (not DIGITS.fullmatch(str(level)) or int(level) not in levels):
        raise UsageError(
            f"--compress-level {level!r} must be a whole number from {levels[0]} to {levels[-1]}"
        )
    return None if level is None else int(level)


def _check_ekm_given(opts: Options) -> None:
    """An --ekm given empty is refused, as Go ishard refuses it: no silent "no map"."""
    if opts.ekm is not None and not opts.ekm.strip():
        raise UsageError(
            f"--ekm {opts.ekm!r} is empty — give a JSON file (--ekm map.json) or inline JSON "
            """(--ekm '{"fish-%d.tar": ["^n01440764/"]}'), or leave --ekm out for no key map"""
        )


def _recorded_sort(sort: str | None) -> str | None:
    """--sort as the manifest records it: a shuffle's drawn seed (so the run can be
    repeated), alpha's direction spelt out."""
    order = parse_sort(sort)
    if order.kind == "shuffle" and order.seed is None:
        return f"shuffle:{secrets.randbits(63)}"
    if order.kind == "alpha":
        return "alpha:dec" if order.descending else "alpha:inc"
    return sort


def option_kind(name: str) -> tuple[tuple[type, ...], str] | None:
    """The types option ``name`` takes from Python and their description; None if unknown."""
    field = Options.__dataclass_fields__.get(name)
    return None if field is None else kind_of(name, str(field.type))


def _typed(name: str, value: Any) -> Any:
    """``value`` as option ``name`` takes it (``kinds.typed``)."""
    return typed(name, value, option_kind(name))


def _check_growth(opts: Options) -> None:
    """``--append`` and ``--update`` with what they can keep."""
    if not (opts.append or opts.update):
        return
    flag = "--update" if opts.update else "--append"
    if opts.append and opts.update:
        raise UsageError(
            "--append and --update cannot be used together — --update adds new samples too: "
            "give --update alone"
        )
    if opts.overwrite:
        raise UsageError(
            f"{flag} and --overwrite cannot be used together — {flag} keeps the dataset and "
            "adds to it, --overwrite replaces it: choose one"
        )
    if opts.num_shards is not None or opts.shards_multiple_of is not None:
        given = "--num-shards" if opts.num_shards is not None else "--shards-multiple-of"
        raise UsageError(
            f"{flag} cannot keep {given}'s promise about the whole dataset (only new shards "
            f"are written) — drop {given}, or re-shard with --overwrite"
        )
    if not opts.sample_index:
        raise UsageError(
            f"{flag} keeps the dataset's sample index up to date — drop --no-sample-index"
        )
