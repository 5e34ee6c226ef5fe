"""``--overwrite``: the earlier run's archives the new run does not rewrite, removed once the
new manifest is in place (never before, so a failed run leaves the rest of the old dataset)."""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from .formats.dali_index import index_name
from .localstate import NotRegularRecord
from .lock import STATE_DIR
from .manifest import MANIFEST_NAME
from .resume import _manifest_data
from .retry import Retrier
from .store import Location


def _safe(name: object) -> bool:
    """A relative name inside DST that is no part of ishard's own records (a manifest may
    have been edited: nothing outside DST, hidden, or the manifest itself is removed)."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        return False
    parts = name.split("/")
    return (
        name != MANIFEST_NAME
        and all(p and p not in (".", "..") for p in parts)
        and not parts[0].startswith(".")
        and parts[0] != STATE_DIR
    )


def manifest_archives(dest: Location, retrier: Retrier) -> list[str]:
    """The archives ``DST/manifest.json`` lists (and their DALI indexes); none without one.

    Only listed names count: a file that merely looks like a shard may be someone else's. A
    link or a FIFO planted under the manifest's name lists nothing (it is replaced, unread)."""
    try:
        data = _manifest_data(dest, retrier)
    except NotRegularRecord:
        return []
    try:
        document = orjson.loads(data) if data else {}
        entries = document.get("shardlist") or []
        extra = (document.get("ishard") or {}).get("shards") or []
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return []
    names = [e.get("url") for e in entries if isinstance(e, dict)]
    names += [e.get("dali_index") for e in extra if isinstance(e, dict)]
    return [n for n in names if isinstance(n, str) and _safe(n)]


def earlier_archives(
    dest: Location, earlier: dict, recorded: dict[int, dict], *, overwrite: bool, retrier: Retrier
) -> list[str]:
    """What the new run must remove at its end if it does not rewrite it: the list an
    interrupted ``--overwrite`` kept in its run state; with ``--overwrite`` also the archives
    of the manifest about to be removed and the shards an interrupted run recorded."""
    kept = earlier.get("replaced")
    names = [n for n in kept if _safe(n)] if isinstance(kept, list) else []
    if overwrite:
        names += manifest_archives(dest, retrier)
        for record in recorded.values():
            name = record.get("name")
            if isinstance(name, str) and _safe(name):
                names += [name]
                if name.endswith(".tar"):
                    names += [index_name(name)]  # removed only if present, as every name
    return sorted(set(names))


def stale(old: Iterable[str], new_names: Iterable[str], dali_index: bool) -> list[str]:
    """The names of ``old`` that the new run's output does not have."""
    new = set(new_names)
    if dali_index:
        new |= {index_name(n) for n in new}
    return [n for n in old if n not in new]


def remove_archives(dest: Location, names: Iterable[str], retrier: Retrier) -> int:
    """Remove ``names`` (those present) from DST; how many were removed. Which are present
    comes from one listing of DST (regular files only locally: a link or a folder under an old
    shard's name is no archive, and nothing is removed through a link); then one bulk delete."""
    wanted = {dest.key(name) for name in names}
    if not wanted:
        return 0
    store = dest.store
    with dest.translated("destination"):
        present = [
            obj.key
            for page in store.pages(dest.key(""), retrier)
            for obj in page
            if obj.key in wanted
        ]
        retrier.run(lambda: store.delete(present))
    return len(present)
