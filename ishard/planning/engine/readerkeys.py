"""What WebDataset readers make of each listed name, in the column engine: each file's reader
key (the name up to the first dot of its basename, hashed as its folder and its stem) and
flags (1: another dot in the basename after the first; 2: no dot in it, or a leading one).

Where each sample's files lie in a row, the key check cuts them from the engine a span at a
time (``READER_KEYS``); where the engine sorted the files by sample key (an image and its
label in two trees), it finds the key check's counts and first examples itself
(``findings``), so no column of a value per file reaches Python."""

from __future__ import annotations

from ..handover import FINDING_BITS, ReaderFindings
from ..naming import EXAMPLES, READER_KEY
from .connection import FETCHED, sql_hash


def with_reader_keys(rows: str) -> str:
    """The SELECT ``rows`` (rows with a ``name``), each row's reader key ``rk`` (its folder
    and stem hashed) and ``flags`` added (``naming.READER_KEY``)."""
    return f"SELECT *, {sql_hash('folder', 'stem')} AS rk FROM {READER_KEY.over(rows=rows)}"


# the files' reader keys and flags (``handover.ReaderKeys``) over files ``{where}``
READER_KEYS = (
    "SELECT rk AS key, flags FROM (" + with_reader_keys("SELECT name FROM files {where}") + ")"
)


def findings(con) -> ReaderFindings:
    """The key check's findings over the files sorted by sample key (``by_key``: ``f``, the
    file's position in the listing, ``key``, ``rk`` and ``flags``, in key then ``f`` order):
    for each kind, how many samples and the keys of the first ``naming.EXAMPLES`` of them in sample
    order (by first file). A sample is split when its files' reader keys are not all one, so
    where one differs from the file's before it in the sample; its run is named by its first
    file (``run``). The rows with a finding are scanned ``FETCHED`` at a time: a sample's are
    in a row, so it is counted where its run changes."""
    import numpy as np

    con.execute(
        "CREATE TEMP TABLE reader_hits AS SELECT run, code FROM (SELECT last_value(CASE WHEN "
        "new THEN f END IGNORE NULLS) OVER (ROWS UNBOUNDED PRECEDING) AS run, flags + 4 * "
        "CAST(NOT new AND rk <> before AS TINYINT) AS code FROM (SELECT f, rk, flags, key IS "
        "DISTINCT FROM lag(key) OVER () AS new, lag(rk) OVER () AS before FROM by_key)) "
        "WHERE code <> 0"
    )
    count = con.execute("SELECT count(*) FROM reader_hits").fetchone()[0]
    counts = dict.fromkeys(FINDING_BITS, 0)
    last = dict.fromkeys(FINDING_BITS, -1)
    firsts = {kind: np.empty(0, dtype=np.int64) for kind in FINDING_BITS}
    for start in range(0, count, FETCHED):
        part = con.execute(
            "SELECT run, code FROM reader_hits "
            f"WHERE rowid >= {start} AND rowid < {start + FETCHED}"
        ).fetchnumpy()
        run, code = part["run"].astype(np.int64, copy=False), part["code"]
        for kind, bit in FINDING_BITS.items():
            hit = run[(code & bit) != 0]
            if not len(hit):
                continue
            runs = hit[np.concatenate(([hit[0] != last[kind]], hit[1:] != hit[:-1]))]
            counts[kind] += len(runs)  # each sample's first row with the finding
            last[kind] = int(hit[-1])
            firsts[kind] = _least(np.concatenate([firsts[kind], runs]))
    con.execute("DROP TABLE reader_hits")
    shown = sorted({int(f) for kind in firsts for f in firsts[kind]}) or [-1]
    listed = ", ".join(map(str, shown))
    keys = dict(con.execute(f"SELECT f, key FROM by_key WHERE f IN ({listed})").fetchall())
    return {
        kind: (counts[kind], [keys[int(f)] for f in firsts[kind]])
        for kind in FINDING_BITS
        if counts[kind]
    }


def _least(values):
    """The ``naming.EXAMPLES`` least of distinct ``values`` (a numpy array), in order,
    without sorting them all."""
    import numpy as np

    if len(values) > EXAMPLES:
        values = np.partition(values, EXAMPLES - 1)[:EXAMPLES]
    return np.sort(values)
