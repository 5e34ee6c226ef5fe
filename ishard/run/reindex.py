"""``ishard index DST``: the sample index, DALI's and Energon's indexes for shards that exist.

For a dataset ishard wrote, they are made from its sample index (no shard byte read) and the
indexes asked for are added to its manifest's record, so that growth keeps them current. For
shards without one — written by another tool, or a dataset whose sample index is gone — the
sample index is read from the shards' member headers (``headerscan``) and a manifest is
written that lists them (a wids shard index, with ishard's record: its sample index marked as
read from headers, which growth refuses to compare a source with).

Everything is made in a private folder first and put in DST after: the indexes, the sample
index, the manifest last, under DST's lock (a run cannot write meanwhile)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import DataError, UsageError
from ..formats.dali_index import dali_index, index_name
from ..formats.indexes import (
    INDEXES,
    energon_split_value,
    index_value,
    indexes_of,
    split_parts,
)
from ..options.checks import check_energon_split
from ..options.record import default_workers
from ..planning.engine.connection import sql_text
from ..planning.engine.growth import MEMORY_LIMIT, create_index_table, private_engine
from ..progress import SILENT, Progress
from ..store import Location
from ..store.lockrecord import acquire
from ..store.retry import Retrier
from ..store.sinks import Guard, put_file
from ..version import __version__
from .energon import EnergonDataset, EnergonFiles
from .headerscan import checked_names, listed_shards, put_rows, scanned
from .indexrecords import IndexRecords, check_records
from .manifest import (
    MANIFEST_NAME,
    WIDS_HEADER,
    check_manifest,
    manifest_bytes,
    totals,
)
from .sampleindex import INDEX_NAME, fetch_index, publish_index
from .state import RunState

CLEANUP_RETRIES = 3
FROM_HEADERS = "shard headers"  # a sample index's ``made_from`` when read from the shards
PART_SIZE = 64 << 20
DALI_BATCH = 1 << 16  # index rows fetched at a time for DALI's indexes


@dataclass(frozen=True)
class Indexed:
    """What ``ishard index`` did: the shards, samples and members indexed, how many shards it
    read the headers of (0: the sample index was there), and the indexes DST now has."""

    destination: str
    shards: int
    samples: int
    members: int
    headers_read: int
    indexes: str
    manifest: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def index_dataset(
    dest: Location,
    wanted: str | None,
    shards: Sequence[str] | None,
    *,
    energon_split: str | None = None,
    resume: bool = False,
    jobs: int = 0,
    retries: int = 5,
    tmp_dir: str | None = None,
    memory_limit: int = MEMORY_LIMIT,
    progress: Progress = SILENT,
) -> Indexed:
    """Index the shards of DST (``shards``: names in it; None: its manifest's, else every tar
    under it) with the indexes ``wanted`` names (``--index``) and the sample index.

    Raises:
        UsageError: DST holds no shards, a run's records, or names given beside a manifest.
        DataError: a shard is missing or damaged; a manifest that is not one; two samples
            Energon keys alike.
    """
    retrier = Retrier(retries)
    dest.store.check_folder(dest.url, "give the folder or prefix that holds the shards")
    check_records(dest, resume)
    lock = acquire(dest, retrier)
    kept = [False]  # records of shards read are there: a stopped job keeps them
    try:
        done = _indexed(
            dest,
            wanted,
            shards,
            _Asked(energon_split, resume, jobs, tmp_dir, memory_limit),
            retrier,
            lock.guard,
            progress,
            kept,
        )
        kept[0] = False
        return done
    finally:
        if not kept[0]:
            with contextlib.suppress(Exception):
                RunState(dest, retrier).clear()
        lock.release()


@dataclass(frozen=True)
class _Asked:
    """How the user asked for the job to be done."""

    energon_split: str | None
    resume: bool
    jobs: int
    tmp_dir: str | None
    memory_limit: int


@dataclass
class _Job:
    """One ``ishard index``: DST, its manifest (if any) and ishard's record in it, the shards
    and the indexes to make, and how files are put."""

    dest: Location
    doc: dict | None
    record: dict | None
    names: list[str]
    indexes: frozenset[str]
    retrier: Retrier
    guard: Guard | None
    upload: dict[str, Any]

    split: str

    @property
    def energon(self) -> EnergonDataset | None:
        return EnergonDataset(self.names, self.split) if "energon" in self.indexes else None

    def from_headers(
        self, con: Any, folder: str, asked: _Asked, progress: Progress, kept: list[bool]
    ) -> _Made:
        """The sample index read from the shards' headers (each recorded in DST as read; with
        ``--resume``, those an earlier job recorded taken from there), checked against the
        manifest's claims, DALI's and Energon's indexes made of it; all put in DST."""
        options = self.record["options"] if self.record else None
        records = IndexRecords(self.dest, self.retrier, self.names, options)
        earlier = records.earlier() if asked.resume else {}
        records.begin()
        progress.indexing(len(self.names), 0)
        create_index_table(con, "samples")
        sizes: dict[str, int] = {}
        workers = asked.jobs or _workers(self.dest)
        found = scanned(self.dest, self.names, options, workers, progress, self.retrier, earlier)
        for number, shard in enumerate(found):
            put_rows(con, "samples", shard)
            if number not in earlier:
                records.record(number, shard)
            kept[0] = True  # a stop from here on leaves what was read, for --resume
            sizes[shard.name] = shard.size
        kept[0] = False  # every shard read: what fails now is no reading to go on from
        counts = _counts(con, "samples")
        _check_claims(self.dest, self.doc, sizes, counts)
        if "dali" in self.indexes:
            _dali_indexes(con, "samples", self.names, self.dest, self.retrier, self.guard)
        record = publish_index(
            con, folder, self.dest, "samples", None, ("samples",), energon=self.energon,
            **self.upload,
        )  # fmt: skip
        record["made_from"] = FROM_HEADERS
        return _Made(counts, sizes, record, len(sizes) - len(earlier))

    def from_index(self, con: Any, folder: str, path: str, record: dict) -> _Made:
        """DALI's and Energon's indexes made of the sample index at ``path``; put in DST."""
        rows = f"read_parquet({sql_text(path)})"
        if "dali" in self.indexes:
            _dali_indexes(con, rows, self.names, self.dest, self.retrier, self.guard)
        if self.energon is not None:
            with contextlib.closing(EnergonFiles(con, path, self.energon, folder)) as made:
                made.put(self.dest, **self.upload)
        sizes = {e["url"]: e["filesize"] for e in (self.doc or {}).get("shardlist", ())}
        return _Made(_counts(con, rows), sizes, record, 0)


@dataclass(frozen=True)
class _Made:
    counts: dict[str, tuple[int, int, int]]  # per shard: samples, members, payload bytes
    sizes: dict[str, int]  # per shard: its bytes
    index: dict  # the sample index's record
    scans: int  # shards whose headers were read


def _indexed(
    dest: Location,
    wanted: str | None,
    given: Sequence[str] | None,
    asked: _Asked,
    retrier: Retrier,
    guard: Guard | None,
    progress: Progress,
    kept: list[bool],
) -> Indexed:
    data = dest.read_file(MANIFEST_NAME, retrier, role="dataset")
    doc = check_manifest(data, dest.child(MANIFEST_NAME)) if data is not None else None
    if doc is not None and given:
        raise UsageError(
            f"{dest.child(MANIFEST_NAME)!r} lists the shards of this dataset — leave out "
            "the shard names (they name shards where there is no manifest)"
        )
    record = (doc or {}).get("ishard")
    record = copy.deepcopy(record) if isinstance(record, dict) else None
    if doc is not None:
        names = checked_names([e["url"] for e in doc["shardlist"]])
    else:
        names = checked_names(_inside(dest, given)) if given else listed_shards(dest)
    upload: dict[str, Any] = {"retrier": retrier, "cleanup": Retrier(CLEANUP_RETRIES, cap=4.0)}
    upload.update(part_size=PART_SIZE, guard=guard)
    indexes = _wanted(wanted, names)
    recorded = (record or {}).get("options", {}).get("energon_split")
    split = energon_split_value(asked.energon_split or recorded or "train")
    check_energon_split(split, ",".join(indexes | _recorded_indexes(record)) or "none")
    if "energon" in indexes:  # a split Energon's files cannot make fails before any is put
        split_parts([n for n in names if n.endswith(".tar")], split)
    job = _Job(dest, doc, record, names, indexes, retrier, guard, upload, split)
    with private_engine(asked.tmp_dir, asked.memory_limit, threads=1) as (con, folder):
        held = _held_index(dest, record, folder)
        if held is None:  # read from the shards; the new sample index is published first
            made = job.from_headers(con, folder, asked, progress, kept)
        else:
            made = job.from_index(con, folder, *held)
    document = _manifest(job, made)
    where = put_file(dest, MANIFEST_NAME, manifest_bytes(document), retrier, guard)
    return Indexed(
        dest.url,
        len(names),
        sum(c[0] for c in made.counts.values()),
        sum(c[1] for c in made.counts.values()),
        made.scans,
        document["ishard"]["options"]["index"],
        where,
    )


def _inside(dest: Location, given: Sequence[str]) -> list[str]:
    """Shards named by their URL (or path) in DST, or relative to it, as names in DST."""
    base = dest.url.rstrip("/") + "/"
    return [name.removeprefix(base) for name in given]


def _wanted(wanted: str | None, names: Sequence[str]) -> frozenset[str]:
    """The indexes to make: those ``wanted`` names (None: DALI's and Energon's where there are
    ``.tar`` shards, else none).

    Raises:
        UsageError: DALI's or Energon's asked for where no shard is a ``.tar``.
    """
    tars = any(n.endswith(".tar") for n in names)
    if wanted is None:
        return frozenset(INDEXES) if tars else frozenset()
    indexes = indexes_of(wanted)
    if indexes and not tars:
        raise UsageError(
            f"--index {wanted} indexes .tar shards, and none of these is one (the first is "
            f"{names[0]!r}) — give --index none: the sample index is written for any tar shard"
        )
    return indexes


def _recorded_indexes(record: Mapping | None) -> frozenset[str]:
    """The indexes the manifest's record says the dataset has."""
    return indexes_of(str((record or {}).get("options", {}).get("index", "none")))


def _workers(dest: Location) -> int:
    return default_workers(dest.store.capabilities.many_at_once)


def _held_index(dest: Location, record: Mapping | None, folder: str) -> tuple[str, dict] | None:
    """The sample index the manifest names, fetched and checked, with its record; None where
    there is none (or none that is there and the one named): the shards' headers are read."""
    index = record.get("samples_index") if record else None
    if not isinstance(index, dict) or index.get("name") != INDEX_NAME:
        return None
    try:
        return fetch_index(dest, index, folder), dict(index)
    except DataError:
        return None  # missing or replaced: the shards say what it holds


def _counts(con: Any, rows: str) -> dict[str, tuple[int, int, int]]:
    """Per shard: samples, members and payload bytes the index holds."""
    found = con.execute(
        f"SELECT shard, count(DISTINCT key), count(*), sum(size) FROM {rows} GROUP BY shard"
    ).fetchall()
    return {shard: (samples, files, int(payload)) for shard, samples, files, payload in found}


def _check_claims(
    dest: Location,
    doc: Mapping | None,
    sizes: Mapping[str, int],
    counts: Mapping[str, tuple[int, int, int]],
) -> None:
    """Does each shard have the size, and (where ishard's record says) the members its
    manifest records — claims checked before a new index is put beside the shards?

    Raises:
        DataError: a shard that is not the one the manifest lists.
    """
    if doc is None:
        return
    records = (doc.get("ishard") or {}).get("shards") or [{}] * len(doc["shardlist"])
    for entry, record in zip(doc["shardlist"], records):
        name = entry["url"]
        said = [("bytes", entry["filesize"], sizes[name])]
        if isinstance(record, dict) and "files" in record:
            said.append(("members", record["files"], counts.get(name, (0, 0, 0))[1]))
        for what, recorded, found in said:
            if recorded != found:
                raise DataError(
                    f"{dest.child(name)!r} has {found} {what}, but {MANIFEST_NAME} records "
                    f"{recorded} — run ishard verify on the destination"
                )


def _dali_indexes(
    con: Any, rows: str, names: Sequence[str], dest: Location, retrier: Retrier, guard
) -> None:
    """DALI's index beside each ``.tar`` shard of ``names``, from the sample index ``rows``
    (a table, or a Parquet file read), its rows read a batch at a time in shard order."""
    tars = {n for n in names if n.endswith(".tar")}
    result = con.execute(
        f"SELECT shard, member, data_offset, size FROM {rows} WHERE ends_with(shard, '.tar') "
        "ORDER BY shard, header_offset"
    )
    shard: str | None = None
    members: list[tuple[str, int, int]] = []

    def put() -> None:
        if shard in tars:
            data = dali_index(*(list(c) for c in zip(*members)))  # type: ignore[call-arg]
            put_file(dest, index_name(shard), data, retrier, guard)

    while batch := result.fetchmany(DALI_BATCH):
        for name, member, data_offset, size in batch:
            if name != shard:
                if members:
                    put()
                shard, members = name, []
            members.append((member, data_offset, size))
    if members:
        put()


def _manifest(job: _Job, made: _Made) -> dict:
    """The manifest after indexing: an ishard manifest's, its record told of the indexes;
    any other's (a wids shard index, or none), ishard's record of shards it read."""
    doc, record, indexes = job.doc, job.record, job.indexes
    value = index_value(",".join(sorted(_recorded_indexes(record) | indexes)) or "none")
    split = {"energon_split": job.split} if "energon" in indexes else {}
    if record is not None and doc is not None:
        out = copy.deepcopy(dict(doc))
        out["ishard"]["options"]["index"] = value
        out["ishard"]["options"].update(split)
        out["ishard"]["samples_index"] = dict(made.index)
        if "dali" in indexes:
            for entry in out["ishard"]["shards"]:
                if entry["name"].endswith(".tar"):
                    entry["dali_index"] = index_name(entry["name"])
        return out
    earlier = {e["url"]: e for e in (doc or {}).get("shardlist", ())}
    shardlist = []
    records = []
    for name in job.names:
        samples, files, payload = made.counts.get(name, (0, 0, 0))
        entry = {
            k: v for k, v in earlier.get(name, {}).items() if k in ("url", "md5sum", "checksum")
        }
        entry.update(url=name, nsamples=samples, filesize=made.sizes[name])
        shardlist.append(entry)
        shard = {"name": name, "files": files, "samples": samples, "payload_bytes": payload}
        if "dali" in indexes and name.endswith(".tar"):
            shard["dali_index"] = index_name(name)
        records.append(shard)
    return {
        **WIDS_HEADER,
        "shardlist": shardlist,
        "ishard": {
            "version": __version__,
            "source": None,
            "options": {"member_names": "sample", "index": value, **split},
            "totals": totals(shardlist, records),
            "samples_index": dict(made.index),
            "shards": records,
        },
    }
