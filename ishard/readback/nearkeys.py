"""The keys a sample index holds nearest to keys it does not hold (``ishard find``'s
suggestions), found by the column engine in the index's key column.

For each missing key the engine returns the ``NEIGHBOURS`` rows just below it and just above
it in key order (those that share the longest start with it: a typo at the end, a key cut
short or given with its extension): a top-N search over the rows between the missing key and
the second row group's bound from it (the row groups' key ranges, from the file's metadata),
so an index written in key order, as a plan in listing order mostly is, is read in two or
three row groups; any other costs a pass over the key column. Should that span hold too few
rows, the search is made again over every row. When the keys hold folders, one more pass finds
the keys that are a missing key under a folder (the folder left out). Only these few keys
reach Python, where ``difflib`` ranks them: the key column is never loaded whole, whatever
the size of the index."""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Sequence

NEIGHBOURS = 64  # index rows taken on either side of a missing key (a sample's members repeat it)
FOLDED = 8  # rows kept of keys that are the missing key under a folder
NEAR_FOR = 3  # missing keys given near keys: at most three searches each
CUTOFF = 0.6  # the least difflib ratio of a near key (difflib.get_close_matches's own)
WITHIN = 0.1  # and at most this far below the nearest one's: a few alike, not a long tail
# the rows just below and just above $2, within the bound $3 where there is one
BELOW = "SELECT key FROM read_parquet($1) WHERE key < $2{} ORDER BY key DESC LIMIT {}"
ABOVE = "SELECT key FROM read_parquet($1) WHERE key > $2{} ORDER BY key LIMIT {}"
RANGES = (
    "SELECT stats_min_value, stats_max_value FROM parquet_metadata($1) WHERE path_in_schema = 'key'"
)


def near_keys(con, path: str, missing: Sequence[str], count: int) -> dict[str, tuple[str, ...]]:
    """Up to ``count`` keys of the index at ``path`` nearest to each of the first
    ``NEAR_FOR`` of ``missing`` (keys it does not hold), nearest first: a key that is the
    missing one under a folder, then the neighbours in key order whose ``difflib`` ratio is
    at least ``CUTOFF`` and within ``WITHIN`` of the nearest's; searched through the
    connection ``con``. A missing key with none is left out.

    Raises:
        duckdb.Error: the index cannot be read as one.
    """
    asked = list(dict.fromkeys(missing))[:NEAR_FOR]
    if count <= 0 or not asked:
        return {}
    ranges = con.execute(RANGES, [path]).fetchall()
    lows = sorted(low for low, _ in ranges if low is not None)
    highs = sorted(high for _, high in ranges if high is not None)
    around = {}
    for key in asked:
        at, past = bisect.bisect_left(lows, key), bisect.bisect_right(highs, key)
        below = _search(con, BELOW, path, key, lows[at - 2] if at >= 2 else None, ">=")
        above = _search(
            con, ABOVE, path, key, highs[past + 1] if past + 1 < len(highs) else None, "<="
        )
        around[key] = below + above
    foldered = any("/" in k for keys in around.values() for k in keys)
    folded = _folded(con, path, asked) if foldered else {}
    found = {}
    for key in asked:
        ranked = _ranked(key, around[key], folded.get(key, []))[:count]
        if ranked:
            found[key] = tuple(ranked)
    return found


def _search(con, query: str, path: str, key: str, bound: str | None, sign: str) -> list[str]:
    """The ``NEIGHBOURS`` rows of ``query`` (``BELOW`` or ``ABOVE`` ``key``), searched
    between ``key`` and ``bound`` first (``sign``: the side the bound is on) — they are the
    nearest when that span holds as many — else over every row."""
    if bound is not None:
        rows = con.execute(query.format(f" AND key {sign} $3", NEIGHBOURS), [path, key, bound])
        found = [r[0] for r in rows.fetchall()]
        if len(found) == NEIGHBOURS:
            return found
    rows = con.execute(query.format("", NEIGHBOURS), [path, key])
    return [r[0] for r in rows.fetchall()]


def _folded(con, path: str, keys: list[str]) -> dict[str, list[str]]:
    """For each of ``keys``, up to ``FOLDED`` keys of the index that are it under a folder
    (``…/key``): one pass over the key column."""
    columns = ", ".join(
        f"min(key, {FOLDED}) FILTER (WHERE ends_with(key, '/' || ${at}))"
        for at in range(2, len(keys) + 2)  # $1 is the path, $2… the keys
    )
    row = con.execute(f"SELECT {columns} FROM read_parquet($1)", [path, *keys]).fetchone()
    return {key: list(row[i] or []) if row else [] for i, key in enumerate(keys)}


def _ranked(key: str, neighbours: list[str], folded: list[str]) -> list[str]:
    """``folded`` (the key under a folder), then ``neighbours`` by their ``difflib``
    ratio to ``key`` (at least ``CUTOFF``, and within ``WITHIN`` of the highest), highest
    first; each key once."""
    scored = {}
    for candidate in neighbours:
        if candidate not in scored:
            matcher = difflib.SequenceMatcher(None, key, candidate)
            scored[candidate] = matcher.ratio()
    best = max(scored.values(), default=0.0)
    least = max(CUTOFF, best - WITHIN)
    close = sorted((k for k, r in scored.items() if r >= least), key=lambda k: (-scored[k], k))
    return list(dict.fromkeys([*sorted(folded), *close]))
