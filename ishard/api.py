"""The Python API: ``plan()`` and ``shard()`` with their keywords checked once; the planning
is ``planning.planner``'s, the run ``run.shard``'s.

Each option is said once: its type in :class:`PlanKeywords` (or :class:`ShardKeywords` for
those only a run takes), its default in ``Options``, its text in ``KEYWORD_DOCS``;
:func:`_spelt_out` shows them as each function's own keyword-only parameters, in
``help()``, ``inspect.signature`` and the docstring's Args."""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from typing import TypedDict, TypeVar

from .errors import UsageError
from .formats import ARCHIVE_EXTS, level_help
from .model import WRITING_ONLY, Plan, Report
from .options import choices
from .options.record import Options, make_options
from .planning.planner import announce, located, make_plan
from .progress import SILENT, Progress
from .run.destination import check_as_run, check_name_room
from .run.grow import holding, mode_of
from .run.shard import shard_with

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

__all__ = ["PlanKeywords", "ShardKeywords", "plan", "plan_with", "shard", "shard_with"]

SHARD_ONLY = WRITING_ONLY  # shard() takes every option; plan() all but these
DEFAULTS = Options()  # the defaults of plan() and shard(): Options' own, one place to change them


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
    strict: bool
    lookalike_names: str
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
    read_buffer: int | str
    retries: int
    checksum: choices.Checksum
    executor: choices.Executor
    scheduler: str | None


KEYWORD_DOCS: dict[str, str] = {
    "prefix": "only files whose name relative to ``src`` starts with this text.",
    "shard_size": (
        "where shards are cut: bytes as an int (or a whole float, ``3e9``), or a string read "
        'as on the command line: ``"512MiB"``, ``"100KB"`` are sizes, ``"10"`` is 10 samples '
        "per shard."
    ),
    "samples_per_shard": "also cut a shard at this many samples.",
    "sample_key_pattern": (
        'how file names become sample keys: ``"base_file_name"``, ``"full_name"``, '
        '``"collapse_all_dir"`` or a regex whose group 1 is the key.'
    ),
    "sample_exts": (
        'the extensions every sample should have: ``[".jpg", ".xml"]`` (or ``".jpg,.xml"``).'
    ),
    "missing_extension_action": (
        'a sample without one of ``sample_exts``: ``"ignore"``, ``"warn"``, ``"abort"`` or '
        '``"exclude"``.'
    ),
    "collapse": "let a directory's remainder move up into its parent's shards.",
    "ekm": (
        "an external key map routing samples to shard-name formats: a dict such as "
        '``{"fish-%d.tar": ["^n01440764/"]}``, its JSON text, or the path of a JSON file.'
    ),
    "ext": " or ".join(
        filter(
            None, (", ".join(f'``"{e}"``' for e in ARCHIVE_EXTS[:-1]), f'``"{ARCHIVE_EXTS[-1]}"``')
        )
    )
    + ".",
    "shard_template": (
        'shard names: ``"shard-%06d"``, ``"shard-{0000..9999}"`` or ``"shard-@0999"``.'
    ),
    "sort": (
        '``"alpha:inc"``, ``"alpha:dec"``, ``"shuffle"`` or ``"shuffle:SEED"``; None keeps the '
        "listing order."
    ),
    "include_hidden": 'keep files and directories whose name starts with ``"."``.',
    "follow_symlinks": "list what symbolic links point to (inside ``src`` only).",
    "compress_level": f"{level_help()[:-1]}; None: each format's default.",
    "zip_compression": '``"stored"`` or ``"deflated"``.',
    "src_list": (
        "take the listing from an inventory file (CSV with a header, JSON Lines, Parquet, or "
        "an S3 Inventory report's ``manifest.json``), a path or a URL."
    ),
    "endpoint_url": 'an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.',
    "storage_options": (
        'passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings (``"a.b=c"`` nests).'
    ),
    "gzip_library": (
        'the gzip compressor for ``.tgz``: ``"auto"`` (the fastest installed), ``"isal"``, '
        '``"zlib-ng"`` or ``"zlib"``.'
    ),
    "num_shards": "exactly this many shards, their sample counts differing by at most one.",
    "shards_multiple_of": "round the shard count up to a multiple of this.",
    "member_names": (
        '``"original"`` (paths as listed) or ``"sample"`` (``<key>.<ext>``, one WebDataset '
        "sample per ishard sample)."
    ),
    "index": '``"none"``, or ``"dali"``: a DALI index beside each ``.tar`` shard.',
    "strict": (
        "any warning of the plan (readers would misread it, an option has no effect) raises "
        ":class:`ishard.StrictError` before anything is written."
    ),
    "lookalike_names": (
        "member names that differ only in case or Unicode form (``A.jpg``, ``a.jpg``; "
        'distinct files on Linux, one on macOS and Windows): ``"refuse"`` (a ``DataError``) '
        'or ``"warn"`` (a warning of the plan, as Go ishard\'s spelling).'
    ),
    "tmp_dir": (
        "the folder where the column engine spills while it sorts a big inventory "
        "(``src_list``); None: the system's temporary folder."
    ),
    "memory_limit": (
        'bytes (or ``"1GiB"``) the column engine may hold while it sorts and groups a big '
        "inventory, past which it spills to ``tmp_dir``; 128 MiB at least."
    ),
    "jobs": "shards written at once; 0: the CPUs (at most 8), or 8 with a store.",
    "overwrite": "allow a non-empty ``dst``; same-named files are replaced.",
    "resume": (
        "finish an interrupted run into ``dst``: keep its complete shards (checked), write "
        "the rest."
    ),
    "append": (
        "add the samples of ``src`` that the dataset in ``dst`` does not hold, in new shards "
        "numbered on from its last; a sample it holds that changed or went is refused."
    ),
    "update": (
        "as ``append``, and rewrite only the shards holding samples that changed or went (in "
        "new shards; the replaced ones are removed once the manifest is published)."
    ),
    "max_remove": (
        "the most an ``update`` may remove, in percent of the dataset's samples (changed "
        'samples do not count), or ``"all"``; past it, a ``DataError`` before anything is '
        "written."
    ),
    "sample_index": (
        "write ``dst/samples.parquet``: one row per member (sample key, shard, member name, "
        "source name, size, mtime); ``append`` and ``update`` need it."
    ),
    "part_size": "the multipart upload part size for store destinations (at least 5MiB).",
    "read_buffer": "bytes fetched ahead from a store, across all writers.",
    "retries": "retries of a failed store request after its first try (0: none).",
    "checksum": (
        'the algorithm of every shard\'s checksum in the manifest (``"xxh128"``, '
        '``"blake3"``, ``"sha256"``, ``"md5"``), or ``"none"``.'
    ),
    "executor": '``"local"``, or ``"dask"``: shards are Dask tasks.',
    "scheduler": (
        'with ``executor="dask"``, a running scheduler\'s ``"tcp://HOST:PORT"`` (None: a '
        "local cluster of ``jobs`` processes)."
    ),
}

Function = TypeVar("Function", bound=Callable[..., object])
_KEYWORD_ONLY = """    Every option is keyword-only and means what the command-line option of the same name
    (dashes for underscores) means; its default is in the signature.

"""


def _spelt_out(keywords: type) -> Callable[[Function], Function]:
    """Show the options of ``keywords`` (a TypedDict) as the function's own keyword-only
    parameters, each with its type and ``Options``' default, before ``progress``: in
    ``inspect.signature`` and ``help()``, and as its docstring's Args (for ``{keywords}``),
    which a paragraph saying so opens."""

    def spell(function: Function) -> Function:
        signature = inspect.signature(function)
        head = [p for p in signature.parameters.values() if p.name not in ("options", "progress")]
        types = {name: ref.__forward_arg__ for name, ref in keywords.__annotations__.items()}
        own = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=getattr(DEFAULTS, name),
                annotation=kind,
            )
            for name, kind in types.items()
        ]
        progress = signature.parameters["progress"]
        function.__signature__ = signature.replace(parameters=[*head, *own, progress])  # type: ignore[attr-defined]
        function.__annotations__ = {
            **{p.name: p.annotation for p in head},
            **types,
            "progress": progress.annotation,
            "return": signature.return_annotation,
        }
        args = "\n".join(
            textwrap.fill(
                KEYWORD_DOCS[name],
                96,
                initial_indent=f"        {name}: ",
                subsequent_indent=" " * 12,
            )
            for name in types
        )
        doc = (function.__doc__ or "").replace("{keywords}", args.lstrip())
        function.__doc__ = doc.replace("    Args:\n", _KEYWORD_ONLY + "    Args:\n", 1)
        return function

    return spell


@_spelt_out(PlanKeywords)
def plan(
    src: str | PathLike[str],
    *,
    progress: Progress | None = None,
    **options: Unpack[PlanKeywords],
) -> Plan:
    """Plan the shards of ``src`` without writing anything (what ``--dry-run`` prints).

    Args:
        src: the dataset: a directory, or a URL such as ``s3://bucket/prefix``.
        {keywords}
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
    opts = _checked(options, PlanKeywords, "plan")
    return plan_with(src, opts, SILENT if progress is None else progress)


def plan_with(
    src: str | PathLike[str],
    opts: Options,
    progress: Progress = SILENT,
    dst: str | PathLike[str] | None = None,
) -> Plan:
    """:func:`plan` under options already checked by :func:`make_options` (the command's
    way in: its messages name flags, not keywords); with ``--append`` or ``--update``, the
    plan of growing the dataset in ``dst``. A ``dst`` is looked at as the run would look at
    it, and refused as the run would refuse it (not empty, held by a live run, no dataset to
    grow …); nothing is created or written there."""
    source = located(str(src), opts, "source")
    dest = None if dst is None else located(str(dst), opts, "destination")
    if dest is not None:
        check_as_run(source, dest, opts)  # what the run would refuse, refused now
    if mode_of(opts) is None:
        the_plan = make_plan(source, opts, progress)
    elif dest is None:
        raise UsageError(
            f"--{mode_of(opts)} needs DST, the dataset to grow: ishard shard SRC DST "
            f"--{mode_of(opts)} --dry-run"
        )
    else:
        with holding(dest, opts) as found:
            the_plan = make_plan(source, opts, progress, found.held)
    if dest is not None:
        check_name_room(dest, the_plan.shard_names)  # the last names may be the longest
    announce(the_plan, opts, progress)
    return the_plan


@_spelt_out(ShardKeywords)
def shard(
    src: str | PathLike[str],
    dst: str | PathLike[str],
    *,
    progress: Progress | None = None,
    **options: Unpack[ShardKeywords],
) -> Report:
    """Shard ``src`` into ``dst`` and write ``dst/manifest.json`` last.

    Args:
        src: the dataset: a directory or a store URL (``s3://``, ``gs://``, ``ais://`` …).
        dst: where shards go, a directory (created if missing) or a store URL; it must be empty
            unless ``overwrite=True``.
        {keywords}
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
    opts = _checked(options, ShardKeywords, "shard")
    sort = options.get("sort", DEFAULTS.sort)
    return shard_with(src, dst, opts, progress=SILENT if progress is None else progress, sort=sort)


def _checked(given: Mapping[str, object], keywords: type, function: str) -> Options:
    """The options of a call, checked; a keyword the function does not take is refused as
    Python refuses it, and a bad value's message names its keyword (``shard_size='1.5'``)
    where the command line's names its flag (``--shard-size '1.5'``)."""
    unknown = [name for name in given if name not in keywords.__annotations__]
    if unknown:
        raise TypeError(f"{function}() got an unexpected keyword argument {unknown[0]!r}")
    try:
        return make_options(**given)
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
