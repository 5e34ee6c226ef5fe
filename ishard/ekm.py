"""External key map: route each file to a named shard series by regex (``{"fish-%d.tar": [regex]}``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import regex

from .errors import DataError, UsageError
from .keys import REGEX_SECONDS
from .templates import NameTemplate, parse_template

NO_MATCH = "matches no --ekm pattern"
SEVERAL = "matches more than one --ekm pattern"


@dataclass(frozen=True)
class Category:
    """One EKM entry: the shard-name format and the patterns that route files to it."""

    template: NameTemplate
    patterns: tuple[regex.Pattern, ...]


@dataclass(frozen=True)
class Ekm:
    """A parsed external key map; categories keep the order they have in the JSON."""

    source: str
    categories: tuple[Category, ...]

    def category(self, name: str) -> int | str:
        """Index of the category of the one pattern matching ``name``, else the reason it has none.

        Like Go's EKM lookup, exactly one pattern over the whole map must match: two patterns
        match (even of the same category) → ``SEVERAL``.
        """
        found = -1
        for index, cat in enumerate(self.categories):
            hits = 0
            for pattern in cat.patterns:
                try:
                    hits += pattern.search(name, timeout=REGEX_SECONDS) is not None
                except TimeoutError:  # name the regex: a category may hold hundreds
                    raise DataError(
                        f"--ekm pattern {pattern.pattern!r} of {cat.template.text!r} took over "
                        f"{REGEX_SECONDS:g}s on {name!r} — simplify the regex (avoid nested "
                        "repeats such as (a+)+)"
                    ) from None
            if hits:
                if found >= 0 or hits > 1:
                    return SEVERAL
                found = index
        return found if found >= 0 else NO_MATCH


def strip_comments(text: str) -> str:
    """Drop ``//`` line comments that stand outside JSON strings."""
    out, i, in_string = [], 0, False
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


class _Repeated(Exception):
    """A JSON object names the same key twice."""


def _no_repeats(pairs: list[tuple[str, object]]) -> dict:
    doc: dict = {}
    for key, value in pairs:
        if key in doc:
            raise _Repeated(key)
        doc[key] = value
    return doc


def _read(value: str) -> tuple[str, str]:
    value = value.strip()
    if value.startswith("{"):
        return "inline --ekm JSON", value
    path = Path(value)
    if not path.is_file():
        raise UsageError(
            f"--ekm {value!r} is neither inline JSON (starting with '{{') nor an existing file — "
            "check the path, or pass the JSON itself"
        )
    try:
        return f"--ekm file {value!r}", path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"--ekm file {value!r} cannot be read: {err}") from None


def parse_ekm(value: str) -> Ekm:
    """Parse an EKM given inline or as a file path.

    Raises:
        UsageError: malformed JSON, a bad format template, a bad or repeated regex.
    """
    where, text = _read(value)
    try:
        doc = json.loads(strip_comments(text), object_pairs_hook=_no_repeats)
    except _Repeated as err:
        raise UsageError(
            f"{where} lists format {str(err)!r} more than once — merge its patterns into one list"
        ) from None
    except json.JSONDecodeError as err:
        raise UsageError(
            f"{where} is not valid JSON ({err}) — "
            'write e.g. {"fish-%d.tar": ["^n01440764"]}'
        ) from None
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f'{where} must be a JSON object like {{"fish-%d.tar": ["regex", ...]}}')
    seen: set[str] = set()
    categories = []
    for fmt, patterns in doc.items():
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not patterns or not all(
            isinstance(p, str) for p in patterns
        ):
            raise UsageError(f"{where}: {fmt!r} must map to a list of regex strings")
        template = parse_template(fmt, f"{where}: format")
        if not template.ranges:
            raise UsageError(
                f"{where}: format {fmt!r} has no number range — write e.g. 'fish-%d.tar'"
            )
        compiled = []
        for p in patterns:
            if p in seen:
                raise UsageError(f"{where}: regex {p!r} is listed more than once")
            seen.add(p)
            try:
                compiled.append(regex.compile(p))
            except regex.error as err:
                raise UsageError(f"{where}: {p!r} is not a valid regex ({err})") from None
        categories.append(Category(template, tuple(compiled)))
    return Ekm(where, tuple(categories))
