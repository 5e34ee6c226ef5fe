"""Preloaded into a `dask worker` by tests/test_dask_stops.py (``--preload``): every shard but
the one named by $ISHARD_TEST_FIRST is held after its first member until the run is cancelled
(for good if it never is), so a signal or a kill lands mid-shard for certain."""

from __future__ import annotations

import os
import time

from ishard.run import writers as run

_real = getattr(run.write_one, "real", run.write_one)  # the preload may run twice


def _held(shard, reader, open_sink, settings, cancel, progress):
    inner = reader

    class Held:
        def read(self, members):
            stream = inner.read(members)
            yield next(stream)
            while not cancel.is_set():
                time.sleep(0.05)
            yield from stream

    if shard.name != os.environ.get("ISHARD_TEST_FIRST"):
        reader = Held()
    return _real(shard, reader, open_sink, settings, cancel, progress)


_held.real = _real  # type: ignore[attr-defined]
run.write_one = _held
