"""Member names that may clash on extraction, found by the column engine over a whole listing.

The extraction check (:func:`ishard.planning.naming.check_extraction_names`) refuses member names
that cannot be extracted as distinct files into one folder. Run in Python over ten million
names it takes seconds; here the engine narrows it down while the listing is still in it.
Each listed file's member name (its own name, or ``<sample key>.<extension>`` for a built-in
key pattern) is folded as the check folds it — lower case in SQL for plain ASCII names, the
check's own Python function for the rest — and the engine marks every file that could take
part in a clash: a folded name another file shares (by 64-bit hash, so the odd hash
collision only adds a suspect), a name another name needs as a directory, and the names
below it, a path part over 255 bytes. The planned members are a subset of the listed files
and each one's member name depends on its own name alone, so any clash among them is among
the suspects; the check then looks at the suspects only, and finds exactly what it would
have found over all the names.
"""

from __future__ import annotations

from array import array

from ...names import MEMBER_NAME
from ..extraction import BELOW, FOLD, FOLDER, FOLDERS, LONG_PART, fold_names
from ..handover import Clashes
from .connection import hint_failed, sql_hash

ODD_SHARE = 4  # one name in this many folded in Python (or ODD_ANYWAY), else the check is whole
ODD_ANYWAY = 1 << 16
CONFLICTS_MAX = 1 << 16  # names that are also directories looked into, at most

# ``<sample key>.<extension>`` member names, of a key in SQL (``{}``)
_RENAMED = (
    "SELECT rowid AS f, "
    + MEMBER_NAME.over(key="{}", name="name").replace("{}", "{0}")
    + " AS m FROM files"
)


def find_clashes(con, key_sql: str | None, count: int) -> Clashes | None:
    """The files of the engine's ``files`` table (``count`` rows) whose member names may
    clash: original names, or with ``key_sql`` (a built-in pattern's key in SQL)
    ``<key>.<extension>``. None when too many names need folding in Python for this to pay,
    or when the engine fails at it (out of memory or disk): the check then looks at every
    name itself."""
    import duckdb

    try:
        return _clashes(con, key_sql, count)
    except duckdb.Error as error:
        hint_failed("mark the member names that may clash", error)
        return None
    finally:
        _drop(con)


def _clashes(con, key_sql: str | None, count: int) -> Clashes | None:
    folded = _folded_members(con, key_sql, count)
    if folded is None:
        return None
    _repeated_hashes(con, folded)
    suspects = _fetched_positions(
        con, "SELECT f FROM hashes WHERE h IN (SELECT h FROM repeated WHERE twice)"
    )
    files_as_directories = _fetched_positions(
        con, "SELECT f FROM hashes WHERE h IN (SELECT h FROM repeated WHERE folder)"
    )
    if len(files_as_directories) > CONFLICTS_MAX:
        return None
    if files_as_directories:
        suspects += files_as_directories
        suspects += _below(con, folded, files_as_directories)
    suspects += _fetched_positions(con, f"SELECT f FROM members WHERE {LONG_PART.over(name='m')}")
    return Clashes(key_sql is not None, array("q", sorted(set(suspects))))


def _folded_members(con, key_sql: str | None, count: int) -> str | None:
    """The tables ``members`` (each file's member name, and whether it is plain ASCII) and
    ``odd`` (the others folded in Python); the query of every member name folded, or None when
    too many of ``count`` names are not plain to fold them one by one."""
    named = "SELECT rowid AS f, name AS m FROM files" if key_sql is None else _RENAMED
    con.execute(  # a table, not a view: each name's member name is worked out once
        f"CREATE TEMP TABLE members AS SELECT f, m, {FOLD.answered(name='m')} AS plain "
        f"FROM ({named.format(key_sql)})"
    )
    odd = con.execute("SELECT count(*) FROM members WHERE NOT plain").fetchone()[0]
    if odd > max(count // ODD_SHARE, ODD_ANYWAY):
        return None
    con.execute("CREATE TEMP TABLE odd (f BIGINT, folded VARCHAR)")
    if odd:
        rows = con.execute("SELECT f, m FROM members WHERE NOT plain").fetchnumpy()
        con.execute(
            "INSERT INTO odd SELECT unnest($1::BIGINT[]), unnest($2::VARCHAR[])",
            [rows["f"].tolist(), fold_names(rows["m"].tolist())],
        )
        del rows
    return (
        f"(SELECT f, {FOLD.over(name='m')} AS folded FROM members WHERE plain "
        "UNION ALL SELECT f, folded FROM odd)"
    )


def _repeated_hashes(con, folded: str) -> None:
    """The tables ``hashes`` (each file's folded member name hashed) and ``repeated`` (a hash
    met before: ``twice`` for another file's, ``folder`` for a folder's)."""
    con.execute(f"CREATE TEMP TABLE hashes AS SELECT f, {sql_hash('folded')} AS h FROM {folded}")
    _directories(con)
    # sorted, then compared with the row before: a sort spills, where a hash table of tens
    # of millions of folder hashes (a join's, a DISTINCT's, a GROUP BY's) runs out of memory
    con.execute(
        "CREATE TEMP TABLE by_hash AS SELECT h, file FROM (SELECT h, true AS file FROM hashes "
        "UNION ALL SELECT h, false FROM directories) ORDER BY h, file"  # folders first
    )
    con.execute("DROP TABLE directories")
    con.execute(
        "CREATE TEMP TABLE repeated AS SELECT h, before_file AS twice, NOT before_file AS folder "
        "FROM (SELECT h, file, lag(h) OVER () AS before, lag(file) OVER () AS before_file "
        "FROM by_hash) WHERE file AND h = before"
    )
    con.execute("DROP TABLE by_hash")


def _directories(con) -> None:
    """The table ``directories``: hashes of every folder the folded member names need,
    parents included (some more than once). Folded folder by folder (folding a name folds its
    folder too: NFC does not compose across a '/', lower case goes a character at a time)."""
    con.execute(  # the files are in name order: most repeats of a folder are neighbours
        "CREATE TEMP TABLE parents AS SELECT d FROM (SELECT d, lag(d) OVER () AS before FROM "
        f"(SELECT {FOLDER.over(name='m')} AS d FROM members)) "
        "WHERE d IS DISTINCT FROM before"
    )
    plain = FOLD.answered(name="d")
    odd = con.execute(f"SELECT d FROM parents WHERE d <> '' AND NOT {plain}").fetchall()
    con.execute(
        f"CREATE TEMP TABLE folders AS SELECT {FOLD.over(name='d')} AS d FROM parents "
        f"WHERE d <> '' AND {plain} UNION ALL SELECT unnest($1::VARCHAR[])",
        [fold_names([d for (d,) in odd])],
    )
    con.execute("DROP TABLE parents")
    con.execute(  # each folder's: a folded name's folder is never absolute (FOLDERS' where)
        f"CREATE TEMP TABLE directories AS SELECT {sql_hash('p')} AS h FROM "
        f"(SELECT unnest({FOLDERS.over(folder='d')}) AS p FROM folders)"
    )
    con.execute("DROP TABLE folders")


def _below(con, folded: str, files: list[int]) -> list[int]:
    """The files whose folded names lie below one of these files' folded names."""
    con.execute("CREATE TEMP TABLE conflicts (f BIGINT)")
    con.execute("INSERT INTO conflicts SELECT unnest($1::BIGINT[])", [files])
    con.execute(
        "CREATE TEMP TABLE prefixes AS SELECT folded AS p "
        f"FROM {folded} WHERE f IN (SELECT f FROM conflicts)"
    )
    below = _fetched_positions(
        con,
        f"SELECT DISTINCT n.f FROM {folded} AS n JOIN prefixes "
        f"ON {BELOW.over(name='n.folded', folder='p')}",
    )
    con.execute("DROP TABLE prefixes")
    con.execute("DROP TABLE conflicts")
    return below


def _fetched_positions(con, query: str) -> list[int]:
    return con.execute(query).fetchnumpy()["f"].tolist()


def _drop(con) -> None:
    for table in (
        *("members", "odd", "hashes", "parents", "folders", "directories", "by_hash"),
        *("repeated", "prefixes", "conflicts"),
    ):
        con.execute(f"DROP TABLE IF EXISTS {table}")
