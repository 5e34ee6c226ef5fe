"""The manifest: a wids shard index (``manifest.json``) with ishard's own record beside it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import orjson

from ..checksums import RECORDED, split, tagged
from ..errors import DataError, UsageError, WriteError
from ..model import Plan, ShardResult
from ..names import printable, wds_split
from ..options.table import EXECUTION_ONLY
from ..planning.keys import KeyFunction, key_function, sample_key
from ..store import Location
from ..store.retry import Retrier
from ..version import __version__

MANIFEST_NAME = "manifest.json"
WIDS_HEADER = {"__kind__": "wids-shard-index-v1", "wids_version": 1}  # what wids reads first


def manifest_document(
    plan: Plan,
    results: Sequence[ShardResult],
    fingerprint: str | None = None,
    *,
    index: Mapping | None = None,
    earlier: Kept | None = None,
) -> dict:
    """The manifest as a dict: ``shardlist`` for wids, ``ishard`` for everything else
    (``fingerprint``: the plan's, which ``--resume`` compares; ``index``: the sample index's
    record; ``earlier``: a growing dataset's shards kept, listed before this run's). Options
    that only say how the run went (``EXECUTION_ONLY``: jobs, resume …) are left out, so a
    resumed run's manifest is byte for byte an uninterrupted one's."""
    kept = earlier if earlier is not None else Kept((), ())
    shardlist = [*kept.entries, *(_shard_entry(r) for r in results)]
    records = [
        *kept.records,
        *(
            {
                "name": r.name,
                "files": r.files,
                "samples": r.samples,
                "payload_bytes": r.payload,
                **({"dali_index": r.index} if r.index else {}),
            }
            for r in results
        ),
    ]
    return {
        **WIDS_HEADER,
        "shardlist": shardlist,
        "ishard": {
            "version": __version__,
            "source": plan.source,
            "options": {k: v for k, v in plan.options.items() if k not in EXECUTION_ONLY},
            "seed": plan.seed,
            "fingerprint": fingerprint,
            "totals": totals(shardlist, records),
            "skipped": [
                {"reason": s.reason, "count": s.count, "examples": list(s.examples)}
                for s in plan.skipped
            ],
            "numbering": list(plan.numbering),
            **(
                {"duplicates": plan.duplicates.record(every=plan.duplicates.dropped)}
                if plan.duplicates is not None
                else {}
            ),
            **({"samples_index": dict(index)} if index is not None else {}),
            "shards": records,
        },
    }


def totals(shardlist: Sequence[Mapping], records: Sequence[Mapping]) -> dict:
    """The manifest's ``ishard.totals`` of its shard list and ``ishard.shards`` records."""
    return {
        "shards": len(shardlist),
        "samples": sum(e["nsamples"] for e in shardlist),
        "files": sum(r["files"] for r in records),
        "payload_bytes": sum(r["payload_bytes"] for r in records),
        "archive_bytes": sum(e["filesize"] for e in shardlist),
    }


@dataclass(frozen=True)
class Kept:
    """An earlier manifest's shards a growing dataset keeps: their shardlist entries and
    ``ishard.shards`` records, as that manifest wrote them."""

    entries: tuple[dict, ...]
    records: tuple[dict, ...]

    @classmethod
    def of(cls, doc: Mapping, dropped: Iterable[str] = ()) -> Kept:
        """The shards of manifest ``doc`` but ``dropped``."""
        gone = set(dropped)
        pairs = [
            (e, r)
            for e, r in zip(doc["shardlist"], doc["ishard"]["shards"])
            if e["url"] not in gone
        ]
        return cls(tuple(e for e, _ in pairs), tuple(r for _, r in pairs))


def entry_checksum(entry: Mapping) -> str | None:
    """A shardlist entry's recorded checksum as ``algorithm:hex``: its ``checksum``, else its
    ``md5sum`` (wids' field, and every manifest of earlier versions), else None."""
    if isinstance(entry.get("checksum"), str):
        return entry["checksum"]
    return tagged("md5", entry["md5sum"]) if isinstance(entry.get("md5sum"), str) else None


def _shard_entry(r: ShardResult) -> dict:
    """One wids shardlist entry: an md5 as wids' ``md5sum``, any other checksum as
    ``checksum: "algorithm:hex"``, none without one (``checksum="none"``)."""
    entry: dict = {"url": r.name}
    if r.checksum is not None:
        algorithm, value = split(r.checksum)
        if algorithm == "md5":
            entry["md5sum"] = value
        else:
            entry["checksum"] = r.checksum
    entry.update(nsamples=r.samples, filesize=r.filesize)
    return entry


def manifest_bytes(document: dict) -> bytes:
    """The manifest ``document`` (``manifest_document``'s) as the JSON bytes written to
    ``DST/manifest.json``."""
    try:
        return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    except TypeError:  # a name that is not UTF-8 (a local file's): shown with \xNN escapes
        return orjson.dumps(printable(document), option=orjson.OPT_INDENT_2) + b"\n"


def remove_manifest(dst: Location, retrier: Retrier | None = None) -> None:
    """Remove an earlier ``DST/manifest.json`` before its shards may be replaced (store
    requests retried by ``retrier``).

    A run that then fails leaves no manifest describing shards it overwrote.
    """
    run = retrier.run if retrier is not None else (lambda call: call())
    try:
        run(lambda: dst.store.delete([dst.key(MANIFEST_NAME)]))
    except OSError as err:
        raise WriteError(
            f"cannot remove the old manifest in {dst.url!r}: {err.strerror or err} — fix its "
            "permissions"
        ) from None
    except Exception as err:  # noqa: BLE001 - a store's error, translated once
        raise dst.error(err, "destination") from None


def read_manifest(dst: Location) -> dict:
    """Read and check ``DST/manifest.json``: a wids shard index, with ishard's record if present.

    Raises:
        UsageError: DST does not exist or is a file.
        DataError: no manifest, or one that is not valid JSON or lacks what verify needs.
        IshardError: the store cannot be reached or denies access.
    """
    where = dst.child(MANIFEST_NAME)
    dst.store.check_folder(dst.url, f"give the directory that holds {MANIFEST_NAME}")
    try:
        data, _ = dst.store.get(dst.key(MANIFEST_NAME))
    except FileNotFoundError:
        if not _exists(dst):
            raise UsageError(
                f"destination {dst.url!r} does not exist — give the directory or "
                "URL ishard wrote its shards to"
            ) from None
        raise DataError(
            f"no {MANIFEST_NAME} in {dst.url!r} — it is written when a run ends; "
            "run ishard shard again with the same source and options and --resume "
            "to finish the job"
        ) from None
    except OSError as err:
        if (
            isinstance(err, (IsADirectoryError, PermissionError))
            or not dst.store.capabilities.transient_errors
        ):
            raise DataError(
                f"cannot read {where!r}: {err.strerror or err} — it must be the "
                "manifest file ishard wrote, readable by you"
            ) from None
        raise dst.error(err, "dataset") from None
    except Exception as err:  # noqa: BLE001 - a store's error, translated once
        raise dst.error(err, "dataset") from None
    return check_manifest(data, where)


def _exists(dst: Location) -> bool:
    try:
        key = dst.key("").rstrip("/")
        return dst.store.root_exists() and (not key or dst.store.exists(key))
    except Exception:  # noqa: BLE001 - cannot tell: say the manifest is missing, the likelier case
        return True


def check_manifest(data: bytes, where: str) -> dict:
    """The parsed manifest, or a ``DataError`` saying what is wrong with it."""

    def bad(what: str) -> DataError:
        return DataError(
            f"{where!r} is not an ishard manifest: {what} — run ishard shard "
            "again (with --overwrite) to rewrite it"
        )

    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise bad(f"invalid JSON ({err})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("shardlist"), list):
        raise bad("no 'shardlist' list")
    for i, entry in enumerate(doc["shardlist"]):
        if not _is_entry(entry):
            raise bad(
                f"shardlist entry {i} needs a relative 'url', whole-number 'filesize' "
                "and 'nsamples', and a checksum (if any) as 'algorithm:hex' of a known "
                "algorithm"
            )
    record = doc.get("ishard")
    if record is None:
        return doc
    shards = record.get("shards") if isinstance(record, dict) else None
    if not isinstance(shards, list) or len(shards) != len(doc["shardlist"]):
        raise bad("'ishard.shards' does not list one record per shardlist entry")
    for entry, rec in zip(doc["shardlist"], shards):
        if not _is_record_of(rec, entry["url"]):
            raise bad(f"'ishard.shards' has no files and payload_bytes for {entry['url']!r}")
    if not isinstance(record.get("options", {}), dict):
        raise bad("'ishard.options.record' is not an object")
    return doc


def _is_entry(entry: object) -> bool:
    """A ``shardlist`` entry: a name in DST, whole-number size and count, checksums if any."""
    return (
        isinstance(entry, dict)
        and _is_name(entry.get("url"))
        and _is_count(entry.get("filesize"))
        and _is_count(entry.get("nsamples"))
        and isinstance(entry.get("md5sum", ""), str)
        and _is_checksum(entry.get("checksum", "md5:"))
    )


def _is_record_of(record: object, name: str) -> bool:
    """An ``ishard.shards`` record of shard ``name``: whole-number files and payload bytes."""
    return (
        isinstance(record, dict)
        and record.get("name") == name
        and _is_count(record.get("files"))
        and _is_count(record.get("payload_bytes"))
    )


def _is_checksum(value: object) -> bool:
    if not isinstance(value, str):
        return False
    algorithm, hexdigest = split(value)
    return algorithm in RECORDED and all(c in "0123456789abcdef" for c in hexdigest)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_name(value: object) -> bool:
    """A shard name inside DST: relative, no '..', no URL (verify reads nothing outside DST)."""
    if not isinstance(value, str) or not value or value.startswith(("/", "\\")) or "://" in value:
        return False
    return ".." not in value.replace("\\", "/").split("/")


def member_key_function(options: Mapping) -> KeyFunction:
    """A member's sample key, from the options a manifest recorded.

    Members named like their source files (``member_names`` absent or ``"original"``) have
    the key the run gave the file: ``sample_key_pattern`` with the file's extension trimmed.
    ``--ekm`` and ``--collapse`` only route and cut samples, so they leave keys alone.
    Members named ``<key>.<ext>`` (``member_names="sample"``) have their name up to the
    basename's first dot as key (``.seg.png`` is one extension there, as WebDataset reads it).

    Raises:
        DataError: the recorded naming or key pattern is not one this ishard knows.
    """
    naming = options.get("member_names") or "original"
    if naming not in ("original", "sample"):
        raise DataError(
            f"the manifest's member_names {naming!r} is unknown to this ishard — "
            "verify with the ishard version that wrote the shards"
        )
    if naming == "sample":  # <key>.<extension>, the extension after the basename's first dot
        return lambda name: wds_split(name)[0]
    pattern = options.get("sample_key_pattern", "")
    try:
        key = key_function(pattern)
    except UsageError:
        raise DataError(
            f"the manifest's sample_key_pattern {pattern!r} is not a valid RE2 "
            "regex (written by an ishard before RE2, or edited) — verify without "
            "--deep, or rewrite the shards"
        ) from None
    return lambda name: sample_key(name, key)
