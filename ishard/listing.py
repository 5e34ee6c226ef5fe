"""List a source (a local directory or a store location) into bytewise-sorted ``FileEntry`` values."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import fsspec.asyn

from .errors import IshardError, SourceError, UsageError
from .model import Tally
from .storage import Location, storage_error
from .table import FileTable

HIDDEN = "hidden (name starts with '.'; --include-hidden keeps it)"
HIDDEN_DIR = "hidden directory, not entered (--include-hidden enters it)"
SYMLINK = "symbolic link, not followed"
SPECIAL = "not a regular file"


def sort_key(name: str) -> bytes:
    """Bytewise order of a member name (the order object stores list in)."""
    return name.encode("utf-8", "surrogateescape")


def check_source_dir(src: str) -> Path:
    """Return ``src`` as a directory path, or raise a UsageError saying what is wrong."""
    path = Path(src)
    if not path.exists():
        raise UsageError(f"source {src!r} does not exist — give an existing directory")
    if not path.is_dir():
        raise UsageError(f"source {src!r} is not a directory — give the dataset's top directory")
    return path


def _wanted(rel_dir: str, prefix: str) -> bool:
    """Could anything below ``rel_dir`` (ending in '/') start with ``prefix``?"""
    return prefix.startswith(rel_dir) or rel_dir.startswith(prefix)


def list_local(
    src: str,
    *,
    prefix: str = "",
    include_hidden: bool = False,
    tally: Tally | None = None,
    on_file: Callable[[int], None] | None = None,
) -> FileTable:
    """List regular files under ``src`` whose relative name starts with ``prefix``.

    Names use ``/`` and are relative to ``src``; the result is sorted bytewise. Symbolic links,
    special files and (unless ``include_hidden``) names starting with ``.`` are left out and
    counted in ``tally``.

    Raises:
        UsageError: ``src`` is missing or not a directory.
        SourceError: the top directory cannot be read.
    """
    root = check_source_dir(src)
    tally = tally if tally is not None else Tally()
    entries = FileTable()
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                children = list(it)
        except OSError as err:
            where = f"directory {rel_dir!r} in source {src!r}" if rel_dir else f"source {src!r}"
            raise SourceError(
                f"cannot read {where}: {err.strerror} — fix its permissions or narrow --prefix"
            ) from None
        for child in children:
            name = rel_dir + child.name
            hidden = child.name.startswith(".") and not include_hidden
            if child.is_dir(follow_symlinks=False):
                if not _wanted(name + "/", prefix):
                    continue
                if hidden and not prefix.startswith(name + "/"):  # a prefix may name it
                    tally.add(HIDDEN_DIR, name + "/")
                else:
                    pending.append(name + "/")
                continue
            if not name.startswith(prefix):
                continue
            if child.is_symlink():
                tally.add(SYMLINK, name)
            elif hidden:
                tally.add(HIDDEN, name)
            else:
                st = child.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    tally.add(SPECIAL, name)
                    continue
                entries.add(name, st.st_size, st.st_mtime_ns // 1_000_000_000)
                if on_file is not None:
                    on_file(st.st_size)
    entries.sort()
    return entries


def combined_prefix(a: str, b: str) -> str | None:
    """The prefix names must have to start with both ``a`` and ``b``; None if none can."""
    if a.startswith(b):
        return a
    if b.startswith(a):
        return b
    return None


def keep_remote_name(name: str, include_hidden: bool, tally: Tally) -> bool:
    """Object-store rules: directory markers are not files; hidden path parts are skipped."""
    if not name or name.endswith("/"):
        return False
    if not include_hidden and (name[0] == "." or "/." in name):
        tally.add(HIDDEN, name)
        return False
    return True


def _mtime(info: dict) -> int:
    for key in ("LastModified", "mtime", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp())
        try:
            return int(float(value))
        except (TypeError, ValueError):
            continue
    return 0


async def _s3_pages(fs, bucket: str, prefix: str, on_object: Callable[[dict], None]) -> None:
    async for info in fs._iterdir(bucket, delimiter="", prefix=prefix):
        on_object(info)


def list_remote(
    location: Location,
    *,
    prefix: str = "",
    include_hidden: bool = False,
    tally: Tally | None = None,
    on_file: Callable[[int], None] | None = None,
) -> FileTable:
    """List the objects of a store location; names are relative to the bucket (or URL path).

    Raises:
        UsageError: the bucket or path does not exist.
        IshardError: access denied, the endpoint unreachable.
    """
    tally = tally if tally is not None else Tally()
    wanted = combined_prefix(location.prefix, prefix)
    entries = FileTable()
    if wanted is None:
        return entries
    fs, root = location.fs, location.root
    cut = len(root) + 1 if root else 0

    def take(info: dict) -> None:
        if info.get("type", "file") != "file":
            return
        name = info["name"][cut:]
        if not name.startswith(wanted) or not keep_remote_name(name, include_hidden, tally):
            return
        size = int(info["size"])
        entries.add(name, size, _mtime(info))
        if on_file is not None:
            on_file(size)

    try:
        if location.is_s3:
            fsspec.asyn.sync(fs.loop, _s3_pages, fs, root, wanted, take)
        else:
            if not fs.exists(root or "/"):
                raise FileNotFoundError(root)
            start = "/".join(p for p in (root, wanted.rpartition("/")[0]) if p)
            for info in fs.find(start, detail=True).values():
                take(info)
    except IshardError:
        raise
    except Exception as err:
        raise storage_error(err, location, "source") from None
    entries.sort()
    return entries
