"""What ``bench_statements.py`` and the engines' modules (``statements_polars.py``,
``statements_datafusion.py``) share: the checks that make their answers comparable (sums
weighted by position, a digest of the ordered names, the reader findings), the RSS watch,
the spooled columns, the constants."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

P = 2_147_483_647  # position-weighted sums are taken modulo this prime (no overflow)
CHUNK = 1 << 21  # ints read out at a time, as ishard's engine does (INTS_FETCHED)
EXAMPLES = 3  # first samples kept per reader finding (naming.EXAMPLES)
# names.SKIP_REASON's unsafe names, as a regular expression
UNSAFE = r"^[/\\]|^[A-Za-z]:|[\x00-\x1f\x7f]|(^|[/\\])\.\.([/\\]|$)"
LOOK = 0.05  # seconds between two reads of the RSS
ENGINES = ("duckdb", "polars", "datafusion")
STATEMENTS = ("read", "checks", "sort", "clashes", "group", "layout", "read-out")


def rss_mib() -> float:
    """This process's RSS now, MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


class Statements:
    """Each statement's seconds and peak RSS, and the answers that must agree."""

    def __init__(self, cap: float | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.rss: dict[str, float] = {}
        self.answers: dict[str, object] = {}
        self.cap = cap  # MiB: past it, the process says where it was and ends

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Time the block, and take its most RSS (read every ``LOOK`` seconds by a thread:
        resetting the kernel's peak would take it from GNU time's figure too)."""
        done, most = threading.Event(), [rss_mib()]

        def look() -> None:
            while not done.wait(LOOK):
                most[0] = max(most[0], rss_mib())
                if self.cap is not None and most[0] > self.cap:
                    self.seconds[name] = time.perf_counter() - started
                    self.rss[name] = most[0]
                    self.printed(over=name)
                    os._exit(0)

        watcher = threading.Thread(target=look, daemon=True)
        watcher.start()
        started = time.perf_counter()
        try:
            yield
        except Exception as error:  # noqa: BLE001 - an engine that fails (out of memory): a finding
            self.printed(failed=f"{name}: {str(error).splitlines()[-1][:300]}")
            os._exit(0)
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            done.set()
            watcher.join()
            self.rss[name] = max(self.rss.get(name, 0.0), most[0], rss_mib())

    def printed(self, over: str | None = None, failed: str | None = None) -> None:
        found = {"seconds": self.seconds, "rss": self.rss, "answers": self.answers}
        found |= {"over": over, "failed": failed}
        print(json.dumps(found, default=int), flush=True)  # DataFusion sums: Decimal


def weighted(chunks: Iterator) -> tuple[int, int, int]:
    """Count, sum and position-weighted sum (mod P) of an int column read in numpy chunks."""
    import numpy as np

    count = total = mixed = 0
    for chunk in chunks:
        values = np.asarray(chunk, dtype=np.int64)
        rank = np.arange(count + 1, count + len(values) + 1, dtype=np.int64)
        mixed = (mixed + int(((rank * values) % P).sum())) % P
        count, total = count + len(values), total + int(values.sum())
    return count, total, mixed


def names_digest(batches: Iterator) -> str:
    """blake2b of the names in order (Arrow batches of one text column), a line each."""
    digest = hashlib.blake2b(digest_size=16)
    for batch in batches:
        digest.update("".join(f"{n}\n" for n in batch.column(0).to_pylist()).encode())
    return digest.hexdigest()


# ---- DuckDB: ishard's own statements -------------------------------------------------------


class Timing:
    """A DuckDB connection whose statements ``_layout`` (the layout sort) are timed apart."""

    def __init__(self, con, statements: Statements) -> None:
        self._con, self._statements = con, statements

    def execute(self, query: str, *args):
        if query.startswith("CREATE TEMP TABLE laid"):
            with self._statements.timed("layout"):
                return self._con.execute(query, *args)
        return self._con.execute(query, *args)

    def __getattr__(self, name: str):
        return getattr(self._con, name)


SORTED_SUMS = (  # the listing's order: its sizes and name lengths weighted by position
    f"SELECT count(*), sum(size), sum(((rowid + 1) * size) % {P}) % {P}, "
    f"sum(((rowid + 1) * strlen(name)) % {P}) % {P} FROM files"
)
RUNS_SUMS = (  # the samples' order: where each run starts in by_key, its key's length
    f"SELECT count(*), sum(((rowid + 1) * pos) % {P}) % {P}, "
    f"sum(((rowid + 1) * strlen(key)) % {P}) % {P} FROM runs"
)


FINDINGS = {"dotted": 1, "dropped": 2, "split": 4}  # handover.FINDING_BITS


def reader_findings(hits: str, keys_of: Callable[[list[int]], dict[int, str]]) -> dict[str, list]:
    """For each finding, how many samples have it and the keys (``keys_of`` their first files)
    of the first ``EXAMPLES``: the rows of ``hits`` (a Parquet file of ``run``, each hit's
    sample by its first file, and ``code``, its finding bits) in sample key order."""
    import numpy as np

    count = dict.fromkeys(FINDINGS, 0)
    last = dict.fromkeys(FINDINGS, -1)
    least = {kind: np.empty(0, dtype=np.int64) for kind in FINDINGS}
    for batch in batches(hits, "run", "code"):
        run = batch.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
        code = batch.column(1).to_numpy(zero_copy_only=False)
        for kind, bit in FINDINGS.items():
            runs = run[(code & bit) != 0]
            if len(runs):  # each sample counted at its first row with the finding
                first = np.flatnonzero(np.diff(runs, prepend=last[kind]) != 0)
                count[kind] += len(first)
                last[kind] = int(runs[-1])
                least[kind] = np.unique(np.concatenate([least[kind], runs[first]]))[:EXAMPLES]
    keys = keys_of(sorted({int(f) for kind in least for f in least[kind]}))
    return {
        kind: [count[kind], [keys[int(f)] for f in least[kind]]] for kind in FINDINGS if count[kind]
    }


def batches(path: str, *columns: str):
    """A Parquet file's columns, ``CHUNK`` rows at a time (Arrow record batches)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).iter_batches(batch_size=CHUNK, columns=list(columns))


def spooled_columns(folder: str, laid: str, runs: str, files: str) -> list[tuple[str, str]]:
    """The columns Python takes, written to files ``CHUNK`` ints at a time, as ishard's engine
    hands them over: the files by sample (``laid``'s ``f``), where each sample's files start
    (from ``runs``' ``files``, and where the last ends), each sample's bytes (``runs``'
    ``bytes``), each file's size (``files``' ``size``); 4-byte ints where the values fit."""
    import numpy as np
    import pyarrow.parquet as pq

    spooled = []
    for source, column in ((laid, "f"), (runs, "files"), (runs, "bytes"), (files, "size")):
        meta = pq.ParquetFile(source).metadata
        at = meta.schema.names.index(column)
        stats = [meta.row_group(g).column(at).statistics for g in range(meta.num_row_groups)]
        fits = all(-(1 << 31) <= s.min and s.max < 1 << 31 for s in stats)
        kind = "int32" if fits and column != "files" and column != "bytes" else "int64"
        path, before = os.path.join(folder, f"{column}.{kind}"), 0
        with open(path, "wb") as out:
            for batch in batches(source, column):
                values = batch.column(0).to_numpy(zero_copy_only=False).astype(kind)
                if column == "files":  # lengths → starts
                    ends = np.cumsum(values, dtype=np.int64) + before
                    values, before = ends - values, int(ends[-1]) if len(ends) else before
                values.tofile(out)
            if column == "files":
                np.array([before], dtype=np.int64).tofile(out)
        spooled.append((path, kind))
    return spooled


def spooled(path: str, kind: str):
    """A column ``spooled_columns`` wrote, ``CHUNK`` values at a time."""
    import numpy as np

    values = np.memmap(path, dtype=kind, mode="r")
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]
