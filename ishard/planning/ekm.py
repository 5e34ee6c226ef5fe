"""External key map: route each file to a named shard series by regex (``{"fish-%d.tar": [regex]}``)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import re2

from ..errors import UsageError
from .keys import compile_re2, re2_options, utf8
from .templates import NameTemplate, parse_template

NO_MATCH = "matches no --ekm pattern"
SEVERAL = "matches more than one --ekm pattern"

# Limits measured (docs/dependencies.md): a map of 100,000 patterns (3.2 MiB) parses and
# compiles in about 1-3 s and 100 MiB; far larger maps are attacks or mistakes (a 29 MB one
# took 270 s and 3 GB with one regex after another).
MAX_EKM_BYTES = 4 << 20
MAX_EKM_PATTERNS = 100_000
_SET_BYTES = 512 << 10  # pattern text per RE2 set: bigger sets can fail to compile
_FIRST_SET_BYTES = 64 << 10  # grown after each set that compiles: a failed compile costs
_SET_MEMORY = 64 << 20
MAX_SETS = 24  # separate searches per name (a few us each), and compiles before an answer


@dataclass(frozen=True)
class Category:
    """One EKM entry: the shard-name format and the patterns (RE2 regexes) routing files to it."""

    template: NameTemplate
    patterns: tuple[str, ...]


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """RE2 logs to file descriptor 2 when a set is too big to compile; that case is handled
    (the set is split), so the log would only break ishard's one-line errors."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class _BadPattern(Exception):
    """Pattern ``args[0]`` (an index) cannot be used: ``args[1]`` says why."""


class _TooComplex(Exception):
    """The patterns need more than ``MAX_SETS`` separate searches."""


class _Matcher:
    """Which patterns of a map match a name: all patterns in a few RE2 sets, each searched
    once in time linear in the name (not one regex after another).

    Sets take up to ``_SET_BYTES`` of pattern text, starting from ``_FIRST_SET_BYTES`` and
    doubling after each set that compiles. When one fails to compile (heavy patterns, such as
    thousands of ``\\pL+``, exceed RE2's memory limit) the budget is halved and grows no more,
    so failed compiles are few. A map that would need more than
    ``MAX_SETS`` searches per name at the budget that works is refused early rather than slowly
    built.
    """

    def __init__(self, patterns: list[bytes]) -> None:
        self._sets: list[tuple[int, re2.Set]] = []  # (index of its first pattern, set)
        self._single: list[tuple[int, re2._Regexp]] = []  # patterns no set would take
        left = sum(map(len, patterns))
        budget, start, failed = _FIRST_SET_BYTES, 0, False
        while start < len(patterns):
            stop, size = start, 0
            while stop < len(patterns) and (stop == start or size + len(patterns[stop]) <= budget):
                size += len(patterns[stop])
                stop += 1
            found = self._compile(patterns, start, stop)
            if found is not None:
                self._sets.append((start, found))
                budget = budget if failed else min(_SET_BYTES, budget * 2)
            elif stop - start == 1:
                self._single.append((start, self._alone(patterns, start)))
            else:
                budget, failed = max(1, size // 2), True
                if len(self._sets) + len(self._single) + left / budget > MAX_SETS:
                    raise _TooComplex
                continue
            start, left = stop, left - size
            if len(self._sets) + len(self._single) > MAX_SETS:
                raise _TooComplex

    @staticmethod
    def _compile(patterns: list[bytes], start: int, stop: int) -> re2.Set | None:
        options = re2_options()
        options.max_mem = _SET_MEMORY
        found = re2.Set.SearchSet(options)
        for index in range(start, stop):
            try:
                found.Add(patterns[index])
            except re2.error:
                _Matcher._alone(patterns, index)  # raises _BadPattern with RE2's reason
                raise _BadPattern(index, "not accepted by RE2") from None
        try:
            with _quiet_stderr():
                found.Compile()
        except re2.error:
            return None
        return found

    @staticmethod
    def _alone(patterns: list[bytes], index: int) -> re2._Regexp:
        try:
            return compile_re2(patterns[index].decode("utf-8", "surrogatepass"), _SET_MEMORY)
        except re2.error as err:
            raise _BadPattern(index, str(err)) from None

    def find(self, data: bytes) -> list[int]:
        """Indices of matching patterns; stops once two are found (one is all that may match).

        A set's search cannot run out of memory and miss a match: each set's memory budget
        holds many times its largest search state.
        """
        hits: list[int] = []
        for first, found in self._sets:
            got = found.Match(data)
            if got:
                hits += [first + i for i in got]
                if len(hits) > 1:
                    return hits
        for index, pattern in self._single:
            if pattern.search(data) is not None:
                hits.append(index)
                if len(hits) > 1:
                    return hits
        return hits


@dataclass(frozen=True)
class Ekm:
    """A parsed external key map; categories keep the order they have in the JSON."""

    source: str
    categories: tuple[Category, ...]
    _owner: tuple[int, ...] = field(default=(), repr=False, compare=False)
    _matcher: _Matcher | None = field(default=None, repr=False, compare=False)

    def category(self, name: str) -> int | str:
        """Index of the category of the one pattern matching ``name``, else the reason it has none.

        Like Go's EKM lookup, exactly one pattern over the whole map must match: two patterns
        match (even of the same category) → ``SEVERAL``.
        """
        hits = self._matcher.find(utf8(name)[0]) if self._matcher is not None else []
        if not hits:
            return NO_MATCH
        return SEVERAL if len(hits) > 1 else self._owner[hits[0]]


_TOKEN = re.compile(r'"(?:[^"\\]+|\\.)*"?|//[^\n]*|[^"/]+|/', re.DOTALL)


def strip_comments(text: str) -> str:
    """Drop ``//`` line comments that stand outside JSON strings."""
    return _TOKEN.sub(lambda m: "" if m.group().startswith("//") else m.group(), text)


class _Repeated(Exception):
    """A JSON object names the same key twice."""


def _no_repeats(pairs: list[tuple[str, object]]) -> dict:
    doc: dict = {}
    for key, value in pairs:
        if key in doc:
            raise _Repeated(key)
        doc[key] = value
    return doc


def _too_big(where: str, what: str) -> UsageError:
    return UsageError(
        f"{where} has {what} — route by fewer, broader patterns (e.g. one per class "
        "directory, such as '^train/n01440764/'), or shard the dataset in parts"
    )


def _read(value: str) -> tuple[str, str]:
    value = value.strip()
    if value.startswith("{"):
        where = "inline --ekm JSON"
        if len(value) > MAX_EKM_BYTES:
            raise _too_big(where, f"{len(value)} characters, over the limit of {MAX_EKM_BYTES}")
        return where, value
    path = Path(value)
    if not path.is_file():
        raise UsageError(
            f"--ekm {value!r} is neither inline JSON (starting with '{{') nor an existing file — "
            "check the path, or pass the JSON itself"
        )
    where = f"--ekm file {value!r}"
    try:
        size = path.stat().st_size
        if size > MAX_EKM_BYTES:
            raise _too_big(
                where, f"{size / (1 << 20):.1f} MiB, over the limit of {MAX_EKM_BYTES >> 20} MiB"
            )
        return where, path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"--ekm file {value!r} cannot be read: {err}") from None


def _pattern_count(doc: dict) -> int:
    return sum(len(v) if isinstance(v, list) else 1 for v in doc.values())


def parse_ekm(value: str) -> Ekm:
    """Parse an EKM given inline or as a file path, and compile its patterns with RE2.

    Raises:
        UsageError: malformed JSON, a bad format template, a bad or repeated regex, a map
            over ``MAX_EKM_BYTES`` or ``MAX_EKM_PATTERNS``.
    """
    where, text = _read(value)
    doc = _document(where, text)
    seen: set[str] = set()
    categories: list[Category] = []
    owner: list[int] = []
    for fmt, patterns in doc.items():
        category = _category(where, fmt, patterns, seen)
        owner += [len(categories)] * len(category.patterns)
        categories.append(category)
    matcher = _matcher(where, [p for c in categories for p in c.patterns])
    return Ekm(where, tuple(categories), tuple(owner), matcher)


def _document(where: str, text: str) -> dict:
    """The EKM's JSON object (comments stripped), checked: no format twice, not empty, at most
    ``MAX_EKM_PATTERNS`` patterns."""
    try:
        doc = json.loads(strip_comments(text), object_pairs_hook=_no_repeats)
    except _Repeated as err:
        raise UsageError(
            f"{where} lists format {str(err)!r} more than once — merge its patterns into one list"
        ) from None
    except json.JSONDecodeError as err:
        raise UsageError(
            f'{where} is not valid JSON ({err}) — write e.g. {{"fish-%d.tar": ["^n01440764"]}}'
        ) from None
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f'{where} must be a JSON object like {{"fish-%d.tar": ["regex", ...]}}')
    count = _pattern_count(doc)
    if count > MAX_EKM_PATTERNS:
        raise _too_big(where, f"{count} patterns, over the limit of {MAX_EKM_PATTERNS}")
    return doc


def _category(where: str, fmt: str, patterns: object, seen: set[str]) -> Category:
    """The format ``fmt`` with its regexes (one string or a list), checked: a number range in
    the format, each regex new (``seen``: the regexes of the formats before, added to)."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if (
        not isinstance(patterns, list)
        or not patterns
        or not all(isinstance(p, str) for p in patterns)
    ):
        raise UsageError(f"{where}: {fmt!r} must map to a list of regex strings")
    template = parse_template(fmt, f"{where}: format")
    if not template.ranges:
        raise UsageError(f"{where}: format {fmt!r} has no number range — write e.g. 'fish-%d.tar'")
    for p in patterns:
        if p in seen:
            raise UsageError(f"{where}: regex {p!r} is listed more than once")
        seen.add(p)
    return Category(template, tuple(patterns))


def _matcher(where: str, patterns: list[str]) -> _Matcher:
    """Every regex of the EKM compiled with RE2 to be searched together."""
    encoded = [p.encode("utf-8", "surrogatepass") for p in patterns]
    try:
        return _Matcher(encoded)
    except _BadPattern as err:
        index, reason = err.args
        raise UsageError(
            f"{where}: {patterns[index]!r} is not a valid regex ({reason}) — write "
            "an RE2 regex (no lookaround or backreferences)"
        ) from None
    except _TooComplex:
        raise _too_big(
            where,
            f"patterns too heavy to search together (more than {MAX_SETS} "
            "RE2 sets; e.g. thousands of \\pL or long counted repeats)",
        ) from None
