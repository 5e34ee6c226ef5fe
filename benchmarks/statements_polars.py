"""Planning's statements in Polars' streaming engine, each pass from and to Parquet files (see
``bench_statements.py``, which runs it)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from functools import partial

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


def child(inventory: str, tmp: str, cap: float | None) -> None:
    """The statements over ``inventory``, intermediate files in a folder of ``tmp``."""
    import polars as pl

    out = Statements(cap)
    folder = tempfile.mkdtemp(prefix="polars-", dir=tmp)
    at = {name: os.path.join(folder, f"{name}.parquet") for name in ("files", "by_key", "runs")}
    bytewise = pl.Series(["b", "B", "é", "e", "_", "Z", "~", "a/b", "a.b"])
    if bytewise.sort().to_list() != sorted(bytewise.to_list(), key=str.encode):
        sys.exit("polars does not sort text bytewise")
    source = pl.scan_parquet(inventory).select(
        pl.col("name").fill_null(""),
        pl.col("size").cast(pl.String),
        pl.col("mtime").cast(pl.String),
    )
    with out.timed("checks"):
        _polars_checks(pl, source.with_row_index("rn"))
    with out.timed("sort"):
        listed, repeated = _polars_sort(pl, source, at["files"])
    files = (
        pl.scan_parquet(at["files"]).with_row_index("f").with_columns(pl.col("f").cast(pl.Int64))
    )
    out.answers["sort"] = [repeated, *_polars_sorted_sums(pl, files)]
    with out.timed("clashes"):
        out.answers["clashes"] = _polars_clashes(pl, files, folder)
    with out.timed("group"):
        findings = _polars_group(pl, files, listed, at)
    out.answers["group"] = [False, *findings, *_polars_runs_sums(pl, at["runs"])]
    with out.timed("layout"):
        laid = os.path.join(folder, "laid.parquet")
        _polars_layout(pl, at["by_key"], laid)
    with out.timed("read-out"):
        columns = spooled_columns(folder, laid, at["runs"], at["files"])
    out.answers["read-out"] = [weighted(spooled(path, kind)) for path, kind in columns]
    out.answers["names"] = names_digest(batches(at["files"], "name"))
    out.printed()
    shutil.rmtree(folder, ignore_errors=True)


def _polars_checks(pl, rows) -> None:
    """One pass: the rows ishard's engine refuses, odd mtimes, rows left out, skipped rows."""
    name, size, mtime = pl.col("name"), pl.col("size"), pl.col("mtime")
    bad = (name.str.len_chars() > 131072) | ~(
        size.is_not_null()
        & size.str.contains(r"^[0-9]{1,19}$")
        & ~((size.str.len_bytes() == 19) & (size > "9223372036854775807"))
    )
    whole = mtime.is_null() | (mtime == "") | mtime.str.contains(r"^[0-9]{1,15}$")
    keep = name.str.starts_with("") & ~((name == "") | name.str.ends_with("/"))
    why = (
        pl.when((name == "") | name.str.contains(UNSAFE))
        .then(pl.lit("unsafe"))
        .when(name.str.starts_with(".") | name.str.contains("/.", literal=True))
        .then(pl.lit("hidden"))
    )
    skip = pl.when(~keep).then(None).otherwise(why).alias("skip")
    reasons = []
    for reason in ("unsafe", "hidden"):
        hit = pl.col("skip") == reason
        reasons += [
            hit.sum().alias(f"{reason}s"),
            name.filter(hit).bottom_k_by(pl.col("rn").filter(hit), 5).implode().alias(reason),
            pl.col("rn").filter(hit).min().alias(f"{reason}_first"),
        ]
    found = (
        rows.with_columns(skip)
        .select(
            bad.sum().alias("bad"),
            (~whole).sum().alias("odd"),
            (~keep).sum().alias("out"),
            *reasons,
        )
        .collect(engine="streaming")
    )
    if found["bad"][0] or found["odd"][0] or found["out"][0] or found["unsafes"][0]:
        sys.exit(f"this benchmark takes a clean inventory: {found.row(0)}")


def _polars_sort(pl, source, path: str) -> tuple[int, int]:
    """The listing sorted bytewise (stable: inventory order among equal names), each name once."""
    mtime = pl.col("mtime")
    source.select(
        "name",
        pl.col("size").cast(pl.Int64),
        pl.when(mtime.is_null() | (mtime == ""))
        .then(0)
        .otherwise(mtime.cast(pl.Int64))
        .alias("mtime"),
    ).sort("name", maintain_order=True).sink_parquet(path, engine="streaming")
    again = pl.col("name") == pl.col("name").shift(1)
    repeated = pl.scan_parquet(path).select(again.sum()).collect(engine="streaming").item()
    if repeated:
        first = pl.scan_parquet(path).filter(pl.col("name").ne_missing(pl.col("name").shift(1)))
        first.sink_parquet(path + ".once", engine="streaming")
        os.replace(path + ".once", path)
    listed = pl.scan_parquet(path).select(pl.len()).collect().item()
    return listed, repeated


def _polars_sorted_sums(pl, files) -> list[int]:
    rank = pl.col("f") + 1
    return list(
        files.select(
            pl.len(),
            pl.col("size").sum(),
            (((rank * pl.col("size")) % P).sum() % P).alias("by_size"),
            (((rank * pl.col("name").str.len_bytes().cast(pl.Int64)) % P).sum() % P).alias(
                "by_name"
            ),
        )
        .collect(engine="streaming")
        .row(0)
    )


def _hashed(pl, *texts):
    """A 64-bit hash of the texts: Polars' own (DuckDB's hashes the reversed texts too, as its
    hash of a text alone gives ImageNet-like names one value; Polars' ``str.reverse`` would
    cost 13 s a pass over 10M names)."""
    return pl.struct(*(t.alias(f"t{i}") for i, t in enumerate(texts))).hash()


def _plain(text):
    """extraction.FOLD's ``where``: folded by lower case alone."""
    return (
        (text.str.len_bytes() == text.str.len_chars())
        & ~text.str.contains("//", literal=True)
        & ~text.str.contains("./", literal=True)
        & ~text.str.ends_with("/")
        & ~text.str.ends_with("/.")
    )


def _base(name):
    """A name's basename (DuckDB's parse_filename): after its last '/'."""
    return name.str.split("/").list.last()


def _folder(name, base):
    """A name's folder (DuckDB's parse_dirpath): before its last '/', '' for none (a regex
    that says so, ``^(.*)/[^/]*$``, costs Polars 26 s over 10M names)."""
    return name.str.strip_suffix(base).str.strip_suffix("/")


def _polars_clashes(pl, files, folder: str) -> list[int]:
    """Files whose folded names another file shares or a folder needs, or with a long part."""
    m = pl.col("name")
    if files.select((~_plain(m)).sum()).collect(engine="streaming").item():
        sys.exit("names that fold past lower case: ishard folds them in Python")
    hashes = os.path.join(folder, "hashes.parquet")
    files.select("f", _hashed(pl, m.str.to_lowercase()).alias("h")).sink_parquet(
        hashes, engine="streaming"
    )
    d = pl.col("d")
    parents = files.select(_folder(m, _base(m)).alias("d")).filter(d.ne_missing(d.shift(1)))
    folders = parents.filter((d != "") & _plain(d)).select(d.str.to_lowercase())
    if parents.filter((d != "") & ~_plain(d)).select(pl.len()).collect(engine="streaming").item():
        sys.exit("folders that fold past lower case: ishard folds them in Python")
    parts = pl.col("parts")
    directories = (
        folders.with_columns(d.str.split("/").alias("parts"))
        .with_columns(pl.int_ranges(1, parts.list.len() + 1).alias("i"))
        .explode("i")
        .select(_hashed(pl, parts.list.head(pl.col("i")).list.join("/")).alias("h"))
    )
    h, file = pl.col("h"), pl.col("file")
    repeated = (
        pl.concat(
            [
                pl.scan_parquet(hashes).select("h", pl.lit(True).alias("file")),
                directories.select("h", pl.lit(False).alias("file")),
            ]
        )
        .sort("h", "file")  # folders first
        .with_columns(h.shift(1).alias("before"), file.shift(1).alias("twice"))
        .filter(file & (h == pl.col("before")))
        .select("h", "twice")
        .collect(engine="streaming")
    )
    if not repeated["twice"].all():
        sys.exit("files that name a folder: ishard then looks below them")
    suspects = pl.scan_parquet(hashes).join(repeated.lazy(), on="h", how="semi").select("f")
    long = files.filter(
        (m.str.len_bytes() > 255)
        & (m.str.split("/").list.eval(pl.element().str.len_bytes()).list.max() > 255)
    ).select("f")
    found = pl.concat([suspects, long]).unique().sort("f").collect(engine="streaming")
    return found["f"].to_list()


def _polars_group(pl, files, listed: int, at: dict[str, str]) -> list:
    """The files sorted by sample key with their reader keys and flags, the key check's
    findings, and each key's run (``runs``, by first file: key, start, files, bytes)."""
    name, f, k = pl.col("name"), pl.col("f"), pl.col("key")
    base = _base(name)
    key = base.str.replace(r"\.[^.]*$", "")  # the base_file_name key
    every = max(1, listed // (2048 * 32))  # columns._in_a_row's look at 32 runs of files
    low = (
        files.filter((f // 2048) % every == 0)
        .select(key.alias("key"))
        .select((k < k.shift(1)).sum())
    )
    if not low.collect(engine="streaming").item():
        sys.exit("samples in a row: this benchmark takes samples apart (the imagenet shape)")
    dot = (base.str.find(".", literal=True) + 1).fill_null(0)  # SQL's instr
    stem = pl.when(dot == 0).then(base).otherwise(base.str.slice(0, dot - 1))
    flags = ((dot > 1) & base.str.slice(dot).str.contains(".", literal=True)).cast(pl.Int8) + 2 * (
        dot <= 1
    ).cast(pl.Int8)
    files.select(
        "f",
        key.alias("key"),
        "size",
        _hashed(pl, _folder(name, base), stem).alias("rk"),
        flags.alias("flags"),
    ).sort("key", "f").sink_parquet(at["by_key"], engine="streaming")
    new = k.ne_missing(k.shift(1))
    hits = os.path.join(os.path.dirname(at["by_key"]), "hits.parquet")
    rk = pl.col("rk")
    pl.scan_parquet(at["by_key"]).select(
        pl.when(new).then(f).forward_fill().alias("run"),
        (pl.col("flags") + 4 * (~new & (rk != rk.shift(1))).cast(pl.Int8)).alias("code"),
    ).filter(pl.col("code") != 0).sink_parquet(hits, engine="streaming")
    findings = reader_findings(hits, partial(_keys_of, pl, at["by_key"]))
    total = files.select(pl.col("size").sum()).collect(engine="streaming").item()
    pos, csum = pl.col("pos"), pl.col("csum")
    pl.scan_parquet(at["by_key"]).with_row_index("pos").with_columns(
        pos.cast(pl.Int64), (pl.col("size").cum_sum() - pl.col("size")).alias("csum")
    ).filter(new).select(
        "key",
        "pos",
        "f",
        (pos.shift(-1, fill_value=listed) - pos).alias("files"),
        (csum.shift(-1, fill_value=total) - csum).alias("bytes"),
    ).sort("f").sink_parquet(at["runs"], engine="streaming")
    folders = pl.scan_parquet(at["runs"]).select(k.str.contains("/", literal=True).sum())
    return [folders.collect(engine="streaming").item(), findings]


def _keys_of(pl, by_key: str, files: list[int]) -> dict[int, str]:
    keys = pl.scan_parquet(by_key).filter(pl.col("f").is_in(files)).select("f", "key")
    return dict(keys.collect().rows())


def _polars_runs_sums(pl, runs: str) -> list[int]:
    rank = pl.col("i").cast(pl.Int64) + 1
    return list(
        pl.scan_parquet(runs)
        .with_row_index("i")
        .select(
            pl.len(),
            (((rank * pl.col("pos")) % P).sum() % P).alias("by_pos"),
            (((rank * pl.col("key").str.len_bytes().cast(pl.Int64)) % P).sum() % P).alias("by_key"),
        )
        .collect(engine="streaming")
        .row(0)
    )


def _polars_layout(pl, by_key: str, laid: str) -> None:
    """The files laid out run after run: sorted by their sample's first file, then their own."""
    k, f = pl.col("key"), pl.col("f")
    first = pl.when(k.ne_missing(k.shift(1))).then(f).forward_fill().alias("first")
    pl.scan_parquet(by_key).select("f", "size", first).sort("first", "f").select(
        "f", "size"
    ).sink_parquet(laid, engine="streaming")
