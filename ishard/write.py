"""Execute a plan: each shard streamed from its reader into a sink, committed only when complete."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from .errors import Interrupted, IshardError, WriteError
from .formats import open_writer
from .model import ShardPlan, ShardResult
from .progress import Progress

REPORT_EVERY = 4 << 20


class _Cancelled(Exception):
    """Another shard failed or the user interrupted: stop this one quietly."""


def _write_one(shard: ShardPlan, reader, open_sink: Callable, settings: dict,
               cancel: threading.Event, progress: Progress) -> ShardResult:
    if cancel.is_set():
        raise _Cancelled
    sink = open_sink(shard)
    writer = None
    try:
        writer = open_writer(shard.name, sink, **settings)
        pending = 0
        for entry, stream in reader.read(shard.members()):
            if cancel.is_set():
                raise _Cancelled
            writer.add(entry.name, entry.size, entry.mtime, stream)
            pending += entry.size
            if pending >= REPORT_EVERY:
                progress.wrote(pending)
                pending = 0
        writer.close()
        sink.commit()
        progress.wrote(pending)
    except BaseException as err:
        if writer is not None:
            writer.abort()
        sink.abort()
        if isinstance(err, OSError) and not isinstance(err, IshardError):
            raise WriteError(f"cannot write shard {shard.name!r}: {err.strerror or err}") from None
        raise
    result = ShardResult(shard.name, sink.size, sink.checksum, len(shard.samples),
                         shard.file_count, shard.size)
    progress.shard_done(result)
    return result


def write_shards(shards: tuple[ShardPlan, ...], reader, open_sink: Callable, *, jobs: int,
                 settings: dict, progress: Progress) -> list[ShardResult]:
    """Write every shard (``jobs`` at a time); results come back in plan order.

    On the first failure, or Ctrl-C, the other writers stop and abandon their shards (temp files
    removed, uploads aborted); shards already complete stay (they are exactly what the plan says).

    Raises:
        IshardError: the first failure in plan order; Interrupted on Ctrl-C.
    """
    cancel = threading.Event()
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="ishard-write") as pool:
        futures = [pool.submit(_write_one, s, reader, open_sink, settings, cancel, progress)
                   for s in shards]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
            if any(f.done() and not f.cancelled() and f.exception() for f in futures):
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
