"""A local directory: descriptor reads, forked writers, and no link ever followed."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ...errors import IshardError, SourceError, UsageError, WriteError
from ..base import (
    Capabilities,
    Listing,
    Mode,
    NotRegular,
    ObjectInfo,
    SourceListing,
    Store,
    Unconditional,
    Upload,
)
from ..registry import Backend, register
from ..retry import run_with
from ..sinks import TEMP_SUFFIX, WRITE_FIX, LocalSink
from . import state as localstate
from .walk import check_source_dir, list_local, local_stamp

if TYPE_CHECKING:
    from ..retry import Retrier

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LocalStore(Store):
    """A directory on this machine. Small files (manifest, run state) are read, written and
    removed through directory descriptors opened without following links (``localstate``);
    shards are temp files renamed when complete (``sinks.LocalSink``)."""

    scheme = "file"
    capabilities = Capabilities(
        forkable=True, many_at_once=False, transient_errors=False, folders=True
    )

    def __init__(self, root: str) -> None:
        super().__init__(root, root)

    def url_of(self, key: str) -> str:
        return os.path.join(self.root, key)

    def path(self, key: str) -> Path:
        """The file ``key`` as a path."""
        return Path(self.root) / key

    def make_root(self) -> bool:
        path = Path(self.root)
        if path.exists():
            return False
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            where = next((p for p in (path, *path.parents) if p.exists()), path)
            raise WriteError(
                f"cannot create the destination {self.root!r}: {err.strerror or err} (in "
                f"{str(where)!r}) — choose a destination you can write to, or create it first"
            ) from None
        return True

    def remove_root_if_empty(self) -> None:
        try:
            Path(self.root).rmdir()
        except OSError:
            pass  # not empty: keep it

    def name_bytes(self) -> int | None:
        """The file system's file name limit (255 bytes on most) less a writer's temporary
        name around it (``.NAME.PID.ishard-tmp``, a pid of up to 7 digits)."""
        path = Path(self.root)
        where = next((p for p in (path, *path.parents) if p.exists()), path)
        try:
            limit = os.pathconf(where, "PC_NAME_MAX")
        except (OSError, ValueError):
            limit = 255
        return limit - len(f"..{0:07d}{TEMP_SUFFIX}")

    def check_destination(self, url: str) -> None:
        self.check_folder(url, "give a directory")
        localstate.check(self.root)  # with --overwrite too: nothing is removed through a link

    def check_folder(self, url: str, fix: str) -> None:
        path = Path(self.root)
        if path.exists() and not path.is_dir():
            raise UsageError(f"destination {url!r} is a file — {fix}")

    def root_exists(self) -> bool:
        return os.path.exists(self.root)

    def within(self, prefix: str, other: Store, other_prefix: str) -> bool:
        if not isinstance(other, LocalStore):
            return False
        src_path = check_source_dir(other.root).resolve()
        dst_path = Path(self.root).resolve()
        if dst_path == src_path or src_path in dst_path.parents:
            return True
        # the same directory under another path (a bind mount): compare device and inode
        src_id = _identity(src_path)
        return src_id is not None and any(
            _identity(p) == src_id for p in (dst_path, *dst_path.parents)
        )

    # -- listing ----------------------------------------------------------------------------
    def pages(self, prefix: str, retrier: Retrier) -> Iterator[list[ObjectInfo]]:
        """Every regular file (links not followed) whose key starts with ``prefix``, in one
        bytewise-sorted page."""
        if not os.path.isdir(self.root):
            raise FileNotFoundError(self.root)
        folder = prefix.rpartition("/")[0]
        page = [
            ObjectInfo(key, st.st_size, int(st.st_mtime))
            for key, st in self._walk(folder)
            if key.startswith(prefix)
        ]
        page.sort(key=lambda o: os.fsencode(o.key))
        yield page

    def list_source(self, location, entries: Listing, listing: SourceListing) -> None:
        """The source walk with its path rules (``localwalk.list_local``)."""
        list_local(self.root, entries, listing)

    def _walk(self, folder: str) -> Iterator[tuple[str, os.stat_result]]:
        fd = self._open_dir(folder)
        if fd is None:
            return
        try:
            for top, _, files, top_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                base = "/".join(p for p in (folder, top[2:]) if p)
                for name in files:
                    st = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode):
                        yield (f"{base}/{name}" if base else name), st
        finally:
            os.close(fd)

    def _open_dir(self, folder: str, *, create: bool = False) -> int | None:
        if not folder:
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return localstate.open_dir(self.root, folder, create=create)

    def has_objects(self, prefix: str) -> bool:
        path = self.path(prefix.rstrip("/")) if prefix else Path(self.root)
        return path.is_dir() and any(path.iterdir())

    def exists(self, key: str) -> bool:
        return os.path.lexists(self.path(key))

    # -- reading ----------------------------------------------------------------------------
    def is_folder(self, key: str) -> bool:
        return os.path.isdir(self.path(key) if key else self.root)

    def _open(self, key: str) -> int:
        """A descriptor of the regular file ``key``, no link followed in any part (key ``""``:
        the root itself, a file the user named).

        Raises:
            NotRegular: a link, a FIFO, a directory … under that name (never read).
        """
        if not key:
            return _regular(os.open(self.root, _FILE_FLAGS & ~os.O_NOFOLLOW), None)
        folder, _, base = key.rpartition("/")
        dir_fd = self._open_dir(folder)
        if dir_fd is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", key)
        try:
            fd = os.open(base, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise NotRegular.named("a symbolic link", key) from None
            raise
        finally:
            os.close(dir_fd)
        return _regular(fd, key)

    def sizes(
        self, keys: Sequence[str], retrier: Retrier, follow_symlinks: bool = False
    ) -> list[ObjectInfo]:
        """Each file opened as the source's reader opens it (``readers.local_stats``), its
        mtime and stamp as the walk lists them."""
        from ..readers import local_stats

        return [
            ObjectInfo(
                key,
                st.st_size,
                st.st_mtime_ns // 1_000_000_000,
                stamp=local_stamp(st.st_mtime_ns, st.st_ino),
            )
            for key, st in zip(keys, local_stats(self.root, keys, follow_symlinks))
        ]

    def descriptor(self, key: str) -> int | None:
        return self._open(key)

    def read(self, key: str, start: int = -1, end: int = -1) -> bytes:
        fd = self._open(key)
        try:
            if start < 0:
                with open(fd, "rb", closefd=False) as f:
                    return f.read()
            return os.pread(fd, end - start, start)
        finally:
            os.close(fd)

    def reader(
        self, location, retrier: Retrier, *, jobs: int, budget: int, follow_symlinks: bool = False
    ):
        """Files opened one after another under the source path rule (``readers.LocalReader``)."""
        from ..readers import LocalReader

        return LocalReader(location, follow_symlinks)

    def open_read(self, key: str) -> BinaryIO:
        return open(self._open(key), "rb", buffering=8 << 20)

    def stat(self, key: str) -> ObjectInfo:
        fd = self._open(key)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return ObjectInfo(key, st.st_size, int(st.st_mtime))

    # -- small files ------------------------------------------------------------------------
    def get(self, key: str) -> tuple[bytes, str | None]:
        folder, _, base = key.rpartition("/")
        fd = self._open_dir(folder)
        data = None
        if fd is not None:
            try:
                data = localstate.read(fd, base)
            except NotRegular as err:
                raise localstate.not_regular(str(self.path(key)), str(err)) from None
            finally:
                os.close(fd)
        if data is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", key)
        return data, None

    def put(self, key: str, data: bytes, *, mode: Mode = "overwrite") -> str | None:
        if mode != "overwrite":
            raise Unconditional("a local directory is locked with flock, not conditions")
        folder, _, base = key.rpartition("/")
        fd = self._open_dir(folder, create=True)
        assert fd is not None  # made if missing
        try:
            localstate.write(fd, base, data, f".{base}.{os.getpid()}{TEMP_SUFFIX}")
        finally:
            os.close(fd)
        return None

    def put_from(self, key: str, path: str, upload: Upload) -> None:
        """As :meth:`put`, from the file ``path`` a chunk at a time: a new temp file in the
        key's folder (opened through the folder's descriptor, never through a link), renamed
        over the key."""
        folder, _, base = key.rpartition("/")
        fd = self._open_dir(folder, create=True)
        assert fd is not None  # made if missing
        try:
            with open(path, "rb") as source:
                localstate.write(fd, base, source, f".{base}.{os.getpid()}{TEMP_SUFFIX}")
        finally:
            os.close(fd)

    def delete(self, keys: Iterable[str], retrier: Retrier | None = None) -> None:
        """Unlink these files (a link itself, never what it points to; never a folder)."""
        for key in keys:
            run_with(retrier, partial(self._in_folder, key, _unlink))

    def delete_tree(self, prefix: str, retrier: Retrier | None = None) -> None:
        """Remove the folder ``prefix`` and everything in it, following no link."""
        run_with(retrier, partial(self._in_folder, prefix.rstrip("/"), localstate.remove))

    def _in_folder(self, key: str, use: Callable[[int, str], object]) -> None:
        folder, _, base = key.rpartition("/")
        try:
            fd = self._open_dir(folder)
        except UsageError:
            return  # a link on the way: nothing of ours through it
        if fd is None:
            return
        try:
            use(fd, base)
        finally:
            os.close(fd)

    def find(self, prefix: str, retrier: Retrier | None = None) -> list[str]:
        return run_with(retrier, lambda: [key for key, _ in self._walk(prefix.rstrip("/"))])

    # -- shards -----------------------------------------------------------------------------
    def sink(self, key: str, upload: Upload):
        return LocalSink(self.path(key), upload.exclusive)

    def remove_temp_files(self, keys: list[str]) -> int:
        """Remove the hidden temp files of killed writers in these shards' folders."""
        removed = 0
        root = Path(self.root)
        folders = {(root / key).parent for key in keys}
        folders.add(root)
        for folder in folders:
            if any(p.is_symlink() for p in (folder, *folder.parents) if root in p.parents):
                continue  # a linked folder leads out of DST: nothing there is ours to remove
            for temp in folder.glob(f".*{TEMP_SUFFIX}"):
                temp.unlink(missing_ok=True)
                removed += 1
        return removed

    def lock(self, location, retrier: Retrier):
        """``flock`` on the run state's lock file: the kernel frees it when the run dies."""
        from .lock import LocalLock

        return LocalLock(location)

    def check_unlocked(self, location, retrier: Retrier) -> None:
        """Is the lock file ``flock``-ed (a live run holds it)? Read only."""
        from .lock import check_flock

        check_flock(location)

    # -- errors -----------------------------------------------------------------------------
    def classify(self, err: BaseException) -> str:
        if isinstance(err, FileNotFoundError):
            return "missing"
        if isinstance(err, PermissionError):
            return "denied"
        return "unreachable"

    def error(self, err: BaseException, role: str, where: str | None = None) -> IshardError:
        """A local failure names the file and the system's reason."""
        if isinstance(err, IshardError):
            return err
        if not isinstance(err, OSError):
            return super().error(err, role, where)
        what = getattr(err, "filename", None)
        where = (
            str(self.path(what))
            if isinstance(what, str) and not os.path.isabs(what)
            else (what or where or self.root)
        )
        if role != "destination":
            return SourceError(
                f"cannot read {where!r}: {err.strerror or err} — check that it "
                "exists and is readable"
            )
        return WriteError(
            f"cannot write {where!r}: {err.strerror or err} — "
            f"{WRITE_FIX.get(err.errno, WRITE_FIX[None])}"
        )


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None  # not there (yet): a missing part of DST is no directory of SRC
    return st.st_dev, st.st_ino


def _unlink(dir_fd: int, name: str) -> None:
    try:
        if not stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _regular(fd: int, name: str | None) -> int:
    """``fd`` if it is a regular file (made blocking again), else closed and ``NotRegular``
    naming ``name`` (None: the root)."""
    what = localstate.kind(os.fstat(fd).st_mode)
    if what is not None:
        os.close(fd)
        raise NotRegular.named(what, name)
    os.set_blocking(fd, True)
    return fd


register(Backend("local", schemes={"file": "file", "local": "file"}, path=LocalStore))
