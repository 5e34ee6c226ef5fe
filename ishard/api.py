"""The Python API: ``plan()`` and ``shard()`` with their keywords checked once; the planning
is ``planning.planner``'s, the run ``run.shard``'s.

Each option is said once: its type in :class:`PlanKeywords` (or :class:`ShardKeywords` for
those only a run takes) and its default in ``Options``, side by side in ``options.record``, its
text in its record of the option table (``options.table``); :func:`_spelt_out` shows them as
each function's own keyword-only parameters, in ``help()``, ``inspect.signature`` and the
docstring's Args."""

from __future__ import annotations

import inspect
import sys
import textwrap
from collections.abc import (
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from os import PathLike, fspath
from typing import TypeVar

from .errors import UsageError
from .model import Plan, Report
from .options import choices  # noqa: F401 - named by the keywords' types too
from .options.checks import jobs_option
from .options.record import Options, PlanKeywords, ShardKeywords, make_options
from .options.settings import located, plan_settings
from .options.spelling import keyword_spelling
from .options.table import keyword_docs
from .planning.planner import announce, make_plan
from .progress import SILENT, Progress
from .run.destination import check_as_run, check_name_room
from .run.grow import holding, mode_of
from .run.reindex import Indexed, index_dataset
from .run.settled import settled
from .run.shard import shard_with
from .store import parse_storage_options, resolve
from .store.retry import Retrier

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

__all__ = ["PlanKeywords", "ShardKeywords", "plan", "plan_with", "shard", "shard_with"]

DEFAULTS = Options()  # the defaults of plan() and shard(): Options' own, one place to change them


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
        docs = keyword_docs()
        args = "\n".join(
            textwrap.fill(
                docs[name],
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
    given: Collection[str] | None = None,
    sort: str | None = None,
) -> Plan:
    """:func:`plan` under options already checked by :func:`make_options` (the command's
    way in: its messages name flags, not keywords); with ``--append`` or ``--update``, the
    plan of growing the dataset in ``dst``. A ``dst`` is looked at as the run would look at
    it, and refused as the run would refuse it (not empty, held by a live run, no dataset to
    grow …); nothing is created or written there. ``given``: the names of the options the
    caller gave (None: every one), ``sort`` the order as given; the others that shape shards
    are taken from what ``dst`` records, as the run would take them."""
    source = located(str(src), opts, "source")
    dest = None if dst is None else located(str(dst), opts, "destination")
    if dest is not None:
        was_empty = check_as_run(source, dest, opts)  # what the run would refuse, refused now
        retrier = Retrier(opts.retries)
        opts, _ = settled(
            dest,
            opts,
            given=given,
            sort=sort,
            was_empty=was_empty,
            progress=progress,
            retrier=retrier,
        )
    settings = plan_settings(opts)
    if mode_of(opts) is None:
        the_plan = make_plan(source, settings, progress)
    elif dest is None:
        raise UsageError(
            f"--{mode_of(opts)} needs DST, the dataset to grow: ishard shard SRC DST "
            f"--{mode_of(opts)} --dry-run"
        )
    else:
        with holding(dest, opts) as found:
            the_plan = make_plan(source, settings, progress, found.held)
    if dest is not None:
        check_name_room(dest, the_plan.shard_names)  # the last names may be the longest
    announce(the_plan, settings, progress)
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
    given = {name for name, value in options.items() if value is not None}
    progress = SILENT if progress is None else progress
    return shard_with(src, dst, opts, progress=progress, sort=sort, given=given)


def index(
    dst: str | PathLike[str],
    shards: Sequence[str] | None = None,
    *,
    index: str | None = None,
    energon_split: str | None = None,
    resume: bool = False,
    jobs: int = 0,
    retries: int = 5,
    tmp_dir: str | None = None,
    endpoint_url: str | None = None,
    storage_options=None,
    progress: Progress | None = None,
) -> Indexed:
    """Write the sample index (``samples.parquet``), DALI's and Megatron-Energon's indexes and
    ``manifest.json`` for the shards in ``dst``, as ``ishard index`` does.

    Args:
        dst: the folder or store prefix that holds the shards.
        shards: their names, relative to ``dst``, where it has no manifest (None: its
            manifest's shards, else every tar shard under it).
        index: ``"none"``, ``"dali"``, ``"energon"`` or ``"dali,energon"`` (None: both where
            the shards are ``.tar``, else none).
        energon_split: Energon's split parts, as ``--energon-split`` (None: the manifest's,
            else ``"train"``).
        resume: go on from the shards an earlier, stopped ``index`` of the same shards read.
        jobs: shards whose headers are read at once (0: CPUs, at most 8; 8 for a store).
        retries: retries of a failed store request.
        tmp_dir: where the index is made before it is put in ``dst``.
        endpoint_url: an S3-compatible endpoint, as for :func:`shard`.
        storage_options: ``KEY=VALUE`` strings or a dict for the filesystem.
        progress: told how many shards are read (None: silent).

    Returns:
        The shards, samples and members indexed, how many shards' headers were read (0: the
        dataset's sample index was there) and the indexes it has now.

    Raises:
        UsageError: ``dst`` holds no shards, a run's records, or ``shards`` beside a manifest.
        IshardError: a shard missing or damaged, a store that cannot be reached.
    """
    jobs = jobs_option(jobs)  # as verify checks it
    dest = resolve(
        fspath(dst),
        endpoint_url=endpoint_url,
        storage_options=parse_storage_options(storage_options),
        role="destination",
    )
    return index_dataset(
        dest,
        index,
        list(shards) if shards else None,
        energon_split=energon_split,
        resume=resume,
        jobs=jobs,
        retries=retries,
        tmp_dir=tmp_dir,
        progress=SILENT if progress is None else progress,
    )


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
