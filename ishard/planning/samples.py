"""Group listed files into samples by key, route them by EKM, apply the missing-extension policy."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import replace
from itertools import islice

from ..errors import DataError
from ..model import Tally
from .ekm import Ekm
from .keys import KeyFunction, extension, sample_keys
from .namecolumn import Names
from .table import FileTable, SampleTable, int_column, int_view

ACTIONS = ("ignore", "warn", "abort", "exclude")
WARNINGS_SHOWN = 10
EXTRA = "extension not in --sample-exts (--missing-extension-action exclude)"
REPEATED = "second file of a sample with the same extension (--missing-extension-action exclude)"
INCOMPLETE = (
    "file of a sample that lacks an extension of --sample-exts (--missing-extension-action exclude)"
)


NUMPY_FROM = 1 << 16  # files from which grouping gathers with numpy (its import is ~0.1 s)
CHUNK = 1 << 16  # files numbered at a time


def group_table(files: FileTable, key: KeyFunction) -> SampleTable:
    """Samples in order of first appearance; each sample's files in listing order (as the
    listing's maker found them, when it did, for the same key function)."""
    table = SampleTable(files)
    grouping = files.handover.grouping
    if grouping is not None and grouping.key is key:
        table.keys, table.starts, table.members = grouping.keys, grouping.starts, grouping.members
        table.flat, table.findings = grouping.flat, grouping.findings
        files.handover = replace(files.handover, grouping=None)  # the table holds them now
        table.sizes = grouping.sizes
        return table
    table.keys, sample_of = _numbered(files, key)
    if len(table.keys) == len(files):  # one file per sample, in order: nothing to gather
        table.members = array("q", range(len(files)))
        table.starts = array("q", range(len(files) + 1))
        table.sizes = array("q", files.sizes)
        return table
    gather = _gather_numpy if len(files) >= NUMPY_FROM else _gather
    table.starts, table.members, table.sizes = gather(sample_of, len(table.keys), files.sizes)
    return table


def _numbered(files: FileTable, key: KeyFunction) -> tuple[Names, array]:
    """The sample keys in order of first appearance, and each file's sample number."""
    ids: dict[str, int] = {}
    number = ids.setdefault  # a new key gets the next number, len(ids) before it is added
    keys = sample_keys(files.names, key)
    sample_of = array("q")
    while chunk := [number(k, len(ids)) for k in islice(keys, CHUNK)]:  # bounded: no list
        sample_of.extend(chunk)  # of an int object per file
    return Names(ids), sample_of


Gathered = tuple[array, array, array]


def _gather(sample_of: array, samples: int, file_sizes: array) -> Gathered:
    """(each sample's first slot in ``members``, files by sample in listing order, sample
    sizes) by a counting sort."""
    counts = array("q", bytes(8 * (samples + 1)))
    for i in sample_of:
        counts[i + 1] += 1
    for i in range(1, len(counts)):
        counts[i] += counts[i - 1]
    starts = array("q", counts)
    members = array("q", bytes(8 * len(sample_of)))
    sizes = array("q", bytes(8 * samples))
    for f, i in enumerate(sample_of):
        members[counts[i]] = f
        counts[i] += 1
        sizes[i] += file_sizes[f]
    return starts, members, sizes


def _gather_numpy(sample_of: array, samples: int, file_sizes: array) -> Gathered:
    """:func:`_gather` as whole-array operations: a stable argsort keeps listing order."""
    import numpy as np

    of = np.frombuffer(sample_of, dtype=np.int64)
    starts = np.zeros(samples + 1, dtype=np.int64)
    np.cumsum(np.bincount(of, minlength=samples), out=starts[1:])
    first = int_column(starts)
    del starts  # each numpy column goes once copied: at ten million files each is 80 MB
    sizes = np.zeros(samples, dtype=np.int64)
    np.add.at(sizes, of, int_view(file_sizes))
    totals = int_column(sizes, narrow=False)  # sample sizes: 8 bytes, whatever they are
    del sizes
    return first, int_column(np.argsort(of, kind="stable")), totals


def route_table(table: SampleTable, ekm: Ekm | None, tally: Tally) -> list[SampleTable]:
    """Split samples into EKM categories (one group when there is no EKM).

    Files matching no pattern, or several, are left out and counted; a sample whose files fall
    into different categories is an error.
    """
    if ekm is None:
        return [table]
    table.hold()  # read sample by sample
    names = table.files.names
    groups = [SampleTable(table.files) for _ in ekm.categories]
    for index, key in enumerate(table.keys):
        kept: list[int] = []
        where: dict[int, str] = {}
        for f in table.file_indices(index):
            cat = ekm.category(names[f])
            if isinstance(cat, str):
                tally.add(cat, names[f])
            else:
                kept.append(f)
                where.setdefault(cat, names[f])
        if len(where) > 1:
            (a, fa), (b, fb) = list(where.items())[:2]
            raise DataError(
                f"sample {key!r} is split by --ekm: {fa!r} goes to "
                f"{ekm.categories[a].template.text!r} but {fb!r} to "
                f"{ekm.categories[b].template.text!r} — make the patterns keep a sample together"
            )
        if kept:
            groups[next(iter(where))].add(key, kept)
    return groups


def _problems(names: Sequence[str], wanted: Sequence[str]) -> tuple[list[int], list[str]]:
    """Positions of files whose extension is unwanted or repeated; wanted extensions missing."""
    seen: set[str] = set()
    extra = []
    for pos, name in enumerate(names):
        ext = extension(name)
        if ext in wanted and ext not in seen:
            seen.add(ext)
        else:
            extra.append(pos)
    return extra, [e for e in wanted if e not in seen]


def apply_sample_exts_table(
    table: SampleTable, wanted: Sequence[str], action: str, tally: Tally, warnings: list[str]
) -> SampleTable:
    """Check every sample against ``wanted`` extensions and act as ``action`` says.

    ``warn`` lists offenders (at most ``WARNINGS_SHOWN`` lines, then a count); ``abort`` raises
    on the first one; ``exclude`` drops unwanted or repeated files and incomplete samples.
    """
    if not wanted or action == "ignore":
        return table
    table.hold()  # read sample by sample
    all_names = table.files.names
    kept = SampleTable(table.files)
    offenders = 0
    for index, key in enumerate(table.keys):
        files = table.file_indices(index)
        names = all_names.take(files)
        extra, missing = _problems(names, wanted)
        if not extra and not missing:
            kept.add(key, files)
            continue
        what = [
            f"file {names[p]!r} has extension {extension(names[p])!r}, not in --sample-exts"
            if extension(names[p]) not in wanted
            else f"file {names[p]!r} repeats extension {extension(names[p])!r}"
            for p in extra
        ]
        what += [f"no {e!r} file" for e in missing]
        if action == "abort":
            raise DataError(
                f"sample {key!r}: {what[0]} (--missing-extension-action abort) — "
                "fix the dataset, or use --missing-extension-action exclude to leave such samples out"
            )
        if action == "warn":
            offenders += 1
            if offenders <= WARNINGS_SHOWN:
                warnings.append(f"sample {key!r}: " + "; ".join(what))
            kept.add(key, files)
            continue
        if missing:
            for name in names:
                tally.add(INCOMPLETE, name)
            continue
        for p in extra:
            tally.add(EXTRA if extension(names[p]) not in wanted else REPEATED, names[p])
        kept.add(key, [f for p, f in enumerate(files) if p not in extra])
    if offenders > WARNINGS_SHOWN:
        warnings.append(
            f"... and {offenders - WARNINGS_SHOWN} more samples that do not match --sample-exts"
        )
    return kept
