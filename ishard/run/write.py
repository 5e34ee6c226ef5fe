"""Execute a plan: each shard streamed from its reader into a sink, committed only when complete."""

from __future__ import annotations

import ctypes
import gc
import itertools
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import (
    FIRST_EXCEPTION,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from .. import signals
from ..errors import Interrupted, IshardError, WriteError
from ..formats.dali_index import dali_index, index_name
from ..formats.indexes import indexes_of
from ..formats.registry import Settings, writer
from ..model import FileEntry, ShardPlan, ShardResult, packed, packed_sums
from ..options.record import Options
from ..progress import Progress
from ..store.base import ComposeRefused, publishing

LOG = logging.getLogger("ishard")
REPORT_EVERY = 4 << 20
RELAY_EVERY = 0.25  # seconds between progress reports relayed from writer processes
PR_SET_PDEATHSIG = 1  # prctl(2)
ORPHAN_CHECK = 1024  # a writer process checks every this many members that ishard still runs
# Writer processes are forked, so they inherit the plan, reader and sink factory instead of
# having them pickled; only Linux's fork is both cheap and safe enough for that.
FORK = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
_RUNS: dict[int, Batch] = {}  # run token -> the shards it writes
_TOKENS = itertools.count()
_CHILD: tuple = ()  # in a writer process: (cancel flag, progress relay)


class Cancel(Protocol):
    """What a writer asks between members: should it stop? (a ``threading.Event`` is one)."""

    def is_set(self) -> bool:
        """True once the run is being stopped."""


class _Cancelled(Exception):
    """Another shard failed or the user interrupted: stop this one quietly."""


@dataclass(frozen=True)
class WriterSettings:
    """How every shard of a run is written, built once from the options (:meth:`of`): the
    settings its format's archive writer takes, and whether a DALI index goes beside each
    ``.tar``."""

    archive: Settings
    dali_index: bool = False

    @classmethod
    def of(cls, opts: Options) -> WriterSettings:
        """The settings ``opts`` ask for."""
        archive = Settings(
            opts.compress_level, opts.zip_compression == "deflated", opts.gzip_library
        )
        return cls(archive, "dali" in indexes_of(opts.index))


def write_one(
    shard: ShardPlan,
    reader,
    open_sink: Callable,
    settings: WriterSettings,
    cancel: Cancel,
    progress: Progress,
) -> ShardResult:
    """Write one shard: reader → archive writer → sink, then commit; abort on any failure."""
    if cancel.is_set():
        raise _Cancelled
    sink = open_sink(shard)
    try:
        return _write_into(sink, shard, reader, open_sink, settings, cancel, progress)
    except ComposeRefused as refused:  # aborted: the store would not compose it
        LOG.info("shard %r is written through this machine: %s", shard.name, refused.reason)
        return write_one(shard, reader, open_sink, settings, cancel, progress)


def _members(shard: ShardPlan, reader, sink) -> Iterator[tuple[FileEntry, BinaryIO | None]]:
    """The shard's members in order, each with a stream of its bytes from ``reader``, or None
    for one the sink places itself (copied inside its store: ``--compose``)."""
    members = shard.members()
    placed = getattr(sink, "placed", None)
    if placed is None:
        yield from reader.read(members)
        return
    copied = [placed(m) for m in members]
    streams = reader.read([m for m, c in zip(members, copied) if not c])
    try:
        for member, is_copied in zip(members, copied):
            yield (member, None) if is_copied else next(streams)
    finally:
        streams.close()


def _write_into(
    sink,
    shard: ShardPlan,
    reader,
    open_sink: Callable,
    settings: WriterSettings,
    cancel: Cancel,
    progress: Progress,
) -> ShardResult:
    archive = index = None
    counts = [len(sample.files) for sample in shard.samples]
    try:
        archive = writer(shard.name, sink, settings.archive)
        pending = _write_members(archive, shard, reader, sink, counts, cancel, progress)
        archive.close()
        headers, data, frames = archive.layout()
        if settings.dali_index:  # committed before the shard: a visible shard always has its index
            index = _put_index(shard, data, open_sink)
        sink.commit()
        progress.wrote(pending)
    except BaseException as err:
        if archive is not None:
            archive.abort()
        sink.abort()
        if isinstance(err, OSError) and not isinstance(err, IshardError):
            raise WriteError(
                f"cannot write shard {shard.name!r}: {err.strerror or err} — fix the "
                "destination, then run again with --resume"
            ) from None
        raise
    result = ShardResult(
        shard.name,
        sink.size,
        sink.checksum,
        len(shard.samples),
        shard.file_count,
        shard.size,
        index,
        getattr(sink, "etag", None),
        packed(headers, data),
        None if frames is None else _member_frames(frames, counts),
        packed_sums(archive.checksums()),
        tuple(zip(getattr(archive, "placed", ()), getattr(sink, "sources", ()))),
    )
    progress.shard_done(result)
    return result


def _write_members(
    archive, shard: ShardPlan, reader, sink, counts: list[int], cancel: Cancel, progress: Progress
) -> int:
    """Every member of ``shard`` into ``archive``, each sample begun where it begins (a
    member the sink places itself: ``place``d); the bytes written but not yet reported."""
    pending = 0
    firsts = set(itertools.accumulate(counts[:-1], initial=0))
    for i, (entry, stream) in enumerate(_members(shard, reader, sink)):
        if cancel.is_set():
            raise _Cancelled
        if i in firsts:
            archive.sample()
        if stream is None:
            archive.place(entry.arcname, entry.size, entry.mtime, entry.name)
        else:
            archive.add(entry.arcname, entry.size, entry.mtime, stream)
        pending += entry.size  # a copied member's bytes count as they are placed
        if pending >= REPORT_EVERY:
            progress.wrote(pending)
            pending = 0
    return pending


def _member_frames(starts: list[int], counts: list[int]) -> bytes:
    """Each member's sample's frames (offset, size), from where each sample's frames start
    (and the last ends) and how many members each sample has."""
    offsets = [starts[s] for s, n in enumerate(counts) for _ in range(n)]
    sizes = [starts[s + 1] - starts[s] for s, n in enumerate(counts) for _ in range(n)]
    return packed(offsets, sizes)


@dataclass(frozen=True)
class Batch:
    """What every writer of one run shares: the shards, the reader their members come from,
    the sink factory and the archive writer's settings."""

    shards: Sequence[ShardPlan]
    reader: object
    open_sink: Callable
    settings: WriterSettings

    def write(self, index: int, cancel: Cancel, progress: Progress) -> ShardResult:
        """Write shard ``index`` (``write_one``)."""
        return write_one(
            self.shards[index], self.reader, self.open_sink, self.settings, cancel, progress
        )


def _put_index(shard: ShardPlan, offsets: list[int], open_sink: Callable) -> str:
    """Write the shard's DALI index through a sink of its own (temp name, then renamed)."""
    members = shard.members()
    data = dali_index([m.arcname for m in members], offsets, [m.size for m in members])
    name = index_name(shard.name)
    with publishing(open_sink(ShardPlan(name, (), len(data)))) as sink:
        sink.write(data)
    return name


def take_step(steps: Iterator[object]) -> Iterator[object] | None:
    """Take one of ``steps`` (work done while the shards are written); None once they are
    done, or one failed (their owner does the work again, and tells what failed, after the
    shards)."""
    try:
        next(steps)
    except StopIteration:
        return None
    except Exception:  # noqa: BLE001 - met again after the shards
        return None
    return steps


def _meanwhile(steps: Callable[[], Iterator[object]] | None, futures: list[Future]) -> None:
    """Take ``steps`` one after another while the writers work, until they end, a writer
    fails or a stop signal comes (``_collect`` then deals with it)."""
    if steps is None:
        return
    taking: Iterator[object] | None = steps()
    while taking is not None:
        taking = take_step(taking)
        if signals.stopping() or any(
            f.done() and not f.cancelled() and f.exception() is not None for f in futures
        ):
            return


def _collect(futures: list[Future], cancel: Callable[[], None]) -> list[ShardResult]:
    """Results in submission order; on the first failure or a stop signal, cancel the rest and
    raise. Every wait has a timeout: a signal only sets a flag here (``signals.deferred``),
    seen within ``signals.TICK`` seconds."""
    failed = False
    try:
        while not (failed or signals.stopping()):
            done, pending = wait(futures, timeout=signals.TICK, return_when=FIRST_EXCEPTION)
            failed = any(not f.cancelled() and f.exception() for f in done)
            if not (failed or pending):
                return [f.result() for f in futures]
    except KeyboardInterrupt:  # a handler of the caller's own raised it
        pass
    _drain(futures, cancel)
    if not failed:
        raise Interrupted(signals.received(), signals.name())
    errors = [f.exception() for f in futures if f.done() and not f.cancelled()]
    error = next(e for e in errors if e is not None and not isinstance(e, _Cancelled))
    if isinstance(error, BrokenProcessPool):
        raise WriteError(
            "a shard writer process died unexpectedly (killed, or out of "
            "memory) — complete shards were kept: run again with --resume "
            "(with --jobs 1 if it keeps happening)"
        ) from None
    raise error


def _drain(futures: list[Future], cancel: Callable[[], None]) -> None:
    """Stop the run: queued shards are dropped, running writers abandon theirs (temp files
    removed) at their next member; wait for them, a tick at a time."""
    cancel()
    for f in futures:
        f.cancel()
    while wait(futures, timeout=signals.TICK).not_done:
        pass


def write_shards(
    shards: Sequence[ShardPlan],
    reader,
    open_sink: Callable,
    *,
    jobs: int,
    settings: WriterSettings,
    progress: Progress,
    processes: bool = False,
    meanwhile: Callable[[], Iterator[object]] | None = None,
) -> list[ShardResult]:
    """Write every shard (``jobs`` at a time); results come back in plan order.
    ``meanwhile``'s steps run in the calling thread once the writers have started (forked),
    while they write: work the run needs next (the sample index's plan rows). Between steps
    the run looks for a failure or a stop signal; an error of its own is left for the caller
    to meet again (``meanwhile`` is optional work done early).

    With ``processes`` (for CPU-bound work: local to local, compression) and more than one job,
    the writers are forked processes, each writing whole shards, so they run beside each other
    instead of taking turns at the interpreter lock; otherwise they are threads.

    On the first failure, or a stop signal (Ctrl-C, SIGTERM, SIGHUP), the other writers stop
    and abandon their shards (temp files removed, uploads aborted); shards already complete
    stay (they are exactly what the plan says).

    Raises:
        IshardError: the first failure in plan order; Interrupted on a stop signal.
    """
    jobs = max(1, min(jobs, len(shards)))
    batch = Batch(shards, reader, open_sink, settings)
    if processes and jobs > 1 and FORK is not None:
        return _write_in_processes(batch, jobs, progress, meanwhile)
    cancel = threading.Event()

    def write(index: int) -> ShardResult:  # the shard's members are built only when it starts
        return batch.write(index, cancel, progress)

    with (
        signals.deferred(),
        ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="ishard-write") as pool,
    ):
        try:
            futures = [pool.submit(write, i) for i in range(len(shards))]
            _meanwhile(meanwhile, futures)
        except BaseException:  # Ctrl-C while submitting: the pool must not finish the rest
            cancel.set()
            raise
        return _collect(futures, cancel.set)


class _ChildCancel:
    """A writer process's view of the cancel flag; an orphaned writer (ishard was killed)
    cancels itself too."""

    def __init__(self, flag, parent: int) -> None:
        self._flag, self._parent, self._calls = flag, parent, 0

    def is_set(self) -> bool:
        if self._flag.value:
            return True
        self._calls += 1
        return self._calls % ORPHAN_CHECK == 0 and os.getppid() != self._parent


class _ChildProgress(Progress):
    """Adds written bytes to a counter the parent relays; the parent reports finished shards."""

    def __init__(self, counter) -> None:
        self._counter = counter

    def wrote(self, nbytes: int) -> None:
        with self._counter.get_lock():
            self._counter.value += nbytes


def _die_with_parent() -> None:
    """If ishard is killed outright (kill -9, preemption), its writers die at once instead of
    going on without it (and holding its destination lock); ``--resume`` cleans up after them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # then the writer notices the lost parent itself (ORPHAN_CHECK)


def _start_writer(flag, counter, parent: int) -> None:
    # Ctrl-C, SIGTERM and SIGHUP reach the whole process group: the parent alone turns them
    # into the cancel flag, so each writer stops between members and removes its temp file.
    # They were blocked across the fork (see _write_in_processes): ignored first, then let in.
    for signum in signals.SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals.SIGNALS)
    _die_with_parent()
    if os.getppid() != parent:  # ishard died before the line above took effect
        os._exit(1)
    global _CHILD
    _CHILD = (_ChildCancel(flag, parent), _ChildProgress(counter))


def _write_forked(token: int, index: int) -> ShardResult:
    return _RUNS[token].write(index, *_CHILD)


def _forking(pool: ProcessPoolExecutor, token: int) -> Future:
    """Submit the first shard, which forks the writers, with the stop signals blocked: a
    signal at that moment must not reach a writer before it ignores them (it would die, and
    the run end as a broken pool); the parent gets it once they are unblocked."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, signals.SIGNALS)
    try:
        return pool.submit(_write_forked, token, 0)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class _Relay:
    """Relays to ``progress`` the bytes forked writers add to a shared ``counter``: every
    ``RELAY_EVERY`` seconds from a thread of its own, and before each finished shard is told
    (so its last bytes come first)."""

    def __init__(self, counter, progress: Progress) -> None:
        self._counter, self._progress = counter, progress
        self._lock = threading.Lock()
        self._relayed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ishard-progress", daemon=True)

    def now(self) -> None:
        """Relay what the writers counted since the last time."""
        with self._lock:
            now = self._counter.value
            if now > self._relayed:
                self._progress.wrote(now - self._relayed)
                self._relayed = now

    def _run(self) -> None:
        while not self._stop.wait(RELAY_EVERY):
            self.now()
        self.now()

    def finished(self, future: Future) -> None:
        """A shard's writer returned: its last bytes, then the shard, told."""
        if not future.cancelled() and future.exception() is None:
            self.now()  # the writer counted the shard's last bytes before it returned
            self._progress.shard_done(future.result())

    def start(self) -> None:
        """Start relaying (after the fork: the writers inherit no extra thread)."""
        self._thread.start()

    def stop(self) -> None:
        """Relay the last bytes and stop."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def _write_in_processes(
    batch: Batch, jobs: int, progress: Progress, meanwhile: Callable[[], Iterator[object]] | None
) -> list[ShardResult]:
    assert FORK is not None  # processes are used only where fork is (see write_shards)
    flag = FORK.RawValue("b", 0)
    counter = FORK.Value("q", 0)
    relay = _Relay(counter, progress)

    def cancel() -> None:
        flag.value = 1

    token = next(_TOKENS)
    _RUNS[token] = batch
    # Objects that exist now are never collected in the writers: a collection there would
    # touch (and so copy) every page of the inherited plan.
    gc.freeze()
    try:
        with (
            signals.deferred(),
            ProcessPoolExecutor(
                jobs,
                mp_context=FORK,
                initializer=_start_writer,
                initargs=(flag, counter, os.getpid()),
            ) as pool,
        ):
            try:
                futures = [_forking(pool, token)]  # the writers are forked by the first submit
                futures += [
                    pool.submit(_write_forked, token, i) for i in range(1, len(batch.shards))
                ]
                relay.start()  # after the fork: the writers inherit no extra thread
                for f in futures:
                    f.add_done_callback(relay.finished)
                _meanwhile(meanwhile, futures)  # after the fork: the writers inherit none of it
            except BaseException:  # Ctrl-C while submitting: the pool must not finish the rest
                cancel()
                raise
            return _collect(futures, cancel)
    finally:
        gc.unfreeze()
        _RUNS.pop(token, None)
        relay.stop()
