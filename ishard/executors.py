"""Run the plan's shards as Dask tasks on a cluster's workers (``--executor dask``).

The plan is made once, on the client; each task writes one whole shard on a worker, which
opens SRC and DST itself; the client gathers the results (the caller writes the manifest).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from .errors import Interrupted, IshardError, UsageError, WriteError
from .model import ShardPlan, ShardResult
from .progress import Progress

CONNECT_SECONDS = 20
CANCEL_CHECK = 0.5  # seconds between a worker's looks at the run's cancel flag


def _distributed():
    try:
        import distributed
    except ImportError:
        raise UsageError(
            "--executor dask needs Dask's distributed scheduler — pip install 'ishard[dask]'"
        ) from None
    return distributed


def _client(scheduler: str | None, workers: int):
    distributed = _distributed()
    if scheduler:
        try:
            return distributed.Client(scheduler, timeout=CONNECT_SECONDS), None
        except (OSError, TimeoutError) as err:
            raise IshardError(
                f"the Dask scheduler {scheduler!r} did not answer within {CONNECT_SECONDS} s "
                f"({type(err).__name__}) — check the address (tcp://HOST:PORT) and that "
                "`dask scheduler` runs there"
            ) from None
    cluster = distributed.LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        silence_logs=logging.CRITICAL,
    )
    return distributed.Client(cluster), cluster


class DaskCancel:
    """A worker's view of the run's cancel flag (a ``distributed.Event``), looked at no more
    than every CANCEL_CHECK seconds: asking the scheduler costs a round trip."""

    def __init__(self, name: str) -> None:
        self._name, self._next, self._set = name, 0.0, False
        self._event: Any = None  # a distributed.Event, made on first use

    def __reduce__(self):  # sent to workers by name only
        return (DaskCancel, (self._name,))

    def is_set(self) -> bool:
        now = time.monotonic()
        if not self._set and now >= self._next:
            if self._event is None:
                self._event = _distributed().Event(self._name)
            self._set = self._event.is_set()
            self._next = now + CANCEL_CHECK
        return self._set


def write_with_dask(
    shards: Sequence[ShardPlan],
    task: Callable[[ShardPlan, DaskCancel], ShardResult],
    *,
    scheduler: str | None,
    workers: int,
    progress: Progress,
) -> list[ShardResult]:
    """Run ``task(shard, cancel)`` for every shard on Dask workers; results in plan order.

    Without ``scheduler`` a local cluster of ``workers`` processes (one thread each) is started
    on 127.0.0.1 and stopped at the end. ``task`` must pickle by reference (a module-level
    function, or a ``functools.partial`` of one): ishard must be installed on the workers.

    On the first failure, or Ctrl-C, the run's cancel flag is set: queued tasks are dropped,
    running ones abandon their shards (temp files removed, uploads aborted) within about
    CANCEL_CHECK seconds; shards already complete stay.

    Raises:
        IshardError: the first failure seen; Interrupted on Ctrl-C.
    """
    distributed = _distributed()
    client, cluster = _client(scheduler, workers)
    try:
        name = f"ishard-cancel-{uuid.uuid4().hex}"
        cancel_event = distributed.Event(name, client=client)
        cancel = DaskCancel(name)
        futures = [
            client.submit(
                task, shard, cancel, key=f"ishard-{i:09d}-{uuid.uuid4().hex}", pure=False, retries=0
            )
            for i, shard in enumerate(shards)
        ]
        try:
            for future in distributed.as_completed(futures):
                if future.status == "error":
                    _stop(cancel_event, futures)
                    raise _worker_error(future.exception())
                result = future.result()
                progress.wrote(result.payload)
                progress.shard_done(result)
        except KeyboardInterrupt:
            _stop(cancel_event, futures)
            raise Interrupted(Interrupted.MESSAGE) from None
        return [f.result() for f in futures]
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _stop(cancel_event, futures) -> None:
    """Set the cancel flag and wait: queued tasks then stop before writing, running ones
    abandon their shards."""
    cancel_event.set()
    _distributed().wait(futures)


def _worker_error(err: BaseException) -> IshardError:
    if isinstance(err, IshardError):
        return err
    if type(err).__name__ == "KilledWorker":
        return WriteError(
            "a Dask worker died while writing a shard (out of memory, or killed) — "
            "complete shards were kept: run again with --resume"
        )
    return WriteError(f"a Dask worker failed on a shard: {type(err).__name__}: {err}")
