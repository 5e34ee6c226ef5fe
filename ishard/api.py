"""The Python API: ``plan()`` and ``shard()`` with their keywords checked once; the planning
is ``planning.planner``'s, the run ``run.shard``'s."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from os import PathLike

from .errors import UsageError
from .model import WRITING_ONLY, Plan, Report
from .options import choices
from .options.record import Options, make_options
from .planning.planner import announce, located, make_plan
from .progress import SILENT, Progress
from .run.shard import shard_with

__all__ = ["plan", "plan_with", "shard", "shard_with"]

SHARD_ONLY = WRITING_ONLY  # shard() takes every option; plan() all but these
DEFAULTS = Options()  # the defaults of plan() and shard(): Options' own, one place to change them


def plan(
    src: str | PathLike[str],
    *,
    prefix: str = DEFAULTS.prefix,
    shard_size: float | str | None = DEFAULTS.shard_size,  # an int is a float to type checkers
    samples_per_shard: int | None = DEFAULTS.samples_per_shard,
    sample_key_pattern: str = DEFAULTS.sample_key_pattern,
    sample_exts: str | Sequence[str] = DEFAULTS.sample_exts,
    missing_extension_action: choices.MissingExtensionAction = DEFAULTS.missing_extension_action,
    collapse: bool = DEFAULTS.collapse,
    ekm: str | PathLike[str] | Mapping[str, str | Sequence[str]] | None = DEFAULTS.ekm,
    ext: choices.Ext = DEFAULTS.ext,
    shard_template: str = DEFAULTS.shard_template,
    sort: str | None = DEFAULTS.sort,
    include_hidden: bool = DEFAULTS.include_hidden,
    follow_symlinks: bool = DEFAULTS.follow_symlinks,
    compress_level: int | None = DEFAULTS.compress_level,
    zip_compression: choices.ZipCompression = DEFAULTS.zip_compression,
    src_list: str | PathLike[str] | None = DEFAULTS.src_list,
    endpoint_url: str | None = DEFAULTS.endpoint_url,
    storage_options: Mapping[str, object] | Sequence[str] = DEFAULTS.storage_options,
    gzip_library: choices.GzipLibrary = DEFAULTS.gzip_library,
    num_shards: int | None = DEFAULTS.num_shards,
    shards_multiple_of: int | None = DEFAULTS.shards_multiple_of,
    member_names: choices.MemberNames = DEFAULTS.member_names,
    index: choices.Index = DEFAULTS.index,
    strict: bool = DEFAULTS.strict,
    lookalike_names: str = DEFAULTS.lookalike_names,
    tmp_dir: str | PathLike[str] | None = DEFAULTS.tmp_dir,
    memory_limit: int | str = DEFAULTS.memory_limit,
    progress: Progress | None = None,
) -> Plan:
    """Plan the shards of ``src`` without writing anything (what ``--dry-run`` prints).

    Every option is keyword-only and means what the command-line option of the same name
    (dashes for underscores) means; its default is in the signature.

    Args:
        src: the dataset: a directory, or a URL such as ``s3://bucket/prefix``.
        prefix: only files whose name relative to ``src`` starts with this text.
        shard_size: where shards are cut: bytes as an int (or a whole float, ``3e9``), or a
            string read as on the command line: ``"512MiB"``, ``"100KB"`` are sizes, ``"10"``
            is 10 samples per shard.
        samples_per_shard: also cut a shard at this many samples.
        sample_key_pattern: how file names become sample keys: ``"base_file_name"``,
            ``"full_name"``, ``"collapse_all_dir"`` or a regex whose group 1 is the key.
        sample_exts: the extensions every sample should have: ``[".jpg", ".xml"]`` (or
            ``".jpg,.xml"``).
        missing_extension_action: a sample without one of ``sample_exts``: ``"ignore"``,
            ``"warn"``, ``"abort"`` or ``"exclude"``.
        collapse: let a directory's remainder move up into its parent's shards.
        ekm: an external key map routing samples to shard-name formats: a dict such as
            ``{"fish-%d.tar": ["^n01440764/"]}``, its JSON text, or the path of a JSON file.
        ext: ``".tar"``, ``".tgz"``, ``".tar.gz"``, ``".zip"`` or ``".tar.lz4"``.
        shard_template: shard names: ``"shard-%06d"``, ``"shard-{0000..9999}"`` or
            ``"shard-@0999"``.
        sort: ``"alpha:inc"``, ``"alpha:dec"``, ``"shuffle"`` or ``"shuffle:SEED"``; None keeps
            the listing order.
        include_hidden: keep files and directories whose name starts with ``"."``.
        follow_symlinks: list what symbolic links point to (inside ``src`` only).
        compress_level: gzip 0-9 (None: 6), lz4 0-9 (None: 0), zip with ``"deflated"``.
        zip_compression: ``"stored"`` or ``"deflated"``.
        src_list: take the listing from an inventory file (CSV with a header, JSON Lines,
            Parquet, or an S3 Inventory report's ``manifest.json``), a path or a URL.
        endpoint_url: an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.
        storage_options: passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings
            (``"a.b=c"`` nests).
        gzip_library: the gzip compressor for ``.tgz``: ``"auto"`` (the fastest installed),
            ``"isal"``, ``"zlib-ng"`` or ``"zlib"``.
        num_shards: exactly this many shards, their sample counts differing by at most one.
        shards_multiple_of: round the shard count up to a multiple of this.
        member_names: ``"original"`` (paths as listed) or ``"sample"`` (``<key>.<ext>``, one
            WebDataset sample per ishard sample).
        index: ``"none"``, or ``"dali"``: a DALI index beside each ``.tar`` shard.
        strict: any warning of the plan (readers would misread it, an option has no effect)
            raises :class:`ishard.StrictError` before anything is written.
        lookalike_names: member names that differ only in case or Unicode form (``A.jpg``,
            ``a.jpg``; distinct files on Linux, one on macOS and Windows): ``"refuse"``
            (a ``DataError``) or ``"warn"`` (a warning of the plan, as Go ishard's spelling).
        tmp_dir: the folder where the column engine spills while it sorts a big inventory
            (``src_list``); None: the system's temporary folder.
        memory_limit: bytes (or ``"1GiB"``) the column engine may hold while it sorts and
            groups a big inventory, past which it spills to ``tmp_dir``; 128 MiB at least.
        progress: hooks told about listing progress (a :class:`ishard.progress.Progress`);
            None: silent.

    A plan over an inventory the column engine read keeps the files' names and mtimes, and
    the samples' keys, in the engine (at most 64 MiB, the rest in its folder under
    ``tmp_dir``) until one is read — reading a shard's files fetches them all and closes it
    — or the plan goes.

    Warns:
        IshardWarning: each of the plan's warnings (also in ``Plan.warnings``).

    Raises:
        UsageError: an option of the wrong type or value (the message names the keyword),
            before anything is listed.
        StrictError: ``strict=True`` and the plan has warnings.
        IshardError: the source cannot be listed or the data breaks an option's rule.
    """
    opts = _checked(locals())
    return plan_with(src, opts, SILENT if progress is None else progress)


def plan_with(src: str | PathLike[str], opts: Options, progress: Progress = SILENT) -> Plan:
    """:func:`plan` under options already checked by :func:`make_options` (the command's
    way in: its messages name flags, not keywords)."""
    the_plan = make_plan(located(str(src), opts, "source"), opts, progress)
    announce(the_plan, opts, progress)
    return the_plan


def shard(
    src: str | PathLike[str],
    dst: str | PathLike[str],
    *,
    prefix: str = DEFAULTS.prefix,
    shard_size: float | str | None = DEFAULTS.shard_size,  # an int is a float to type checkers
    samples_per_shard: int | None = DEFAULTS.samples_per_shard,
    sample_key_pattern: str = DEFAULTS.sample_key_pattern,
    sample_exts: str | Sequence[str] = DEFAULTS.sample_exts,
    missing_extension_action: choices.MissingExtensionAction = DEFAULTS.missing_extension_action,
    collapse: bool = DEFAULTS.collapse,
    ekm: str | PathLike[str] | Mapping[str, str | Sequence[str]] | None = DEFAULTS.ekm,
    ext: choices.Ext = DEFAULTS.ext,
    shard_template: str = DEFAULTS.shard_template,
    sort: str | None = DEFAULTS.sort,
    include_hidden: bool = DEFAULTS.include_hidden,
    follow_symlinks: bool = DEFAULTS.follow_symlinks,
    jobs: int = DEFAULTS.jobs,
    overwrite: bool = DEFAULTS.overwrite,
    resume: bool = DEFAULTS.resume,
    compress_level: int | None = DEFAULTS.compress_level,
    zip_compression: choices.ZipCompression = DEFAULTS.zip_compression,
    src_list: str | PathLike[str] | None = DEFAULTS.src_list,
    endpoint_url: str | None = DEFAULTS.endpoint_url,
    storage_options: Mapping[str, object] | Sequence[str] = DEFAULTS.storage_options,
    part_size: int | str = DEFAULTS.part_size,
    read_buffer: int | str = DEFAULTS.read_buffer,
    retries: int = DEFAULTS.retries,
    checksum: choices.Checksum = DEFAULTS.checksum,
    executor: choices.Executor = DEFAULTS.executor,
    gzip_library: choices.GzipLibrary = DEFAULTS.gzip_library,
    scheduler: str | None = DEFAULTS.scheduler,
    num_shards: int | None = DEFAULTS.num_shards,
    shards_multiple_of: int | None = DEFAULTS.shards_multiple_of,
    member_names: choices.MemberNames = DEFAULTS.member_names,
    index: choices.Index = DEFAULTS.index,
    strict: bool = DEFAULTS.strict,
    lookalike_names: str = DEFAULTS.lookalike_names,
    tmp_dir: str | PathLike[str] | None = DEFAULTS.tmp_dir,
    memory_limit: int | str = DEFAULTS.memory_limit,
    progress: Progress | None = None,
) -> Report:
    """Shard ``src`` into ``dst`` and write ``dst/manifest.json`` last.

    Every option is keyword-only and means what the command-line option of the same name
    (dashes for underscores) means; its default is in the signature.

    Args:
        src: the dataset: a directory or a store URL (``s3://``, ``gs://``, ``ais://`` …).
        dst: where shards go, a directory (created if missing) or a store URL; it must be empty
            unless ``overwrite=True``.
        prefix: only files whose name relative to ``src`` starts with this text.
        shard_size: where shards are cut: bytes as an int (or a whole float, ``3e9``), or a
            string read as on the command line: ``"512MiB"``, ``"100KB"`` are sizes, ``"10"``
            is 10 samples per shard.
        samples_per_shard: also cut a shard at this many samples.
        sample_key_pattern: how file names become sample keys: ``"base_file_name"``,
            ``"full_name"``, ``"collapse_all_dir"`` or a regex whose group 1 is the key.
        sample_exts: the extensions every sample should have: ``[".jpg", ".xml"]`` (or
            ``".jpg,.xml"``).
        missing_extension_action: a sample without one of ``sample_exts``: ``"ignore"``,
            ``"warn"``, ``"abort"`` or ``"exclude"``.
        collapse: let a directory's remainder move up into its parent's shards.
        ekm: an external key map routing samples to shard-name formats: a dict such as
            ``{"fish-%d.tar": ["^n01440764/"]}``, its JSON text, or the path of a JSON file.
        ext: ``".tar"``, ``".tgz"``, ``".tar.gz"``, ``".zip"`` or ``".tar.lz4"``.
        shard_template: shard names: ``"shard-%06d"``, ``"shard-{0000..9999}"`` or
            ``"shard-@0999"``.
        sort: ``"alpha:inc"``, ``"alpha:dec"``, ``"shuffle"`` or ``"shuffle:SEED"``; None keeps
            the listing order.
        include_hidden: keep files and directories whose name starts with ``"."``.
        follow_symlinks: list what symbolic links point to (inside ``src`` only).
        compress_level: gzip 0-9 (None: 6), lz4 0-9 (None: 0), zip with ``"deflated"``.
        zip_compression: ``"stored"`` or ``"deflated"``.
        src_list: take the listing from an inventory file (CSV with a header, JSON Lines,
            Parquet, or an S3 Inventory report's ``manifest.json``), a path or a URL.
        endpoint_url: an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.
        storage_options: passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings
            (``"a.b=c"`` nests).
        gzip_library: the gzip compressor for ``.tgz``: ``"auto"`` (the fastest installed),
            ``"isal"``, ``"zlib-ng"`` or ``"zlib"``.
        num_shards: exactly this many shards, their sample counts differing by at most one.
        shards_multiple_of: round the shard count up to a multiple of this.
        member_names: ``"original"`` (paths as listed) or ``"sample"`` (``<key>.<ext>``, one
            WebDataset sample per ishard sample).
        index: ``"none"``, or ``"dali"``: a DALI index beside each ``.tar`` shard.
        strict: any warning of the plan (readers would misread it, an option has no effect)
            raises :class:`ishard.StrictError` before anything is written.
        lookalike_names: member names that differ only in case or Unicode form (``A.jpg``,
            ``a.jpg``; distinct files on Linux, one on macOS and Windows): ``"refuse"``
            (a ``DataError``) or ``"warn"`` (a warning of the plan, as Go ishard's spelling).
        tmp_dir: the folder where the column engine spills while it sorts a big inventory
            (``src_list``); None: the system's temporary folder.
        memory_limit: bytes (or ``"1GiB"``) the column engine may hold while it sorts and
            groups a big inventory, past which it spills to ``tmp_dir``; 128 MiB at least.
        jobs: shards written at once; 0: the CPUs (at most 8), or 8 with a store.
        overwrite: allow a non-empty ``dst``; same-named files are replaced.
        resume: finish an interrupted run into ``dst``: keep its complete shards (checked),
            write the rest.
        part_size: the multipart upload part size for store destinations (at least 5MiB).
        read_buffer: bytes fetched ahead from a store, across all writers.
        retries: retries of a failed store request after its first try (0: none).
        checksum: the algorithm of every shard's checksum in the manifest (``"xxh128"``,
            ``"blake3"``, ``"sha256"``, ``"md5"``), or ``"none"``.
        executor: ``"local"``, or ``"dask"``: shards are Dask tasks.
        scheduler: with ``executor="dask"``, a running scheduler's ``"tcp://HOST:PORT"``
            (None: a local cluster of ``jobs`` processes).
        progress: hooks told about listing and writing progress (a
            :class:`ishard.progress.Progress`); None: silent.

    Returns:
        The plan, the written shards (name, size, md5), retries and the manifest location.

    Warns:
        IshardWarning: each of the plan's warnings, after planning and before anything is
            written (also in ``Report.warnings``).

    Raises:
        UsageError: an option of the wrong type or value (the message names the keyword), or
            a bad destination, before anything is listed.
        StrictError: ``strict=True`` and the plan has warnings; DST is left as it was.
        IshardError: a failure while listing or writing; complete shards stay, partial ones
            never appear under their final names.
    """
    opts = _checked(locals())
    return shard_with(src, dst, opts, progress=SILENT if progress is None else progress, sort=sort)


def _checked(given: dict[str, object]) -> Options:
    """The options among a call's arguments, checked; a bad one's message names its keyword
    (``shard_size='1.5'``) where the command line's names its flag (``--shard-size '1.5'``)."""
    options = {k: v for k, v in given.items() if k not in ("src", "dst", "progress")}
    try:
        return make_options(**options)
    except UsageError as err:
        raise UsageError(keyword_spelling(str(err))) from None


_FLAG = re.compile(r"(?<![^\s(])--([a-z][a-z-]*[a-z])( (?=['\"]|-?[0-9]))?")


def keyword_spelling(message: str) -> str:
    """``message`` with each option's flag (``--shard-size '0'``) spelt as its Python keyword
    (``shard_size='0'``); other words are kept."""

    def keyword(match: re.Match) -> str:
        name = match.group(1).replace("-", "_")
        name = "storage_options" if name == "storage_option" else name
        if name not in Options.__dataclass_fields__:
            return match.group(0)
        return name + ("=" if match.group(2) else "")

    return _FLAG.sub(keyword, message)
