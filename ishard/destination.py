"""Check a destination before anything is listed: not inside the source, exists, empty."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from . import localstate
from .errors import IshardError, UsageError
from .listing import check_source_dir
from .lock import STATE_DIR
from .manifest import MANIFEST_NAME
from .retry import Retrier
from .storage import Location, run_on_loop, storage_error

NOT_EMPTY = "use an empty destination, or --overwrite to replace same-named shards"
RUN_MARKS = (STATE_DIR, MANIFEST_NAME)  # what a resumable run leaves in its destination


def _inside(src: Location, dst: Location) -> bool:
    if src.is_local != dst.is_local:
        return False
    if src.is_local:
        src_path = check_source_dir(src.root).resolve()
        dst_path = Path(dst.root).resolve()
        if dst_path == src_path or src_path in dst_path.parents:
            return True
        # the same directory under another path (a bind mount): compare device and inode
        src_id = _identity(src_path)
        return src_id is not None and any(_identity(p) == src_id
                                          for p in (dst_path, *dst_path.parents))
    if type(src.fs) is not type(dst.fs) or src.root != dst.root:
        return False
    return dst.prefix.strip("/").startswith(src.prefix.strip("/"))


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None  # not there (yet): a missing part of DST is no directory of SRC
    return st.st_dev, st.st_ino


async def _first_key(fs, bucket: str, prefix: str) -> str | None:
    async for info in fs._iterdir(bucket, max_items=1, delimiter="", prefix=prefix):
        return info["name"]
    return None


def _remote_has_objects(dst: Location) -> bool:
    fs = dst.fs
    if dst.is_s3:
        prefix = dst.prefix.strip("/")
        return run_on_loop(fs.loop, _first_key, fs, dst.root, prefix + "/" if prefix else "") is not None
    path = dst.child("").rstrip("/")
    if not fs.exists(path):
        parent = path.rpartition("/")[0]
        if dst.root and not fs.exists(dst.root) and parent:
            raise FileNotFoundError(dst.root)
        return False
    return bool(fs.ls(path, detail=False))


def check_destination(src: Location, dst: Location, *, overwrite: bool,
                      resume: bool = False, retrier: Retrier | None = None) -> None:
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
    if dst.is_local:
        path = Path(dst.root)
        if path.exists() and not path.is_dir():
            raise UsageError(f"destination {dst.url!r} is a file — give a directory")
        localstate.check(dst.root)  # with --overwrite too: nothing is removed through a link
        if path.is_dir() and not overwrite and any(path.iterdir()):
            _refuse_not_empty(dst, resume, has_run=any((path / n).exists() for n in RUN_MARKS))
        return
    run = (retrier or Retrier(1)).run
    try:
        has_objects = run(lambda: _remote_has_objects(dst))
    except IshardError:
        raise
    except Exception as err:
        raise storage_error(err, dst, "destination") from None
    if has_objects and not overwrite:
        try:
            has_run = any(run(partial(dst.fs.exists, dst.child(n))) for n in RUN_MARKS)
        except Exception as err:
            raise storage_error(err, dst, "destination") from None
        _refuse_not_empty(dst, resume, has_run)


def _refuse_not_empty(dst: Location, resume: bool, has_run: bool) -> None:
    if resume and has_run:
        return
    if has_run:
        raise UsageError(f"destination {dst.url!r} holds an unfinished or finished ishard run — "
                         "add --resume to finish it, or --overwrite to start over")
    if resume:
        raise UsageError(f"destination {dst.url!r} is not empty and holds no ishard run to "
                         "resume — use an empty destination, or --overwrite")
    raise UsageError(f"destination {dst.url!r} is not empty — {NOT_EMPTY}")
