"""Where shard bytes go: a local temp file renamed when complete, or an S3 multipart upload."""

from __future__ import annotations

import errno
import hashlib
import math
import os
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Protocol

from .errors import IshardError, WriteError
from .retry import Retrier
from .storage import Location, storage_error

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
COPY_STEP = 64 << 20  # bytes per kernel copy call: Ctrl-C and cancellation act between calls
PLAIN_STEP = 1 << 20  # user-space copy: read/write in pieces of this size


class Guard(Protocol):
    """The destination's lease, asked around every publication (``lock.LeaseLock`` on stores;
    a Dask worker's ``lock.LeaseCheck``)."""

    def confirm(self) -> float:
        """Raise unless this run still holds the destination; return when that was confirmed."""

    def committed(self, confirmed: float, what: str) -> None:
        """Raise if the confirmation may have run out before ``what`` was published."""


def _guarded(guard: Guard | None, what: str, publish: Callable[[], object]):
    """``publish()`` only while this run holds the destination's lease."""
    if guard is None:
        return publish()
    confirmed = guard.confirm()
    out = publish()
    guard.committed(confirmed, what)
    return out


def _copy_file_range(src: int, dst: int, count: int) -> int:
    return os.copy_file_range(src, dst, count)


def _sendfile(src: int, dst: int, count: int) -> int:
    return os.sendfile(dst, src, None, count)


# Ways to copy file to file inside the kernel, best first; each is dropped for a shard once it
# fails (EXDEV across file systems, ENOSYS, EINVAL on file systems without support …).
KERNEL_COPIES = tuple(
    f for f, name in ((_copy_file_range, "copy_file_range"), (_sendfile, "sendfile"))
    if hasattr(os, name)
)


def _write_failed(where: str, err: OSError) -> WriteError:
    return WriteError(f"cannot write shard {where!r}: {err.strerror or err} — "
                      f"{WRITE_FIX.get(err.errno, WRITE_FIX[None])}")


def temp_path(final: Path) -> Path:
    """The hidden name a local shard is written under until it is complete."""
    return final.with_name(f".{final.name}.{os.getpid()}{TEMP_SUFFIX}")


class _Hashing:
    """md5 (unless skipped) and byte count of everything written."""

    def __init__(self) -> None:
        self.md5 = hashlib.md5()
        self.size = 0

    def skip_checksum(self) -> None:
        """Count bytes only (``--checksum none``); call before anything is written."""
        self.md5 = None

    @property
    def checksum(self) -> str | None:
        """The md5 hex digest of the bytes written so far, or None when skipped."""
        return None if self.md5 is None else self.md5.hexdigest()

    def _count(self, data: bytes) -> None:
        if self.md5 is not None:
            self.md5.update(data)
        self.size += len(data)


class LocalSink(_Hashing):
    """A shard written to a hidden temp file beside its final name; renamed on commit."""

    def __init__(self, final: Path) -> None:
        super().__init__()
        self.final, self.temp = final, temp_path(final)
        self._kernel = 0  # index of the kernel copy to try first (see KERNEL_COPIES)
        self._plain: memoryview | None = None
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

    def can_copy(self) -> bool:
        """Whether ``copy_from`` may be used: only when no checksum has to see the bytes."""
        return self.md5 is None

    def copy_from(self, fd: int, count: int) -> int:
        """Append up to ``count`` bytes of the open file ``fd`` (from its offset), copied in the
        kernel where the system allows it, else through a buffer; fewer only where that file
        ends first.

        Raises:
            WriteError: the shard cannot be written.
            OSError: the source file cannot be read.
        """
        done = 0
        while done < count:
            step = min(count - done, COPY_STEP)
            n = 0
            while self._kernel < len(KERNEL_COPIES):
                try:
                    n = KERNEL_COPIES[self._kernel](fd, self._fd, step)
                    break
                except OSError:
                    self._kernel += 1
            if n == 0:  # no kernel way left, or the file ends (some file systems copy nothing)
                n = self._copy_plain(fd, step)
                if n == 0:
                    break
            done += n
        self.size += done
        return done

    def _copy_plain(self, fd: int, count: int) -> int:
        if self._plain is None:
            self._plain = memoryview(bytearray(PLAIN_STEP))
        n = os.readv(fd, [self._plain[: min(count, PLAIN_STEP)]])
        view = self._plain[:n]
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as err:
            raise _write_failed(str(self.final), err) from None
        return n

    def close(self) -> None:
        """All bytes are written."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def commit(self) -> None:
        """Give the complete shard its final name."""
        self.close()
        os.replace(self.temp, self.final)

    def abort(self) -> None:
        """Remove the partial shard."""
        self.close()
        self.temp.unlink(missing_ok=True)


class S3Sink(_Hashing):
    """A shard streamed to S3: parts upload while writing; the object appears only on commit.

    A shard smaller than one part is a single PUT at commit. A failed shard's multipart upload
    is aborted, so no partial object and no dangling upload remain.
    """

    def __init__(self, location: Location, name: str, retrier: Retrier, cleanup: Retrier,
                 part_size: int, expected: int, notice: Callable[[str], None],
                 guard: Guard | None = None) -> None:
        super().__init__()
        self._guard = guard
        self.etag: str | None = None  # the object's ETag once committed
        self._fs, self._loc, self._retrier, self._cleanup = location.fs, location, retrier, cleanup
        self.url = f"{location.url.partition('://')[0]}://{location.child(name)}"
        self._bucket, _, self._key = location.child(name).partition("/")
        self._part_size = max(part_size, MIN_PART, math.ceil(expected * 1.1 / (MAX_PARTS - 100)))
        self._buf = bytearray()
        self._upload_id: str | None = None
        self._parts: list[Future] = []
        self._notice = notice

    def _call(self, retrier: Retrier, method: str, **kwargs):
        coro = retrier.run_async(lambda: self._fs._call_s3(method, Bucket=self._bucket,
                                                           Key=self._key, **kwargs))
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self._fs.loop)

    def _wait(self, future: Future):
        try:
            return future.result()
        except IshardError:
            raise
        except Exception as err:
            raise storage_error(err, self._loc, "destination") from None

    def _send(self, part: bytes) -> None:
        if self._upload_id is None:
            out = self._wait(self._call(self._retrier, "create_multipart_upload"))
            self._upload_id = out["UploadId"]
        number = len(self._parts) + 1
        self._parts.append(self._call(self._retrier, "upload_part", PartNumber=number,
                                      UploadId=self._upload_id, Body=part))
        if len(self._parts) > PARTS_IN_FLIGHT:
            self._wait(self._parts[-1 - PARTS_IN_FLIGHT])

    def write(self, data: bytes) -> None:
        """Append ``data``; full parts start uploading."""
        self._count(data)
        self._buf += data
        while len(self._buf) >= self._part_size:
            with memoryview(self._buf) as view:  # one copy (a bytearray slice would be two)
                part = bytes(view[: self._part_size])
            del self._buf[: self._part_size]
            self._send(part)

    def close(self) -> None:
        """All bytes are written: send the last part (a small shard waits for commit)."""
        if self._upload_id is not None and self._buf:
            self._send(bytes(self._buf))
            self._buf.clear()

    def commit(self) -> None:
        """Complete the upload (or PUT a small shard): only now does the object exist, and only
        while this run holds the destination's lease."""
        if self._upload_id is None:
            body = bytes(self._buf)
            out = _guarded(self._guard, self.url, lambda: self._wait(
                self._call(self._retrier, "put_object", Body=body)))
        else:
            etags = [self._wait(f)["ETag"] for f in self._parts]
            parts = [{"PartNumber": i + 1, "ETag": tag} for i, tag in enumerate(etags)]
            out = _guarded(self._guard, self.url, lambda: self._wait(self._call(
                self._retrier, "complete_multipart_upload", UploadId=self._upload_id,
                MultipartUpload={"Parts": parts})))
            self._upload_id = None
        self.etag = out.get("ETag")

    def abort(self) -> None:
        """Abort the multipart upload, retrying patiently: nothing may be left dangling."""
        for future in self._parts:
            future.cancel()
        if self._upload_id is None:
            return
        try:
            self._call(self._retrier, "abort_multipart_upload", UploadId=self._upload_id).result()
        except Exception as err:
            self._notice(
                f"could not abort the unfinished upload of {self.url} yet ({type(err).__name__}); "
                f"retrying for up to {self._cleanup.patience:.0f}s"
            )
            try:
                self._call(self._cleanup, "abort_multipart_upload",
                           UploadId=self._upload_id).result()
            except Exception:
                self._notice(
                    f"the unfinished upload of {self.url} could not be aborted — once the store "
                    "is back, run ishard again with --resume (it aborts such uploads), or set "
                    "a lifecycle rule"
                )
                return
        self._upload_id = None


class FsspecSink(_Hashing):
    """A shard written through any other fsspec filesystem; removed again on failure."""

    def __init__(self, location: Location, name: str, guard: Guard | None = None) -> None:
        super().__init__()
        self._loc, self._path, self._guard = location, location.child(name), guard
        try:
            self._file = location.fs.open(self._path, "wb")
        except Exception as err:
            raise storage_error(err, location, "destination") from None

    def write(self, data: bytes) -> None:
        """Append ``data``."""
        self._count(data)
        self._file.write(data)

    def close(self) -> None:
        """All bytes are written."""

    def commit(self) -> None:
        """Finish the file (while this run holds the destination's lease)."""
        try:
            _guarded(self._guard, self._path, self._file.close)
        except IshardError:
            raise
        except Exception as err:
            raise storage_error(err, self._loc, "destination") from None

    def abort(self) -> None:
        """Drop the partial file."""
        discard = getattr(self._file, "discard", None)
        try:
            if discard is not None:
                discard()
            else:
                self._file.close()
                self._loc.fs.rm(self._path)
        except Exception:
            pass  # best effort: the manifest never lists a failed shard


def put_file(location: Location, name: str, data: bytes, retrier: Retrier,
             guard: Guard | None = None) -> str:
    """Write a small whole file (the manifest) to a destination in one request, while
    ``guard`` (the destination's lease, if given) confirms this run holds it; return its URL."""
    if location.is_local:
        final = Path(location.root) / name
        temp = temp_path(final)
        try:
            # a new temp file (never through a link planted under its name), renamed over the
            # final name (which replaces a link there rather than writing through it)
            temp.unlink(missing_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with open(fd, "wb") as f:
                f.write(data)
            os.replace(temp, final)
        except OSError as err:
            temp.unlink(missing_ok=True)
            raise WriteError(f"cannot write {str(final)!r}: {err.strerror}") from None
        return str(final)
    path = location.child(name)
    fs = location.fs
    try:
        _guarded(guard, path, lambda: retrier.run(lambda: fs.pipe_file(path, data)))
    except IshardError:
        raise
    except Exception as err:
        raise storage_error(err, location, "destination") from None
    return f"{location.url.split('://')[0]}://{path}"


def open_sink(location: Location, name: str, *, retrier: Retrier, cleanup: Retrier,
              part_size: int, expected: int, notice: Callable[[str], None], checksum: bool = True,
              guard: Guard | None = None):
    """The sink for one shard at a destination (hashing its bytes unless ``checksum`` is off;
    on a store, committed only while ``guard``, the destination's lease, confirms it)."""
    if location.is_local:
        sink = LocalSink(Path(location.root) / name)
    elif location.is_s3:
        sink = S3Sink(location, name, retrier, cleanup, part_size, expected, notice, guard)
    else:
        sink = FsspecSink(location, name, guard)
    if not checksum:
        sink.skip_checksum()
    return sink



def abort_dangling_uploads(location: Location, names: Iterable[str], retrier: Retrier) -> int:
    """Abort unfinished multipart uploads of these shard names (a killed run's); return how
    many. Only S3 destinations have them."""
    if not location.is_s3:
        return 0
    bucket = location.root
    keys = {location.child(name).partition("/")[2] for name in names}
    prefix = location.prefix.strip("/")
    fs, aborted, marker = location.fs, 0, {}
    try:
        while True:
            page = retrier.run(partial(fs.call_s3, "list_multipart_uploads", Bucket=bucket,
                                       Prefix=prefix + "/" if prefix else "", **marker))
            for upload in page.get("Uploads", []):
                if upload["Key"] in keys:
                    retrier.run(lambda u=upload: fs.call_s3(
                        "abort_multipart_upload", Bucket=bucket, Key=u["Key"],
                        UploadId=u["UploadId"]))
                    aborted += 1
            if not page.get("IsTruncated"):
                return aborted
            marker = {"KeyMarker": page["NextKeyMarker"],
                      "UploadIdMarker": page["NextUploadIdMarker"]}
    except IshardError:
        raise
    except Exception as err:
        raise storage_error(err, location, "destination") from None
