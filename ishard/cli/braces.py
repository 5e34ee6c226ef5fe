"""The shell's brace expansion seen in what click refused: an unquoted shard template such
as ``{0..3}`` that became several words, and the line that says to quote it."""

from __future__ import annotations

import re
from itertools import pairwise

import click

_EXTRA = re.compile(r"Got unexpected extra arguments? \((.*)\)")
_NUMBERED = re.compile(r"(.*?)([0-9]+)([^0-9]*)")


def brace_hint(args: list[str], err: click.ClickException) -> str | None:
    """When click found extra arguments and an option's value is followed by words counting on
    from it (the shell expanded an unquoted ``{0..3}``): the line that says to quote it."""
    if not _EXTRA.fullmatch(err.format_message()):
        return None
    for at, arg in enumerate(args):
        option, eq, first = arg.partition("=")
        if not option.startswith("--") or option == "--":
            continue
        rest = at + 1
        if not eq:
            if rest >= len(args):
                break
            first, rest = args[rest], rest + 1
        template = _counted(first, args[rest:])
        if template is not None:
            extras = args[rest : rest + template[1]]
            return (
                f"got unexpected extra arguments {' '.join(extras)!r} — they look like a "
                f"brace template the shell expanded: quote it, e.g. {option} '{template[0]}'"
            )
    return None


def expanded_option(args: list[str]) -> str | None:
    """The hint for ``--opt=s-{0..3}`` left unquoted: the shell made it ``--opt=s-0 --opt=s-1
    …`` and the last would silently win; None when no option repeats that way."""
    for at, arg in enumerate(args):
        option, eq, first = arg.partition("=")
        if not (eq and option.startswith("--")):
            continue
        values = []
        for word in args[at + 1 :]:
            same, eq2, value = word.partition("=")
            if same != option or not eq2:
                break
            values.append(value)
        template = _counted(first, values) if values else None
        if template is not None:
            return (
                f"{option} is given {template[1] + 1} times ({arg} … {option}="
                f"{values[template[1] - 1]}) — it looks like a brace template the shell "
                f"expanded: quote it, e.g. {option}='{template[0]}'"
            )
    return None


def _counted(first: str, after: list[str]) -> tuple[str, int] | None:
    """(the brace template, how many words of ``after`` it explains) when ``first`` and the
    words after it count up by one step with the same text around the number; else None."""
    head = _NUMBERED.fullmatch(first)
    if head is None:
        return None
    parts = []
    for word in after:
        m = _NUMBERED.fullmatch(word)
        if m is None or (m.group(1), m.group(3)) != (head.group(1), head.group(3)):
            break
        parts.append(m)
    numbers = [int(head.group(2))] + [int(m.group(2)) for m in parts]
    step = numbers[1] - numbers[0] if len(numbers) > 1 else 0
    count = 0
    for a, b in pairwise(numbers):
        if step <= 0 or b - a != step:
            break
        count += 1
    if not count:
        return None
    lo, hi = head.group(2), parts[count - 1].group(2)
    braces = f"{{{lo}..{hi}}}" if step == 1 else f"{{{lo}..{hi}..{step}}}"
    return f"{head.group(1)}{braces}{head.group(3)}", count
