"""List a local source directory into a bytewise-sorted stream of ``FileEntry`` values."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from .errors import SourceError, UsageError
from .model import FileEntry, Tally

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
    on_file: Callable[[FileEntry], None] | None = None,
) -> list[FileEntry]:
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
    entries: list[FileEntry] = []
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
                entry = FileEntry(name, st.st_size, st.st_mtime_ns // 1_000_000_000)
                entries.append(entry)
                if on_file is not None:
                    on_file(entry)
    entries.sort(key=lambda e: sort_key(e.name))
    return entries
