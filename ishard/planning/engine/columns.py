"""Planning's column engine (DuckDB): an inventory read, filtered and sorted as columns,
without Python work per row.

An inventory the engine takes as it is (a local CSV file with a header, or a Parquet file) is
read, checked, filtered (prefix, hidden and unsafe names, folder markers), sorted bytewise,
stripped of repeated names and, for a built-in key pattern, grouped into samples in DuckDB,
under a memory limit past which DuckDB spills to a temporary folder. Anything it cannot take
as it is — a line the CSV reader refuses, a size that is not plain digits, a carriage return —
goes back to the row reader (:mod:`ishard.planning.inventory`), which names the offending line; so both
readers give the same listing or the same error.
"""

from __future__ import annotations

import csv
import itertools
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from typing import Any, BinaryIO, TypedDict

from ...errors import DataError
from ...model import EXAMPLES_KEPT, Tally
from ...names import (
    EXTENSION,
    FOLDER_MARKER,
    NAME_ORDER,
    SKIP_REASON,
    SKIP_REASONS,
    UNDER_PREFIX,
)
from ...sizes import describe_size
from ...store import Location
from ..cut import IN_A_FOLDER
from ..duplicates import by_column
from ..handover import NOTHING, Grouping, Handover, ReaderFindings
from ..intcolumn import Positions, SpooledInts
from ..keys import PATTERNS, KeyFunction
from ..namecolumn import NARROW_MAX, Names
from ..naming import EXT_FOLD, MEMBER_KEY
from ..rowrules import MTIME_TEXT, NAME_FITS, SIZE_TEXT, mtime_seconds
from ..table import FileTable
from . import MEMORY_LIMIT, connection, duplicates, parquet, readerkeys, selects
from .clashes import find_clashes
from .connection import Fallback

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

DISTINCT_TIMES = 1 << 20  # non-numeric mtimes converted by the row reader's rule, at most

# the row reader's rules, in SQL (``rowrules``): an mtime it reads as the whole number it is; a row the engine does not take — a name too long,
# a size that is not plain digits of at most 2^63-1 (the row reader takes ' 3' and '003', and
# names what is wrong with the others)
_WHOLE_SECONDS = MTIME_TEXT.answered(mtime="mtime")
_BAD_ROW = f"NOT {NAME_FITS.over(name='name')} OR NOT {SIZE_TEXT.answered(size='size')}"
_IN_A_FOLDER = IN_A_FOLDER.over(key="key")


# the sample keys of the built-in patterns (keys.sample_keys) in SQL, by key function
_KEY_SQL = {p.key: p.sql for p in PATTERNS}


# Before samples are sought in a row, the keys of 32 runs of 2,048 files spread over the
# listing are looked at: whole vectors of the engine, so it reads no other file's name
SAMPLED_RUN, SAMPLED_RUNS = 2048, 32


class EngineReading(TypedDict, total=False):
    """How the engine reads an inventory, besides what it keeps: where it spills
    (``tmp_dir``) and past how many bytes (``memory_limit``), the run's key function
    (``key``), whether members are named ``<key>.<extension>`` (``renamed``) and what is done
    of files whose checksums are the same (``duplicates``, ``--duplicates``' value)."""

    tmp_dir: str | None
    memory_limit: int | None
    key: KeyFunction | None
    renamed: bool
    duplicates: str


def read_inventory(
    path: str,
    kind: str | selects.Inventory,
    *,
    wanted: str | None,
    include_hidden: bool,
    tally: Tally,
    opener: Callable[[str], BinaryIO] | None = None,
    **reading: Unpack[EngineReading],
) -> tuple[FileTable, int]:
    """The listing an inventory names (filtered, sorted bytewise, repeated names dropped, the
    first kept) and its byte total; what the engine found of it is the table's ``handover``:
    with a built-in pattern's ``key``, its samples too (``grouping``); the files whose member
    names may clash on extraction (``clashes``: for ``<key>.<extension>`` names when
    ``renamed``, if ``key`` is built in). The engine holds up to ``memory_limit`` bytes
    (``MEMORY_LIMIT`` when None), then spills to a private folder in ``tmp_dir``;
    ``spilled`` is the most that folder held, the inventory's files fetched from a store
    (through ``opener``) included. ``kind``: what ``selects.describe`` found at ``path`` (the
    name messages give it), or the kind of the one local file there, uncompressed.

    Raises:
        Fallback: the row reader must read it (and say what is wrong, if anything is).
        UsageError: a Parquet inventory without name and size columns.
        DataError: the engine ran out of memory under ``memory_limit``, or of disk space.
    """
    tmp_dir, key = reading.get("tmp_dir"), reading.get("key")
    renamed = reading.get("renamed", False)
    import duckdb

    on_disk = Location.local_path(path)
    path = path if on_disk is None else on_disk
    inventory = selects.Inventory(kind, (path,)) if isinstance(kind, str) else kind
    spill = tempfile.mkdtemp(prefix="ishard-spill-", dir=tmp_dir)  # this run's own, private
    memory_limit = reading.get("memory_limit") or MEMORY_LIMIT
    con = connection.connect(spill, memory_limit)
    watch = connection.SpillWatch(spill)
    local = inventory
    try:
        with watch:
            local = selects.fetched(inventory, spill, opener)
            read = selects.as_given(inventory, local, lambda: selects.source(con, local))
            mode = reading.get("duplicates", "off")
            column = read.identity if mode != "off" else None
            con.execute(  # a checksum as 16 bytes (its MD5), not as text: it is only compared
                "CREATE TEMP TABLE raw AS SELECT coalesce(name, '') AS name, size, mtime"
                f"{', md5_number(ident) AS ident' if column else ''} FROM ({read.sql})"
            )
            built_in = key if key in _KEY_SQL else None
            dupes = None if column is None else (by_column(column), mode == "drop")
            handed, sizes, total = _listing(
                con, (wanted, include_hidden, tally), built_in, renamed, watch, dupes
            )
        # the key check's reader keys, cut when it asks (not where the engine did the check)
        found = handed.grouping is not None and handed.grouping.findings is not None
        readers = None if renamed or found else readerkeys.READER_KEYS
        handed = replace(handed, spilled=watch.most)
        return connection.leave_waiting(con, spill, sizes, handed, readers), total  # theirs now
    except duckdb.OutOfMemoryException as error:  # not the row reader: it takes far more
        connection.close(con, spill)
        raise _out_of_room(path, memory_limit, tmp_dir, error) from None
    except (duckdb.Error, UnicodeDecodeError, csv.Error, Fallback) as error:
        refused, failed = None, error
        if inventory.kind == "parquet":
            refused = selects.as_given(
                inventory, local, lambda: parquet.refusal(con, local.files[0], failed, _BAD_ROW)
            )
        connection.close(con, spill)
        if refused is not None:  # no row reader reads Parquet: the engine names the row
            raise refused from None
        raise Fallback from None  # the row reader says what is wrong, naming the line
    except BaseException:
        connection.close(con, spill)
        raise


def _out_of_room(path: str, memory_limit: int, tmp_dir: str | None, error) -> DataError:
    """What the engine ran out of: its spill folder's disk, or its memory."""
    if "max_temp_directory_size" in str(error):  # DuckDB's own bound: what that disk has left
        return DataError(
            f"--src-list {path!r} needs more room for the column engine's temporary files "
            f"than the disk of {tmp_dir or tempfile.gettempdir()!r} has left — give --tmp-dir "
            "a folder on a disk with more room"
        )
    return DataError(
        f"--src-list {path!r} needs more memory than the column engine's "
        f"{describe_size(memory_limit)} (--memory-limit) to be read — give it more, "
        "e.g. --memory-limit 1GiB"
    )


def _listing(
    con,
    kept: tuple[str | None, bool, Tally],
    key: KeyFunction | None,
    renamed: bool,
    watch: connection.SpillWatch,
    dupes: tuple[str, bool] | None,
) -> tuple[Handover, SpooledInts, int]:
    """What the engine found of the listing (a ``Handover``), its sizes (spooled: none held)
    and their total. ``kept``: the prefix wanted, whether hidden names are, the tally of what
    is not; ``dupes``: what tells duplicates alike, and whether they are dropped (None: they
    are not looked for)."""
    wanted, include_hidden, tally = kept
    keep, skip = _kept_sql(wanted, include_hidden)
    odd, left_out, skipped = _checked_rows(con, keep, skip, tally)
    if dupes is not None:
        duplicates.kept_aside(con, f"({keep}) AND ({skip}) IS NULL")
    _sorted_files(con, (keep if left_out else None, skip if skipped else None), odd, watch)
    found = None if dupes is None else duplicates.found(con, *dupes)
    handed = replace(_handover(con, key, renamed, watch.folder), duplicates=found)
    total, *bounds = con.execute(
        "SELECT coalesce(sum(size), 0), min(size), max(size) FROM files"
    ).fetchone()
    sizes = connection.int_fetched(con, "size", watch.folder, bounds=(bounds[0], bounds[1]))
    return handed, sizes, total  # the names wait in the engine (read_inventory)


def _kept_sql(wanted: str | None, include_hidden: bool) -> tuple[str, str]:
    """SQL of the rows under the prefix ``wanted`` (``keep``) and of why a row is skipped
    (``skip``: NULL, 'unsafe' or 'hidden')."""
    keep = (  # no prefix any name can have (None): none kept, but every row still checked
        f"{UNDER_PREFIX.over(name='name', prefix=connection.sql_text(wanted))} AND NOT "
        f"{FOLDER_MARKER.over(name='name')}"
        if wanted is not None
        else "false"
    )
    why = SKIP_REASON.over(name="name", include_hidden=str(include_hidden).lower())
    return keep, f"CASE WHEN NOT ({keep}) THEN NULL ELSE {why} END"


def _checked_rows(con, keep: str, skip: str, tally: Tally) -> tuple[bool, bool, bool]:
    """One pass over ``raw``: falls back on a bad row, tallies what is skipped; whether an
    mtime has a fraction, a row is left out by ``keep``, a row is skipped."""
    reasons = SKIP_REASONS
    skipped = ", ".join(  # for each reason: how many, the first few, where the first is
        f"count(*) FILTER (WHERE skip = '{why}'), min_by(name, rn, {EXAMPLES_KEPT}) FILTER "
        f"(WHERE skip = '{why}'), min(rn) FILTER (WHERE skip = '{why}')"
        for why in reasons
    )
    bad, odd, left_out, *tallied = con.execute(  # one pass: checks, what is skipped
        f"SELECT count(*) FILTER (WHERE {_BAD_ROW}), count(*) FILTER (WHERE NOT "
        f"{_WHOLE_SECONDS}), count(*) FILTER (WHERE NOT ({keep})), "
        f"{skipped} "
        f"FROM (SELECT rowid AS rn, name, size, mtime, {skip} AS skip FROM raw)"
    ).fetchone()
    if bad:
        raise Fallback  # the row reader names the line (for Parquet: the engine, read_inventory)
    found = sorted(
        (first, why, count, examples)
        for why, (count, examples, first) in zip(reasons, zip(*[iter(tallied)] * 3))
        if count
    )
    for _, why, count, examples in found:  # in the order each reason first turns up
        tally.add_many(reasons[why], count, examples)
    return bool(odd), bool(left_out), bool(found)


def _sorted_files(
    con,
    filters: tuple[str | None, str | None],
    odd: bool,
    watch: connection.SpillWatch,
) -> None:
    """The table ``files`` from ``raw``: the rows ``keep`` keeps (None: all) and ``skip`` does
    not skip (None: none skipped), sorted by name, each name once (its first row)."""
    keep, skip = filters
    seconds = MTIME_TEXT.over(mtime="mtime")
    when = (  # every mtime whole seconds or none (the common case): cast, no pattern per row
        f"CASE WHEN {_WHOLE_SECONDS} THEN {seconds} ELSE {_odd_times(con)} END" if odd else seconds
    )
    kept = [keep] if keep is not None else []  # a sort under a filter took 2.7x as long at 100M
    kept += [f"({skip}) IS NULL"] if skip is not None else []  # nothing skipped: no pattern per row
    con.execute(
        f"CREATE TEMP TABLE files AS SELECT name, {SIZE_TEXT.over(size='size')} AS size, "
        f"{when} AS mtime FROM raw {'WHERE ' + ' AND '.join(kept) if kept else ''} "
        f"ORDER BY {NAME_ORDER.over(name='name')}, rowid"
    )
    watch.look()  # the listing twice, sorted and not: what is past the limit is on disk now
    con.execute("DROP TABLE raw")
    repeated = con.execute(
        "SELECT count(*) FROM (SELECT name = lag(name) OVER () AS again FROM files) WHERE again"
    ).fetchone()[0]
    if repeated:  # the first of each name stays (the rows are in name, then file order)
        con.execute(
            "CREATE TEMP TABLE listed AS SELECT * FROM files "
            "QUALIFY lag(name) OVER () IS DISTINCT FROM name"
        )
        con.execute("DROP TABLE files")
        con.execute("ALTER TABLE listed RENAME TO files")


def _handover(con, key: KeyFunction | None, renamed: bool, folder: str) -> Handover:
    """What the engine tells the planner of ``files``: member names that may clash, whether
    the key renames them without a clash, the samples' grouping (its columns spooled to files
    with no name in ``folder``)."""
    handed = NOTHING
    listed = con.execute("SELECT count(*) FROM files").fetchone()[0]
    if not renamed or key is not None:
        members_key = _KEY_SQL[key] if renamed and key is not None else None
        handed = replace(handed, clashes=find_clashes(con, members_key, listed))
    # no member name <key>.<extension> that may clash: no two files of a key with one
    # extension in any case either (their member names would fold to one)
    unrepeated = handed.clashes is not None and not handed.clashes.files
    if renamed and key is not None and not unrepeated and _renamable(con, _KEY_SQL[key]):
        handed = replace(handed, renamable_by=key)
    # last: the keys wait in the engine, and the naming hints need room
    runs = _group(con, key, listed, not renamed) if key is not None else None
    if runs is not None and renamed and unrepeated and _renamable(con, None):
        handed = replace(handed, renamable_by=key)
    if key is not None and runs is not None:
        handed = replace(handed, grouping=_grouping(con, key, listed, runs, folder))
    connection.fetching(con)  # the rest waits on disk
    return handed


Found = tuple[bool, int, ReaderFindings | None]  # what ``_group`` found


def _group(con, key: KeyFunction, count: int, readers: bool) -> Found:
    """The samples of ``files`` (``count`` rows) by a built-in key pattern, as runs of files:
    each key's first file and the key (``runs``, in order of first appearance); and whether
    every sample's files are in a row (``_in_a_row``), and how many keys hold a '/'. Samples
    apart, the files are sorted by key, then listing position (``by_key``: sorting spills,
    where a hash join of ten million keys under the memory limit fails), and each key's run is
    found there; when the key check wants the files' reader keys (``readers``), it is done
    there too (``readerkeys.findings``), as the files of each sample are in a row."""
    folders = _in_a_row(con, _KEY_SQL[key], count)
    if folders is not None:
        return True, folders, None
    import duckdb

    rows = f"SELECT rowid AS f, {_KEY_SQL[key]} AS key, name, size FROM files"
    sort = "CREATE TEMP TABLE by_key AS SELECT f, key, size{} FROM ({}) ORDER BY key, f"
    findings = None
    if readers:  # sorted on its own: a window sorting it (OVER (ORDER BY key)) is 3x slower
        try:
            con.execute(sort.format(", rk, flags", readerkeys.with_reader_keys(rows)))
            findings = readerkeys.findings(con)
        except duckdb.Error as error:  # out of memory or disk: the planner checks the names
            connection.hint_failed("find what readers make of the names", error)
            con.execute("DROP TABLE IF EXISTS by_key")
            con.execute("DROP TABLE IF EXISTS reader_hits")
    if findings is None:
        con.execute(sort.format("", rows))
    con.execute(  # the windows go in the table's (key) order; runs by first file, as above
        f"CREATE TEMP TABLE runs AS SELECT key, pos, lead(pos, 1, {count}) OVER () - pos AS "
        "files FROM (SELECT f, key, pos FROM (SELECT f, key, row_number() OVER () - 1 AS pos, "
        "key IS DISTINCT FROM lag(key) OVER () AS new FROM by_key) WHERE new) ORDER BY f"
    )
    folders = con.execute(f"SELECT count(*) FROM runs WHERE {_IN_A_FOLDER}").fetchone()[0]
    return False, folders, findings


def _in_a_row(con, key_sql: str, count: int) -> int | None:
    """Whether each key's files follow each other in ``files`` with the keys rising along it
    (most listings: the key is the name without its extension): if so, its runs of files are
    in ``runs`` (one pass, no sort) and how many of their keys hold a '/' is returned, else
    None. Keys falling in ``SAMPLED_RUNS`` runs of files spread over the listing (the image
    and its label in two trees) say no at once."""
    every = max(1, count // (SAMPLED_RUN * SAMPLED_RUNS))  # one run of files in every
    if con.execute(
        "SELECT count(*) FROM (SELECT key < lag(key) OVER () AS low FROM (SELECT "
        f"{key_sql} AS key FROM files WHERE (rowid // {SAMPLED_RUN}) % {every} = 0)) WHERE low"
    ).fetchone()[0]:
        return None
    con.execute(  # a run: files in a row with one key; low: its key below the run's before
        "CREATE TEMP TABLE runs AS SELECT key, pos, key < before AS low FROM (SELECT pos, key, "
        f"lag(key) OVER () AS before FROM (SELECT rowid AS pos, {key_sql} AS key FROM files)) "
        "WHERE key IS DISTINCT FROM before"
    )
    falls, folders = con.execute(  # a key below the one before: a key in two runs, or may be
        f"SELECT count(*) FILTER (WHERE low), count(*) FILTER (WHERE {_IN_A_FOLDER}) FROM runs"
    ).fetchone()
    if falls:
        con.execute("DROP TABLE runs")
        return None
    return folders


def _grouping(con, key: KeyFunction, count: int, found: Found, folder: str) -> Grouping:
    """The samples ``_group`` found (``found``: its answer) as ``SampleTable`` holds them, in
    columns spooled to files with no name in ``folder`` a window at a time (none is held):
    where each sample's run of files starts, the files by sample (each sample's in listing
    order; samples in a row: the files themselves, ``Positions``), each sample's bytes. Samples
    apart, the engine lays the files out run after run (sorted by their sample's first file).
    The keys stay in ``runs`` (``connection.leave_waiting``)."""
    with connection.spooling(folder):
        return _laid_out(con, key, count, found, folder)


def _laid_out(con, key: KeyFunction, count: int, found: Found, folder: str) -> Grouping:
    import numpy as np

    in_a_row, folders, findings = found
    narrow = count <= NARROW_MAX  # positions: 4 bytes each up to 2**31 files
    samples = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    if in_a_row:  # the runs follow each other: the members are the files in listing order
        connection.fetching(con)
        firsts = connection.ints_of(con, "pos", "runs", samples, narrow=False)
        members: Any = Positions(count, "i" if narrow else "q")
        laid = "files"
    else:
        con.execute(  # each file after its sample's first one: the samples by first file
            "CREATE TEMP TABLE laid AS SELECT f, size FROM (SELECT f, size, last_value(CASE "
            "WHEN new THEN f END IGNORE NULLS) OVER (ROWS UNBOUNDED PRECEDING) AS first FROM "
            "(SELECT f, size, key IS DISTINCT FROM lag(key) OVER () AS new FROM by_key)) "
            "ORDER BY first, f"
        )
        con.execute("DROP TABLE by_key")
        connection.fetching(con)
        counts = connection.ints_of(con, "files", "runs", samples, narrow=False)
        firsts = _run_starts(counts)
        members = SpooledInts.written(
            connection.ints_of(con, "f", "laid", count, narrow), "i" if narrow else "q", folder
        )
        laid = "laid"
    starts = SpooledInts.written(
        itertools.chain(firsts, [np.array([count], dtype=np.int64)]), "q", folder
    )
    sizes = SpooledInts.written(_sample_sizes(con, laid, starts), "q", folder)
    if laid == "laid":
        con.execute("DROP TABLE laid")
    # the keys: connection.leave_waiting
    return Grouping(key, Names(), starts, members, sizes, not folders, findings)


def _run_starts(counts):
    """Where each run starts, given chunks of run lengths (numpy arrays) in order."""
    import numpy as np

    before = 0
    for chunk in counts:
        lengths = np.asarray(chunk, dtype=np.int64)
        ends = np.cumsum(lengths) + before
        yield ends - lengths
        if len(ends):
            before = int(ends[-1])


def _sample_sizes(con, table: str, starts: SpooledInts):
    """Each sample's bytes, a chunk of samples at a time: the sizes of ``table``'s rows (the
    files, run after run) summed over each run ``starts`` gives (runs are never empty)."""
    import numpy as np

    samples = len(starts) - 1
    step = connection.INTS_FETCHED
    for a in range(0, samples, step):
        first = starts.window(a, min(a + step, samples) + 1).astype(np.int64)
        sizes = con.execute(
            f"SELECT CAST(size AS BIGINT) AS v FROM {table} "
            f"WHERE rowid >= {int(first[0])} AND rowid < {int(first[-1])}"
        ).fetchnumpy()["v"]
        yield np.add.reduceat(sizes, first[:-1] - first[0], dtype=np.int64)


def _renamable(con, key_sql: str | None) -> bool:
    """Can every listed file be named ``<sample key>.<extension>`` (the checks of
    ``naming.sample_members``, over all the files)? Each key's basename is not empty and has
    no dot, ``<key>.x`` is a safe name, each file has an extension, in ASCII, and no two files
    of a sample have the same one in any case (by hash: a collision only answers no) — each
    file's key by ``key_sql``. Without it, the keys are the samples' (``runs``: once a sample,
    not a file) and the last check is left out: the caller knows no two member names can fold
    to one."""
    import duckdb

    bad_key = MEMBER_KEY.over(key="key")  # the keys of listed names: its ``where`` holds
    # no extension, or one whose lower case SQL may not fold as Python does
    no_ext = (
        f"NOT {EXTENSION.answered(name='name')} OR ext = '' OR NOT {EXT_FOLD.answered(ext='ext')}"
    )
    extensions = f"SELECT {{0}}, name, {EXTENSION.over(name='name')} AS ext FROM files"
    if key_sql is None:
        query = (
            f"SELECT (SELECT count(*) FILTER (WHERE {no_ext}) FROM ({extensions.format('rowid')}))"
            f" + (SELECT count(*) FILTER (WHERE {bad_key}) FROM runs), 0"
        )
    else:
        query = (
            f"SELECT count(*) FILTER (WHERE {bad_key} OR {no_ext}), count(*) - count(DISTINCT "
            f"{connection.sql_hash('key', EXT_FOLD.over(ext='ext'))}) FROM "
            f"({extensions.format(key_sql + ' AS key')})"
        )
    try:
        bad, twice = con.execute(query).fetchone()
    except duckdb.Error as error:  # out of memory or disk: the planner checks every sample
        connection.hint_failed("check the names for --member-names sample", error)
        return False
    return not bad and not twice


def _odd_times(con) -> str:
    """The SQL of an mtime that is neither digits nor empty, by the row reader's own function
    (once per distinct value)."""
    odd = con.execute(
        f"SELECT DISTINCT mtime FROM raw WHERE NOT {_WHOLE_SECONDS} LIMIT {DISTINCT_TIMES + 1}"
    ).fetchall()
    if len(odd) > DISTINCT_TIMES:
        raise Fallback
    con.execute("CREATE TEMP TABLE odd_times (text VARCHAR PRIMARY KEY, seconds BIGINT)")
    con.executemany(
        "INSERT INTO odd_times VALUES (?, ?)", [(text, mtime_seconds(text)) for (text,) in odd]
    )
    return "(SELECT seconds FROM odd_times WHERE text = mtime)"
