"""Execute a plan on a local destination: each shard via a temp file, renamed when complete."""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from .errors import Interrupted, IshardError, SourceError, WriteError
from .formats import open_writer
from .model import ShardPlan, ShardResult
from .progress import Progress

TEMP_SUFFIX = ".ishard-tmp"
REPORT_EVERY = 4 << 20


class _Cancelled(Exception):
    """Another shard failed or the user interrupted: stop this one quietly."""


class _HashingFile:
    """Writes to a local file and hashes what it writes; counts the bytes."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.md5 = hashlib.md5()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.md5.update(data)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self.size += len(data)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def temp_path(final: Path) -> Path:
    """The hidden name a shard is written under until it is complete."""
    return final.with_name(f".{final.name}.{os.getpid()}{TEMP_SUFFIX}")


def _write_one(
    shard: ShardPlan, src: Path, dst: Path, settings: dict, cancel: threading.Event, progress: Progress
) -> ShardResult:
    final = dst / shard.name
    temp = temp_path(final)
    out = _HashingFile(temp)
    writer = None
    try:
        writer = open_writer(shard.name, out, **settings)
        pending = 0
        for f in shard.members():
            if cancel.is_set():
                raise _Cancelled
            try:
                source = open(src / f.name, "rb", buffering=0)
            except OSError as err:
                raise SourceError(
                    f"cannot read {f.name!r} from the source: {err.strerror} — "
                    "check that it exists and is readable"
                ) from None
            with source:
                writer.add(f.name, f.size, f.mtime, source)
            pending += f.size
            if pending >= REPORT_EVERY:
                progress.wrote(pending)
                pending = 0
        writer.close()
        progress.wrote(pending)
        os.replace(temp, final)
    except BaseException as err:
        if writer is not None:
            writer.abort()
        out.close()
        temp.unlink(missing_ok=True)
        if isinstance(err, OSError) and not isinstance(err, IshardError):
            raise WriteError(f"cannot write shard {str(final)!r}: {err.strerror or err}") from None
        raise
    finally:
        out.close()
    result = ShardResult(
        shard.name, out.size, out.md5.hexdigest(), len(shard.samples), shard.file_count, shard.size
    )
    progress.shard_done(result)
    return result


def write_shards(
    shards: tuple[ShardPlan, ...],
    src: Path,
    dst: Path,
    *,
    jobs: int,
    settings: dict,
    progress: Progress,
) -> list[ShardResult]:
    """Write every shard (``jobs`` at a time); results come back in plan order.

    On the first failure, or Ctrl-C, the other writers stop and remove their temp files; shards
    already complete stay (they are exactly what the plan says).

    Raises:
        IshardError: the first failure; Interrupted on Ctrl-C.
    """
    cancel = threading.Event()
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="ishard-write") as pool:
        futures = [
            pool.submit(_write_one, s, src, dst, settings, cancel, progress) for s in shards
        ]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f.done() and not f.cancelled() and f.exception()]
            if failed:
                cancel.set()
                for f in futures:
                    f.cancel()
                wait(futures)
                errors = [f.exception() for f in futures if f.done() and not f.cancelled()]
                raise next(e for e in errors if e is not None and not isinstance(e, _Cancelled))
        except KeyboardInterrupt:
            cancel.set()
            for f in futures:
                f.cancel()
            wait(futures)
            raise Interrupted(Interrupted.MESSAGE) from None
    return [f.result() for f in futures]
