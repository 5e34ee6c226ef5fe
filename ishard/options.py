"""Validate and normalise the sharding options once, for the CLI and the Python API alike."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property

from .ekm import Ekm, parse_ekm
from .errors import UsageError
from .formats.compress import GZIP_LIBRARIES, gzip_library
from .keys import ALIASES, BUILT_IN, check_pattern
from .naming import MEMBER_NAMES
from .plan import ARCHIVE_EXTS, Bounds, Order
from .samples import ACTIONS
from .sizes import parse_size
from .storage import parse_storage_options
from .templates import NameTemplate, parse_template

DEFAULT_SHARD_SIZE = 1 << 20
DEFAULT_PART_SIZE = 16 << 20
DEFAULT_READ_BUFFER = 256 << 20
_DIGITS = re.compile(r"[0-9]+")
ZIP_METHODS = ("stored", "deflated")
EXECUTORS = ("local", "dask")
GZIP_CHOICES = ("auto", *GZIP_LIBRARIES)
_SCHEDULER = re.compile(r"(tcp|tls|ucx|ws|wss)://(\[[0-9a-fA-F:]+\]|[^/\s:\[\]]+)(:\d{1,5})?/?")
CHECKSUMS = ("md5", "none")
MAX_SEED = (1 << 63) - 1  # Go ishard's -sort shuffle:<int64>; the manifest records it
INDEXES = ("none", "dali")


@dataclass(frozen=True)
class Options:
    """Every sharding option, checked. Build it with :func:`make_options`."""

    prefix: str = ""
    shard_size: int = DEFAULT_SHARD_SIZE
    samples_per_shard: int | None = None
    sample_key_pattern: str = "base_file_name"
    sample_exts: tuple[str, ...] = ()
    missing_extension_action: str = "ignore"
    collapse: bool = False
    ekm: str | None = None
    ext: str = ".tar"
    shard_template: str = "shard-%06d"
    sort: str | None = None
    include_hidden: bool = False
    follow_symlinks: bool = False
    jobs: int = 0
    overwrite: bool = False
    resume: bool = False
    compress_level: int | None = None
    zip_compression: str = "stored"
    src_list: str | None = None
    endpoint_url: str | None = None
    storage_options: tuple[str, ...] | dict = ()
    part_size: int = DEFAULT_PART_SIZE
    read_buffer: int = DEFAULT_READ_BUFFER
    retries: int = 5
    checksum: str = "md5"
    executor: str = "local"
    gzip_library: str = "auto"
    scheduler: str | None = None
    num_shards: int | None = None
    shards_multiple_of: int | None = None
    member_names: str = "sample"
    index: str = "none"
    strict: bool = False

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
        """How many shards are written at once: CPUs locally, more when a store is involved."""
        return self.jobs or (8 if remote else min(8, os.cpu_count() or 1))

    def to_dict(self) -> dict:
        """The options as plain JSON-ready values (for the manifest); storage option values,
        which may hold secrets, are reduced to their keys."""
        values = asdict(self)
        values["storage_options"] = sorted(parse_storage_options(self.storage_options))
        return values


def parse_sort(text: str | None) -> Order:
    """``alpha[:inc|:dec]``, ``alphanumeric[...]``, ``shuffle[:SEED]`` or None (listing order)."""
    if text is None or text == "":
        return Order()
    kind, colon, arg = text.partition(":")
    kind, arg = kind.strip().lower(), arg.strip().lower()
    if kind in ("alpha", "alphanumeric") and arg in ("", "inc", "dec"):
        return Order("alpha", descending=arg == "dec")
    if kind == "shuffle":
        if not colon:  # "shuffle:" with an empty seed is an error, as in Go ishard
            return Order("shuffle", seed=None)
        if _DIGITS.fullmatch(arg):
            if len(arg) > 19 or int(arg) > MAX_SEED:
                raise UsageError(
                    f"--sort {text!r} has a seed over {MAX_SEED} (2^63-1, as Go's int64) — "
                    f"use shuffle:SEED with SEED from 0 to {MAX_SEED}"
                )
            return Order("shuffle", seed=int(arg))
    raise UsageError(
        f"--sort {text!r} is not a sort order — use alpha:inc, alpha:dec, shuffle or shuffle:SEED "
        "(SEED a whole number >= 0)"
    )


def _exts(value: str | Sequence[str] | None) -> tuple[str, ...]:
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
                f"--sample-exts item {item!r} must start with a dot — write e.g. .{item.strip()}"
            )
    return tuple(items)


def positive_int(value, option: str, *, allow_none: bool) -> int | None:
    """``value`` as a whole number >= 1 (None passes when allowed), else a ``UsageError``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not _DIGITS.fullmatch(str(value).strip()) or int(value) < 1:
        raise UsageError(f"{option} {str(value)!r} must be a whole number of at least 1")
    return int(value)


def _part_size(value) -> int:
    size = parse_size(value, option="--part-size")
    if size < 5 << 20:
        raise UsageError(f"--part-size {str(value)!r} is below S3's minimum part of 5MiB")
    return size


def _storage_options(value) -> tuple[str, ...] | dict:
    parse_storage_options(value)  # a malformed item fails here
    if isinstance(value, dict):
        return value
    return tuple([value] if isinstance(value, str) else value or ())


def make_options(**kwargs) -> Options:
    """Check keyword options and return them normalised.

    Raises:
        UsageError: an unknown option or a bad value, named with how to fix it.
    """
    known = Options.__dataclass_fields__
    for name in kwargs:
        if name not in known:
            raise UsageError(f"unknown option {name!r} — known options: {', '.join(known)}")
    values = {k: v for k, v in kwargs.items() if v is not None or k == "samples_per_shard"}
    opts = Options(**values)
    pattern = ALIASES.get(opts.sample_key_pattern, opts.sample_key_pattern)
    check_pattern(opts.sample_key_pattern)  # a typo or a bad regex fails here, before listing
    if opts.missing_extension_action not in ACTIONS:
        raise UsageError(
            f"--missing-extension-action {opts.missing_extension_action!r} is not an action — "
            f"use one of {', '.join(ACTIONS)}"
        )
    if opts.ext not in ARCHIVE_EXTS:
        raise UsageError(f"--ext {opts.ext!r} is not supported — use one of {', '.join(ARCHIVE_EXTS)}")
    if opts.zip_compression not in ZIP_METHODS:
        raise UsageError(f"--zip-compression {opts.zip_compression!r} must be stored or deflated")
    if str(opts.checksum).lower() not in CHECKSUMS:
        raise UsageError(f"--checksum {opts.checksum!r} must be md5 or none")
    if opts.overwrite and opts.resume:
        raise UsageError("--overwrite and --resume cannot be used together — --resume finishes "
                         "the interrupted run as planned, --overwrite starts over: choose one")
    _check_executor(opts.executor, opts.scheduler)
    if opts.gzip_library not in GZIP_CHOICES:
        raise UsageError(f"--gzip-library {opts.gzip_library!r} must be one of "
                         f"{', '.join(GZIP_CHOICES)}")
    if opts.gzip_library != "auto" and opts.ext in (".tgz", ".tar.gz"):
        gzip_library(6, opts.gzip_library)  # not installed: say so before listing
    balance = _check_balance(opts)
    _check_naming(opts.member_names, opts.index, opts.ext)
    if not isinstance(opts.strict, bool):
        raise UsageError(f"strict={opts.strict!r} must be True or False")
    level = opts.compress_level
    if level is not None and (not _DIGITS.fullmatch(str(level)) or not 0 <= int(level) <= 9):
        raise UsageError(f"--compress-level {level!r} must be a whole number from 0 to 9")
    _check_template_ext(opts.template, opts.ext)  # also parses: a bad template fails here
    ekm = opts.parsed_ekm
    order = parse_sort(opts.sort)
    sort = opts.sort
    if order.kind == "shuffle" and order.seed is None:
        sort = f"shuffle:{secrets.randbits(63)}"  # recorded, so the run can be repeated
    elif order.kind == "alpha":
        sort = "alpha:dec" if order.descending else "alpha:inc"
    checked = Options(
        **{
            **asdict(opts),
            "sample_key_pattern": pattern if pattern in BUILT_IN else opts.sample_key_pattern,
            "shard_size": parse_size(opts.shard_size),
            "samples_per_shard": positive_int(
                opts.samples_per_shard, "--samples-per-shard", allow_none=True
            ),
            "sample_exts": _exts(opts.sample_exts),
            "sort": sort,
            "jobs": positive_int(opts.jobs, "--jobs", allow_none=False) if opts.jobs else 0,
            "compress_level": None if level is None else int(level),
            "part_size": _part_size(opts.part_size),
            "read_buffer": parse_size(opts.read_buffer, option="--read-buffer"),
            "retries": positive_int(opts.retries, "--retries", allow_none=False),
            "storage_options": _storage_options(opts.storage_options),
            "prefix": opts.prefix or "",
            "checksum": str(opts.checksum).lower(),
            "executor": str(opts.executor).lower(),
            **balance,
        }
    )
    checked.__dict__["parsed_ekm"] = ekm  # the cached_property's slot: parsed once per run
    return checked


def _check_template_ext(template: NameTemplate, ext: str) -> None:
    """A template ending in an archive extension: ``ext`` itself (kept, never doubled) or
    another one, refused."""
    tail = template.gaps[-1]
    own = max((e for e in ARCHIVE_EXTS if tail.endswith(e)), key=len, default=None)
    if own is not None and own != ext:
        raise UsageError(
            f"--shard-template {template.text!r} ends in {own!r} but --ext is {ext!r} — "
            f"use --ext {own}, or drop {own!r} from the template"
        )


def option_warnings(opts: Options, names: Sequence[str]) -> list[str]:
    """Options given that change nothing for the formats of these shard names."""
    def some(*exts: str) -> bool:
        return any(n.endswith(exts) for n in names)

    out = []
    deflated = some(".zip") and opts.zip_compression == "deflated"
    if opts.compress_level is not None and not (some(".tgz", ".tar.gz", ".tar.lz4") or deflated):
        out.append(f"--compress-level {opts.compress_level} has no effect: no shard is "
                   ".tgz, .tar.gz, .tar.lz4 or a deflated .zip")
    if opts.zip_compression != "stored" and not some(".zip"):
        out.append(f"--zip-compression {opts.zip_compression} has no effect: no shard is .zip")
    if opts.gzip_library != "auto" and not some(".tgz", ".tar.gz"):
        out.append(f"--gzip-library {opts.gzip_library} has no effect: no shard is .tgz or "
                   ".tar.gz")
    return out


def _check_executor(executor: str, scheduler: str | None) -> None:
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


def _check_balance(opts: Options) -> dict:
    """--num-shards / --shards-multiple-of: positive, one at a time, flat (single-group) plans."""
    out = {
        "num_shards": positive_int(opts.num_shards, "--num-shards", allow_none=True),
        "shards_multiple_of": positive_int(
            opts.shards_multiple_of, "--shards-multiple-of", allow_none=True
        ),
    }
    if out["num_shards"] and out["shards_multiple_of"]:
        raise UsageError(
            "--num-shards and --shards-multiple-of both set the shard count — give one"
        )
    flag = "--num-shards" if out["num_shards"] else "--shards-multiple-of"
    if any(out.values()) and opts.ekm:
        raise UsageError(f"{flag} cannot be combined with --ekm — balance one category at a time")
    if out["num_shards"] and opts.samples_per_shard is not None:
        raise UsageError(
            "--num-shards fixes the samples per shard — leave out --samples-per-shard"
        )
    return out


def _check_naming(member_names: str, index: str, ext: str) -> None:
    if member_names not in MEMBER_NAMES:
        raise UsageError(f"--member-names {member_names!r} must be original or sample")
    if index not in INDEXES:
        raise UsageError(f"--index {index!r} must be none or dali")
    if index == "dali" and ext != ".tar":
        raise UsageError(
            f"--index dali indexes plain tar shards, not {ext!r} — use --ext .tar (DALI reads "
            "uncompressed tar), or drop --index dali"
        )
