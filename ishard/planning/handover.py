"""What the column engine hands the planner of a listing it read, beyond its columns, as one
value (``Handover``): the files' samples, the files whose member names may clash on extraction,
whether every file can be ``<key>.<extension>``, what readers make of each name, and how much
it spilled."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..model import Duplicates
from .keys import KeyFunction
from .namecolumn import Names

# Reader keys are cut from the engine for a span of at most SPAN_FACTOR files a file asked
# for, or of SPAN_LEAST files; past that, all of them are fetched at once
SPAN_FACTOR, SPAN_LEAST = 4, 1 << 16

# The key check's findings by kind, as the column engine codes them per file: a dot inside a
# basename after the first, no dot or a leading one, reader keys that differ within a sample
FINDING_BITS = {"dotted": 1, "dropped": 2, "split": 4}
ReaderFindings = dict[str, tuple[int, list[str]]]  # by kind: samples, the first ones' keys


class Grouping(NamedTuple):
    """Samples a listing's maker already found (the column engine, for a built-in key
    pattern): the key function, the keys in order of first appearance, and the files by
    sample (each sample's in listing order) as ``SampleTable`` holds them: ``members``, where
    each sample's run of them starts (``starts``, one more than there are samples), each
    sample's bytes (``sizes``) — int columns (``intcolumn``);
    ``flat`` when no key holds a '/'; ``findings``: the key check's over these samples, when
    the engine found them (``readerkeys.findings``)."""

    key: KeyFunction
    keys: Names
    starts: Any
    members: Any
    sizes: Any
    flat: bool
    findings: ReaderFindings | None = None


class Clashes(NamedTuple):
    """The files whose member names may clash on extraction (``engine.clashes``), as the
    column engine found them over the whole listing: for ``<sample key>.<extension>`` member
    names (``renamed``) or the files' own names."""

    renamed: bool
    files: array


class ReaderKeys(NamedTuple):
    """What WebDataset readers make of each listed file's own name, as the column engine
    found it: a 64-bit hash of its key (``names.wds_split``: the name up to the first dot of
    its basename) and flags (1: another dot in the basename after the first; 2: no dot in
    it, or a leading one), numpy arrays in listing order."""

    keys: Any
    flags: Any

    def rows(self, files: Any) -> tuple[Any, Any]:
        """The hashes and flags of ``files`` (a numpy array of listing positions)."""
        return self.keys[files], self.flags[files]


class ReaderKeysLost(Exception):
    """The column engine could not give the reader keys (closed, out of memory or disk)."""


class LaterReaderKeys:
    """``ReaderKeys`` of a listing left in the column engine, cut as they are asked for: the
    files of a chunk of samples lying in a short span of the listing (each sample's files in
    a row), ``span(lo, hi)`` gives that span's; else ``load()`` all of them, once (9 bytes a
    file). ``loaded`` hands over all of them fetched another way. Either may raise
    ``ReaderKeysLost``."""

    __slots__ = ("__weakref__", "_all", "_load", "_span")

    def __init__(
        self, span: Callable[[int, int], ReaderKeys], load: Callable[[], ReaderKeys]
    ) -> None:
        self._span, self._load = span, load
        self._all: ReaderKeys | None = None

    def loaded(self, readers: ReaderKeys) -> None:
        """Take all of them, fetched."""
        self._all = readers

    def rows(self, files: Any) -> tuple[Any, Any]:
        """The hashes and flags of ``files`` (a numpy array of listing positions)."""
        if not len(files):  # nothing to cut, or to load everything for
            return files.astype("uint64"), files.astype("int8")
        if self._all is None:
            lo, hi = int(files.min()), int(files.max()) + 1
            if hi - lo <= max(SPAN_FACTOR * len(files), SPAN_LEAST):
                return self._span(lo, hi).rows(files - lo)
            self._all = self._load()
        return self._all.rows(files)


@dataclass(frozen=True)
class Handover:
    """What the column engine found of a listing it read, handed to the planner in one value
    (``FileTable.handover``). Each part is None where the engine found nothing, or the listing
    is not the engine's (``NOTHING``): the planner then does that work itself. ``grouping``:
    the files' samples for a built-in key pattern; ``clashes``: the files whose member names
    may clash on extraction; ``renamable_by``: the key function by whose samples every file
    can take a ``<sample key>.<extension>`` name; ``readers``: what readers make of each
    name; ``spilled``: the most bytes the engine wrote to its temporary folder, reading it;
    ``duplicates``: the files of equal checksums it found (and dropped, if asked).
    A part the planner has taken is dropped with ``dataclasses.replace`` (its memory goes)."""

    grouping: Grouping | None = None
    clashes: Clashes | None = None
    renamable_by: KeyFunction | None = None
    readers: ReaderKeys | LaterReaderKeys | None = None
    spilled: int = 0
    duplicates: Duplicates | None = None


NOTHING = Handover()  # a listing the column engine did not read: nothing handed over
