"""A growing dataset (``--append``, ``--update``): what its destination holds, read from its
manifest and sample index and checked against this run's options, for the plan to compare
the source with."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from ..errors import DataError, UsageError
from ..model import Growth
from ..options.record import Options
from ..options.recorded import compared
from ..planning.engine.growth import Held, private_engine
from ..progress import Progress
from ..sizes import counted
from ..store import Location
from ..store.lockrecord import STATE_DIR
from ..store.retry import Retrier
from ..store.sinks import name_taken, put_local_file
from .manifest import MANIFEST_NAME, read_manifest
from .sampleindex import INDEX_NAME, fetch_index

HELD_NAME = f"{STATE_DIR}/held.parquet"
CLEANUP_RETRIES = 11  # aborting an upload after a failure: about 40 s of patience  # the index the run began from, for its --resume


@dataclass(frozen=True)
class Holding:
    """A growing destination as this run found it: its manifest and what the plan compares
    the source with."""

    manifest: dict
    held: Held

    @property
    def index(self) -> Mapping:
        """The manifest's record of the sample index."""
        return self.manifest["ishard"]["samples_index"]


def mode_of(opts: Options) -> str | None:
    """``"append"``, ``"update"`` or None (a run that does not grow a dataset)."""
    return "update" if opts.update else "append" if opts.append else None


@contextmanager
def holding(dest: Location, opts: Options) -> Iterator[Holding]:
    """What DST holds, its index fetched into a private folder (gone at the end).

    Raises:
        UsageError: DST holds no dataset, one without a sample index, or one made with other
            options (named, with the recorded value).
        DataError: its index is not the one its manifest names.
    """
    mode = mode_of(opts)
    assert mode is not None
    flag = f"--{mode}"
    try:
        doc = read_manifest(dest)
    except DataError:
        raise no_dataset(flag, dest) from None
    record = doc.get("ishard") or {}
    index = record.get("samples_index")
    if not isinstance(index, dict):
        raise UsageError(
            f"{flag}: the dataset in {dest.url!r} has no sample index ({INDEX_NAME}), which "
            f"{flag} compares the source with — it was written by an earlier ishard or with "
            "--no-sample-index; shard it again with --overwrite"
        )
    if index.get("made_from") is not None:
        raise UsageError(
            f"{flag}: the sample index of {dest.url!r} was read from its shards' headers "
            "(ishard index): it does not name the source files growth compares with — shard "
            "the source into it again with --overwrite"
        )
    compared(opts, record.get("options", {}), None, flag, dest.url)  # taken before the lock
    numbering = checked_numbering(record.get("numbering"), opts)
    with private_engine(opts.tmp_dir) as (_con, folder):
        path = _fetched(dest, index, folder)
        shards = tuple(e["url"] for e in doc["shardlist"])
        counts = _said_counts(doc)
        held = Held(path, shards, numbering, mode, counts, int(opts.max_remove))
        yield Holding(doc, held)


def no_dataset(flag: str, dest: Location) -> UsageError:
    """The refusal of growth into a DST that holds no finished dataset (and is not empty)."""
    return UsageError(
        f"{flag}: {dest.url!r} holds no finished dataset ({MANIFEST_NAME} is missing) — "
        f"shard into it without {flag} first, or add --resume to finish its run"
    )


def _said_counts(doc: Mapping) -> tuple[tuple[int, int], ...]:
    """Per shard the manifest lists: the samples and files it says the shard holds (what
    the sample index must agree with); -1 where it says nothing readable."""

    def whole(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else -1

    records = doc.get("ishard", {}).get("shards")
    records = records if isinstance(records, list) else []
    records += [{}] * (len(doc["shardlist"]) - len(records))
    return tuple(
        (whole(e.get("nsamples")), whole(r.get("files") if isinstance(r, dict) else None))
        for e, r in zip(doc["shardlist"], records)
    )


def checked_numbering(numbering: object, opts: Options) -> tuple[int, ...]:
    """The manifest's ``ishard.numbering`` as a claim: a whole number from 0 to its template's
    count of names, one per shard template this run's options make (the template, or each
    ``--ekm`` format's). Whether the names it gives are free is checked once they are planned
    (``planning.engine.growth.check_new_names``).

    Raises:
        DataError: it is something else, named with the fix.
    """
    ekm = opts.parsed_ekm
    templates = [opts.template] if ekm is None else [c.template for c in ekm.categories]
    if (
        isinstance(numbering, list)
        and len(numbering) == len(templates)
        and all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= t.count
            for n, t in zip(numbering, templates)
        )
    ):
        return tuple(numbering)
    shown = json.dumps(numbering)
    shown = shown if len(shown) <= 80 else shown[:76] + " ..."
    want = counted(len(templates), "whole number")
    raise DataError(
        f"{MANIFEST_NAME}'s ishard.numbering is {shown}, where this dataset's shard templates "
        f"need {want} from 0 to the names each yields (the next unused name of each) — run "
        "ishard verify on the destination, or re-shard it with --overwrite"
    )


def check_free(dest: Location, names: Sequence[str], retrier: Retrier) -> None:
    """Nothing is at any of ``names`` (a growing dataset's new shards, which the manifest does
    not list): a file or object there is someone's, never written over. Locally each name is
    looked up; in a store DST is listed once.

    Raises:
        DataError: naming the first one found.
    """
    store = dest.store
    with dest.translated("destination"):
        if store.capabilities.folders:
            found = next(
                (n for n in names if retrier.run(partial(store.exists, dest.key(n)))), None
            )
        else:
            wanted = {dest.key(n): n for n in names}
            listed = (o.key for page in store.pages(dest.key(""), retrier) for o in page)
            found = next((wanted[k] for k in listed if k in wanted), None)
    if found is not None:
        raise name_taken(dest.child(found))


def _fetched(dest: Location, index: Mapping, folder: str) -> str:
    """The index the manifest names, from DST; else the copy a run that stopped between
    publishing a new index and its manifest kept in its records."""
    try:
        return fetch_index(dest, index, folder, INDEX_NAME)
    except DataError as first:
        try:
            return fetch_index(dest, index, folder, HELD_NAME)
        except DataError:
            raise first from None


def keep_held(dest: Location, path: str, retrier: Retrier, opts: Options) -> None:
    """Keep the index this run compared with in its records until it ends (streamed, not
    held in memory): a run stopped after it published the new index and before its manifest
    finds the old one there."""
    cleanup = Retrier(CLEANUP_RETRIES, cap=4.0)
    put_local_file(
        dest, HELD_NAME, path, retrier=retrier, cleanup=cleanup, part_size=opts.part_size
    )


def tell_unchanged(growth: Growth, dest: Location, progress: Progress) -> None:
    progress.notice(
        f"nothing to {growth.mode}: the dataset in {dest.url!r} holds every one of the "
        f"source's {counted(growth.held, 'sample')} as it is; nothing was written"
    )
