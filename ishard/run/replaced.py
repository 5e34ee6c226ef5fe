"""``--overwrite``: the earlier run's archives the new run does not rewrite, removed once the
new manifest is in place (never before, so a failed run leaves the rest of the old dataset)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from warnings import warn

import orjson

from ..errors import IshardWarning, UsageError
from ..formats import extensions
from ..formats.dali_index import index_name
from ..formats.indexes import companions, dataset_files, indexes_of
from ..names import shown
from ..planning.templates import parse_template
from ..progress import Progress
from ..sizes import counted
from ..store import Location
from ..store.local.state import NotRegularRecord
from ..store.retry import Retrier
from .manifest import MANIFEST_NAME
from .resume import manifest_data
from .state import still_complete

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _flat(name: object) -> bool:
    """A name ishard could have given a file of its own in DST: flat (shard templates hold no
    '/'), not hidden, no control character, not the manifest."""
    return (
        isinstance(name, str)
        and bool(name)
        and not any(c in name for c in "/\\")
        and not name.startswith(".")
        and not _CONTROL.search(name)
        and name != MANIFEST_NAME
    )


def _shapes(options: object) -> list[re.Pattern] | None:
    """Patterns of the shard names a recorded ``shard_template`` and ``ext`` make (the digits
    of the number free); None when the record does not say (an ``--ekm`` run, a damaged or
    older manifest): then the name rules alone decide."""
    if not isinstance(options, dict) or options.get("ekm"):
        return None
    text, ext = options.get("shard_template"), options.get("ext")
    exts = extensions()
    if not isinstance(text, str) or ext not in exts:
        return None
    try:
        gaps = parse_template(text).gaps
    except UsageError:
        return None
    stem = "[0-9]+".join(map(re.escape, gaps))
    any_ext = "|".join(map(re.escape, exts))
    return [re.compile(stem + re.escape(ext)), re.compile(f"{stem}(?:{any_ext})")]


def _archive(name: object, shapes: list[re.Pattern] | None) -> bool:
    """Could ishard have written this archive (under the earlier run's template, if known)?"""
    return (
        isinstance(name, str)
        and _flat(name)
        and name.endswith(extensions())
        and (shapes is None or any(p.fullmatch(name) for p in shapes))
    )


def _sorted_out(
    archives: Iterable[object], indexes: Iterable[tuple[object, object]], shapes
) -> tuple[list[str], list[str]]:
    """(the archives, and the DALI indexes of ``.tar`` ones, that ishard could have written;
    the other names, shown, to leave alone). ``indexes``: (shard, index) pairs."""
    names: list[str] = []
    ignored: list[object] = []
    for name in archives:
        if isinstance(name, str) and _archive(name, shapes):
            names.append(name)
        else:
            ignored.append(name)
    for shard, index in indexes:
        expected = index_name(shard) if isinstance(shard, str) and shard.endswith(".tar") else None
        if isinstance(index, str) and index == expected and _archive(shard, shapes):
            names.append(index)
        elif index is not None:
            ignored.append(index)
    return names, [shown(n) if isinstance(n, str) else repr(n) for n in ignored]


def manifest_archives(dest: Location, retrier: Retrier) -> tuple[list[str], list[str]]:
    """The archives ``DST/manifest.json`` lists (and their DALI indexes) that ishard could
    have written: flat names with an archive extension ishard writes, of the shape the
    manifest's recorded template and extension give; and the listed names left alone.

    Only listed names count: a file that merely looks like a shard may be someone else's. A
    link or a FIFO planted under the manifest's name lists nothing (it is replaced, unread)."""
    try:
        data = manifest_data(dest, retrier)
    except NotRegularRecord:
        return [], []
    try:
        document = orjson.loads(data) if data else {}
        entries = document.get("shardlist") or []
        record = document.get("ishard") or {}
        extra = record.get("shards") or []
        shapes = _shapes(record.get("options"))
        archives = [e.get("url") for e in entries if isinstance(e, dict)]
        indexes = [(e.get("name"), e.get("dali_index")) for e in extra if isinstance(e, dict)]
        energon = _energon(record.get("options"))
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return [], []
    names, ignored = _sorted_out(archives, indexes, shapes)
    if energon:  # the dataset's Energon files, which its record says ishard wrote
        tars = [n for n in names if n.endswith(".tar")]
        names += [*companions(tars, frozenset({"energon"})), *dataset_files(frozenset({"energon"}))]
    return names, ignored


def _energon(options: object) -> bool:
    """Whether a manifest's recorded options wrote Energon's files."""
    if not isinstance(options, dict) or not isinstance(options.get("index"), str):
        return False
    try:
        return "energon" in indexes_of(options["index"])
    except UsageError:
        return False


def earlier_archives(
    dest: Location, earlier: dict, recorded: dict[int, dict], *, overwrite: bool, retrier: Retrier
) -> tuple[list[str], list[str]]:
    """What the new run must remove at its end if it does not rewrite it: the list an
    interrupted ``--overwrite`` kept in its run state; with ``--overwrite`` also the archives
    of the manifest about to be removed and the shards an interrupted run recorded. Second:
    the names listed there that are no archive ishard could have written (left alone)."""
    kept = earlier.get("replaced")
    kept = kept if isinstance(kept, list) else []
    names, ignored = _sorted_out(
        [n for n in kept if not str(n).endswith(".idx")],
        [
            (n.removesuffix(".idx") + ".tar", n)
            for n in kept
            if isinstance(n, str) and n.endswith(".idx")
        ],
        None,
    )
    if overwrite:
        listed, skipped = manifest_archives(dest, retrier)
        shards = [r.get("name") for r in recorded.values()]
        more, others = _sorted_out(
            shards,
            [(n, index_name(n)) for n in shards if isinstance(n, str) and n.endswith(".tar")],
            None,
        )
        names, ignored = names + listed + more, ignored + skipped + others
    return sorted(set(names)), sorted(set(ignored))


def stopped_leftovers(
    dest: Location, recorded: Mapping[int, dict], listed: Iterable[str], retrier: Retrier
) -> list[str]:
    """The shards a stopped run published that the manifest does not list (``listed``) and
    that are still as the run recorded them — their size, then their ETag or checksum
    (``state.still_complete``): the evidence that they are that run's, not someone's files;
    only names ishard could have written (index files beside them are the caller's). What a
    growing run that plans otherwise removes before it writes: no manifest ever named them,
    so no reader of the dataset reads them; any other file at a new name is left to
    ``grow.check_free`` to refuse."""
    shown = set(listed)
    records = [r for r in recorded.values() if r.get("name") not in shown]
    names, _ = _sorted_out([r.get("name") for r in records], [], None)
    ours = [r["name"] for r in records if r["name"] in names and still_complete(dest, r, retrier)]
    return sorted(ours)


def stale(old: Iterable[str], new_names: Iterable[str], indexes: frozenset[str]) -> list[str]:
    """The names of ``old`` that the new run's output (its shards, and the ``indexes``
    beside them) does not have."""
    new = list(new_names)
    written = {*new, *companions(new, indexes), *dataset_files(indexes)}
    return [n for n in old if n not in written]


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


def tell_ignored(dest: Location, names: list[str], progress: Progress, stacklevel: int = 2) -> None:
    """Warn (once) of the names an earlier run's manifest or records list that are no
    archive ishard could have written: ``--overwrite`` leaves them alone. ``stacklevel``: the
    frame the ``IshardWarning`` names, counted from here (the caller of ``shard()``)."""
    if not names:
        return
    some = ", ".join(map(repr, names[:5])) + (f" and {len(names) - 5} more" * (len(names) > 5))
    line = (
        f"the earlier run's manifest.json or records in {dest.url!r} list "
        f"{counted(len(names), 'name')} that ishard does not write as archives ({some}): "
        "they are left alone, not removed"
    )
    progress.warning(line)
    warn(line, IshardWarning, stacklevel=stacklevel)
