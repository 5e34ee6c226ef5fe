"""Two destinations compared (``ishard diff``): the shards added, removed or rewritten, and
the samples added, removed, changed or moved from one shard to another.

A shard both manifests list under one name with one recorded checksum and size holds the same
bytes on both sides, so it holds the same samples and is not read. Every other shard is read
member by member (a digest of each member's bytes, in bounded memory), and its members are
grouped into samples by the key each manifest's options give (``member_key_function``). A
sample is the same when its members have the same names, sizes and bytes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import DataError, IshardError
from ..names import wds_split
from ..run.manifest import entry_checksum, member_key_function, read_manifest
from ..store import Location
from .archive import digests
from .dataset import ROLE, dataset
from .verify import shard_readers

Contents = tuple[tuple[str, int, bytes], ...]  # a sample's members: name, size, digest


@dataclass(frozen=True)
class SampleChange:
    """A sample that differs: its key, and the shard holding it on each side (None where it
    is not there)."""

    key: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class Difference:
    """What differs between the destinations ``old`` and ``new``: each shard and sample
    (``ishard diff --samples``); its ``repr`` is the counts (what ``ishard diff`` prints)."""

    old: str
    new: str
    shards_added: tuple[str, ...]
    shards_removed: tuple[str, ...]
    shards_rewritten: tuple[str, ...]
    shards_same: int
    samples_added: tuple[SampleChange, ...]
    samples_removed: tuple[SampleChange, ...]
    samples_changed: tuple[SampleChange, ...]
    samples_moved: tuple[SampleChange, ...]

    @property
    def same(self) -> bool:
        """Nothing differs."""
        return not (
            self.shards_added
            or self.shards_removed
            or self.shards_rewritten
            or self.samples_added
            or self.samples_removed
            or self.samples_changed
            or self.samples_moved
        )

    def __repr__(self) -> str:  # the counts, as the command prints them: a re-cut moves all
        return (
            f"Difference(same={self.same}, shards_added={len(self.shards_added)}, "
            f"shards_removed={len(self.shards_removed)}, "
            f"shards_rewritten={len(self.shards_rewritten)}, shards_same={self.shards_same}, "
            f"samples_added={len(self.samples_added)}, "
            f"samples_removed={len(self.samples_removed)}, "
            f"samples_changed={len(self.samples_changed)}, "
            f"samples_moved={len(self.samples_moved)}, old={self.old!r}, new={self.new!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        """As ``ishard diff --json`` prints it."""

        def changes(found: tuple[SampleChange, ...]) -> list[dict]:
            return [{"key": c.key, "old_shard": c.old, "new_shard": c.new} for c in found]

        return {
            "old": self.old,
            "new": self.new,
            "same": self.same,
            "shards": {
                "added": list(self.shards_added),
                "removed": list(self.shards_removed),
                "rewritten": list(self.shards_rewritten),
                "same": self.shards_same,
            },
            "samples": {
                "added": changes(self.samples_added),
                "removed": changes(self.samples_removed),
                "changed": changes(self.samples_changed),
                "moved": changes(self.samples_moved),
            },
        }


@dataclass(frozen=True)
class _Side:
    location: Location
    shards: dict[str, Mapping]  # shardlist entries by name, in manifest order
    key_of: Callable[[str], str]


def _side(url: str, endpoint_url: str | None, storage_options) -> _Side:
    """A destination, or the destination of a ``manifest.json`` named directly."""
    location = dataset(url, endpoint_url=endpoint_url, storage_options=storage_options)
    manifest = read_manifest(location)
    record = manifest.get("ishard")
    key_of = (
        member_key_function(record.get("options", {}))
        if record
        else (lambda name: wds_split(name)[0])
    )
    return _Side(location, {e["url"]: e for e in manifest["shardlist"]}, key_of)


def _unchanged(a: Mapping, b: Mapping) -> bool:
    """Both entries promise the same bytes: one recorded checksum, one size."""
    checksum = entry_checksum(a)
    return checksum is not None and checksum == entry_checksum(b) and a["filesize"] == b["filesize"]


Read = tuple[dict[str, tuple[str, Contents]], dict[str, Contents]]


def _samples(side: _Side, names: list[str]) -> Read:
    """The samples of shards ``names`` of ``side`` (key → shard, members) and each shard's
    members in archive order."""

    def read(name: str) -> list[tuple[str, str, int, bytes]]:
        where = side.location
        try:
            with where.store.open_read(where.key(name)) as raw:
                return [(side.key_of(m.name), m.name, m.size, d) for m, d in digests(name, raw)]
        except FileNotFoundError:
            raise _not_there(name, where) from None
        except IshardError:
            raise
        except Exception as err:  # noqa: BLE001 — a store's many error types, translated once
            raise where.error(err, ROLE) from None

    jobs = shard_readers(side.location)
    found: dict[str, tuple[str, list[tuple[str, int, bytes]]]] = {}
    shards: dict[str, Contents] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, members in zip(names, pool.map(read, names)):
            shards[name] = tuple(m[1:] for m in members)
            for key, member, size, digest in members:
                shard, kept = found.setdefault(key, (name, []))
                if shard != name:
                    raise DataError(
                        f"sample {key!r} is in two shards of {side.location.url!r} ({shard!r} "
                        f"and {name!r}) — check it with ishard verify --deep"
                    )
                kept.append((member, size, digest))
    samples = {key: (shard, tuple(sorted(kept))) for key, (shard, kept) in found.items()}
    return samples, shards


def _not_there(name: str, where: Location) -> DataError:
    return DataError(
        f"shard {name!r}, which the manifest of {where.url!r} lists, is not there — "
        f"check the destination with ishard verify {where.url}"
    )


def _check_there(side: _Side, names: list[str]) -> None:
    """Each of ``names``, shards ``side``'s manifest lists and that are not read, is there:
    a manifest's promise says nothing of a shard deleted since.

    Raises:
        DataError: naming the first one missing, in manifest order.
    """
    where = side.location

    def there(name: str) -> bool:
        try:
            where.store.stat(where.key(name))
        except FileNotFoundError:
            return False
        except IshardError:
            raise
        except Exception as err:  # noqa: BLE001 — a store's many error types, translated once
            raise where.error(err, "destination") from None
        return True

    with ThreadPoolExecutor(max_workers=shard_readers(where)) as pool:
        for name, found in zip(names, pool.map(there, names)):
            if not found:
                raise _not_there(name, where)


def diff(
    old: str, new: str, *, endpoint_url: str | None = None, storage_options=None
) -> Difference:
    """Compare the destinations (or manifests) ``old`` and ``new``.

    Raises:
        UsageError: a destination does not exist.
        DataError: no manifest, a broken one, a shard a manifest lists that is not there, or
            a sample in two shards of one side.
        IshardError: a damaged shard; the store cannot be reached.
    """
    a, b = _side(old, endpoint_url, storage_options), _side(new, endpoint_url, storage_options)
    same = {n for n in a.shards if n in b.shards and _unchanged(a.shards[n], b.shards[n])}
    for side in (a, b):
        _check_there(side, [n for n in side.shards if n in same])
    read_a = [n for n in a.shards if n not in same]
    read_b = [n for n in b.shards if n not in same]
    (before, old_shards), (after, new_shards) = _samples(a, read_a), _samples(b, read_b)
    removed, changed, moved = [], [], []
    for key, (shard, contents) in before.items():
        if key not in after:
            removed.append(SampleChange(key, shard, None))
            continue
        now, now_contents = after[key]
        if contents != now_contents:
            changed.append(SampleChange(key, shard, now))
        elif shard != now:
            moved.append(SampleChange(key, shard, now))
    added = [
        SampleChange(key, None, shard) for key, (shard, _) in after.items() if key not in before
    ]
    both = [n for n in read_b if n in a.shards]
    rewritten = [n for n in both if old_shards[n] != new_shards[n]]
    return Difference(
        old=a.location.url,
        new=b.location.url,
        shards_added=tuple(n for n in read_b if n not in a.shards),
        shards_removed=tuple(n for n in read_a if n not in b.shards),
        shards_rewritten=tuple(rewritten),
        shards_same=len(same) + len(both) - len(rewritten),
        samples_added=tuple(added),
        samples_removed=tuple(removed),
        samples_changed=tuple(changed),
        samples_moved=tuple(moved),
    )
