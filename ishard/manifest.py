"""The manifest: a wids shard index (``manifest.json``) with ishard's own record beside it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import orjson

from . import __version__
from .errors import WriteError
from .model import Plan, ShardResult

MANIFEST_NAME = "manifest.json"


def manifest_document(plan: Plan, results: Sequence[ShardResult]) -> dict:
    """The manifest as a dict: ``shardlist`` for wids, ``ishard`` for everything else."""
    return {
        "__kind__": "wids-shard-index-v1",
        "wids_version": 1,
        "shardlist": [
            {"url": r.name, "md5sum": r.md5, "nsamples": r.samples, "filesize": r.filesize}
            for r in results
        ],
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
                {"name": r.name, "files": r.files, "samples": r.samples, "payload_bytes": r.payload}
                for r in results
            ],
        },
    }


def remove_manifest(dst: Path) -> None:
    """Remove an earlier ``DST/manifest.json`` before its shards may be replaced.

    A run that then fails leaves no manifest describing shards it overwrote.
    """
    final = dst / MANIFEST_NAME
    try:
        final.unlink(missing_ok=True)
    except OSError as err:
        raise WriteError(
            f"cannot remove the old manifest {str(final)!r}: {err.strerror} — fix its permissions"
        ) from None


def write_manifest(dst: Path, plan: Plan, results: Sequence[ShardResult]) -> Path:
    """Write ``DST/manifest.json`` atomically (temp name, then rename); return its path."""
    final = dst / MANIFEST_NAME
    temp = dst / f".{MANIFEST_NAME}.{os.getpid()}.ishard-tmp"
    data = orjson.dumps(manifest_document(plan, results), option=orjson.OPT_INDENT_2) + b"\n"
    try:
        temp.write_bytes(data)
        os.replace(temp, final)
    except OSError as err:
        temp.unlink(missing_ok=True)
        raise WriteError(f"cannot write the manifest {str(final)!r}: {err.strerror}") from None
    return final
