"""Run the plan's shards as Dask tasks on a cluster's workers (``--executor dask``).

The plan is made once, on the client; each task writes one whole shard on a worker, which
opens SRC and DST itself; the client gathers the results (the caller writes the manifest).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .. import signals
from ..errors import Interrupted, IshardError, UsageError, WriteError
from ..model import ShardPlan, ShardResult
from ..progress import Progress
from .write import take_step

CONNECT_SECONDS = 20
NO_WORKERS_SECONDS = 10.0  # a cluster without workers this long fails the run (see _Workers)
WORKER_CHECK = 1.0  # seconds between asking the scheduler for its workers while none finish
STOP_SECONDS = 2.0  # after a failure or a signal: how long running tasks get to abandon shards
CLOSE_SECONDS = 2  # closing the client, and ishard's own cluster
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
    # the client's own reports (a result it could not fetch and has computed again, a lost
    # scheduler it tried to reach again, with tracebacks) are not the user's to act on: ishard
    # says what failed, in one line
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _AbandonedFetch) for f in asyncio_log.filters):
        asyncio_log.addFilter(_AbandonedFetch())
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
    client = distributed.Client(cluster)
    # ishard's own workers are in its process group: a Ctrl-C or SIGTERM sent to the group
    # must not kill them mid-shard (leaving temp files); ishard cancels their tasks itself
    client.run(_ignore_stop_signals)
    return client, cluster


class _AbandonedFetch(logging.Filter):
    """Drops asyncio's report of a result fetch ishard stopped waiting for (the result had
    gone with its worker, ``_result``): distributed ends such a fetch with ``AllExit`` when
    the client closes, and asyncio reports it as never retrieved."""

    def filter(self, record: logging.LogRecord) -> bool:
        failure = record.exc_info[1] if record.exc_info else None
        return type(failure).__name__ != "AllExit"


def _ignore_stop_signals() -> None:
    """Run on each worker of ishard's own local cluster (in its main thread)."""
    for signum in signals.SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


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


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int, wanted: bool = True) -> Iterator[Any]:
    """A Dask client, connected (or its local cluster started) now, closed at the end in
    bounded time; None when not ``wanted``. A run opens it before it claims its destination,
    so a missing ``distributed`` or a scheduler that does not answer leaves the destination
    untouched.

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
        _close(client, cluster)


def write_with_dask(
    shards: Sequence[ShardPlan],
    task: Callable[[ShardPlan, DaskCancel], ShardResult],
    *,
    scheduler: str | None,
    workers: int,
    progress: Progress,
    client: Any = None,
    cleanup: Callable[[list[str]], object] | None = None,
    meanwhile: Callable[[], Iterator[object]] | None = None,
) -> list[ShardResult]:
    """Run ``task(shard, cancel)`` for every shard on Dask workers; results in plan order.
    ``meanwhile``'s steps are taken while the client waits for the workers, one between two
    looks at the shards in flight (work the run needs next; one that fails is left for its
    owner to meet again after the shards).

    ``client`` is the run's (``dask_client``); without one, one is opened here. Without
    ``scheduler`` a local cluster of ``workers`` processes (one thread each) is started
    on 127.0.0.1 and stopped at the end. ``task`` must pickle by reference (a module-level
    function, or a ``functools.partial`` of one): ishard must be installed on the workers.

    A window of shards is in flight at once (``_window``): each is built from ``shards`` and
    submitted as an earlier one finishes, and a finished task is released with its plan.

    On the first failure, a stop signal (Ctrl-C, SIGTERM, SIGHUP), or a cluster left without
    workers for NO_WORKERS_SECONDS, the run's cancel flag is set: queued tasks are dropped,
    running ones abandon their shards (temp files removed, uploads aborted) within about
    CANCEL_CHECK seconds (waited for STOP_SECONDS at most); shards already complete stay.
    Every wait has a timeout, so a signal ends the run within a few seconds. Once every shard
    is written, ``cleanup(names)`` removes what writers that died mid-shard left (their shards
    were written again elsewhere).

    Raises:
        IshardError: the first failure seen; Interrupted on a stop signal.
    """
    if client is None:
        with dask_client(scheduler, workers) as own:
            return write_with_dask(shards, task, scheduler=scheduler, workers=workers,
                                   progress=progress, client=own, cleanup=cleanup,
                                   meanwhile=meanwhile)  # fmt: skip
    cluster = getattr(client, "cluster", None)
    where = str(scheduler or getattr(cluster, "scheduler_address", ""))
    with signals.deferred(), _scheduler_kept(client, where, own=scheduler is None):
        results = _gather(client, shards, task, _window(client, scheduler, workers), progress,
                          _Workers(client, where, own=scheduler is None),
                          meanwhile() if meanwhile is not None else None)  # fmt: skip
    if cleanup is not None:
        cleanup([r.name for r in results])
    return results


@contextlib.contextmanager
def _scheduler_kept(client, where: str, *, own: bool) -> Iterator[None]:
    """Any failure while the client has lost its scheduler (killed, restarted, the network
    gone) told as that: distributed cancels every task of the run when the connection drops,
    and its errors (a task cancelled, ``FuturesCancelledError``, no workers found) name no
    cause. A stop signal stays itself."""
    try:
        yield
    except Interrupted:
        raise
    except Exception:  # whatever distributed raised for it (a stop signal is no Exception)
        if client.status == "running":
            raise
        fix = "" if own else "start the scheduler and its workers again, then "
        raise WriteError(
            f"lost the Dask scheduler at {where} while writing shards (it stopped, or the "
            f"network to it failed) — complete shards were kept: {fix}run again with --resume"
        ) from None


def _gather(
    client,
    shards: Sequence[ShardPlan],
    task: Callable,
    window: int,
    progress: Progress,
    watch: _Workers,
    steps: Iterator[object] | None,
) -> list[ShardResult]:
    """Submit a window of shards at a time and collect their results, a tick at a time; while
    none has finished, take one of ``steps`` instead of waiting."""
    name = f"ishard-cancel-{uuid.uuid4().hex}"
    cancel = DaskCancel(name)
    results: list[ShardResult | None] = [None] * len(shards)
    waiting: dict[Any, int] = {}  # future -> its shard's index

    def submit(i: int) -> None:  # the shard's plan is built now: a window of them at a time
        future = client.submit(
            task, shards[i], cancel, key=f"ishard-{i:09d}-{uuid.uuid4().hex}", pure=False,
            retries=0,
        )  # fmt: skip
        waiting[future] = i

    submitted, written = min(window, len(shards)), 0
    for i in range(submitted):
        submit(i)
    try:
        while waiting:
            if signals.stopping():
                raise Interrupted(signals.received(), signals.name())
            finished = [f for f in waiting if f.done()]
            if not finished:
                watch.check(len(shards) - written)
                if steps is not None:
                    steps = take_step(steps)
                else:
                    _wait_any(list(waiting))
            for future in finished:
                result = _result(future)
                if result is None:
                    continue  # lost with its worker: Dask runs the task again
                results[waiting.pop(future)] = result
                future.release()  # the scheduler lets go of the task and its plan
                progress.wrote(result.payload)
                progress.shard_done(result)
                written += 1
                if submitted < len(shards):
                    submit(submitted)
                    submitted += 1
    except BaseException:
        _stop(client, name, list(waiting))
        raise
    assert all(r is not None for r in results)
    return results  # type: ignore[return-value]


def _window(client, scheduler: str | None, workers: int) -> int:
    """Shards handed to Dask at once: ``IN_FLIGHT`` a worker (the cluster's, as the scheduler
    knows them, with ``--scheduler``), at least ``LEAST_IN_FLIGHT``; the rest are built and
    submitted as those finish, so neither the client nor the scheduler holds the whole plan."""
    if scheduler:  # the client's own copy of the scheduler's answer: no round trip
        workers = len(client.scheduler_info().get("workers", {}))
    return max(LEAST_IN_FLIGHT, IN_FLIGHT * workers)


def _result(future) -> ShardResult | None:
    """A finished task's shard, or the error it ended with; None when its result went with
    its worker before it reached this client (Dask computes it again: no wait for it here,
    which could last for good on a cluster left without workers)."""
    if future.status == "finished":
        try:
            return future.result(timeout=signals.TICK)
        except TimeoutError:
            return None
    if future.status == "error":
        raise _worker_error(future.exception())
    raise WriteError(  # cancelled or lost: the scheduler restarted or forgot the run
        f"the Dask scheduler dropped a shard's task ({future.status}) — complete shards were "
        "kept: run again with --resume"
    )


def _wait_any(futures: list) -> None:
    """Until one of ``futures`` finishes, or a tick passes."""
    try:
        _distributed().wait(futures, timeout=signals.TICK, return_when="FIRST_COMPLETED")
    except TimeoutError:
        pass


class _Workers:
    """Notices a cluster left without workers while shards are still to write (they died or
    were stopped): its tasks would wait for good. A worker restarted by its nanny within
    NO_WORKERS_SECONDS is no failure."""

    def __init__(self, client, where: str, *, own: bool) -> None:
        self._client, self._where, self._own = client, where, own
        self._next = 0.0
        self._since: float | None = None

    def check(self, left: int) -> None:
        """Ask the scheduler (at most every WORKER_CHECK seconds) how many workers it has.

        Raises:
            WriteError: none for NO_WORKERS_SECONDS (or the scheduler did not answer).
        """
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + WORKER_CHECK
        try:
            count = len(self._client.nthreads(callback_timeout=WORKER_CHECK))
        except Exception:  # noqa: BLE001 - unreachable or slow: no worker known to run tasks
            count = 0
        if count:
            self._since = None
        elif self._since is None:
            self._since = now
        elif now - self._since >= NO_WORKERS_SECONDS:
            raise WriteError(self._message(left))

    def _message(self, left: int) -> str:
        head = (
            f"the Dask cluster at {self._where} has had no workers for "
            f"{NO_WORKERS_SECONDS:g} s with {left} shard{'s' * (left != 1)} still to write"
        )
        if self._own:
            return (
                f"{head} (its worker processes died: out of memory, or killed) — complete "
                "shards were kept: run again with --resume (with fewer --jobs if they ran out "
                "of memory)"
            )
        return (
            f"{head} (they died or were stopped, or the scheduler stopped answering) — "
            f"complete shards were kept: start workers (dask worker {self._where}), then run "
            "again with --resume"
        )


def _stop(client, name: str, futures: list) -> None:
    """Set the run's cancel flag and give running tasks STOP_SECONDS to abandon their shards
    (queued ones then stop before writing); a task on a worker that is gone is not waited
    for."""
    # a timeout, a lost scheduler: the run stops regardless
    with contextlib.suppress(Exception):
        client.sync(client.scheduler.event_set, name=name, callback_timeout=STOP_SECONDS)
        _distributed().wait(futures, timeout=STOP_SECONDS)


def _close(client, cluster) -> None:
    """Close the client (and ishard's own cluster), each in bounded time."""
    with contextlib.suppress(Exception):
        client.close(timeout=CLOSE_SECONDS)
    if cluster is not None:
        with contextlib.suppress(Exception):
            cluster.close(timeout=CLOSE_SECONDS)


def _worker_error(err: BaseException) -> IshardError:
    if isinstance(err, IshardError):
        return err
    if type(err).__name__ == "KilledWorker":
        return WriteError(
            "a Dask worker died while writing a shard (out of memory, or killed) — "
            "complete shards were kept: run again with --resume"
        )
    return WriteError(f"a Dask worker failed on a shard: {type(err).__name__}: {err}")
