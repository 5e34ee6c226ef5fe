"""Planning's statements in DataFusion's SQL, under a memory pool of DuckDB's limit that spills
to a folder, each pass from and to Parquet files (see ``bench_statements.py``, which runs it).

DataFusion has no ``rowid`` and keeps no order a window of ``OVER ()`` could rely on, so each
table carries its position (``f`` in the listing, ``pos`` in the files by key) and windows are
ordered by it; and its SQL has no 64-bit hash of a text, so the clash hints and the reader keys
compare the texts themselves (exact, where a hash only narrows)."""

from __future__ import annotations

import os
import shutil
import tempfile

from statements_common import (
    UNSAFE,
    P,
    Statements,
    batches,
    names_digest,
    reader_findings,
    spooled,
    spooled_columns,
    weighted,
)

MEMORY = 512 << 20  # ishard's engine: MEMORY_LIMIT
KEEP = "starts_with(name, '') AND NOT (name = '' OR ends_with(name, '/'))"
PLAIN = (  # extraction.FOLD's where, of {0}
    "(octet_length({0}) = character_length({0}) AND strpos({0}, '//') = 0 AND "
    "strpos({0}, './') = 0 AND NOT ends_with({0}, '/') AND NOT ends_with({0}, '/.'))"
)
FOLDER = "CASE WHEN strpos({0}, '/') = 0 THEN '' ELSE regexp_replace({0}, '/[^/]*$', '') END"
BASE = "regexp_replace(name, '^.*/', '')"
NEW = "key IS DISTINCT FROM lag(key) OVER (ORDER BY pos)"
# the file that starts the run of each row (last_value(...) IGNORE NULLS over the rows so far
# took DataFusion 26 s for 200,000 rows): the run's start is the greatest start so far, and
# carries its first file in the low 32 bits
FIRST = (
    "max(CASE WHEN new THEN pos * 4294967296 + f END) OVER (ORDER BY pos ROWS UNBOUNDED "
    "PRECEDING) % 4294967296"
)


def child(inventory: str, tmp: str, cap: float | None) -> None:
    """The statements over ``inventory``, spilling and writing to a folder of ``tmp``."""
    from datafusion import RuntimeEnvBuilder, SessionConfig, SessionContext

    out = Statements(cap)
    folder = tempfile.mkdtemp(prefix="datafusion-", dir=tmp)
    config = SessionConfig().with_target_partitions(2).with_repartition_file_scans(False)
    runtime = RuntimeEnvBuilder().with_disk_manager_specified(folder).with_fair_spill_pool(MEMORY)
    ctx = SessionContext(config, runtime)
    ctx.register_parquet("inventory", inventory)
    at = {name: os.path.join(folder, f"{name}.parquet") for name in ("files", "by_key", "runs")}

    def copied(query: str, name: str) -> None:
        path = os.path.join(folder, f"{name}.parquet")
        ctx.sql(f"COPY ({query}) TO '{path}' STORED AS PARQUET").collect()
        ctx.register_parquet(name, path)

    def one(query: str) -> list:
        return list(ctx.sql(query).to_pylist()[0].values())

    ctx.sql(
        "CREATE VIEW raw AS SELECT row_number() OVER () - 1 AS rn, coalesce(name, '') AS name, "
        "CAST(size AS VARCHAR) AS size, CAST(mtime AS VARCHAR) AS mtime FROM inventory"
    ).collect()
    with out.timed("checks"):
        _checks(one)
    with out.timed("sort"):
        copied(
            "SELECT row_number() OVER (ORDER BY name, rn) - 1 AS f, name, CAST(size AS BIGINT) "
            "AS size, CASE WHEN mtime IS NULL OR mtime = '' THEN 0 ELSE CAST(mtime AS BIGINT) "
            "END AS mtime FROM raw ORDER BY f",
            "files",
        )
        repeated = one(
            "SELECT count(*) FROM (SELECT name = lag(name) OVER (ORDER BY f) AS again "
            "FROM files) WHERE again"
        )[0]
        if repeated:
            raise SystemExit("this benchmark takes an inventory of names listed once")
    out.answers["sort"] = [repeated, *one(SORTED_SUMS)]
    listed = out.answers["sort"][1]
    with out.timed("clashes"):
        out.answers["clashes"] = _clashes(ctx, one, copied)
    with out.timed("group"):
        findings = _group(ctx, one, copied, listed, folder)
    out.answers["group"] = [False, *findings, *one(RUNS_SUMS)]
    with out.timed("layout"):
        copied(
            f"SELECT f, size FROM (SELECT f, size, {FIRST} AS first FROM (SELECT pos, f, size, "
            f"{NEW} AS new FROM by_key)) ORDER BY first, f",
            "laid",
        )
    with out.timed("read-out"):
        laid = os.path.join(folder, "laid.parquet")
        columns = spooled_columns(folder, laid, at["runs"], at["files"])
    out.answers["read-out"] = [weighted(spooled(path, kind)) for path, kind in columns]
    out.answers["names"] = names_digest(batches(at["files"], "name"))
    out.printed()
    shutil.rmtree(folder, ignore_errors=True)


SORTED_SUMS = (
    f"SELECT count(*), sum(size), sum(((f + 1) * size) % {P}) % {P}, "
    f"sum(((f + 1) * octet_length(name)) % {P}) % {P} FROM files"
)
RUNS_SUMS = (
    f"SELECT count(*), sum(((i + 1) * pos) % {P}) % {P}, "
    f"sum(((i + 1) * octet_length(key)) % {P}) % {P} "
    "FROM (SELECT row_number() OVER (ORDER BY f) - 1 AS i, pos, key FROM runs)"
)


def _checks(one) -> None:
    """One pass: rows the engine refuses, odd mtimes, rows left out, skipped rows."""
    why = (
        f"CASE WHEN NOT ({KEEP}) THEN NULL WHEN name = '' OR regexp_like(name, '{UNSAFE}') THEN "
        "'unsafe' WHEN starts_with(name, '.') OR strpos(name, '/.') > 0 THEN 'hidden' END"
    )
    reasons = ", ".join(
        f"count(*) FILTER (WHERE skip = '{r}'), array_agg(name ORDER BY rn) FILTER (WHERE skip "
        f"= '{r}'), min(rn) FILTER (WHERE skip = '{r}')"
        for r in ("unsafe", "hidden")
    )
    found = one(
        "SELECT count(*) FILTER (WHERE NOT (character_length(name) <= 131072) OR NOT (size IS "
        "NOT NULL AND regexp_like(size, '^[0-9]{1,19}$') AND NOT (octet_length(size) = 19 AND "
        "size > '9223372036854775807'))), count(*) FILTER (WHERE NOT (mtime IS NULL OR mtime = "
        "'' OR regexp_like(mtime, '^[0-9]{1,15}$'))), "
        f"count(*) FILTER (WHERE NOT ({KEEP})), {reasons} "
        f"FROM (SELECT rn, name, size, mtime, {why} AS skip FROM raw)"
    )
    if any(found[:4]):
        raise SystemExit(f"this benchmark takes a clean inventory: {found}")


def _clashes(ctx, one, copied) -> list[int]:
    """Files whose folded names another file shares or a folder needs, or with a long part."""
    if one(f"SELECT count(*) FROM files WHERE NOT {PLAIN.format('name')}")[0]:
        raise SystemExit("names that fold past lower case: ishard folds them in Python")
    ctx.sql("CREATE VIEW hashes AS SELECT f, lower(name) AS h FROM files").collect()
    folder = FOLDER.format("name")
    copied(
        f"SELECT lower(d) AS d FROM (SELECT d, lag(d) OVER (ORDER BY f) AS before FROM (SELECT "
        f"f, {folder} AS d FROM files)) WHERE (d IS DISTINCT FROM before) AND d <> ''",
        "folders",
    )
    if one(f"SELECT count(*) FROM folders WHERE NOT {PLAIN.format('d')}")[0]:
        raise SystemExit("folders that fold past lower case: ishard folds them in Python")
    ctx.sql(
        "CREATE VIEW directories AS SELECT array_to_string(array_slice(parts, 1, i), '/') AS h "
        "FROM (SELECT parts, unnest(range(1, CAST(array_length(parts) AS BIGINT) + 1)) AS i FROM "
        "(SELECT string_to_array(d, '/') AS parts FROM folders))"
    ).collect()
    copied(
        "SELECT h, before_file AS twice FROM (SELECT h, file, lag(h) OVER (ORDER BY h, file) AS "
        "before, lag(file) OVER (ORDER BY h, file) AS before_file FROM (SELECT h, true AS file "
        "FROM hashes UNION ALL SELECT h, false FROM directories)) WHERE file AND h = before",
        "repeated",
    )
    if one("SELECT count(*) FROM repeated WHERE NOT twice")[0]:
        raise SystemExit("files that name a folder: ishard then looks below them")
    suspects = ctx.sql("SELECT f FROM hashes WHERE h IN (SELECT h FROM repeated)").to_pylist()
    long = ctx.sql("SELECT f, name FROM files WHERE octet_length(name) > 255").to_pylist()
    long = [r for r in long if max(len(p.encode()) for p in r["name"].split("/")) > 255]
    return sorted({r["f"] for r in suspects} | {r["f"] for r in long})


def _group(ctx, one, copied, listed: int, folder: str) -> list:
    """The files by sample key with their reader keys and flags, the key check's findings,
    and each key's run (``runs``, by first file: key, start, files, bytes)."""
    key = f"regexp_replace({BASE}, '\\.[^.]*$', '')"
    every = max(1, listed // (2048 * 32))
    if not one(
        "SELECT count(*) FROM (SELECT key < lag(key) OVER (ORDER BY f) AS low FROM (SELECT f, "
        f"{key} AS key FROM files WHERE (f / 2048) % {every} = 0)) WHERE low"
    )[0]:
        raise SystemExit("samples in a row: this benchmark takes samples apart (imagenet)")
    copied(
        "SELECT row_number() OVER (ORDER BY key, f) - 1 AS pos, f, key, size, "
        f"{FOLDER.format('name')} || '/' || stem AS rk, flags FROM (SELECT f, key, size, name, "
        "CASE WHEN dot = 0 THEN base ELSE left(base, dot - 1) END AS stem, CAST(dot > 1 AND "
        "strpos(substr(base, dot + 1), '.') > 0 AS TINYINT) + 2 * CAST(dot <= 1 AS TINYINT) AS "
        f"flags FROM (SELECT *, strpos(base, '.') AS dot FROM (SELECT f, {key} AS key, size, "
        f"name, {BASE} AS base FROM files))) ORDER BY pos",
        "by_key",
    )
    copied(
        f"SELECT pos, run, code FROM (SELECT pos, {FIRST} AS run, flags + 4 * CAST(NOT new AND "
        "rk <> before AS TINYINT) AS code FROM (SELECT pos, f, rk, flags, "
        f"{NEW} AS new, lag(rk) OVER (ORDER BY pos) AS before FROM by_key)) WHERE code <> 0 "
        "ORDER BY pos",
        "hits",
    )

    def keys_of(files: list[int]) -> dict[int, str]:
        listed_files = ", ".join(map(str, files or [-1]))
        rows = ctx.sql(f"SELECT f, key FROM by_key WHERE f IN ({listed_files})").to_pylist()
        return {r["f"]: r["key"] for r in rows}

    findings = reader_findings(os.path.join(folder, "hits.parquet"), keys_of)
    total = one("SELECT sum(size) FROM files")[0]
    copied(
        f"SELECT key, pos, f, lead(pos, 1, {listed}) OVER (ORDER BY pos) - pos AS files, "
        f"lead(before, 1, {total}) OVER (ORDER BY pos) - before AS bytes FROM (SELECT key, pos, "
        "f, new, sum(size) OVER (ORDER BY pos ROWS UNBOUNDED PRECEDING) - size AS before FROM "
        f"(SELECT key, pos, f, size, {NEW} AS new FROM by_key)) WHERE new ORDER BY f",
        "runs",
    )
    folders = one("SELECT count(*) FROM runs WHERE strpos(key, '/') > 0")[0]
    return [folders, findings]
