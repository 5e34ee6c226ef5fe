"""The manifest: a wids shard index (``manifest.json``) with ishard's own record beside it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson

from . import __version__
from .errors import WriteError
from .model import Plan, ShardResult
from .storage import Location

MANIFEST_NAME = "manifest.json"


def manifest_document(plan: Plan, results: Sequence[ShardResult]) -> dict:
    """The manifest as a dict: ``shardlist`` for wids, ``ishard`` for everything else."""
    return {
        "__kind__": "wids-shard-index-v1",
        "wids_version": 1,
        "shardlist": [_shard_entry(r) for r in results],
        "ishard": {
            "version": __version__,
            "source": plan.source,
            "options": plan.options,
            "seed": plan.seed,
            "totals": {
                "shards": len(results),
                "samples": plan.sample_count,
                "files": plan.file_count,
                "payload_bytes": plan.size,
                "archive_bytes": sum(r.filesize for r in results),
            },
            "skipped": [
                {"reason": s.reason, "count": s.count, "examples": list(s.examples)}
                for s in plan.skipped
            ],
            "shards": [
                {"name": r.name, "files": r.files, "samples": r.samples, "payload_bytes": r.payload,
                 **({"dali_index": r.index} if r.index else {})}
                for r in results
            ],
        },
    }


def _shard_entry(r: ShardResult) -> dict:
    """One wids shardlist entry; without a checksum (``checksum="none"``) no ``md5sum`` key."""
    entry = {"url": r.name, "md5sum": r.md5, "nsamples": r.samples, "filesize": r.filesize}
    if r.md5 is None:
        del entry["md5sum"]
    return entry


def manifest_bytes(plan: Plan, results: Sequence[ShardResult]) -> bytes:
    """The manifest as the JSON bytes written to ``DST/manifest.json``."""
    return orjson.dumps(manifest_document(plan, results), option=orjson.OPT_INDENT_2) + b"\n"


def remove_manifest(dst: Location) -> None:
    """Remove an earlier ``DST/manifest.json`` before its shards may be replaced.

    A run that then fails leaves no manifest describing shards it overwrote.
    """
    try:
        if dst.is_local:
            (Path(dst.root) / MANIFEST_NAME).unlink(missing_ok=True)
        elif dst.fs.exists(dst.child(MANIFEST_NAME)):
            dst.fs.rm(dst.child(MANIFEST_NAME))
    except OSError as err:
        raise WriteError(
            f"cannot remove the old manifest in {dst.url!r}: {err.strerror or err} — fix its "
            "permissions"
        ) from None
