"""The whole plan through the column engine against the whole plan through the row reader.

The engine (``ishard.planning.engine.columns``) does more than list: it groups files by a built-in key
pattern, marks the files whose member names may clash on extraction, decides whether every
file can be named ``<key>.<extension>``, and hands the key check each file's reader key. Each
of those only narrows or replaces work the planner does over the row reader's listing, so
the same inventory with the same options must give the same plan — shards, samples, files,
member names, skipped files, warnings — or the same error, option for option.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import warnings
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from unittest import mock
from urllib.parse import quote_plus

import pytest
from helpers import s3_csv_report, s3_orc_report, s3_parquet_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ishard import api
from ishard.errors import IshardError
from ishard.formats import ARCHIVE_EXTS
from ishard.options.table import EXECUTION_ONLY
from ishard.planning import inventory, samples
from ishard.planning.engine import columns, connection
from ishard.planning.keys import BUILT_IN
from ishard.planning.namecolumn import SpooledBlob
from ishard.planning.record import plan_record
from ishard.planning.table import ShardList

FOLDERS = ["a", "b", "img", "n01", "a.x", "A", "é", "İ", "sp ace", ".hid"]
STEMS = ["s1", "s2", "s3", "S1", "a", "a.b", "i̇", "É", ".dot", "s1.tar"]
EXTS = [".jpg", ".JPG", ".cls", ".xml", ".json", ".tar.gz", "", ".x", ".é"]
ODD = [
    "../up",
    "/abs",
    "a/../b",
    "a//b.jpg",
    "./c.jpg",
    "a/",
    "x" * 256 + "/s1.jpg",
    "b/" + "x" * 252 + ".jpg",
    "b/" + "x" * 250 + ".jpg",
]  # unsafe, folder, parts too long


def names(stems: list[str], exts: list[str]) -> st.SearchStrategy[str]:
    return st.tuples(
        st.lists(st.sampled_from(FOLDERS), max_size=3),
        st.sampled_from(stems),
        st.sampled_from(exts),
    ).map(lambda t: "/".join([*t[0], t[1] + t[2]]))


def rows(stems: list[str], exts: list[str]) -> st.SearchStrategy[list[tuple[str, int, int]]]:
    """Inventory rows, sometimes with one odd name among them."""
    row = st.tuples(names(stems, exts), st.integers(0, 5000), st.integers(0, 2 * 10**9))
    return st.builds(
        lambda body, odd, at: body[:at] + ([(odd, 10, 0)] if odd else []) + body[at:],
        st.lists(row, min_size=4, max_size=40),
        st.sampled_from([None] * 3 + ODD),
        st.integers(0, 40),
    )


# half of the listings with names every reader and --member-names sample take as they are
inventories = rows(STEMS, EXTS) | rows(STEMS[:5], EXTS[:5])

EKM = {"fish-%d": ["^a/", "s2"], "rest-%d": [".*"]}


@st.composite
def plan_options(draw) -> dict:
    """Options of every kind, mostly in combinations the tool accepts."""
    options = draw(
        st.fixed_dictionaries(
            {
                "sample_key_pattern": st.sampled_from([*BUILT_IN, r"^(.*?)\.", r"([^/]*)$"]),
                "collapse": st.booleans(),
                "sort": st.sampled_from([None, "alpha:inc", "alpha:dec", "shuffle:7"]),
                "member_names": st.sampled_from(["original", "sample"]),
                "shard_template": st.sampled_from(["shard-%06d", "part-{00..99}"]),
                "ext": st.sampled_from(ARCHIVE_EXTS),
                "include_hidden": st.booleans(),
                "prefix": st.sampled_from(["", "", "", "a"]),
                "strict": st.sampled_from([False, False, True]),
            },
            optional={
                "sample_exts": st.sampled_from([".jpg,.cls", ".JPG", ".xml,.json"]),
                "missing_extension_action": st.sampled_from(["ignore", "warn", "exclude", "abort"]),
            },
        )
    )
    how = draw(
        st.sampled_from(["size", "count", "both", "num_shards", "multiple_of", "ekm", "default"])
    )
    if how in ("size", "both", "multiple_of", "ekm"):
        options["shard_size"] = draw(st.sampled_from(["1KiB", "5000B", "20KB", "1MiB"]))
    if how in ("count", "both"):
        options["samples_per_shard"] = draw(st.integers(1, 4))
    if how == "num_shards":
        options["num_shards"] = draw(st.integers(1, 4))
    if how == "multiple_of":
        options["shards_multiple_of"] = draw(st.integers(2, 3))
    if how == "ekm":
        options["ekm"] = EKM
    # names alike but for case or Unicode form: refused (the default), or a warning of the plan
    options["lookalike_names"] = draw(st.sampled_from(["refuse", "warn", "warn"]))
    return options


def write_inventory(path, body) -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["name", "size", "mtime"])
    writer.writerows(body)
    path.write_text(out.getvalue(), encoding="utf-8")


SOURCES = ("csv", "csv.gz", "jsonl.gz", "s3-csv", "s3-parquet", "s3-orc")


def write_source(folder, kind: str, body) -> Path:
    """The inventory of ``body`` (name, size, mtime) as ``kind``: a CSV file with a header,
    it or JSON Lines gzip'ed, or an AWS S3 Inventory report in CSV or Parquet."""
    folder.mkdir(parents=True)
    if kind == "s3-csv":
        lines = [["bkt", quote_plus(name, safe="/"), size, aws_time(mtime), "STANDARD"]
                 for name, size, mtime in body]  # fmt: skip
        return s3_csv_report(folder, lines)
    if kind in ("s3-parquet", "s3-orc"):
        write = s3_parquet_report if kind == "s3-parquet" else s3_orc_report
        return write(folder, [(n, z, aws_time(t)[:-1]) for n, z, t in body])
    path = folder / f"inventory.{kind}"
    if kind == "csv":
        write_inventory(path, body)
        return path
    if kind == "csv.gz":
        write_inventory(folder / "plain.csv", body)
        text = (folder / "plain.csv").read_bytes()
    else:
        text = "".join(
            json.dumps({"name": n, "size": z, "mtime": t}) + "\n" for n, z, t in body
        ).encode()
    path.write_bytes(gzip.compress(text))
    return path


def aws_time(seconds: int) -> str:
    """``seconds`` since 1970 as an S3 Inventory report writes a time."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def planner_named(planner: str):
    """The inventory's planner chosen by name, ``engine`` or ``rows``, while the block runs."""
    return mock.patch.dict(os.environ, {inventory.PLANNER: planner})


def outcome(src, path, options: dict, planner: str):
    """The plan (as plain values, with the fingerprints a resumed run compares) or the error of
    ``ishard.plan`` over the inventory, read by the planner named (``engine`` or ``rows``); over
    ``src`` itself when ``path`` is None."""
    saved = samples.NUMPY_FROM
    # through the engine, samples are also gathered with numpy (narrow columns) as for a big
    # listing; through the row reader, one at a time
    samples.NUMPY_FROM = 0 if planner == "engine" else 1 << 62
    try:
        with warnings.catch_warnings(), planner_named(planner):
            warnings.simplefilter("ignore")
            plan = api.plan(str(src), src_list=path and str(path), **options)
        fingerprint = hashlib.sha256()
        if isinstance(plan.shards, ShardList):
            plan.shards.digest(fingerprint.update)
        return (
            "plan",
            list(plan.shards),
            plan.shard_names,
            plan.shard_sizes,
            plan.skipped,
            plan.warnings,
            plan.seed,
            (fingerprint.hexdigest(), json.dumps(plan_record(plan, EXECUTION_ONLY), default=str)),
            json.dumps(plan.options, sort_keys=True, default=str),
        )
    except IshardError as error:
        return ("error", type(error).__name__, str(error))
    finally:
        samples.NUMPY_FROM = saved


def test_engine_plans_as_the_row_reader(tmp_path, monkeypatch):
    """On random inventories and options the two readers give one plan (or one error), from
    every source the engine reads (CSV, gzip'ed CSV and JSON Lines, S3 Inventory reports in
    CSV, Parquet and ORC); most of the examples go through the engine (not handed back), many end
    in a plan of several shards."""
    src = tmp_path / "src"
    src.mkdir()
    seen: Counter[str] = Counter()
    real = columns.read_inventory

    def watched(*args, **kwargs):
        try:
            found = real(*args, **kwargs)
        except connection.Fallback:
            seen["handed back"] += 1
            raise
        seen["engine"] += 1
        table = found[0]
        for hint in ("grouping", "clashes", "renamable_by", "readers"):
            if getattr(table.handover, hint) is not None:
                seen[hint] += 1
        return found

    monkeypatch.setattr(columns, "read_inventory", watched)

    @settings(
        max_examples=400,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(body=inventories, options=plan_options())
    def same_plan(body, options):
        # each source in turn: every one meets as many examples, whatever the draws
        source = SOURCES[sum(seen[s] for s in SOURCES) % len(SOURCES)]
        seen[source] += 1
        path = write_source(tmp_path / f"example-{sum(seen.values())}", source, body)
        by_engine = outcome(src, path, options, "engine")
        by_rows = outcome(src, path, options, "rows")
        assert by_engine == by_rows
        seen[by_engine[0]] += 1
        if by_engine[0] == "plan" and len(by_engine[2]) > 1:
            seen["shards"] += 1

    same_plan()
    # the comparison means something only if the engine did the listing and many plans had
    # shards to compare (the rest end in an error of the naming checks, or of the options,
    # also compared), with every hint the engine gives taken at least sometimes
    assert seen["engine"] > 5 * seen["handed back"], seen
    assert seen["shards"] > 50, seen
    for hint in ("grouping", "clashes", "renamable_by", "readers"):
        assert seen[hint] > 10, seen


@pytest.mark.parametrize("member_names", ["original", "sample"])
def test_look_alike_names_are_one_warning_through_both_readers(tmp_path, member_names):
    """Names that differ only in case or Unicode form, under --lookalike-names warn (the Go
    spelling's default): the same plan with the same warning through the engine and the row
    reader, every file planned; refused alike without it; and a real clash still refused."""
    src = tmp_path / "src"
    src.mkdir()
    body = [
        ("A/x.jpg", 10, 0),
        ("a/x.jpg", 11, 0),
        ("b/caf\u00e9.jpg", 12, 0),
        ("b/cafe\u0301.jpg", 13, 0),
        ("d/K.d", 14, 0),
        ("d/k.d/y.jpg", 15, 0),
    ]
    path = tmp_path / "inventory.csv"
    write_inventory(path, body)
    options = {"member_names": member_names, "sample_key_pattern": "full_name"}
    warned = outcome(src, path, {**options, "lookalike_names": "warn"}, "engine")
    assert warned == outcome(src, path, {**options, "lookalike_names": "warn"}, "rows")
    assert warned[0] == "plan", warned
    files = sorted(f.name for shard in warned[1] for f in shard.members())
    assert files == sorted(n for n, _, _ in body)
    alike = [w for w in warned[5] if "differ only in case or Unicode form" in w]
    assert len(alike) == 1 and alike[0].startswith("3 pairs of member names"), warned[5]
    refused = outcome(src, path, options, "engine")
    assert refused == outcome(src, path, options, "rows")
    assert refused[:2] == ("error", "DataError") and "would extract to one file" in refused[2]
    write_inventory(path, [*body, ("a//x.jpg", 16, 0)])
    for planner in ("engine", "rows"):
        clash = outcome(src, path, {**options, "lookalike_names": "warn"}, planner)
        assert clash[0] == "error" and "repeated slashes" in clash[2], clash


@pytest.mark.parametrize("pattern", BUILT_IN)
def test_engine_groups_a_bigger_listing_as_the_row_reader(tmp_path, pattern):
    """Thousands of files, samples spread over folders and written unsorted: one plan."""
    src = tmp_path / "src"
    src.mkdir()
    body = []
    for i in range(6000):
        folder = ("a", "b/c", "d_e")[i % 2500 % 3]
        for ext in (".jpg", ".cls") if i % 7 else (".jpg",):
            body.append((f"{folder}/{i % 2500:05d}{ext}", 100 + i % 900, i))
    body.reverse()
    path = tmp_path / "inventory.csv"
    write_inventory(path, body)
    for member_names in ("original", "sample"):
        options = {
            "sample_key_pattern": pattern,
            "shard_size": "64KiB",
            "member_names": member_names,
        }
        by_engine = outcome(src, path, options, "engine")
        assert by_engine[0] == "plan" and len(by_engine[2]) > 10, by_engine[:3]
        assert by_engine == outcome(src, path, options, "rows")


def tree_and_inventory(root, path, body) -> None:
    """The files of ``body`` on disk under ``root`` (the last of a repeated name wins, as in a
    listing) and the inventory that lists them, a folder's name never also a file's."""
    files: dict[str, tuple[int, int]] = {}
    for name, size, mtime in body:
        if any(name.startswith(f + "/") for f in files) or any(
            f.startswith(name + "/") for f in files
        ):
            continue
        files[name] = (size, mtime)
    for name, (size, mtime) in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"x" * size)
        os.utime(target, (mtime, mtime))
    write_inventory(path, [(name, size, mtime) for name, (size, mtime) in files.items()])


def test_engine_plans_an_inventory_as_the_tree_it_lists(tmp_path_factory):
    """A dataset on disk and an inventory of it, read by the engine: one plan — the listing a
    user takes from an object store's inventory shards the data as a walk of it would."""
    trees = rows(STEMS[:7], EXTS[:6]).map(
        lambda body: [
            (n, s % 300, m)
            for n, s, m in body
            if "//" not in n
            and "/." not in n
            and not n.startswith((".", "/"))
            and ".." not in n
            and not n.endswith("/")
            and len(n) < 250
        ]
    )

    @settings(
        max_examples=75,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(body=trees, options=plan_options())
    def same_plan(body, options):
        where = tmp_path_factory.mktemp("tree")
        src, path = where / "src", where / "inventory.csv"
        src.mkdir()
        tree_and_inventory(src, path, body)
        walked = outcome(src, None, options, "engine")
        listed = outcome(src, path, options, "engine")
        # all but the options, which name the inventory, and the fingerprints, which hold the
        # files' inodes when walked
        assert walked[:-2] == listed[:-2]
        seen[walked[0] if walked[0] == "error" or len(walked[2]) < 2 else "shards"] += 1

    seen: Counter[str] = Counter()
    same_plan()
    assert seen["shards"] > 5, seen


@pytest.mark.parametrize(("sort", "member_names"), [(None, "sample"), ("shuffle:3", "original")])
def test_a_run_over_an_inventory_the_engine_read_writes_what_the_row_reader_would(
    tmp_path, sort, member_names
):
    """A real run whose names wait in the engine, then in a file a shard is read from at a
    time (by forked writers here), writes the shards the row reader's run writes: the same
    members, bytes and mtimes, and the same manifest."""
    import tarfile

    src, path = tmp_path / "src", tmp_path / "inventory.csv"
    src.mkdir()
    body = [(f"{folder}/s{i:04d}.{ext}", (i * 37) % 900, 1_600_000_000 + i)
            for i in range(300) for folder, ext in (("img", "jpg"), ("cls", "cls"))]  # fmt: skip
    tree_and_inventory(src, path, body)
    runs = {}
    for planner in ("engine", "rows"):
        dst = tmp_path / f"out-{planner}"
        with planner_named(planner):
            report = api.shard(str(src), str(dst), src_list=str(path), shard_size="20KiB",
                               sort=sort, member_names=member_names, jobs=2)  # fmt: skip
        spooled = isinstance(report.plan.shards.listing.names._blob, SpooledBlob)
        assert spooled == (planner == "engine")  # the engine's names were read from their file
        shards = {}
        for result in report.results:
            with tarfile.open(dst / result.name) as tar:
                shards[result.name] = [(m.name, m.mtime, tar.extractfile(m).read())
                                       for m in tar.getmembers()]  # fmt: skip
        manifest = json.loads((dst / "manifest.json").read_text())
        runs[planner] = shards, manifest["shardlist"], manifest["ishard"]["fingerprint"]
    by_engine, by_rows = runs["engine"], runs["rows"]
    assert len(by_engine[0]) > 5 and by_engine == by_rows


@pytest.mark.parametrize("planner", ["engine", "rows"])
@pytest.mark.parametrize("change", ["name", "size", "mtime"])
def test_the_fingerprint_changes_with_any_members_name_size_or_mtime(tmp_path, planner,
                                                                     change):  # fmt: skip
    """An inventory lists no inode or ETag, so a resumed run knows its files by name, size and
    mtime alone: change any one of them for one file, and the fingerprint a resume compares
    changes (the engine's listing and the row reader's alike)."""
    from ishard.run.state import fingerprint

    body = [(f"img/s{i:03d}.{ext}", 100 + i, 1_700_000_000 + i)
            for i in range(40) for ext in ("jpg", "cls")]  # fmt: skip
    name, size, mtime = body[33]
    changed = dict(enumerate(body))
    changed[33] = {
        "name": (name.replace("s016", "s016b"), size, mtime),
        "size": (name, size + 1, mtime),
        "mtime": (name, size, mtime + 1),
    }[change]
    prints = []
    for rows in (body, list(changed.values())):
        path = tmp_path / "inventory.csv"  # one path: the options are the same
        write_inventory(path, rows)
        with planner_named(planner):
            planned = api.plan(str(tmp_path), src_list=str(path), shard_size="1KiB")
            prints.append(fingerprint(planned))
    assert prints[0] != prints[1]
