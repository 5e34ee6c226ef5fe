"""Run the plan's shards as Dask tasks on a cluster's workers (``--executor dask``).

The plan is made once, on the client; each task writes one whole shard on a worker, which
opens SRC and DST itself; the client gathers the results (the caller writes the manifest).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .errors import Interrupted, IshardError, UsageError, WriteError
from .model import ShardPlan, ShardResult
from .progress import Progress

CONNECT_SECONDS = 20
CANCEL_CHECK = 0.5  # seconds between a worker's looks at the run's cancel flag
IN_FLIGHT, LEAST_IN_FLIGHT = 4, 8  # shards submitted and not yet done: per worker, at least


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


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int, wanted: bool = True) -> Iterator[Any]:
    """A Dask client, connected (or its local cluster started) now, closed at the end; None
    when not ``wanted``. A run opens it before it claims its destination, so a missing
    ``distributed`` or a scheduler that does not answer leaves the destination untouched.

    Raises:
        UsageError: ``distributed`` is not installed (exit 2).
        IshardError: the scheduler did not answer (exit 1).
    """
    if not wanted:
        yield None
        return
    client, cluster = _client(scheduler, workers)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


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
    client: Any = None,
) -> list[ShardResult]:
    """Run ``task(shard, cancel)`` for every shard on Dask workers; results in plan order.

    Without ``scheduler`` a local cluster of ``workers`` processes (one thread each) is started
    on 127.0.0.1 and stopped at the end. ``task`` must pickle by reference (a module-level
    function, or a ``functools.partial`` of one): ishard must be installed on the workers.

    A window of shards is in flight at once (``_window``): each is built from ``shards`` and
    submitted as an earlier one finishes, and a finished task is released with its plan.

    On the first failure, or Ctrl-C, the run's cancel flag is set: queued tasks are dropped,
    running ones abandon their shards (temp files removed, uploads aborted) within about
    CANCEL_CHECK seconds; shards already complete stay.

    Raises:
        IshardError: the first failure seen; Interrupted on Ctrl-C.
    """
    if client is None:
        with dask_client(scheduler, workers) as own:
            return write_with_dask(
                shards, task, scheduler=scheduler, workers=workers, progress=progress, client=own
            )
    distributed = _distributed()
    name = f"ishard-cancel-{uuid.uuid4().hex}"
    cancel_event = distributed.Event(name, client=client)
    cancel = DaskCancel(name)
    window = _window(client, scheduler, workers)
    results: list[ShardResult | None] = [None] * len(shards)
    waiting: dict[Any, int] = {}  # future -> its shard's index

    def submit(i: int):  # the shard's plan is built now: a window of them at a time
        future = client.submit(
            task, shards[i], cancel, key=f"ishard-{i:09d}-{uuid.uuid4().hex}", pure=False,
            retries=0,
        )  # fmt: skip
        waiting[future] = i
        return future

    submitted = min(window, len(shards))
    done = distributed.as_completed([submit(i) for i in range(submitted)])
    try:
        for future in done:
            if future.status == "error":
                _stop(cancel_event, list(waiting))
                raise _worker_error(future.exception())
            result = future.result()
            results[waiting.pop(future)] = result
            future.release()  # the scheduler lets go of the task and its plan
            progress.wrote(result.payload)
            progress.shard_done(result)
            if submitted < len(shards):
                done.add(submit(submitted))
                submitted += 1
    except KeyboardInterrupt:
        _stop(cancel_event, list(waiting))
        raise Interrupted(Interrupted.MESSAGE) from None
    assert all(r is not None for r in results)
    return results  # type: ignore[return-value]


def _window(client, scheduler: str | None, workers: int) -> int:
    """Shards handed to Dask at once: ``IN_FLIGHT`` a worker (the cluster's, as the scheduler
    knows them, with ``--scheduler``), at least ``LEAST_IN_FLIGHT``; the rest are built and
    submitted as those finish, so neither the client nor the scheduler holds the whole plan."""
    if scheduler:  # the client's own copy of the scheduler's answer: no round trip
        workers = len(client.scheduler_info().get("workers", {}))
    return max(LEAST_IN_FLIGHT, IN_FLIGHT * workers)


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
