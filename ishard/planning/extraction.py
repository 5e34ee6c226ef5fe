"""Member names that cannot be extracted as distinct files into one folder (users extract every
shard of a run into one): found over the whole plan before anything is written; the folding
rule it shares with the column engine's clash marks (``engine.clashes``)."""

from __future__ import annotations

import posixpath
import unicodedata
from array import array
from bisect import bisect_left

from ..errors import DataError, UsageError
from ..names import quoted
from ..rules import Rule
from .naming import member_chunks
from .table import SampleTable

NAME_MAX = 255  # bytes in a path part most file systems allow


def folded_names(chunk: list[str]) -> tuple[list[str], str]:
    """The names as an extracting file system may see them: repeated slashes and '.' parts
    gone, Unicode composed (NFC), lower case (macOS and Windows ignore case by default); as a
    list and as lines of one string."""
    blob = "\n".join(chunk)
    if not blob.isascii():
        blob = unicodedata.normalize("NFC", blob)
    blob = blob.lower()
    lines = blob.split("\n")
    if "//" in blob or "./" in blob or blob.endswith("/.") or "/.\n" in blob:
        lines = [posixpath.normpath(n) for n in lines]  # no '..' parts: unsafe names are gone
        blob = "\n".join(lines)
    return lines, blob


def fold_names(names: list[str]) -> list[str]:
    """The names as the extraction check folds them (see ``folded_names``)."""
    return folded_names(names)[0]


def fold_name(name: str) -> str:
    """One name as the extraction check folds it."""
    return folded_names([name])[0][0]


def long_part(name: str) -> int:
    """The bytes of ``name``'s first part over ``NAME_MAX`` bytes, or 0; only names of 64
    characters or more can have one (a character is at most 4 bytes)."""
    if len(name) < 64:
        return 0
    for part in name.split("/"):
        size = len(part.encode("utf-8", "surrogateescape")) if len(part) >= 64 else 0
        if size > NAME_MAX:
            return size
    return 0


def folder_of(name: str) -> str:
    """The folder ``name`` is in ("": none)."""
    return name.rpartition("/")[0]


def folders(folder: str) -> list[str]:
    """``folder`` and every folder above it, innermost first (none for "")."""
    out = []
    while folder:
        out.append(folder)
        folder = folder.rpartition("/")[0]
    return out


def below(name: str, folder: str) -> bool:
    """Does ``name`` lie below ``folder`` (is ``folder`` one of those it needs)?"""
    return folder in folders(folder_of(name))


# The folding of member names and the limit of their parts, as the column engine marks the
# names that may clash (``engine.clashes``). In SQL, ASCII lower case for a plain name (a byte
# a character; no '//' or './' part, no trailing '/' or '/.'); the others fold in Python.
FOLD = Rule(
    "a member name folded",
    fold_name,
    "lower({name})",
    where="strlen({name}) = length({name}) AND NOT contains({name}, '//') AND NOT "
    "contains({name}, './') AND NOT ends_with({name}, '/') AND NOT ends_with({name}, '/.')",
)
LONG_PART = Rule(
    "a part over NAME_MAX bytes",
    long_part,
    f"strlen({{name}}) > {NAME_MAX} AND "
    f"list_max([strlen(p) FOR p IN string_split({{name}}, '/')]) > {NAME_MAX}",
)
FOLDER = Rule(  # of a member name: never absolute (unsafe names are gone)
    "a name's folder",
    folder_of,
    "parse_dirpath({name}, 'forward_slash')",
    where="NOT starts_with({name}, '/')",
)
FOLDERS = Rule(  # of a folded name's folder: never absolute (unsafe names are gone)
    "the folders a folder needs",
    folders,
    "[array_to_string(string_split({folder}, '/')[1:i], '/') "
    "FOR i IN range(1, len(string_split({folder}, '/')) + 1)]",
    where="{folder} <> '' AND NOT starts_with({folder}, '/')",
)
BELOW = Rule(  # folded names: never absolute
    "a name below a folder",
    below,
    "starts_with({name}, {folder} || '/')",
    where="{folder} <> '' AND NOT starts_with({folder}, '/') AND NOT starts_with({name}, '/')",
)


# What to do with member names that differ only in case or Unicode form (``A.jpg``, ``a.jpg``):
# distinct files on Linux, one on macOS and Windows. The native spelling refuses them; Go
# ishard shards them, so its spelling warns.
LOOKALIKES = ("refuse", "warn")
BUCKETS = 64  # hashes are kept in this many arrays by their top bits, checked one at a time
EXAMPLES = 3
FIX = "rename or leave out one of the two files (--prefix, --src-list, --sample-exts)"
ALIKE_FIX = ", or keep both with --lookalike-names warn (they are two files on Linux)"


def check_lookalikes(value: str) -> str:
    """``--lookalike-names``' value, checked."""
    if value not in LOOKALIKES:
        raise UsageError(f"--lookalike-names {value!r} must be refuse or warn")
    return value


def _add_directories(folded: list[str], into: set[int]) -> None:
    """Hashes of every directory the (folded) names need, parents included."""
    for d in {folder_of(n) for n in folded}:  # '' for a top-level name
        for folder in folders(d):
            if hash(folder) in into:  # its parents went in with it
                break
            into.add(hash(folder))


def _long_part(chunk: list[str]) -> None:
    """Refuse a name with a part over ``NAME_MAX`` bytes; only names over 63 characters can
    have one (a character is at most 4 bytes), so only those are split."""
    if max(map(len, chunk), default=0) < 64:
        return
    for name in chunk:
        size = long_part(name)
        if size:
            shown = f"{name[:40]}…{name[-30:]}" if len(name) > 80 else name
            raise DataError(
                f"member name {shown!r} has a part of {size} bytes, more than the "
                f"{NAME_MAX} most file systems allow, so it cannot be extracted — shorten "
                "that file or directory name, or leave the file out (--prefix, --src-list)"
            )


def check_extraction_names(
    tables: list[SampleTable], rename: bool, lookalikes: str = "refuse"
) -> list[str]:
    """Refuse member names that cannot be extracted as distinct files into one folder: a path
    part over 255 bytes, two names equal once repeated slashes and '.' parts are ignored, or a
    file name that another name needs as a directory (``a/b`` and ``a/b/c.jpg``, as a store
    may hold). Names that clash only once Unicode normalisation and case are ignored too are
    refused as well, or with ``lookalikes="warn"`` told in the warning returned.

    Names are folded a chunk at a time with string operations in C and only 64-bit hashes of
    the folded names are kept (8 bytes a file), sorted into ``BUCKETS`` arrays by their top
    bits; each array is then checked with a set. Names are looked at one by one only for a
    hash seen twice. The directories the names need are kept as a set of hashes (one per
    distinct directory).

    When the column engine listed the files, it has found the few that may clash
    (``engine.clashes``): only those are looked at.

    Returns:
        The warning about look-alike names (``lookalikes="warn"``), or nothing.

    Raises:
        DataError: the first long part, or two colliding names.
    """
    only = _suspects(tables, rename)
    if only is not None and not only:
        return []  # nothing can clash
    buckets = [array("q") for _ in range(BUCKETS)]
    shift = 64 - BUCKETS.bit_length() + 1
    bounds = [(b - BUCKETS // 2) << shift for b in range(1, BUCKETS)]
    directories: set[int] = set()
    for table in tables:
        for chunk in member_chunks(table, rename, only):
            _long_part(chunk)
            folded, blob = folded_names(chunk)
            if "/" in blob:
                _add_directories(folded, directories)
            hashes = sorted(map(hash, folded))
            packed, lo = array("q", hashes), 0
            for b, bound in enumerate(bounds):
                hi = bisect_left(hashes, bound, lo)
                buckets[b].extend(packed[lo:hi])
                lo = hi
            buckets[-1].extend(packed[lo:])
    twice: set[int] = set()
    both: set[int] = set()  # names of files that are also directories
    for bucket in buckets:
        files = set(bucket)
        if len(files) < len(bucket):
            seen: set[int] = set()
            twice.update(h for h in bucket if h in seen or seen.add(h))  # type: ignore[func-returns-value]
        if directories and not files.isdisjoint(directories):
            both.update(files & directories)
    del buckets
    if not twice and not both:
        return []
    return _Clashes(lookalikes).among(_involved(tables, rename, twice, both, only))


def _suspects(tables: list[SampleTable], rename: bool) -> array | None:
    """The files the column engine found may clash, when it looked for every file of these
    tables under this naming; else None (every member is looked at)."""
    files = tables[0].files if tables else None
    if files is None or any(t.files is not files for t in tables):
        return None
    clashes = files.handover.clashes
    return clashes.files if clashes is not None and clashes.renamed == rename else None


def _involved(
    tables: list[SampleTable], rename: bool, twice: set[int], both: set[int], only: array | None
) -> list[tuple[str, str]]:
    """(name, folded name), in plan order, of the members behind the repeated hashes: names
    folded alike, files whose names are directories, and the names below those."""
    out = []
    for table in tables:
        for chunk in member_chunks(table, rename, only):
            for name, folded in zip(chunk, folded_names(chunk)[0]):
                h = hash(folded)
                if h in twice or h in both or (both and _below(folded, both)):
                    out.append((name, folded))
    return out


def _below(folded: str, both: set[int]) -> bool:
    return any(hash(d) in both for d in _parents(folded))


def _parents(name: str) -> list[str]:
    """Every directory ``name`` needs, innermost first."""
    return folders(folder_of(name))


class _Clashes:
    """The clashes among a few names: those an extraction anywhere meets are refused; those
    only a case-insensitive or normalising file system meets (look-alikes) are refused too,
    or counted for one warning."""

    def __init__(self, lookalikes: str) -> None:
        self.warn = lookalikes == "warn"
        self.alike: list[str] = []  # examples, as shown
        self.count = 0

    def among(self, names: list[tuple[str, str]]) -> list[str]:
        """The warning (or nothing) for these (name, folded name) pairs; the first clash
        refused raises."""
        by_fold: dict[str, dict[str, str]] = {}  # folded -> as extracted on Linux -> name
        files: dict[str, str] = {}  # as extracted on Linux -> name
        for name, folded in names:
            same = by_fold.setdefault(folded, {})
            exact = posixpath.normpath(name)  # no '..' parts: unsafe names are gone
            files.setdefault(exact, name)
            if exact not in same:
                if same:  # folded alike only
                    self._pair(next(iter(same.values())), name, exact=False)
                same[exact] = name
            elif same[exact] != name:
                self._pair(same[exact], name, exact=True)
        for name, folded in names:
            for exact, d in zip(_parents(posixpath.normpath(name)), _parents(folded)):
                if d in by_fold:
                    file = files.get(exact) or next(iter(by_fold[d].values()))
                    self._directory(file, name, exact=exact in files)
                    break
        if not self.count:
            return []
        line = (
            f"{self.count} pair{'s' * (self.count != 1)} of member names differ only in case or "
            f"Unicode form (e.g. {'; '.join(self.alike)}): distinct files on Linux, but one on "
            "macOS and Windows, where extracting the shards into one folder keeps one of each "
            "pair — rename one of each pair to extract them anywhere (--lookalike-names refuse "
            "stops such runs)"
        )
        return [line]

    def _pair(self, a: str, b: str, exact: bool) -> None:
        a, b = sorted((a, b))
        why = _why(a, b)
        alike = "Unicode" in why  # they look alike: show their code points
        shown = f"{quoted(a, alike)} and {quoted(b, alike)}"
        if exact or not self.warn:
            fix = FIX if exact else FIX + ALIKE_FIX
            raise DataError(f"member names {shown} would extract to one file ({why}) — {fix}")
        self._count(shown)

    def _directory(self, file: str, below: str, exact: bool) -> None:
        if exact or not self.warn:
            raise DataError(
                f"member name {quoted(file)} is a file, but {quoted(below)} needs a directory "
                f"of that name, so they cannot both be extracted — {FIX}{'' if exact else ALIKE_FIX}"
            )
        alike = not (file.isascii() and below.isascii())  # show their code points
        self._count(f"{quoted(file, alike)} a file, {quoted(below, alike)} below it")

    def _count(self, shown: str) -> None:
        self.count += 1
        if len(self.alike) < EXAMPLES:
            self.alike.append(shown)


def _why(a: str, b: str) -> str:
    if posixpath.normpath(a) == posixpath.normpath(b):
        return "they differ only in repeated slashes or './' parts"
    if unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b):
        return "the same text in two Unicode normalisations, composed and decomposed"
    return "they differ only in case, which macOS and Windows ignore"
