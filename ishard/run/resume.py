"""``--resume``: which planned shards an earlier run finished (checked, not assumed), the rest
to write, and recording each shard as it finishes."""

from __future__ import annotations

import base64
import dataclasses
import logging
import tempfile
from collections.abc import Callable, Sequence

import orjson

from ..checksums import plain_md5
from ..errors import DataError, IshardError
from ..model import Plan, ShardPlan, ShardResult
from ..options.table import EXECUTION_ONLY
from ..planning.record import differences
from ..progress import Progress
from ..sizes import counted
from ..store import Location
from ..store.retry import Retrier
from ..store.sinks import abort_dangling_uploads
from .manifest import MANIFEST_NAME, entry_checksum
from .sampleindex import INDEX_NAME, fetch_index, recorded_offsets
from .state import RunState, recorded_checksum, remove_temp_files, still_complete

LOG = logging.getLogger("ishard")

CHANGED = (
    "cannot resume into {dst!r}: the source or the options changed since the interrupted run "
    "(its plan fingerprint differs) — rerun with the same source and options, or use "
    "--overwrite to start over"
)
DIFFERS = "cannot resume into {dst!r}: the plan differs from {run}: {changes} — {fix}"


def _changed(dest: Location, earlier: object, plan: Plan, run: str) -> DataError:
    """The refusal, naming what changed when the earlier run recorded what its plan was made
    from (else the fingerprint's word alone)."""
    try:
        changes = differences(earlier, plan, EXECUTION_ONLY) if isinstance(earlier, dict) else []
    except (TypeError, ValueError, KeyError, AttributeError, IndexError):
        changes = []  # a damaged record: the fingerprint's word alone
    if not changes:
        return DataError(
            CHANGED.format(dst=dest.url).replace(
                "the interrupted run", run.replace("finished run", "run that wrote its manifest")
            )
        )
    options = not all(c.startswith("source: ") for c in changes)
    fix = (
        "rerun with the earlier options, or use --overwrite to start over"
        if options
        else "the shards written so far hold the earlier files: use --overwrite to start over"
    )
    return DataError(
        DIFFERS.format(dst=dest.url, run=f"{run}'s", changes="; ".join(changes), fix=fix)
    )


def manifest_data(dest: Location, retrier: Retrier | None = None) -> bytes | None:
    """The bytes of ``DST/manifest.json`` (locally not through a link); None without one."""
    return dest.read_file(MANIFEST_NAME, retrier)


def earlier_manifest_seed(dest: Location) -> int | None:
    """The seed a finished run's manifest records, if any (an unseeded shuffle's resumed)."""
    data = manifest_data(dest)
    try:
        seed = orjson.loads(data)["ishard"]["seed"] if data else None
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return seed if isinstance(seed, int) else None


def _manifest_records(
    dest: Location, plan: Plan, fingerprint: str, retrier: Retrier
) -> dict[int, dict] | None:
    """A finished run's shards, from its manifest, if it is this plan's; None without one."""
    data = manifest_data(dest, retrier)
    if data is None:
        return None
    document = None
    try:
        document = orjson.loads(data)
        recorded = document["ishard"].get("fingerprint")
        entries = document["shardlist"]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        recorded, entries = None, []
    if recorded != fingerprint:
        raise _changed(
            dest,
            document.get("ishard") if isinstance(document, dict) else None,
            plan,
            "the finished run",
        )
    return {
        i: {"name": e.get("url"), "filesize": e.get("filesize"), "checksum": entry_checksum(e)}
        for i, e in enumerate(entries)
        if isinstance(e, dict)
    }


def finished_earlier(
    dest: Location,
    plan: Plan,
    fingerprint: str,
    state: RunState,
    retrier: Retrier,
    grows: bool = False,
) -> dict[int, ShardResult]:
    """The shards of ``plan`` an earlier run into ``dest`` completed and that are still whole,
    by plan index; its temp files and unfinished uploads are cleaned up. A growing dataset's
    manifest is the dataset grown, not a finished run of this plan: only the run's records
    count.

    Raises:
        DataError: the earlier run planned something else (source or options changed).
    """
    earlier = state.earlier_fingerprint()
    if earlier is not None and earlier != fingerprint:
        raise _changed(dest, state.earlier().get("plan"), plan, "the interrupted run")
    records = {} if grows else _manifest_records(dest, plan, fingerprint, retrier) or {}
    if earlier is not None:
        records.update(state.recorded())
    names = plan.shard_names
    remove_temp_files(dest, names)
    abort_dangling_uploads(dest, names, retrier)
    samples, files, sizes = plan.shard_sample_counts, plan.shard_file_counts, plan.shard_sizes
    return {
        i: ShardResult(
            names[i],
            r["filesize"],
            recorded_checksum(r),
            samples[i],
            files[i],
            sizes[i],
            etag=r.get("etag"),
            offsets=_unpacked(r.get("offsets")),
            frames=_unpacked(r.get("frames")),
            sums=_unpacked(r.get("sums")),
            copied=_copied(r.get("copied"), files[i]),
        )
        for i, r in sorted(records.items())
        if i < len(names) and r.get("name") == names[i] and still_complete(dest, r, retrier)
    }


def _copied(pairs: object, files: int) -> tuple[tuple[int, str | None], ...]:
    """The members a run record says the store copied: (index, the source's MD5 or None)
    pairs of this shard's members, or none where the record holds anything else."""
    if not isinstance(pairs, list):
        return ()
    out = tuple(
        (p[0], p[1])
        for p in pairs
        if isinstance(p, list)
        and len(p) == 2
        and isinstance(p[0], int)
        and (p[1] is None or plain_md5(p[1]) == p[1])
    )
    fits = len(out) == len(pairs) and all(0 <= i < files for i, _ in out)
    return out if fits else ()


def _unpacked(text: object) -> bytes | None:
    """Offsets a run record keeps as base64 text (``RunState.record``)."""
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return None


def with_offsets(
    dest: Location, done: dict[int, ShardResult], retrier: Retrier, tmp_dir: str | None
) -> dict[int, ShardResult]:
    """The kept shards the sample index can be written with. A finished run's manifest
    records no offsets, but names the index that has them: they are taken from it; a kept
    shard it has no rows for is written again (its writer reports them)."""
    lacking = {r.name: i for i, r in done.items() if r.offsets is None}
    if not lacking:
        return done
    found: dict = {}
    data = manifest_data(dest, retrier)
    try:
        record = orjson.loads(data or b"null")["ishard"]["samples_index"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        record = None
    if isinstance(record, dict) and record.get("name") == INDEX_NAME:
        with tempfile.TemporaryDirectory(prefix="ishard-", dir=tmp_dir) as folder:
            try:
                path = fetch_index(dest, record, folder)
            except (DataError, KeyError, TypeError):
                path = None
            if path is not None:
                found = recorded_offsets(path, list(lacking))
    kept = {i: r for i, r in done.items() if r.offsets is not None}
    for name, i in lacking.items():
        if name in found:
            offsets, frames, sums, copied = found[name]
            kept[i] = dataclasses.replace(
                done[i], offsets=offsets, frames=frames, sums=sums, copied=copied
            )
    return dict(sorted(kept.items()))


class Remaining(Sequence[ShardPlan]):
    """The planned shards not yet done, in plan order (built on access, like the plan's)."""

    def __init__(self, shards: Sequence[ShardPlan], done: dict[int, ShardResult]) -> None:
        self._shards = shards
        self.indices = [i for i in range(len(shards)) if i not in done]

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self._shards[self.indices[index]]


class Recorder(Progress):
    """Passes every hook on, and records each finished shard (by plan index) for a resume."""

    def __init__(
        self, inner: Progress, names: Sequence[str], record: Callable[[int, ShardResult], None]
    ) -> None:
        self._inner, self._record = inner, record
        self._index = {name: i for i, name in enumerate(names)}

    def listing(self, files: int, nbytes: int) -> None:
        self._inner.listing(files, nbytes)

    def planned(self, shards: int, nbytes: int) -> None:
        self._inner.planned(shards, nbytes)

    def wrote(self, nbytes: int) -> None:
        self._inner.wrote(nbytes)

    def shard_done(self, result: ShardResult) -> None:
        LOG.info(
            "wrote %s: %s, %s, %d bytes, %s",
            result.name,
            counted(result.samples, "sample"),
            counted(result.files, "file"),
            result.filesize,
            result.checksum or "no checksum",
        )
        try:
            self._record(self._index[result.name], result)
        except IshardError:
            pass  # e.g. the disk just filled up: a resume writes this shard again, that is all
        self._inner.shard_done(result)

    def notice(self, text: str) -> None:
        self._inner.notice(text)

    def close(self) -> None:
        self._inner.close()
