"""A run's records in DST while it works: its plan's fingerprint and its finished shards."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable

import orjson

from ..checksums import digest_of, split, tagged
from ..formats.registry import identities
from ..model import Plan, ShardResult
from ..options.table import EXECUTION_ONLY
from ..planning.table import ShardList
from ..store import Location
from ..store.lockrecord import STATE_DIR
from ..store.retry import Retrier
from ..store.sinks import TEMP_SUFFIX, abort_dangling_uploads, put_file
from ..version import __version__

RUN_NAME = f"{STATE_DIR}/run.json"
DONE_DIR = f"{STATE_DIR}/done"


def fingerprint(plan: Plan) -> str:
    """A digest of everything the shards' bytes depend on: ishard's version, the gzip library,
    the source, the options that shape output, the seed, and every planned member (name,
    size, mtime, and its stamp: nanosecond mtime and inode locally, ETag and mtime on a store)
    in every shard, so a file rewritten within the same second is not taken for the same."""
    options = {k: v for k, v in plan.options.items() if k not in EXECUTION_ONLY}
    digest = hashlib.sha256(
        orjson.dumps(
            {
                "ishard": __version__,
                "source": plan.source,
                "options": options,
                "seed": plan.seed,
                **identities(options),  # the libraries the formats write with: "gzip"
            },
            option=orjson.OPT_SORT_KEYS,
        )
    )
    shards = plan.shards
    if isinstance(shards, ShardList):
        shards.digest(digest.update)
    else:
        for shard in shards:
            digest.update(f"\x01{shard.name}\n".encode("utf-8", "surrogateescape"))
            for f in shard.members():
                digest.update(
                    f"{f.name}\x00{f.size}\x00{f.mtime}\n".encode("utf-8", "surrogateescape")
                )
    return digest.hexdigest()


class RunState:
    """``DST/.ishard-run/``: ``run.json`` (the fingerprint, and the seed of an unseeded
    shuffle) and ``done/<index>.json`` (one per finished shard: its name, size and md5).
    Removed once the manifest is written. Locally nothing in it is read, written or removed
    through a link (see ``localstate``)."""

    def __init__(self, dest: Location, retrier: Retrier) -> None:
        self._dest, self._retrier = dest, retrier

    def _read(self, name: str) -> bytes | None:
        return self._dest.read_file(name, self._retrier)

    def _put(self, name: str, data: bytes) -> None:
        put_file(self._dest, name, data, self._retrier)

    def earlier(self) -> dict:
        """What an earlier, unfinished run recorded here (``fingerprint``, ``seed`` …), if any."""
        data = self._read(RUN_NAME)
        try:
            record = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError:
            return {}
        return record if isinstance(record, dict) else {}

    def earlier_fingerprint(self) -> str | None:
        """The fingerprint an earlier, unfinished run recorded here, if any."""
        fingerprint = self.earlier().get("fingerprint")
        return fingerprint if isinstance(fingerprint, str) else None

    def begin(
        self,
        fingerprint: str,
        shards: int,
        shuffle_seed: int | None = None,
        replaced: list[str] | None = None,
        plan: dict | None = None,
    ) -> None:
        """Record this run's fingerprint (before any shard is written), the seed ishard
        drew for an unseeded ``--sort shuffle`` (which a ``--resume`` reuses), the earlier
        run's archives to remove once the manifest is written (which a ``--resume`` removes),
        and what the plan was made from (``planrecord.plan_record``: a refused ``--resume``
        names what changed)."""
        record: dict = {"fingerprint": fingerprint, "shards": shards}
        if plan is not None:
            record["plan"] = plan
        if shuffle_seed is not None:
            record["shuffle_seed"] = shuffle_seed
        if replaced:
            record["replaced"] = replaced
        self._put(RUN_NAME, orjson.dumps(record))

    def record(self, index: int, result: ShardResult) -> None:
        """Note that shard ``index`` is complete (called after it got its final name)."""
        record = {"name": result.name, "filesize": result.filesize, "checksum": result.checksum}
        if result.etag is not None:
            record["etag"] = result.etag
        for field in ("offsets", "frames", "sums"):  # what the sample index is written with
            value = getattr(result, field)
            if value is not None:
                record[field] = base64.b64encode(value).decode("ascii")
        if result.copied:
            record["copied"] = [list(pair) for pair in result.copied]
        self._put(f"{DONE_DIR}/{index:09d}.json", orjson.dumps(record))

    def _done_names(self) -> list[str]:
        """The names in ``done/``; a killed run's temp records are removed on the way."""
        dest = self._dest
        found = dest.store.find(dest.key(DONE_DIR), self._retrier)  # each page retried
        temps = [key for key in found if key.endswith(TEMP_SUFFIX)]
        if temps:
            dest.store.delete(temps, self._retrier)
        return [key.rpartition("/")[2] for key in found]

    def recorded(self) -> dict[int, dict]:
        """The finished shards recorded so far, by plan index (anything else in ``done/`` —
        a killed run's temp record, a stray file — is not a record)."""
        with self._dest.translated("destination"):
            names = self._done_names()
        records = {}
        for name in names:
            stem = name.removesuffix(".json")
            if not (name.endswith(".json") and stem.isascii() and stem.isdigit()):
                continue
            data = self._read(f"{DONE_DIR}/{name}")
            try:
                records[int(stem)] = orjson.loads(data) if data else None
            except orjson.JSONDecodeError:
                continue  # unreadable: the shard is written again
        return {i: r for i, r in records.items() if isinstance(r, dict)}

    def _remove(self, folder: str, *names: str) -> None:
        """Each request (a listing page, a batch of deletes) retried on its own, as every
        request of the run: a throttled store leaves no records behind."""
        dest = self._dest
        with dest.translated("destination"):
            dest.store.delete_tree(dest.key(folder), self._retrier)
            if names:
                dest.store.delete([dest.key(n) for n in names], self._retrier)

    def clear(self) -> None:
        """Remove every record and the run state's folder (the run is over or starts afresh;
        the lock object of a lease then reads as gone, which its release takes as done)."""
        self._remove(STATE_DIR)

    def forget_shards(self) -> None:
        """A fresh run over old records: drop them, keep the lock."""
        self._remove(DONE_DIR, RUN_NAME)


def still_complete(dest: Location, record: dict, retrier: Retrier | None = None) -> bool:
    """Is the recorded shard still there, whole? Its size always, then what was recorded: its
    ETag (from the write; else an md5 when the ETag is a plain md5), else its checksum, by
    the recorded algorithm (re-read). Nothing recorded to compare with (``--checksum none``):
    the size alone. Locally a link planted under a shard's name is no shard: it is
    rewritten."""
    name = record.get("name")
    if not isinstance(name, str):
        return False
    run = retrier.run if retrier is not None else (lambda call: call())
    checksum = recorded_checksum(record)
    key, store = dest.key(name), dest.store
    try:
        info = run(lambda: store.stat(key))
        if info.size != record.get("filesize"):
            return False
        if record.get("etag") is not None and info.etag is not None:
            return info.etag == record["etag"]
        if checksum is None:
            return True
        algorithm, value = split(checksum)
        plain = (info.etag or "").strip('"')
        if algorithm == "md5" and len(plain) == 32 and "-" not in plain:
            return plain == value
        return run(lambda: _digest_of(store, key, algorithm)) == checksum
    except OSError:
        return False


def recorded_checksum(record: dict) -> str | None:
    """A run-state or manifest record's checksum as ``algorithm:hex`` (records of earlier
    versions kept a bare ``md5``)."""
    if isinstance(record.get("checksum"), str):
        return record["checksum"]
    return tagged("md5", record["md5"]) if isinstance(record.get("md5"), str) else None


def _digest_of(store, key: str, algorithm: str) -> str:
    """The checksum of an object by ``algorithm``, read in chunks."""
    with store.open_read(key) as f:
        return digest_of(f, algorithm)


def remove_temp_files(dest: Location, names: Iterable[str]) -> int:
    """Remove temp files a killed run left beside these shards (where a store has them)."""
    return dest.store.remove_temp_files([dest.key(name) for name in names])


def remove_leftovers(dest: Location, retrier: Retrier, names: list[str]) -> int:
    """Once every shard is written: the temp files and unfinished uploads writers that died
    mid-shard left beside these shards (a Dask worker killed while its shard was written
    again elsewhere); how many. Only runs into this destination write them, and it is
    locked for this one."""
    return remove_temp_files(dest, names) + abort_dangling_uploads(dest, names, retrier)
