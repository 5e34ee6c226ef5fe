"""Check a destination: before anything is listed (not inside the source, exists, empty), and
again once this run holds its lock (nothing finished there meanwhile)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from ..errors import IshardError, UsageError
from ..names import quoted
from ..options.record import Options
from ..planning.cut import shard_names
from ..store import Location
from ..store.base import Guard
from ..store.lockrecord import LOCK_NAME, STATE_DIR
from ..store.retry import Retrier
from .grow import mode_of
from .manifest import MANIFEST_NAME

NOT_EMPTY = "use an empty destination, or --overwrite to replace same-named shards"
RUN_MARKS = (STATE_DIR, MANIFEST_NAME)  # what a resumable run leaves in its destination
# what a run that wrote anything leaves (a finished one its manifest; an unfinished one its
# records), as the lock's holder sees it: the lock itself is its own
RUN_RECORDS = (MANIFEST_NAME, f"{STATE_DIR}/run.json")


def _inside(src: Location, dst: Location) -> bool:
    return dst.store.within(dst.key(""), src.store, src.prefix)


def check_destination(
    src: Location,
    dst: Location,
    *,
    overwrite: bool,
    resume: bool = False,
    retrier: Retrier | None = None,
) -> bool:
    """Refuse a destination inside the source, a file, a missing bucket, or one not empty
    (unless ``overwrite``; with ``resume``, one holding a run to resume is fine). Store
    requests are retried by ``retrier``. Nothing is written.

    Returns whether DST was found empty (or missing). A DST holding a run's records
    (``.ishard-run/``) is not refused here: that run may still be going, which only its lock
    tells; :func:`check_claimed`, under this run's lock, decides.

    Raises:
        UsageError: naming the destination and the fix (exit 2).
        IshardError: the destination store cannot be reached or denies access (exit 1).
    """
    if _inside(src, dst):
        raise UsageError(
            f"destination {dst.url!r} is inside the source {src.url!r} — write the shards "
            "somewhere else"
        )
    store = dst.store
    store.check_destination(dst.url)
    run = (retrier or Retrier(0)).run
    with dst.translated("destination"):
        has_objects = run(lambda: store.has_objects(dst.key("")))
        marks = (
            [n for n in RUN_MARKS if run(partial(store.exists, dst.key(n)))]
            if has_objects and not overwrite
            else []
        )
    if has_objects and not overwrite and STATE_DIR not in marks:
        _refuse_not_empty(dst, resume, bool(marks))
    return not has_objects


def check_before_claim(source: Location, dest: Location, opts: Options, retrier: Retrier) -> bool:
    """Everything a run checks of DST before it takes DST's lock (:func:`check_destination`
    as the run's options ask, the first shard names' length); whether DST was found empty."""
    was_empty = check_destination(
        source,
        dest,
        overwrite=opts.overwrite or mode_of(opts) is not None,
        resume=opts.resume,
        retrier=retrier,
    )
    check_name_room(dest, first_names(opts))
    return was_empty


def check_as_run(source: Location, dest: Location, opts: Options) -> bool:
    """A dry run's look at DST: what the run with these options would refuse before it plans
    (:func:`check_before_claim`, a live run's lock, :func:`check_claimed`), in its words and
    exit codes, reading only — nothing is created, taken or written. Returns whether DST was
    found empty (or missing).

    Raises:
        UsageError: as :func:`check_before_claim` and :func:`check_claimed` (exit 2).
        IshardError: a live run holds DST, or the store cannot be reached (exit 1).
    """
    retrier = Retrier(opts.retries)
    if check_before_claim(source, dest, opts, retrier):
        return True  # empty or missing: no lock, nothing another run left
    dest.store.check_unlocked(dest, retrier)
    check_claimed(
        dest,
        overwrite=opts.overwrite or mode_of(opts) is not None,
        resume=opts.resume,
        was_empty=False,
        retrier=retrier,
    )
    return False


def check_claimed(
    dst: Location, *, overwrite: bool, resume: bool, was_empty: bool, retrier: Retrier
) -> None:
    """Under this run's lock, before anything is written: a plain run (no ``overwrite``, no
    ``resume``) refuses a DST holding a finished dataset, another run's records, or anything
    but this run's lock. The check before the lock cannot tell: another run may have finished
    a dataset there between that check and this lock.

    Raises:
        IshardError: DST was found empty before the lock and is not now (exit 1).
        UsageError: DST held a run's records before the lock (exit 2, as
            :func:`check_destination` says it).
    """
    if overwrite or resume:
        return  # --resume keeps only what this plan would write (resume.finished_earlier)
    store, run = dst.store, retrier.run
    with dst.translated("destination"):
        other = _other_than_lock(dst, retrier)  # one listing: nothing more when all is well
        if other is None:
            return
        found = [n for n in RUN_RECORDS if run(partial(store.exists, dst.key(n)))]
    if not was_empty:
        _refuse_not_empty(dst, False, bool(found))
    if MANIFEST_NAME in found:
        raise IshardError(
            f"another ishard run finished a dataset in {dst.url!r} after this run found it "
            "empty — this run wrote nothing there; use another destination, or add "
            "--overwrite to replace that dataset"
        )
    if found:
        raise IshardError(
            f"another ishard run wrote into {dst.url!r} after this run found it empty, and "
            "stopped before it finished — this run wrote nothing there; add --resume to "
            "finish that run, or --overwrite to start over"
        )
    raise IshardError(
        f"destination {dst.url!r} is not empty any more: {quoted(other)} appeared there after this "
        f"run found it empty — this run wrote nothing there; {NOT_EMPTY}"
    )


def _other_than_lock(dst: Location, retrier: Retrier) -> str | None:
    """A file or object in DST (links not followed) other than this run's lock, if any."""
    return _outside(dst, dst.key(LOCK_NAME), retrier)


def holds_only_records(dst: Location, retrier: Retrier) -> bool:
    """Is every file or object in DST (links not followed) one of the run's records?"""
    with dst.translated("destination"):
        return _outside(dst, dst.key(f"{STATE_DIR}/"), retrier) is None


def _outside(dst: Location, inside: str, retrier: Retrier) -> str | None:
    """The name of a file or object in DST whose key does not start with ``inside``, if any."""
    for page in dst.store.pages(dst.key(""), retrier):
        for obj in page:
            if not obj.key.startswith(inside):
                return obj.key.removeprefix(dst.key(""))
    return None


def _refuse_not_empty(dst: Location, resume: bool, has_run: bool) -> None:
    if resume and has_run:
        return
    if has_run:
        raise UsageError(
            f"destination {dst.url!r} holds an unfinished or finished ishard run — "
            "add --resume to finish it, or --overwrite to start over"
        )
    if resume:
        raise UsageError(
            f"destination {dst.url!r} is not empty and holds no ishard run to "
            "resume — use an empty destination, or --overwrite"
        )
    raise UsageError(f"destination {dst.url!r} is not empty — {NOT_EMPTY}")


def first_names(opts: Options) -> list[str]:
    """The first name of each shard-name template the run uses (the template's, or each
    ``--ekm`` format's): later names are never shorter."""
    ekm = opts.parsed_ekm
    templates = [c.template for c in ekm.categories] if ekm is not None else [opts.template]
    return [shard_names(1, t, opts.ext, own_ext=True)[0] for t in templates]


def check_name_room(dst: Location, names: Iterable[str]) -> None:
    """Refuse shard names the destination cannot hold: locally a file name (with room for
    the temporary name a shard is written under first) over the file system's limit, on
    S3, GCS and Azure a key over 1024 bytes (the run's own records included).

    Raises:
        UsageError: naming the longest such name, its length and the limit (exit 2).
    """
    store = dst.store
    part, key = store.name_bytes(), store.key_bytes
    longest = max(names, key=_size, default="")
    if part is not None and _size(longest) > part:
        raise UsageError(
            f"shard names would be too long for {dst.url!r}: {_abridged(longest)} has "
            f"{_size(longest)} bytes, and a file name there can have {part} (with room for "
            f"ishard's temporary name) — {SHORTEN}"
        )
    if key is None:
        return
    for name in (longest, RECORD_EXAMPLE):
        if _size(dst.key(name)) > key:
            raise UsageError(
                f"store keys would be too long for {dst.url!r}: {_abridged(dst.key(name))} "
                f"has {_size(dst.key(name))} bytes, and the store allows {key} — {SHORTEN}, "
                "or the destination's prefix"
            )


SHORTEN = "shorten --shard-template (or the --ekm formats)"
RECORD_EXAMPLE = f"{STATE_DIR}/done/000000000.json"  # the longest key of a run's records


def _size(name: str) -> int:
    return len(name.encode("utf-8", "surrogateescape"))


def _abridged(name: str) -> str:
    """``name`` quoted, its middle left out past 60 characters."""
    return quoted(name if len(name) <= 60 else f"{name[:40]}...{name[-17:]}")


def still_held(guard: Guard | None) -> bool:
    """Does this run still hold DST (a lease another run took over: what is there is that
    run's, nothing of it is removed)? A local lock cannot be lost."""
    if guard is None:
        return True
    try:
        guard.confirm()
    except IshardError:
        return False
    return True


def untouched(dst: Location, retrier: Retrier) -> bool:
    """Does DST hold nothing but this run's records (a run that found it empty failed before
    any shard was published: its records go, so the plain command works again)?"""
    try:
        return holds_only_records(dst, retrier)
    except (IshardError, OSError):
        return False  # cannot tell: the records stay, for --resume
