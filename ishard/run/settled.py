"""What a run that continues a dataset (``--append``, ``--update``, ``--resume``) settles
before it claims DST: growth into a DST that holds nothing yet is a fresh run, said in one
line; and the options that shape shards are taken from what DST records (the manifest, or a
stopped run's record) where they are not given, a given one that differs refused."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

import orjson

from ..options.record import Options
from ..options.recorded import compared, taken_back, with_taken
from ..progress import Progress
from ..store import Location
from ..store.retry import Retrier
from .destination import check_name_room, first_names
from .grow import mode_of, no_dataset
from .manifest import MANIFEST_NAME
from .state import RunState


def settled(
    dest: Location,
    opts: Options,
    *,
    given: Collection[str] | None,
    sort: str | None,
    was_empty: bool,
    progress: Progress,
    retrier: Retrier,
) -> tuple[Options, str | None]:
    """The options this run goes by, and its order as given (an order taken from the record
    is one given). ``given``: the names of the options the caller gave (None: every one);
    ``was_empty``: DST was found missing or empty.

    Growth into a DST found empty is a fresh run of the whole source. Growth with
    ``--resume`` into a DST holding a stopped run and no manifest (the first run of a
    dataset, stopped) finishes that run. Nothing is read from DST here that the run does not
    check again under its lock (the manifest against its options, a stopped run's plan
    against its fingerprint).

    Raises:
        UsageError: growth into a DST that holds no finished dataset and is not empty; a
            given option that shapes shards is not the dataset's (growth), named with both
            values as one would type them; the names the options taken make are too long
            for DST.
    """
    mode = mode_of(opts)
    if mode is None and not opts.resume:
        return opts, sort
    flag = f"--{mode}" if mode is not None else "--resume"
    if was_empty:
        if mode is not None:
            progress.notice(
                f"{flag}: {dest.url!r} holds no dataset yet — this run makes it of the whole "
                f"source, as a run without {flag} would"
            )
            opts = replace(opts, append=False, update=False)
        return opts, sort
    data = dest.read_file(MANIFEST_NAME, retrier)
    stopped = _options(RunState(dest, retrier).earlier().get("plan"))
    if mode is not None and data is None and opts.resume and stopped is not None:
        progress.notice(
            f"{flag} --resume: {dest.url!r} holds a stopped run and no dataset yet — this run "
            "finishes that run, as --resume alone would"
        )
        opts, mode = replace(opts, append=False, update=False), None
    if mode is None:
        taken = taken_back(stopped if stopped is not None else _manifest_options(data), given)
    elif data is None:
        raise no_dataset(flag, dest)  # as the run refuses it again under its lock
    else:
        recorded = stopped if opts.resume and stopped is not None else _manifest_options(data)
        taken = compared(opts, recorded, given, flag, dest.url, sort)
    done = with_taken(opts, taken)
    if done is not opts:
        check_name_room(dest, first_names(done))  # the template or the extension taken
    return done, taken.get("sort", sort)


def _options(record: object) -> Mapping | None:
    """The options a record (a manifest's ``ishard``, a run's ``plan``) holds, if it does."""
    options = record.get("options") if isinstance(record, dict) else None
    return options if isinstance(options, dict) else None


def _manifest_options(data: bytes | None) -> Mapping:
    """The options a manifest records; none where it records none the run could read (the
    run refuses such a manifest as it reads it)."""
    try:
        document = orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        return {}
    return _options(document.get("ishard") if isinstance(document, dict) else None) or {}
