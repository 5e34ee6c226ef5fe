"""Exact duplicates among the files of a listing the column engine read (``--duplicates``):
files of one size and one checksum or ETag (``ident``), the first of each by name kept —
as ``planning.duplicates.among`` finds them for the row reader's listings. One aggregation
finds the groups; only when there are some are the copies named (a join with the groups)."""

from __future__ import annotations

from ...model import EXAMPLES_KEPT, Duplicates

_GROUPS = (  # each size and checksum that two or more files share, and its first file
    "CREATE TEMP TABLE duplicate_groups AS SELECT size, ident, min(rowid) AS first, "
    "count(*) AS files FROM files WHERE ident IS NOT NULL GROUP BY size, ident "
    "HAVING count(*) > 1"
)
_COPIES = (  # each file past its group's first, in listing order, with the first's name
    "SELECT f.rowid AS pos, f.name, h.name AS first FROM files f JOIN duplicate_groups g "
    "USING (size, ident) JOIN files h ON h.rowid = g.first WHERE f.rowid <> g.first ORDER BY pos"
)


def found(con, by: str, drop: bool) -> Duplicates:
    """The duplicates among ``files`` (its column ``ident``); with ``drop``, ``files`` is
    made anew without the copies (positions stay one a file: ``rowid`` is each file's)."""
    con.execute(_GROUPS)
    groups, copies, nbytes = con.execute(
        "SELECT count(*), coalesce(sum(files - 1), 0), coalesce(sum(size * (files - 1)), 0) "
        "FROM duplicate_groups"
    ).fetchone()
    pairs: list[tuple[str, str]] = []
    if copies:
        named = con.execute(_COPIES if drop else f"{_COPIES} LIMIT {EXAMPLES_KEPT}").fetchall()
        pairs = [(name, first) for _, name, first in named]
    if drop and copies:
        con.execute(
            "CREATE TEMP TABLE kept AS SELECT name, size, mtime FROM files WHERE rowid NOT IN "
            "(SELECT f.rowid FROM files f JOIN duplicate_groups g USING (size, ident) "
            "WHERE f.rowid <> g.first) ORDER BY rowid"
        )
        con.execute("DROP TABLE files")
        con.execute("ALTER TABLE kept RENAME TO files")
    con.execute("DROP TABLE duplicate_groups")
    return Duplicates(by, int(groups), int(copies), int(nbytes), drop, tuple(pairs))
