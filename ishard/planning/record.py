"""What a run's plan was made from (recorded in ``run.json``) and, when a ``--resume`` finds
another plan, what changed: options old → new, source files new, gone or changed."""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Collection
from itertools import accumulate

import orjson

from ..formats.registry import identities, identity_fields
from ..model import Plan
from ..names import quoted, shown
from ..sizes import describe_size, format_size
from ..version import __version__
from .table import FileTable, ShardList, column_sum, int64_bytes

SEGMENTS = 256  # the listing is recorded as at most this many runs of names: run.json stays small
EXAMPLES = 3  # names shown per kind of change
CUT_OPTIONS = frozenset({"shard_size", "samples_per_shard"})  # shown together, as --shard-size


def shaping_options(options: dict, execution_only: Collection[str]) -> dict:
    """The options that shape the shards: all but those that only say how a run goes
    (``execution_only``, the option table's ``EXECUTION_ONLY``)."""
    return {k: v for k, v in options.items() if k not in execution_only}


def _listing(plan: Plan) -> FileTable | None:
    return plan.shards.listing if isinstance(plan.shards, ShardList) else None


def _digests(files: FileTable, start: int, stop: int) -> tuple[str, str]:
    """Digests of the names, and of the sizes, mtimes and stamps, of files ``start:stop``."""
    names = files.names.joined(start, stop)  # the names' bytes, none decoded
    content = hashlib.blake2b(digest_size=8)
    for column in (files.sizes, files.mtimes, files.stamps):
        content.update(int64_bytes(column[start:stop]))  # as 8-byte ints, whatever the width
    return hashlib.blake2b(names, digest_size=8).hexdigest(), content.hexdigest()


def listing_record(files: FileTable) -> dict:
    """The listing in bounded space: file and byte totals, and per run of consecutive names
    (at most SEGMENTS runs; one name each for a small source) its first name, its length and
    digests of its names and of their sizes, mtimes and identity stamps."""
    count = len(files)
    step = max(1, -(-count // SEGMENTS))
    segments = [
        [shown(files.names[i]), min(step, count - i), *_digests(files, i, i + step)]
        for i in range(0, count, step)
    ]
    return {"files": count, "bytes": column_sum(files.sizes), "segments": segments}


def _facts(plan: Plan, execution_only: Collection[str]) -> dict:
    shaping = shaping_options(plan.options, execution_only)
    options = orjson.loads(orjson.dumps(shaping))  # as run.json holds them
    return {
        "ishard": __version__,
        **identities(plan.options),  # the libraries the formats write with: "gzip"
        "source": plan.source,
        "seed": plan.seed,
        "options": options,
    }


def plan_record(plan: Plan, execution_only: Collection[str]) -> dict:
    """What the plan was made from, for ``run.json``: ishard's version, the gzip library, the
    source, the shaping options (all but ``execution_only``), the seed and the listing (see
    ``listing_record``)."""
    record = _facts(plan, execution_only)
    files = _listing(plan)
    if files is not None:
        record["listing"] = listing_record(files)
    return record


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _value(key: str, value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "none"
    text = shown(str(value))
    return text if len(text) <= 60 else text[:57] + "..."


def _cut(options: dict) -> str:
    """How shards were cut, as one would type it: ``300B``, ``3 samples``, ``300B or 3 samples``."""
    size, count = options.get("shard_size"), options.get("samples_per_shard")
    parts = [
        describe_size(size) if isinstance(size, int) else None,
        f"{count} samples" if count is not None else None,
    ]
    return " or ".join(p for p in parts if p) or "unset"


def _option_changes(earlier: dict, now: dict, execution_only: Collection[str]) -> list[str]:
    old, new = earlier.get("options"), now["options"]
    if not isinstance(old, dict):
        return []
    keys = [*new, *(k for k in old if k not in new)]
    changes = [
        f"{_flag(k)} {_value(k, old.get(k))} → {_value(k, new.get(k))}"
        for k in keys
        if k not in execution_only and k not in CUT_OPTIONS and old.get(k) != new.get(k)
    ]
    if _cut(old) != _cut(new):  # one change as typed: --shard-size 3 → 300B
        changes.insert(0, f"--shard-size {_cut(old)} → {_cut(new)}")
    if old.get("sort") == new.get("sort") and earlier.get("seed") != now["seed"]:
        changes.append(f"shuffle seed {earlier.get('seed')} → {now['seed']}")
    facts = (("source", "source"), ("ishard", "ishard version"))
    for key, what in facts + tuple((i.key, i.label) for i in identity_fields()):
        if key in earlier and earlier[key] != now[key]:
            changes.append(f"{what} {quoted(str(earlier[key]))} → {quoted(str(now[key]))}")
    return changes


def _examples(kind: str, names: list[str], count: int) -> str:
    more = f" and {count - len(names)} more" if count > len(names) else ""
    return f"{kind} {count}: {', '.join(map(shown, names))}{more}"


class _Kind:
    """Files of one kind of change: how many, and the first few names."""

    def __init__(self) -> None:
        self.count = 0
        self.names: list[str] = []

    def add(self, names: list[str]) -> None:
        self.count += len(names)
        self.names += names[: EXAMPLES - len(self.names)]


def _listing_changes(old: dict, files: FileTable) -> str | None:
    """``source: 44 → 45 files (new 1: a/b.jpg; gone …; changed …)``; None if alike."""
    segments = old.get("segments")
    if not isinstance(segments, list):
        return None
    names = files.names
    cuts = list(accumulate((bisect_left(names, s[0]) for s in segments), max))
    cuts.append(len(names))
    new, gone, changed = _Kind(), _Kind(), _Kind()
    new.add(names[: cuts[0]] if segments else list(names))
    ranges: list[str] = []
    for (first, count, names_digest, content_digest), a, b in zip(segments, cuts, cuts[1:]):
        if b - a == count and _digests(files, a, b) == (names_digest, content_digest):
            continue
        if count == 1:  # a one-name run: exactly what happened to that name, and what is new
            _one_name_run(files, a, b, first, content_digest, (new, gone, changed))
        else:
            ranges.append(_run_text(files, a, b, first, count, names_digest))
    details = [
        _examples(k, c.names, c.count)
        for k, c in (("new", new), ("gone", gone), ("changed", changed))
        if c.count
    ]
    if ranges:
        more = f" and {len(ranges) - EXAMPLES} more runs" if len(ranges) > EXAMPLES else ""
        details.append("differences in " + "; ".join(ranges[:EXAMPLES]) + more)
    if not details and old.get("files") == len(names):
        return None
    return _totals(old.get("files"), len(names), old.get("bytes"), column_sum(files.sizes)) + (
        f" ({'; '.join(details)})" if details else ""
    )


def _one_name_run(
    files: FileTable,
    a: int,
    b: int,
    first: str,
    content_digest: str,
    kinds: tuple[_Kind, _Kind, _Kind],
) -> None:
    """Tell ``kinds`` (new, gone, changed) what became of the run of one name ``first``, now
    the names ``a:b`` of ``files``."""
    new, gone, changed = kinds
    names = files.names
    here = a < b and shown(names[a]) == first
    if not here:
        gone.add([first])
    elif _digests(files, a, a + 1)[1] != content_digest:
        changed.add([names[a]])
    new.add(names[a + 1 if here else a : b])


def _run_text(files: FileTable, a: int, b: int, first: str, count: int, names_digest: str) -> str:
    """``contents of 3 files from a to c`` or ``3 → 4 files from a to d``: how the run of
    ``count`` names from ``first``, now the names ``a:b`` of ``files``, differs."""
    last = shown(files.names[b - 1]) if b > a else first
    same = b - a == count and _digests(files, a, b)[0] == names_digest
    what = f"contents of {count} files" if same else f"{count} → {b - a} files"
    return f"{what} from {first} to {last}"


def _totals(
    old_files: object, files: int, old_bytes: object, nbytes: int, noun: str = "files"
) -> str:
    """``source: 44 → 45 files, 2.48MiB → 2.50MiB``, each part once where it did not change."""
    text = (
        f"source: {old_files} → {files} {noun}" if old_files != files else f"source: {files} {noun}"
    )
    if old_bytes != nbytes:
        old, new = (
            format_size(old_bytes) if isinstance(old_bytes, int) else "?",
            format_size(nbytes),
        )
        text += f", {old} → {new}" if old != new else f", {old_bytes} → {nbytes} bytes"
    return text


def differences(earlier: dict, plan: Plan, execution_only: Collection[str]) -> list[str]:
    """What differs between the plan ``earlier`` recorded (a ``plan_record``, or a manifest's
    ``ishard`` record) and ``plan``: one phrase per option that shapes the shards (all but
    ``execution_only``), then one for the source."""
    now = _facts(plan, execution_only)
    if "version" in earlier and "ishard" not in earlier:  # a manifest's record
        earlier = {**earlier, "ishard": earlier["version"]}
    changes = _option_changes(earlier, now, execution_only)
    files = _listing(plan)
    listing = earlier.get("listing")
    if isinstance(listing, dict) and files is not None:
        source = _listing_changes(listing, files)
        if source:
            changes.append(source)
    elif isinstance(earlier.get("totals"), dict):  # a manifest: planned totals only
        totals = earlier["totals"]
        if (totals.get("files"), totals.get("payload_bytes")) != (plan.file_count, plan.size):
            changes.append(
                _totals(
                    totals.get("files"),
                    plan.file_count,
                    totals.get("payload_bytes"),
                    plan.size,
                    "files planned",
                )
            )
    return changes
