"""Exact duplicates among the files of a listing the column engine read (``--duplicates``):
files of one size and one checksum or ETag (``ident``), the first of each by name kept —
as ``planning.duplicates.among`` finds them for the row reader's listings.

The listing's ``raw`` rows carry each checksum as its MD5 (``md5_number``: 16 bytes, not the
text; two checksums are one where their MD5s are), and the checksums never ride through the
sort of the listing: before it, one aggregation of the rows kept, by size and checksum,
finds the groups of two or more, and only their rows are kept aside (``duplicate_rows``);
after it, each name is counted once (its first row, as the listing keeps it), and — with
``drop`` — the copies leave ``files``."""

from __future__ import annotations

from ...model import EXAMPLES_KEPT, Duplicates
from ...names import NAME_ORDER
from ..rowrules import SIZE_TEXT

# the rows (kept by ``{kept}``) whose size and checksum another row has too
_ROWS = """
CREATE TEMP TABLE duplicate_rows AS
WITH rows AS (SELECT rowid AS pos, name, {size} AS size, ident FROM raw
              WHERE ident IS NOT NULL AND {kept}),
     maybe AS (SELECT size, ident FROM rows GROUP BY ALL HAVING count(*) > 1)
SELECT pos, name, size, ident FROM rows SEMI JOIN maybe USING (size, ident)
"""
# of those, each name's first row (a repeated name's later rows are not in the listing)
_FIRSTS = """
CREATE TEMP TABLE duplicate_files AS
SELECT name, size, ident, count(*) OVER (PARTITION BY size, ident) AS files,
       row_number() OVER (PARTITION BY size, ident ORDER BY {order}) AS nth,
       first_value(name) OVER (PARTITION BY size, ident ORDER BY {order}) AS first
FROM (SELECT * FROM duplicate_rows r WHERE NOT EXISTS
      (SELECT 1 FROM raw WHERE raw.name = r.name AND raw.rowid < r.pos AND {kept}))
QUALIFY files > 1
"""


def kept_aside(con, kept: str) -> None:
    """Before ``raw`` is sorted into ``files``: the rows that may be duplicates, aside
    (``kept``: SQL of the rows the listing keeps)."""
    con.execute(_ROWS.format(size=SIZE_TEXT.over(size="size"), kept=kept))
    order = NAME_ORDER.over(name="name")
    con.execute(_FIRSTS.format(order=order, kept=kept))
    con.execute("DROP TABLE duplicate_rows")


def found(con, by: str, drop: bool) -> Duplicates:
    """The duplicates among the rows ``kept_aside`` found; with ``drop``, ``files`` is made
    anew without the copies (positions stay one a file: ``rowid`` is each file's)."""
    groups, copies, nbytes = con.execute(
        "SELECT count(*) FILTER (WHERE nth = 1), count(*) FILTER (WHERE nth > 1), "
        "coalesce(sum(size) FILTER (WHERE nth > 1), 0) FROM duplicate_files"
    ).fetchone()
    named = f"SELECT name, first FROM duplicate_files WHERE nth > 1 ORDER BY {_ORDER}"
    pairs = con.execute(named if drop else f"{named} LIMIT {EXAMPLES_KEPT}").fetchall()
    if drop and copies:
        con.execute(
            "CREATE TEMP TABLE kept AS SELECT * FROM files WHERE name NOT IN (SELECT name FROM "
            "duplicate_files WHERE nth > 1) ORDER BY rowid"
        )
        con.execute("DROP TABLE files")
        con.execute("ALTER TABLE kept RENAME TO files")
    con.execute("DROP TABLE duplicate_files")
    return Duplicates(by, int(groups), int(copies), int(nbytes), drop, tuple(pairs))


_ORDER = NAME_ORDER.over(name="name")
