"""The keys a sample index holds nearest to keys it does not hold (``ishard find``'s
suggestions), found in one pass of the column engine over the index's key column.

The engine keeps, for each missing key, the ``NEIGHBOURS`` rows just below it and just above
it in key order (those that share the longest start with it: a typo at the end, a key cut
short or given with its extension) and the keys that are it under a folder (the folder left
out); only those reach Python, where ``difflib`` ranks them. The pass holds a few keys a
missing key, whatever the size of the index: the keys are never loaded whole."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

NEIGHBOURS = 64  # index rows kept on either side of a missing key (a sample's members repeat it)
FOLDED = 8  # rows kept of keys that are the missing key under a folder
NEAR_FOR = 3  # missing keys given near keys: each costs three comparisons a row
CUTOFF = 0.6  # the least difflib ratio of a near key (difflib.get_close_matches's own)
WITHIN = 0.1  # and at most this far below the nearest one's: a few alike, not a long tail


def near_keys(con, path: str, missing: Sequence[str], count: int) -> dict[str, tuple[str, ...]]:
    """Up to ``count`` keys of the index at ``path`` nearest to each of the first
    ``NEAR_FOR`` of ``missing`` (keys it does not hold), nearest first: a key that is the
    missing one under a folder, then the neighbours in key order whose ``difflib``
    ratio is at least ``CUTOFF`` and within ``WITHIN`` of the nearest's; one pass of the connection ``con`` over the key column. A
    missing key with none is left out.

    Raises:
        duckdb.Error: the index cannot be read as one.
    """
    asked = list(dict.fromkeys(missing))[:NEAR_FOR]
    if count <= 0 or not asked:
        return {}
    columns = []
    for at in range(2, len(asked) + 2):  # $1 is the path, $2… the missing keys
        columns += [
            f"max(key, {NEIGHBOURS}) FILTER (WHERE key < ${at})",
            f"min(key, {NEIGHBOURS}) FILTER (WHERE key > ${at})",
            f"min(key, {FOLDED}) FILTER (WHERE ends_with(key, '/' || ${at}))",
        ]
    query = f"SELECT {', '.join(columns)} FROM read_parquet($1)"
    row = con.execute(query, [path, *asked]).fetchone()
    found = {}
    for i, key in enumerate(asked):
        below, above, folded = (row[3 * i + j] or [] for j in range(3)) if row else ([],) * 3
        ranked = _ranked(key, [*below, *above], folded)[:count]
        if ranked:
            found[key] = tuple(ranked)
    return found


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
