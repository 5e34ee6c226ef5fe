"""Holds shards mid-write, so a stop signal or a kill lands mid-shard for certain: every shard
but the one named by $ISHARD_TEST_FIRST is held after its first member until the run is being
stopped (for ``BOUND`` seconds at the most). Preloaded into a `dask worker` (``--preload``), or
run as ``python hold_writers.py ARGS``: the CLI with its writers held (forked writers inherit
the patch)."""

from __future__ import annotations

import os
import sys
import time

from ishard.run import write, writers

BOUND = 300.0  # seconds: past any test's bound, so a run never stopped still ends

_real = getattr(write.write_one, "real", write.write_one)  # the preload may run twice


def _held(shard, reader, open_sink, settings, cancel, progress):
    inner = reader

    class Held:
        def read(self, members):
            stream = inner.read(members)
            yield next(stream)
            deadline = time.monotonic() + BOUND
            while not cancel.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)
            yield from stream

    if shard.name != os.environ.get("ISHARD_TEST_FIRST"):
        reader = Held()
    return _real(shard, reader, open_sink, settings, cancel, progress)


_held.real = _real  # type: ignore[attr-defined]
write.write_one = writers.write_one = _held  # local writers call the one, Dask tasks the other

if __name__ == "__main__":
    from ishard import cli

    cli.main(sys.argv[1:])
