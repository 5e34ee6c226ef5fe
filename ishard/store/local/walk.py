"""A local source walked under its path rules into a listing, sorted as it goes (links not followed unless asked)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ...errors import SourceError, UsageError
from ...model import Tally
from ...names import HIDDEN, UNSAFE, has_control, unsafe_name
from ..base import Listing, SourceListing
from .scan import KIND_DIR, KIND_LINK, KIND_SPECIAL, Folder, scan

HIDDEN_DIR = "hidden directory, not entered (--include-hidden enters it)"
SYMLINK = "symbolic link, not followed (--follow-symlinks follows it)"
LINK_OUTSIDE = "symbolic link leading outside the source"
LINK_SEEN = "symbolic link to a directory already listed (a loop or a second path)"
LINK_DANGLING = "dangling symbolic link"
SPECIAL = "not a regular file"

_MASK = (1 << 64) - 1
_MIX = 0x9E3779B97F4A7C15  # odd: a change of the mtime alone always changes the stamp


def local_stamp(mtime_ns: int, inode: int) -> int:
    """A local file's identity beyond its size and whole-second mtime, in 64 bits: its
    nanosecond mtime and its inode, mixed (a new file under the same name, or bytes rewritten
    within the same second, change it); a signed 64-bit value."""
    value = (mtime_ns * _MIX + inode) & _MASK
    return value - (1 << 64) if value >> 63 else value


def _plain_names(rel_dir: str, children: list[tuple[str, int, int]]) -> bool:
    """Is no file of folder ``rel_dir`` (not the top) unsafe by its name? True when the
    folder's own path is safe and no child's name holds a control character or a backslash:
    then ``unsafe_name(rel_dir + name)`` is False for each (a child is never '..', and '/'
    ends every part), so it need not be asked a file at a time."""
    if not rel_dir or unsafe_name(rel_dir[:-1]):
        return False
    blob = "/".join(child[0] for child in children)  # no name holds a '/' (but a folder's end)
    return "\\" not in blob and not has_control(blob)


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


def list_local(src: str, entries: Listing, listing: SourceListing) -> None:
    """List regular files under ``src`` whose relative name starts with ``listing.prefix``
    into ``entries``.

    ``listing.on_file(size)`` is called for a file, or ``on_file(total, count)`` for a
    folder's run of files.

    Names use ``/`` and are relative to ``src``; they come sorted bytewise, but for files
    reached through links, which come last (the caller sorts the listing). Special files,
    unsafe names and (unless ``include_hidden``) names starting with ``.`` are left out and
    counted in ``tally``; so are symbolic links, unless ``follow_symlinks``: then a link is
    listed under its own name as what it points to, if that is inside ``src`` and (for a
    directory) not listed already — real directories first, so a loop ends and a second path
    to a directory adds nothing.

    Raises:
        UsageError: ``src`` is missing or not a directory.
        SourceError: a directory cannot be read.
    """
    walk = _LocalWalk(
        check_source_dir(src),
        src,
        listing.prefix,
        listing.include_hidden,
        listing.follow_symlinks,
        listing.tally,
        listing.on_file,
        entries,
    )
    walk.run()


class Rows:
    """A listing kept as rows of (name, size, mtime, stamp) (a caller that lists millions of
    files passes its own compact table)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, int]] = []

    def add(
        self, name: str, size: int, mtime: int, stamp: int = 0, etag: str | None = None
    ) -> None:
        """Append one file (a local file has no ETag)."""
        self.rows.append((name, size, mtime, stamp))

    def extend(
        self, names: list[str], sizes: list[int], mtimes: list[int], stamps: list[int]
    ) -> None:
        """Append files given as columns."""
        self.rows.extend(zip(names, sizes, mtimes, stamps))

    @property
    def names(self) -> list[str]:
        """The files' names, in the order listed."""
        return [row[0] for row in self.rows]


class _LocalWalk:
    """One listing of a local tree (see ``list_local``)."""

    def __init__(
        self,
        root: Path,
        src: str,
        prefix: str,
        include_hidden: bool,
        follow_symlinks: bool,
        tally: Tally,
        on_file,
        entries: Listing | None = None,
    ) -> None:
        self.root, self.src, self.prefix = root, src, prefix
        self.include_hidden, self.follow, self.tally = include_hidden, follow_symlinks, tally
        self.on_file = on_file
        self.entries = entries if entries is not None else Rows()
        self.real_root = os.path.realpath(root)
        self.seen: set[tuple[int, int]] = set()  # directories listed (with follow_symlinks)
        self.linked: list[tuple[str, os.stat_result]] = []  # linked directories, for later
        self.read = scan  # how a directory is read (``scan.scan_in_python`` does it in Python)

    def run(self) -> None:
        self._walk("")
        while self.linked:
            name, st = self.linked.pop(0)
            if (st.st_dev, st.st_ino) in self.seen:
                self.tally.add(LINK_SEEN, name)
            else:
                self._walk(name + "/")

    def _walk(self, top: str) -> None:
        """Depth first, each directory's entries in the order of their full names (a
        directory's name sorts as if it ended in '/'), so the listing comes out sorted
        bytewise; files are kept a directory's run at a time, without a call per file."""
        prefix, hidden = self.prefix, not self.include_hidden
        first = self._scan(top)
        stack = [(top, first, 0, _plain_names(top, first.children))]
        while stack:
            rel_dir, folder, at, plain = stack.pop()
            children = folder.children
            names: list[str] = []
            rows: list[int] = []
            for i in range(at, len(children)):
                entry, kind, row = children[i]
                name = rel_dir + entry
                if kind != KIND_DIR:
                    if not name.startswith(prefix):
                        continue
                    if (
                        (not plain and unsafe_name(name))
                        or (hidden and entry.startswith("."))
                        or kind == KIND_LINK
                    ):
                        self._left_out_or_link(entry, name)
                    elif kind == KIND_SPECIAL:
                        self.tally.add(SPECIAL, name)
                    else:
                        names.append(name)
                        rows.append(row)
                    continue
                if not _wanted(name, prefix):
                    continue
                if hidden and entry.startswith(".") and not prefix.startswith(name):
                    self.tally.add(HIDDEN_DIR, name)  # (a prefix may name a hidden folder)
                    continue
                stack.append((rel_dir, folder, i + 1, plain))  # go on here after it
                inside = self._scan(name)
                stack.append((name, inside, 0, _plain_names(name, inside.children)))
                break
            if names:  # this run of files, before the folder that follows them
                sizes, mtimes, stamps = folder.columns(rows)
                self.entries.extend(names, sizes, mtimes, stamps)
                if self.on_file is not None:
                    self.on_file(sum(sizes), len(names))

    def _scan(self, rel_dir: str) -> Folder:
        """The entries of one directory, ordered as their full names sort bytewise, with
        each file's lstat (``scan.scan``)."""
        path = self.root / rel_dir if rel_dir else self.root
        try:
            if self.follow:
                st = os.stat(path)
                self.seen.add((st.st_dev, st.st_ino))
            return self.read(path)
        except OSError as err:
            raise self._unreadable(rel_dir, err) from None

    def _unreadable(self, rel_dir: str, err: OSError) -> SourceError:
        where = (
            f"directory {rel_dir!r} in source {self.src!r}" if rel_dir else f"source {self.src!r}"
        )
        return SourceError(
            f"cannot read {where}: {err.strerror} — fix its permissions or narrow --prefix"
        )

    def _left_out_or_link(self, child: str, name: str) -> None:
        """An entry with an unsafe or hidden name (counted) or a symbolic link (followed, or
        counted)."""
        if unsafe_name(name):
            self.tally.add(UNSAFE, name)
        elif child.startswith(".") and not self.include_hidden:
            self.tally.add(HIDDEN, name)
        elif self.follow:
            self._link(name)
        else:
            self.tally.add(SYMLINK, name)

    def _link(self, name: str) -> None:
        path = os.path.join(self.root, name)  # (the entry was listed from a descriptor)
        real = os.path.realpath(path)
        if real != self.real_root and not real.startswith(self.real_root + os.sep):
            self.tally.add(LINK_OUTSIDE, name)
            return
        try:
            st = os.stat(path)
        except OSError:
            self.tally.add(LINK_DANGLING, name)
            return
        if stat.S_ISDIR(st.st_mode):
            self.linked.append((name, st))
        else:
            self._file(name, st)

    def _file(self, name: str, st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            self.tally.add(SPECIAL, name)
            return
        self.entries.add(
            name,
            st.st_size,
            st.st_mtime_ns // 1_000_000_000,
            local_stamp(st.st_mtime_ns, st.st_ino),
        )
        if self.on_file is not None:
            self.on_file(st.st_size)
