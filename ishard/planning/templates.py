"""Shard-name templates in Go ishard's three syntaxes: fmt ``%06d``, bash ``{0..99..2}``, at ``@0001``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError
from ..names import unsafe_name

_BASH = re.compile(r"\{([0-9]+)\.\.([0-9]+)(?:\.\.([0-9]+))?\}")
_AT = re.compile(r"@([0-9]+)")
_FMT = re.compile(r"%(0[1-9][0-9]*)?d")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FMT_LIMIT = (1 << 63) - 1


@dataclass(frozen=True)
class _Range:
    start: int
    count: int
    step: int
    width: int


@dataclass(frozen=True)
class NameTemplate:
    """A parsed template: ``count`` names, the i-th given by :meth:`name`."""

    text: str
    gaps: tuple[str, ...]  # literal text: gaps[0] range0 gaps[1] range1 ... gaps[-1]
    ranges: tuple[_Range, ...]

    @property
    def count(self) -> int:
        """How many distinct names the template yields."""
        total = 1
        for r in self.ranges:
            total *= r.count
        return total

    @property
    def literal_prefix(self) -> str:
        """The text before the first range (all names start with it)."""
        return self.gaps[0]

    def name(self, index: int) -> str:
        """The ``index``-th name; ranges advance like an odometer, the last one fastest."""
        if not 0 <= index < self.count:
            raise IndexError(index)
        digits = []
        for r in reversed(self.ranges):
            index, pos = divmod(index, r.count)
            digits.append(str(r.start + pos * r.step).zfill(r.width))
        digits.reverse()
        parts = [self.gaps[0]]
        for value, gap in zip(digits, self.gaps[1:]):
            parts += [value, gap]
        return "".join(parts)


def _bad(text: str, kind: str, example: str, option: str) -> UsageError:
    return UsageError(f"{option} {text!r} is not a valid {kind} template — write e.g. {example!r}")


def _split(text: str, pattern: re.Pattern, make) -> NameTemplate:
    gaps, ranges, pos = [], [], 0
    for m in pattern.finditer(text):
        gaps.append(text[pos : m.start()])
        ranges.append(make(m))
        pos = m.end()
    gaps.append(text[pos:])
    return NameTemplate(text, tuple(gaps), tuple(ranges))


def _bash_range(text: str, m: re.Match, option: str) -> _Range:
    lo_text, hi_text, step_text = m.group(1), m.group(2), m.group(3)
    lo, hi, step = int(lo_text), int(hi_text), int(step_text or 1)
    if lo > hi or step <= 0:
        raise _bad(text, "bash", "prefix-{0001..0010..1}-suffix", option)
    padded = (len(lo_text) > 1 and lo_text[0] == "0") or (len(hi_text) > 1 and hi_text[0] == "0")
    width = max(len(lo_text), len(hi_text)) if padded else 0
    return _Range(lo, (hi - lo) // step + 1, step, width)


def _check_safe(text: str, option: str) -> None:
    """Refuse a template whose names a file system or an archive tool could misread."""
    if _CONTROL.search(text):
        why = "a control character"
    elif unsafe_name(text) or text in (".", ".."):
        why = "an absolute or drive name, or a '..' part"
    elif text.startswith("."):
        why = "a name starting with '.', which listings hide"
    else:
        return
    raise UsageError(
        f"{option} {text!r} would make unsafe shard names ({why}) — use letters, digits, "
        "'-', '_' and '.' around the number, e.g. 'shard-%06d'"
    )


def parse_template(text: str, option: str = "--shard-template") -> NameTemplate:
    """Parse a shard-name template.

    bash ``{start..end[..step]}`` (repeatable, zero-padded like bash to the wider bound), at
    ``@N`` (range 0..N, width = digits of N), fmt ``%d`` / ``%0Nd`` (exactly one ``%``), or plain
    text, which names exactly one shard.

    Raises:
        UsageError: the template is malformed.
    """
    text = text.strip()
    if text in ("", "*"):
        raise UsageError(f"{option} {text!r} is empty — write e.g. 'shard-%06d'")
    if "/" in text or "\\" in text or "\0" in text:
        raise UsageError(
            f"{option} {text!r} contains a path separator — shards are written flat into DST"
        )
    _check_safe(text, option)
    if "{" in text or "}" in text:
        leftover = _BASH.sub("", text)
        if "{" in leftover or "}" in leftover or "{" not in text:
            raise _bad(text, "bash", "prefix-{0001..0010..1}-suffix", option)
        return _split(text, _BASH, lambda m: _bash_range(text, m, option))
    if "@" in text:
        if "@" in _AT.sub("", text):
            raise _bad(text, "at", "prefix-@00100-suffix", option)
        return _split(text, _AT, lambda m: _Range(0, int(m.group(1)) + 1, 1, len(m.group(1))))
    if "%" in text:
        fmt = _FMT.search(text)
        if text.count("%") != 1 or fmt is None:
            raise _bad(text, "fmt", "prefix-%06d-suffix", option)
        width = fmt.group(1)
        return _split(text, _FMT, lambda m: _Range(0, _FMT_LIMIT, 1, int(width or 0)))
    return NameTemplate(text, (text,), ())
