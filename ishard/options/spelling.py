"""How a message names an option: the checks name its flag (``--shard-size '0'``); a message
for Python names its keyword instead (``shard_size='0'``), one about a value the environment
gave names the variable (``ISHARD_SHARD_SIZE='0'``) — the flag rewritten in one place."""

from __future__ import annotations

import re
from collections.abc import Mapping

from .table import SHARD_OPTIONS

# A flag where a message names an option: after a space, a parenthesis or at the start; a
# value (quoted, or a number) after it is joined to the new name by "="
_FLAG = re.compile(r"(?<![^\s(])(--[a-z][a-z-]*[a-z])( (?=['\"]|-?[0-9]))?")


def respelt(message: str, names: Mapping[str, str]) -> str:
    """``message`` with each flag ``names`` holds (``--shard-size``) written as the name it
    maps to (``shard_size``, ``ISHARD_SHARD_SIZE``), a value after it joined by ``=``
    (``shard_size='0'``); other words are kept."""

    def name(match: re.Match) -> str:
        flag, value = match.groups()
        if flag not in names:
            return match.group(0)
        return names[flag] + ("=" if value else "")

    return _FLAG.sub(name, message)


def _keywords() -> dict[str, str]:
    """The long flag of each option of a run and its keyword, from the option table
    (``--storage-option``: ``storage_options``)."""
    return {o.flags[-1].split("/")[0]: o.name for o in SHARD_OPTIONS if o.group}


KEYWORDS = _keywords()


def keyword_spelling(message: str) -> str:
    """``message`` with each option's flag (``--shard-size '0'``) spelt as its Python keyword
    (``shard_size='0'``); other words are kept."""
    return respelt(message, KEYWORDS)
