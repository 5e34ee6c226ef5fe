"""Member names as WebDataset readers see them: ``--member-names sample``, key check, names a DALI index can hold."""

from __future__ import annotations

import operator
import re
from array import array
from bisect import bisect_right
from dataclasses import replace
from itertools import chain, compress, repeat

from ..errors import DataError, UsageError
from ..formats.indexes import indexes_of
from ..names import member_name, unsafe_name, wds_extension, wds_split
from ..rules import Rule
from .handover import LaterReaderKeys, ReaderKeys, ReaderKeysLost
from .keys import KeyFunction, mirrored_dirs, sample_key
from .table import SampleTable, int_view

MEMBER_NAMES = ("original", "sample")
EXAMPLES = 3
_WHITESPACE = re.compile(r"[ \t\n\r\f\v]")  # what DALI's index parser splits on
_CONTROL_NO_NL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
_MORE = re.compile(r"\.[^\n]*[./]")  # a dot with another dot or a slash after it on its line
CHUNK = 1 << 16  # samples checked at a time
KEY_FIX = (
    "use a --sample-key-pattern that ends the key at the first dot, e.g. "
    "'^(?:.*/)?([^/.]+)\\..*$', or --member-names original"
)

# Key-check findings: what WebDataset-style readers do with such samples.
SPLIT = (
    "that WebDataset readers take as several: their files' names differ before the "
    "first dot of the basename, e.g. in another directory"
)
DOTTED = "with a dot inside a file's basename: readers cut the key at the first dot"
DROPPED = "with files readers skip or mis-key: no dot in the basename, or a leading dot"
FINDINGS = (DOTTED, DROPPED, SPLIT)  # in the order they are told
ADVICE = (
    "for shards that WebDataset readers group as ishard does, use --member-names sample "
    "(members named <sample key>.<extension>; the default, except in Go ishard's spelling)"
)


def reader_flags(name: str) -> int:
    """What readers make of ``name``'s basename's dots: 1, another dot after the first; 2,
    no dot, or a leading one; else 0."""
    base = name[name.rfind("/") + 1 :]
    dot = base.find(".")
    return 2 if dot <= 0 else int(base.find(".", dot + 1) > 0)


def reader_key(name: str) -> tuple[str, int]:
    """``name``'s reader key (``wds_split``) and ``reader_flags``."""
    return wds_split(name)[0], reader_flags(name)


def key_base_refused(key: str) -> bool:
    """Is the basename of sample ``key`` empty, or has it a dot (no ``<key>.<extension>``
    member name reads back as the sample)?"""
    base = key[key.rfind("/") + 1 :]
    return not base or "." in base


def member_key_refused(key: str) -> bool:
    """Can sample ``key`` name no member (``key_base_refused``, or ``<key>.x`` unsafe)?"""
    return key_base_refused(key) or unsafe_name(f"{key}.x")


# WebDataset's dot rule over the rows of the query ``{rows}`` (a ``name`` each): each row's
# reader key, as ``folder`` and ``stem`` (the name up to the first dot of its basename; string
# functions, as regexes over every name took 3.5x as long), and ``flags``. Listed names are
# never absolute (unsafe), where a folder's leading '/' would be lost.
READER_KEY = Rule(
    "a reader key",
    reader_key,
    "SELECT *, CAST(dot > 1 AND contains(substr(base, dot + 1), '.') AS TINYINT) + 2 * "
    "CAST(dot <= 1 AS TINYINT) AS flags FROM (SELECT *, parse_dirpath(name, 'forward_slash') "
    "AS folder, CASE WHEN dot = 0 THEN base ELSE left(base, dot - 1) END AS stem FROM (SELECT "
    "*, instr(base, '.') AS dot FROM (SELECT *, parse_filename(name, false, 'forward_slash') "
    "AS base FROM ({rows}))))",
    where="NOT starts_with({name}, '/')",
)
# A sample key no member can be named after. In SQL over keys of listed names (no control
# character; a '..' part in ``<key>.x`` would be a dot in the key's basename, or the name's):
# only a drive or a separator at its start can make ``<key>.x`` unsafe.
MEMBER_KEY = Rule(
    "a key that names no member",
    member_key_refused,
    "{key} = '' OR ends_with({key}, '/') OR contains(parse_filename({key}, false, "
    r"'forward_slash'), '.') OR regexp_matches({key}, '^[/\\]|^[A-Za-z]:')",
    where=r"NOT regexp_matches({key}, '[\x00-\x1f\x7f]|(^|[/\\])\.\.[/\\]')",
)
# Two extensions of one sample that are one in any case; in SQL, ASCII ones (whose lower
# case is one character each, as Python's)
EXT_FOLD = Rule(
    "an extension folded", str.lower, "lower({ext})", where="strlen({ext}) = length({ext})"
)


class KeyCheck:
    """Counts of samples readers would see differently, with a few example sample keys."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[str]] = {}

    def add(self, finding: str, keys: list[str], count: int | None = None) -> None:
        """Count ``count`` samples (``len(keys)`` if not given) under ``finding``, ``keys``
        the first of them (at least as many as are still to be shown)."""
        count = len(keys) if count is None else count
        if count:
            self.counts[finding] = self.counts.get(finding, 0) + count
            shown = self.examples.setdefault(finding, [])
            shown.extend(keys[: EXAMPLES - len(shown)])

    def merge(self, other: KeyCheck) -> None:
        """Add what ``other`` found."""
        for finding, count in other.counts.items():
            self.add(finding, other.examples[finding], count)

    def wanted(self, finding: str) -> int:
        """How many more example keys ``finding`` shows."""
        return EXAMPLES - len(self.examples.get(finding, ()))

    def warnings(self) -> list[str]:
        """One warning line per finding (in one order, however the samples were taken), then
        the advice once."""
        lines = [
            f"{count} sample{'s' * (count != 1)} {finding} "
            f"(e.g. {', '.join(map(repr, self.examples[finding]))})"
            for finding in FINDINGS
            if (count := self.counts.get(finding))
        ]
        return lines + [ADVICE] if lines else []


def _sample_keys(table: SampleTable, positions: list[int]) -> list[str]:
    """The keys of the samples holding these file positions (each sample once)."""
    starts, out, last = table.starts, [], -1
    for p in positions:
        s = bisect_right(starts, p) - 1
        if s != last:
            out.append(table.keys[s])
            last = s
    return out


def _file_findings(
    table: SampleTable, names: list[str], blob: str, first: int, check: KeyCheck
) -> bool:
    """Dotted, dotless and dot-leading basenames among ``names`` (from position ``first``,
    ``blob`` their lines): scans in C, a look at each name only when they find something.
    True when every name has one dot, in its basename, not leading."""
    if (
        blob.count(".") == len(names)
        and not _MORE.search(blob)
        and "/." not in blob
        and "\n." not in blob
    ):
        return True
    dotted, dropped = [], []
    for pos, name in enumerate(names, first):
        flags = reader_flags(name)
        if flags & 2:
            dropped.append(pos)
        elif flags & 1:
            dotted.append(pos)
    check.add(DOTTED, _sample_keys(table, dotted))
    check.add(DROPPED, _sample_keys(table, dropped))
    return False


def key_check(table: SampleTable, check: KeyCheck | None = None) -> KeyCheck:
    """Count samples of ``table`` that WebDataset readers group differently under original names:
    a file whose basename has a second dot (readers cut the key at the first), none or a
    leading one, or files whose reader keys (``wds_split``: the name up to the first dot of the
    basename) are not all the same. Samples are taken ``CHUNK`` at a time, so the check's memory
    stays small; with the column engine's ``ReaderKeys`` the chunks are numpy arrays; with its
    findings over the table's very samples (``table.findings``) there is nothing to look at.
    """
    check = check or KeyCheck()
    files = table.files
    if table.findings is not None:  # the engine's, over these very samples
        for finding, kind in zip(FINDINGS, ("dotted", "dropped", "split")):
            if kind in table.findings:
                check.add(finding, *table.findings[kind][::-1])
        return check
    if files.handover.readers is not None:
        try:
            found = _key_check_columns(table, files.handover.readers, KeyCheck())
        except ReaderKeysLost:  # the engine could not give them: the names tell
            files.handover = replace(files.handover, readers=None)
        else:
            check.merge(found)
            return check
    all_names, members, starts, keys = table.files.names, table.members, table.starts, table.keys
    for s0 in range(0, len(keys), CHUNK):
        s1 = min(s0 + CHUNK, len(keys))
        base = starts[s0]
        chunk = all_names.take(members[base : starts[s1]])
        blob = "\n" + "\n".join(chunk) + "\n"
        one_dot = _file_findings(table, chunk, blob, base, check)
        if len(chunk) == s1 - s0:
            continue  # one file per sample: nothing to split or collide
        if one_dot:  # each reader key ends at the name's only dot
            reader_keys = [n[: n.find(".")] for n in chunk]
        else:
            reader_keys = [reader_key(n)[0] for n in chunk]
        counts = list(map(operator.sub, starts[s0 + 1 : s1 + 1], starts[s0:s1]))
        firsts = [reader_keys[i - base] for i in starts[s0:s1]]
        differ = map(operator.ne, reader_keys, chain.from_iterable(map(repeat, firsts, counts)))
        samples = chain.from_iterable(map(repeat, range(s0, s1), counts))
        split = list(dict.fromkeys(compress(samples, differ)))  # each sample once, in order
        check.add(SPLIT, [keys[s] for s in split[:EXAMPLES]], len(split))
    return check


def _key_check_columns(
    table: SampleTable, readers: ReaderKeys | LaterReaderKeys, check: KeyCheck
) -> KeyCheck:
    """:func:`key_check` over the engine's per-file reader keys and flags."""
    import numpy as np

    members = int_view(table.members)
    starts = int_view(table.starts)
    for s0 in range(0, len(table), CHUNK):
        s1 = min(s0 + CHUNK, len(table))
        files = members[starts[s0] : starts[s1]]
        counts = np.diff(starts[s0 : s1 + 1])
        samples = np.repeat(np.arange(s0, s1, dtype=np.int64), counts)
        reader_keys, flags = readers.rows(files)
        firsts = np.repeat(reader_keys[starts[s0:s1] - starts[s0]], counts)
        for finding, found in (
            (DOTTED, flags & 1 != 0),
            (DROPPED, flags & 2 != 0),
            (SPLIT, reader_keys != firsts),
        ):
            hit = np.unique(samples[found])
            if len(hit):  # the keys of the first few, as many as are still to be shown
                shown = table.keys.take(hit[: check.wanted(finding)].tolist())
                check.add(finding, shown, len(hit))
    return check


def sample_members(table: SampleTable, key: KeyFunction | None = None) -> None:
    """Check that every file of ``table`` can be named ``<sample key>.<extension>``.

    The extension is what WebDataset readers take: everything after the first dot of the
    file's basename (``a.seg.png`` → ``seg.png``). Keys and extensions are cut for all files
    in comprehensions; a sample is looked at on its own (:func:`check_sample_members`) only
    from the first one where something is found, so the error is the one that sample gives.

    When the column engine found every listed file fit for such a name in the samples of the
    run's ``key`` function (``files.handover.renamable_by``), there is nothing to look for: ``table``'s
    samples are made of those samples' files.

    Raises:
        DataError: the first sample whose names would not read back as that one sample.
    """
    if key is not None and table.files.handover.renamable_by is key:
        return
    unsafe_keys(table)
    table.hold()  # read sample by sample
    keys, starts = table.keys, table.starts
    bad_key = next((s for s, k in enumerate(keys) if key_base_refused(k)), len(keys))
    names, members = table.files.names, table.members
    seen: dict[str, str] = {}
    one = seen.setdefault  # a str object per distinct extension, not one per file
    exts: list[str] = []  # in sample order: sample s holds exts[starts[s]:starts[s + 1]]
    for a in range(0, len(members), CHUNK):
        if len(seen) > CHUNK:
            seen.clear()  # extensions of every kind: bounded all the same
        cut = map(EXT_FOLD.python, map(wds_extension, names.take(members[a : a + CHUNK])))
        exts += [one(e, e) for e in cut]
    del seen
    bad_ext = len(keys)
    if "" in exts:
        bad_ext = bisect_right(starts, exts.index("")) - 1
    for s in range(min(bad_key, bad_ext)):
        a, b = starts[s], starts[s + 1]
        if b - a > 1 and len(set(exts[a:b])) < b - a:  # two files, one extension
            bad_ext = s
            break
    for s in range(min(bad_key, bad_ext), len(keys)):
        check_sample_members(table, s)  # raises for the first sample that is wrong


def check_sample_members(table: SampleTable, s: int) -> None:
    """:func:`sample_members` for sample ``s`` alone, file by file."""
    names, starts, members = table.files.names, table.starts, table.members
    key = table.keys[s]
    base = key[key.rfind("/") + 1 :]
    if not base:
        raise DataError(
            f"sample {key!r} has an empty key (file {names[members[starts[s]]]!r}), so "
            f"--member-names sample cannot name its files — {KEY_FIX}"
        )
    if "." in base:
        raise DataError(
            f"sample {key!r} has a dot in its key, so readers would cut it there under "
            f"--member-names sample — {KEY_FIX}"
        )
    seen: dict[str, str] = {}
    for f in members[starts[s] : starts[s + 1]]:
        ext = wds_split(names[f])[1]
        _check_ext(key, names[f], ext, seen)


def unsafe_keys(table: SampleTable) -> None:
    """Refuse sample keys that would make ``<key>.<extension>`` an unsafe member name (the
    check every source name passed at listing: absolute, a '..' part, a control character).

    The extension cannot change that verdict (it comes from a source name that passed the same
    check, has no '/', and follows a dot), so keys are checked, a chunk at a time, with string
    scans in C; single keys only when those find something.

    Raises:
        DataError: the first such sample, with the member name it would have.
    """
    keys = table.keys
    for k0 in range(0, len(keys), CHUNK):
        chunk = keys[k0 : k0 + CHUNK]
        blob = "\n".join(chunk)
        if (
            ".." not in blob
            and ":" not in blob
            and "\n/" not in blob
            and "\n\\" not in blob
            and not blob.startswith(("/", "\\"))
            and blob.count("\n") == len(chunk) - 1
            and not _CONTROL_NO_NL.search(blob)
        ):
            continue
        for s, key in enumerate(chunk, k0):
            if unsafe_name(f"{key}.x"):
                first = table.files.names[table.members[table.starts[s]]]
                member = f"{key}.{wds_split(first)[1]}"
                raise DataError(
                    f"sample {key!r} would give member {member!r} (file {first!r}) under "
                    "--member-names sample, which could extract outside the target folder "
                    "(absolute, a '..' part, or a control character) — use a "
                    "--sample-key-pattern whose keys are relative paths without '..' parts, or "
                    "--member-names original"
                )


def _check_ext(key: str, name: str, ext: str, seen: dict[str, str]) -> None:
    if not ext:
        raise DataError(
            f"file {name!r} of sample {key!r} has no extension, so --member-names sample cannot "
            "name it — rename it, leave it out with --sample-exts and "
            "--missing-extension-action exclude, or keep source paths with --member-names "
            "original (readers then skip it)"
        )
    other = seen.setdefault(EXT_FOLD.python(ext), name)
    if other != name:
        same = (
            "the same extension"
            if wds_split(other)[1] == ext
            else "extensions that differ only in case"
        )
        raise DataError(
            f"sample {key!r} has two files with {same} ({other!r} and {name!r}), which "
            f"--member-names sample would give one name — {_apart(other, name)}"
        )


def _apart(one: str, two: str) -> str:
    """The fix for two files of a sample that one member name cannot hold: ``mirrored_dirs``
    first when its keys tell the two apart (``images/train/01.jpg``, ``images/val/01.jpg``)."""
    keys = sample_key(one, mirrored_dirs), sample_key(two, mirrored_dirs)
    if keys[0] != keys[1]:
        return (
            f"use --sample-key-pattern mirrored_dirs, whose keys tell them apart ({keys[0]!r} "
            f"and {keys[1]!r}), keep one with --sample-exts and --missing-extension-action "
            "exclude, or --member-names original"
        )
    return (
        "keep one with --sample-exts and --missing-extension-action exclude, use a "
        "--sample-key-pattern that tells them apart, or --member-names original"
    )


def member_chunks(table: SampleTable, rename: bool, only: array | None = None):
    """The member names of ``table``'s files, ``CHUNK`` files at a time, in sample order;
    with ``only`` (listing positions, sorted), those files' alone."""
    if only is not None:
        yield from _some_member_chunks(table, rename, only)
        return
    names, members, starts, keys = table.files.names, table.members, table.starts, table.keys
    if not rename:
        for a in range(0, len(members), CHUNK):
            yield names.take(members[a : a + CHUNK])
        return
    for s0 in range(0, len(keys), CHUNK):
        s1 = min(s0 + CHUNK, len(keys))
        counts = map(operator.sub, starts[s0 + 1 : s1 + 1], starts[s0:s1])
        sample_keys = chain.from_iterable(map(repeat, keys[s0:s1], counts))  # a key a file
        files = names.take(members[starts[s0] : starts[s1]])
        yield list(map(member_name, sample_keys, files))


def _some_member_chunks(table: SampleTable, rename: bool, only: array):
    import numpy as np

    members = int_view(table.members)
    kept = np.flatnonzero(np.isin(members, int_view(only)))
    starts = int_view(table.starts)
    for a in range(0, len(kept), CHUNK):
        at = kept[a : a + CHUNK]
        files = table.files.names.take(members[at].tolist())
        if not rename:
            yield files
            continue
        keys = table.keys.take((np.searchsorted(starts, at, "right") - 1).tolist())
        yield list(map(member_name, keys, files))


def index_names(table: SampleTable, renamed: bool) -> None:
    """Refuse member names a DALI index cannot hold (its parser splits lines at whitespace).

    Raises:
        DataError: the first file (or sample key) whose member name has whitespace.
    """
    for names in member_chunks(table, renamed):  # a chunk of member names at a time
        joined = "\0".join(names)
        found = _WHITESPACE.search(joined)
        if found is None:
            continue
        bad = names[joined.count("\0", 0, found.start())]
        raise DataError(
            f"member name {bad!r} has whitespace, which a DALI index (--index dali) cannot "
            "hold — rename the files, or drop --index dali"
        )


def check_reader_names(
    table: SampleTable, rename: bool, index: str, check: KeyCheck, key: KeyFunction | None = None
) -> None:
    """The naming checks of one planned group (samples by ``key``, if known):
    ``--member-names sample`` rules (else the key check, counted into ``check``) and, for
    ``--index dali``, names without whitespace."""
    if rename:
        sample_members(table, key)
    else:
        key_check(table, check)
    if "dali" in indexes_of(index):
        index_names(table, rename)


def check_index_shards(names: list[str]) -> None:
    """Refuse ``--index dali`` for shards that are not plain tar (``--ekm`` formats may name
    their own extension).

    Raises:
        UsageError: the first such shard name.
    """
    for name in names:
        if not name.endswith(".tar"):
            raise UsageError(
                f"shard {name!r} is not a plain .tar, which --index dali needs — give the "
                "--ekm formats a .tar extension, or drop --index dali"
            )
