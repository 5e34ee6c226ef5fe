"""Check a destination before anything is listed: not inside the source, exists, empty."""

from __future__ import annotations

from functools import partial

from .errors import UsageError
from .lock import STATE_DIR
from .manifest import MANIFEST_NAME
from .retry import Retrier
from .store import Location

NOT_EMPTY = "use an empty destination, or --overwrite to replace same-named shards"
RUN_MARKS = (STATE_DIR, MANIFEST_NAME)  # what a resumable run leaves in its destination


def _inside(src: Location, dst: Location) -> bool:
    return dst.store.within(dst.key(""), src.store, src.prefix)


def check_destination(
    src: Location,
    dst: Location,
    *,
    overwrite: bool,
    resume: bool = False,
    retrier: Retrier | None = None,
) -> None:
    """Refuse a destination inside the source, a file, a missing bucket, or one not empty
    (unless ``overwrite``; with ``resume``, one holding a run to resume is fine). Store
    requests are retried by ``retrier``.

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
        has_run = (
            has_objects
            and not overwrite
            and any(run(partial(store.exists, dst.key(n))) for n in RUN_MARKS)
        )
    if has_objects and not overwrite:
        _refuse_not_empty(dst, resume, has_run)


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
