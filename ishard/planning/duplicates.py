"""Exact duplicates among the listed files (``--duplicates``): files of one size whose
inventory checksum or ETag is the same, or — for a listing without them — whose bytes hash
alike (only files whose sizes collide are read). The first file of each group, by name,
is the one kept; ``drop`` leaves the others out. The column engine finds them in SQL for a
listing it read (``engine/duplicates.py``); this module, for the others."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

from ..checksums import digest_of
from ..errors import UsageError
from ..model import EXAMPLES_KEPT, Duplicates, FileEntry
from .table import FileTable, int_view

MODES = ("auto", "report", "drop", "off")
CONTENT = "xxh128"  # the hash of the bytes of files whose sizes collide
BY_CONTENT = f"the bytes ({CONTENT}) of files whose sizes collide"
BY_ETAG = "the listing's ETags, and the size"
DROPPED = "exact duplicate of an earlier file (--duplicates drop)"  # the tally's reason

Read = Callable[[Iterable[FileEntry]], Iterator[tuple[FileEntry, BinaryIO]]]


def check_duplicates(value: str) -> str:
    """``--duplicates``' value, checked."""
    if value not in MODES:
        raise UsageError(
            f"--duplicates {value!r} must be auto, report, drop or off — auto reports the "
            "duplicates an inventory's checksums or ETags show"
        )
    return value


def by_column(column: str) -> str:
    """What told files alike, said of an inventory's column."""
    return f"the inventory's {column!r} column, and the size"


def among(
    names: Sequence[str], sizes: Sequence[int], values: Sequence[object], by: str, drop: bool
) -> tuple[Duplicates, list[int]]:
    """The duplicates among files of these ``names`` (in listing order), ``sizes`` and
    ``values`` (a checksum, ETag or hash; None: not compared), and the indices of the
    copies (each file past the first of its group)."""
    first: dict[tuple[int, object], int] = {}
    copies: list[int] = []
    grouped: set[int] = set()
    pairs: list[tuple[str, str]] = []
    nbytes = 0
    for index, (size, value) in enumerate(zip(sizes, values)):
        if value is None:
            continue
        at = first.setdefault((size, value), index)
        if at != index:
            copies.append(index)
            grouped.add(at)
            nbytes += size
            if drop or len(pairs) < EXAMPLES_KEPT:
                pairs.append((names[index], names[at]))
    found = Duplicates(by, len(grouped), len(copies), nbytes, drop, tuple(pairs))
    return found, copies


def content_hashes(names: Sequence[str], sizes: Sequence[int], read: Read) -> list[str | None]:
    """A hash of the bytes of each file whose size another file has too (None for the
    others: no file can repeat them), each read once through ``read``."""
    counts = Counter(sizes)
    hashes: list[str | None] = [None] * len(names)
    wanted = [i for i, size in enumerate(sizes) if counts[size] > 1]
    entries = (FileEntry(names[i], sizes[i], 0) for i in wanted)
    for index, (_, stream) in zip(wanted, read(entries)):
        hashes[index] = digest_of(stream, CONTENT)
    return hashes


def _among_etags(files: FileTable, drop: bool) -> tuple[Duplicates, list[int]]:
    """``among`` for a store listing's ETag digests (``FileTable.etags``): the files whose
    size and digest's first half another file shares are found with numpy (a sort of one
    int a file); only they are compared whole, in Python."""
    import numpy as np

    assert files.etags is not None
    digests = np.frombuffer(bytes(files.etags), dtype=np.uint64).reshape(-1, 2)
    sizes = np.asarray(int_view(files.sizes), dtype=np.uint64)
    key = digests[:, 0] ^ (sizes * np.uint64(0x9E3779B97F4A7C15))
    given = np.flatnonzero((digests[:, 0] | digests[:, 1]) != 0)
    order = given[np.argsort(key[given], kind="stable")]
    same = key[order][1:] == key[order][:-1]
    paired = np.zeros(len(order), dtype=bool)
    paired[1:] |= same
    paired[:-1] |= same
    picked = np.sort(order[paired]).tolist()
    names = [files.names[i] for i in picked]
    found, copies = among(
        names,
        [files.sizes[i] for i in picked],
        [digests[i].tobytes() for i in picked],
        BY_ETAG,
        drop,
    )
    return found, [picked[c] for c in copies]


def find_duplicates(files: FileTable, mode: str, read: Read) -> Duplicates | None:
    """The duplicates of a listing under ``--duplicates`` ``mode``: those the column engine
    found; else by the row reader's checksums; else, when asked (``report``, ``drop``: not
    ``auto``), by the bytes of the files whose sizes collide, read through ``read``. With
    ``drop``, the copies leave ``files``. None: not looked for."""
    if mode == "off":
        return None
    if files.handover.duplicates is not None:
        return files.handover.duplicates
    drop = mode == "drop"
    if files.etags is not None:
        found, copies = _among_etags(files, drop)
    else:
        if files.identities is not None:
            by, values = by_column(files.identities.column), files.identities.values
        elif mode == "auto":
            return None
        else:
            by, values = BY_CONTENT, content_hashes(files.names, files.sizes, read)
        found, copies = among(files.names, files.sizes, values, by, drop)
    if found.dropped and copies:
        gone = set(copies)
        files.kept([i for i in range(len(files)) if i not in gone])
    return found
