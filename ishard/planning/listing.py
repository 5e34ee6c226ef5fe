"""List a source (a local directory or a store location) into bytewise-sorted ``FileEntry`` values."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SourceError, UsageError
from ..model import Tally
from ..store.retry import Retrier
from .table import FileTable, local_stamp

if TYPE_CHECKING:
    from ..store import Location

HIDDEN = "hidden (name starts with '.'; --include-hidden keeps it)"
HIDDEN_DIR = "hidden directory, not entered (--include-hidden enters it)"
SYMLINK = "symbolic link, not followed (--follow-symlinks follows it)"
LINK_OUTSIDE = "symbolic link leading outside the source"
LINK_SEEN = "symbolic link to a directory already listed (a loop or a second path)"
LINK_DANGLING = "dangling symbolic link"
SPECIAL = "not a regular file"
UNSAFE = (
    "unsafe name (absolute, a '..' part, or a control character): no archive may "
    "extract outside its folder"
)
GARBLED = (
    "key listed with U+FFFD in place of a character the store's listing cannot carry (a "
    "control character), so it cannot be read: --storage-option backend=fsspec lists it as it is"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"[A-Za-z]:")


def has_control(name: str) -> bool:
    """Does ``name`` hold a C0 or DEL control character?"""
    return _CONTROL.search(name) is not None


def unsafe_name(name: str) -> bool:
    """Would this member name extract outside its folder somewhere, or break a listing?

    Absolute names (``/x``, ``\\x``, ``C:x``), any ``..`` part (parts split on ``/`` and on
    ``\\``, which Windows tools treat as a separator), and C0/DEL control characters.
    """
    if not name or name[0] in "/\\" or _DRIVE.match(name) or _CONTROL.search(name):
        return True
    return ".." in name and ".." in re.split(r"[/\\]", name)


_SURROGATE = re.compile(r"[\ud800-\udfff]")
_REPR_SURROGATE = re.compile(r"(\\\\)|\\udc([89a-f][0-9a-f])")


def _escape(match) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def shown(name: str) -> str:
    """``name`` fit for JSON and terminals: an undecodable byte of a local file name (kept as
    a surrogate escape, U+DC80..U+DCFF) is written ``\\xNN``, any other lone surrogate
    ``\\uNNNN``; every other name is returned as it is."""
    if name.isascii() or not _SURROGATE.search(name):
        return name
    return _SURROGATE.sub(_escape, name)


def quoted(name: str, code_points: bool = False) -> str:
    """``repr(name)`` with undecodable bytes shown as ``\\xNN`` (as Python shows bytes); with
    ``code_points``, every character past ASCII escaped too (``'caf\\xe9'``, ``'cafe\\u0301'``:
    names that look alike told apart)."""
    text = ascii(name) if code_points else repr(name)
    if "\\udc" not in text:
        return text
    return _REPR_SURROGATE.sub(lambda m: m.group(1) or f"\\x{m.group(2)}", text)


def printable(value):
    """A JSON-ready copy of ``value`` (dicts, lists, tuples, strings) with every string
    :func:`shown`."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(v) for v in value]
    return value


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
    follow_symlinks: bool = False,
    tally: Tally | None = None,
    on_file: Callable[..., None] | None = None,
) -> FileTable:
    """List regular files under ``src`` whose relative name starts with ``prefix``.

    ``on_file(size)`` is called for a file, or ``on_file(total, count)`` for a folder's run of
    files.

    Names use ``/`` and are relative to ``src``; the result is sorted bytewise. Special files,
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
        prefix,
        include_hidden,
        follow_symlinks,
        tally if tally is not None else Tally(),
        on_file,
    )
    walk.run()
    walk.entries.sort()
    return walk.entries


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
    ) -> None:
        self.root, self.src, self.prefix = root, src, prefix
        self.include_hidden, self.follow, self.tally = include_hidden, follow_symlinks, tally
        self.on_file = on_file
        self.entries = FileTable()
        self.real_root = os.path.realpath(root)
        self.seen: set[tuple[int, int]] = set()  # directories listed (with follow_symlinks)
        self.linked: list[tuple[str, os.stat_result]] = []  # linked directories, for later

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
        table, prefix, hidden = self.entries, self.prefix, not self.include_hidden
        stack = [(top, self._scan(top), 0)]
        while stack:
            rel_dir, children, at = stack.pop()
            names: list[str] = []
            sizes: list[int] = []
            mtimes: list[int] = []
            stamps: list[int] = []
            for i in range(at, len(children)):
                child = children[i]
                if not child.is_dir(follow_symlinks=False):
                    name = rel_dir + child.name
                    if not name.startswith(prefix):
                        continue
                    if (
                        unsafe_name(name)
                        or (hidden and child.name.startswith("."))
                        or child.is_symlink()
                    ):
                        self._left_out_or_link(child, name)
                        continue
                    st = child.stat(follow_symlinks=False)
                    if not stat.S_ISREG(st.st_mode):
                        self.tally.add(SPECIAL, name)
                        continue
                    names.append(name)
                    sizes.append(st.st_size)
                    mtimes.append(st.st_mtime_ns // 1_000_000_000)
                    stamps.append(local_stamp(st.st_mtime_ns, st.st_ino))
                    continue
                name = rel_dir + child.name + "/"
                if not _wanted(name, prefix):
                    continue
                if hidden and child.name.startswith(".") and not prefix.startswith(name):
                    self.tally.add(HIDDEN_DIR, name)  # (a prefix may name a hidden folder)
                    continue
                stack.append((rel_dir, children, i + 1))  # go on here after it
                stack.append((name, self._scan(name), 0))
                break
            if names:  # this run of files, before the folder that follows them
                table.extend(names, sizes, mtimes, stamps)
                if self.on_file is not None:
                    self.on_file(sum(sizes), len(names))

    def _scan(self, rel_dir: str) -> list[os.DirEntry]:
        """The entries of one directory, ordered as their full names sort bytewise."""
        path = self.root / rel_dir if rel_dir else self.root
        try:
            if self.follow:
                st = os.stat(path)
                self.seen.add((st.st_dev, st.st_ino))
            with os.scandir(path) as it:
                children = list(it)
        except OSError as err:
            where = (
                f"directory {rel_dir!r} in source {self.src!r}"
                if rel_dir
                else f"source {self.src!r}"
            )
            raise SourceError(
                f"cannot read {where}: {err.strerror} — fix its permissions or narrow --prefix"
            ) from None
        bytewise = any(not c.name.isascii() and _SURROGATE.search(c.name) for c in children)
        children.sort(key=_bytewise_entry if bytewise else _entry_name)
        return children

    def _left_out_or_link(self, child: os.DirEntry, name: str) -> None:
        """An entry with an unsafe or hidden name (counted) or a symbolic link (followed, or
        counted)."""
        if unsafe_name(name):
            self.tally.add(UNSAFE, name)
        elif child.name.startswith(".") and not self.include_hidden:
            self.tally.add(HIDDEN, name)
        elif self.follow:
            self._link(child, name)
        else:
            self.tally.add(SYMLINK, name)

    def _link(self, child: os.DirEntry, name: str) -> None:
        real = os.path.realpath(child.path)
        if real != self.real_root and not real.startswith(self.real_root + os.sep):
            self.tally.add(LINK_OUTSIDE, name)
            return
        try:
            st = os.stat(child.path)
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


def _entry_name(child: os.DirEntry) -> str:
    """A directory entry's place among its siblings: its name, a directory's with '/'."""
    return child.name + "/" if child.is_dir(follow_symlinks=False) else child.name


def _bytewise_entry(child: os.DirEntry) -> bytes:
    return _entry_name(child).encode("utf-8", "surrogateescape")


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
    if unsafe_name(name):
        tally.add(UNSAFE, name)
        return False
    if not include_hidden and (name[0] == "." or "/." in name):
        tally.add(HIDDEN, name)
        return False
    return True


def _there(store, key: str, retrier: Retrier) -> bool:
    """Is the listed ``key`` an object by that name (not a stand-in for another's)?"""
    try:
        retrier.run(lambda: store.stat(key))
    except FileNotFoundError:
        return False
    return True


def list_remote(
    location: Location,
    *,
    prefix: str = "",
    include_hidden: bool = False,
    tally: Tally | None = None,
    on_file: Callable[[int], None] | None = None,
    retrier: Retrier | None = None,
) -> FileTable:
    """List the objects of a store location; names are relative to the bucket (or URL path);
    each store request is retried by ``retrier`` (a default one if not given).

    Raises:
        UsageError: the bucket or path does not exist.
        IshardError: access denied, the endpoint unreachable.
    """
    tally = tally if tally is not None else Tally()
    wanted = combined_prefix(location.prefix, prefix)
    entries = FileTable()
    if wanted is None:
        return entries
    store = location.store

    retrier = retrier or Retrier()
    with location.translated("source"):
        for page in store.pages(wanted, retrier):
            for obj in page:
                if not keep_remote_name(obj.key, include_hidden, tally):
                    continue
                if "\ufffd" in obj.key and not _there(store, obj.key, retrier):
                    tally.add(GARBLED, obj.key)  # SeaweedFS's XML writes ESC, BEL so
                    continue
                entries.add(obj.key, obj.size, obj.mtime, obj.stamp)
                if on_file is not None:
                    on_file(obj.size)
    entries.sort()
    return entries
