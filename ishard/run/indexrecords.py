"""The records of an ``ishard index`` that reads shards' headers: what it is indexing, and each
shard's rows as read, kept in ``DST/.ishard-run/index/`` until the manifest is written, so that
one that stopped goes on (``--resume``) without reading those shards again. A record is a
claim: it is taken only for the shard it names, at the size that shard still has."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson

from ..errors import UsageError
from ..formats.reading import Headers
from ..store import Location
from ..store.lockrecord import LOCK_NAME, STATE_DIR
from ..store.retry import Retrier
from ..store.sinks import put_file
from .headerscan import Scanned

RECORDS = f"{STATE_DIR}/index"
RUN_RECORD = f"{RECORDS}/run.json"
COLUMNS = ("member", "header_offset", "data_offset", "size", "mtime")


def check_records(dest: Location, resume: bool) -> None:
    """May ``ishard index`` work in DST: no run's records there, and an earlier ``ishard
    index``'s only with ``resume``?

    Raises:
        UsageError: a run's records, or an earlier ``ishard index``'s without ``resume``.
    """
    with dest.translated("destination"):
        found = dest.store.find(dest.key(STATE_DIR + "/"))
    cut = len(dest.key(""))
    names = {key[cut:] for key in found} - {LOCK_NAME}
    if not names:
        return
    if all(n.startswith(RECORDS + "/") for n in names):
        if resume:
            return
        raise UsageError(
            f"an ishard index of {dest.url!r} stopped before it finished ({RECORDS}/ holds "
            "the shards it read) — add --resume to go on from them"
        )
    raise UsageError(
        f"a run into {dest.url!r} has not finished ({STATE_DIR}/ holds its records) — "
        "finish it first (the same ishard shard command with --resume)"
    )


class IndexRecords:
    """This ``ishard index``'s records in DST: its shards (``names``) and key rule
    (``options``), and each shard's rows once read."""

    def __init__(
        self, dest: Location, retrier: Retrier, names: Sequence[str], options: Mapping | None
    ) -> None:
        self._dest, self._retrier = dest, retrier
        self._names = list(names)
        self._job = {"shards": self._names, "options": options}

    def earlier(self) -> dict[int, Scanned]:
        """The shards an earlier ``ishard index`` of the same shards read, by position, each
        whose record names it and whose size it still has; {} for another job."""
        data = self._dest.read_file(RUN_RECORD, self._retrier)
        try:
            same = data is not None and orjson.loads(data) == self._job
        except orjson.JSONDecodeError:
            same = False
        if not same:
            return {}
        found: dict[int, Scanned] = {}
        for number, name in enumerate(self._names):
            shard = self._read(number, name)
            if shard is not None:
                found[number] = shard
        return found

    def _read(self, number: int, name: str) -> Scanned | None:
        data = self._dest.read_file(f"{RECORDS}/{number}.json", self._retrier)
        if data is None:
            return None
        try:
            record = orjson.loads(data)
            columns = [record[c] for c in COLUMNS]
            keys, size = record["keys"], record["bytes"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None  # unreadable: the shard is read again
        count = len(keys)
        if record.get("name") != name or any(len(c) != count for c in columns):
            return None
        with self._dest.translated("dataset"):
            try:
                now = self._retrier.run(lambda: self._dest.store.stat(self._dest.key(name)))
            except FileNotFoundError:
                return None
        if now.size != size:
            return None  # the shard changed since: read again
        return Scanned(name, Headers(*columns), size, keys)

    def begin(self) -> None:
        """Say what this job indexes (before any shard's record)."""
        put_file(self._dest, RUN_RECORD, orjson.dumps(self._job), self._retrier)

    def record(self, number: int, shard: Scanned) -> None:
        """Shard ``number``'s rows, as read."""
        found = shard.headers
        record = {
            "name": shard.name,
            "bytes": shard.size,
            "keys": shard.keys,
            **{c: getattr(found, c) for c in COLUMNS},
        }
        try:
            data = orjson.dumps(record)
        except TypeError:  # a name that is not UTF-8: not kept (the shard is read again)
            return
        put_file(self._dest, f"{RECORDS}/{number}.json", data, self._retrier)
