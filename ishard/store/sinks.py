"""Where shard bytes go: the local sink (a temp file renamed when complete) and the calls every store shares."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..checksums import DEFAULT as DEFAULT_CHECKSUM
from ..checksums import Hasher, hasher, tagged
from ..errors import DataError, WriteError
from .base import Guard, Upload
from .retry import Retrier

if TYPE_CHECKING:
    from .location import Location

TEMP_SUFFIX = ".ishard-tmp"
WRITE_FIX = {
    errno.ENOSPC: "free space on the destination, then run again with --resume",
    errno.EDQUOT: "free space (disk quota) on the destination, then run again with --resume",
    errno.EACCES: "make the destination writable, then run again with --resume",
    errno.EROFS: "the destination is read-only — write somewhere else",
    None: "fix the destination, then run again with --resume",
}
MIN_PART = 5 << 20  # S3's smallest part (but the last)
MAX_PARTS = 10_000
PARTS_IN_FLIGHT = 2  # per shard: part_size * (this + 1) bytes of memory at most


def guarded(guard: Guard | None, what: str, publish: Callable[[], object]):
    """``publish()`` only while this run holds the destination's lease."""
    if guard is None:
        return publish()
    confirmed = guard.confirm()
    out = publish()
    guard.committed(confirmed, what)
    return out


def _write_failed(where: str, err: OSError) -> WriteError:
    return WriteError(
        f"cannot write shard {where!r}: {err.strerror or err} — "
        f"{WRITE_FIX.get(err.errno, WRITE_FIX[None])}"
    )


# a hard link of a file to a new name fails here: no links on this file system (FAT, some
# network and FUSE ones), or not for this user; the name is then looked up just before the
# rename, which leaves a moment in which a file put there is written over
NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV)


def name_taken(where: str) -> DataError:
    """The refusal to publish a new shard over something already at its name."""
    return DataError(
        f"{where!r} is already there, and manifest.json does not list it — ishard does not "
        "write over it: move it away, then run again (add --resume if this run wrote shards)"
    )


def publish_new(temp: Path, final: Path) -> None:
    """Give the complete file ``temp`` the name ``final`` only if nothing is there: a hard
    link made (atomic, and it fails on an existing name), then the temp name unlinked; where
    the file system makes no links, a look at the name just before the rename.

    Raises:
        DataError: something is at ``final`` (left as it is).
    """
    try:
        os.link(temp, final, follow_symlinks=False)
    except FileExistsError:
        raise name_taken(str(final)) from None
    except OSError as err:
        if err.errno not in NO_LINKS:
            raise
        if os.path.lexists(final):
            raise name_taken(str(final)) from None
        os.replace(temp, final)
        return
    os.unlink(temp)


def temp_path(final: Path) -> Path:
    """The hidden name a local shard is written under until it is complete."""
    return final.with_name(f".{final.name}.{os.getpid()}{TEMP_SUFFIX}")


class Hashing:
    """The checksum (``--checksum``; none when skipped) and byte count of everything written."""

    def __init__(self) -> None:
        self.algorithm: str | None = DEFAULT_CHECKSUM
        self.hash: Hasher | None = hasher(DEFAULT_CHECKSUM)
        self.size = 0

    def use_checksum(self, algorithm: str) -> None:
        """Hash with ``algorithm`` (``"none"``: count bytes only); call before anything is
        written."""
        self.algorithm = None if algorithm == "none" else algorithm
        self.hash = None if self.algorithm is None else hasher(self.algorithm)

    @property
    def checksum(self) -> str | None:
        """``algorithm:hex`` of the bytes written so far, or None when skipped."""
        if self.hash is None or self.algorithm is None:
            return None
        return tagged(self.algorithm, self.hash.hexdigest())

    def _count(self, data: bytes) -> None:
        if self.hash is not None:
            self.hash.update(data)
        self.size += len(data)


class LocalSink(Hashing):
    """A shard written to a hidden temp file beside its final name; renamed on commit."""

    def __init__(self, final: Path, exclusive: bool = False) -> None:
        super().__init__()
        self.exclusive = exclusive  # published only where its name is free
        self.final, self.temp = final, temp_path(final)
        try:
            self._fd = os.open(self.temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as err:
            raise _write_failed(str(final), err) from None

    def write(self, data: bytes) -> None:
        """Append ``data`` (bytes or any buffer, e.g. a memoryview)."""
        self._count(data)
        try:
            done = os.write(self._fd, data)
            if done < len(data):
                view = memoryview(data)[done:]
                while view:
                    view = view[os.write(self._fd, view) :]
        except OSError as err:
            raise _write_failed(str(self.final), err) from None

    def close(self) -> None:
        """All bytes are written."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def commit(self) -> None:
        """Give the complete shard its final name."""
        self.close()
        if self.exclusive:
            publish_new(self.temp, self.final)
        else:
            os.replace(self.temp, self.final)

    def abort(self) -> None:
        """Remove the partial shard."""
        self.close()
        self.temp.unlink(missing_ok=True)


def put_file(
    location: Location, name: str, data: bytes, retrier: Retrier, guard: Guard | None = None
) -> str:
    """Write a small whole file (the manifest) to a destination in one request, atomically,
    while ``guard`` (the destination's lease, if given) confirms this run holds it; return
    where it went."""
    where, key = location.child(name), location.key(name)
    with location.translated("destination"):
        guarded(guard, where, lambda: retrier.run(lambda: location.store.put(key, data)))
    return where


def put_local_file(
    location: Location,
    name: str,
    path: str,
    *,
    retrier: Retrier,
    cleanup: Retrier,
    part_size: int,
    guard: Guard | None = None,
) -> str:
    """Write the file ``path`` of this machine (a run's record too big to hold in memory) to
    a destination whole and atomically, a chunk at a time; return where it went."""
    upload = Upload(retrier, cleanup, part_size, os.path.getsize(path), lambda _text: None, guard)
    with location.translated("destination"):
        retrier.run(lambda: location.store.put_from(location.key(name), path, upload))
    return location.child(name)


def open_sink(
    location: Location,
    name: str,
    *,
    retrier: Retrier,
    cleanup: Retrier,
    part_size: int,
    expected: int,
    notice: Callable[[str], None],
    checksum: str = DEFAULT_CHECKSUM,
    guard: Guard | None = None,
    exclusive: bool = False,
):
    """The sink for one shard at a destination (hashing its bytes with ``checksum`` unless it
    is ``"none"``; on a store, committed only while ``guard``, the destination's lease,
    confirms it; ``exclusive``: published only where nothing is at its name)."""
    upload = Upload(retrier, cleanup, part_size, expected, notice, guard, exclusive)
    with location.translated("destination"):
        sink = location.store.sink(location.key(name), upload)
    sink.use_checksum(checksum)
    return sink


def abort_dangling_uploads(location: Location, names: Iterable[str], retrier: Retrier) -> int:
    """Abort unfinished uploads of these shard names (a killed run's); return how many."""
    with location.translated("destination"):
        return location.store.abort_uploads([location.key(n) for n in names], retrier)
