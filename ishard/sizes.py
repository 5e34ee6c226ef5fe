"""Parse and format byte sizes: ``512MiB`` and ``1.5GiB`` are binary, ``100KB`` decimal."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from .errors import UsageError

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10, "KI": 1 << 10, "KIB": 1 << 10, "KB": 10**3,
    "M": 1 << 20, "MI": 1 << 20, "MIB": 1 << 20, "MB": 10**6,
    "G": 1 << 30, "GI": 1 << 30, "GIB": 1 << 30, "GB": 10**9,
    "T": 1 << 40, "TI": 1 << 40, "TIB": 1 << 40, "TB": 10**12,
}  # fmt: skip
_SIZE = re.compile(r"[ \t]*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)[ \t]*([A-Za-z]*)[ \t]*")


def parse_size(text: str | int, *, option: str = "--shard-size") -> int:
    """Return the number of bytes ``text`` names.

    ``KiB/MiB/GiB/TiB`` (and ``K/M/G/T``) are powers of 1024, ``KB/MB/GB/TB`` powers of 1000,
    a bare integer is bytes; fractions are allowed with a unit (``1.5GiB``).

    Raises:
        UsageError: the text is not a size, or it is not positive.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE.fullmatch(str(text))
        unit = match.group(2).upper() if match else None
        if match is None or unit not in _UNITS:
            raise UsageError(
                f"{option} {text!r} is not a size — write e.g. 512MiB, 100KB, 1.5GiB or 1048576"
            )
        number = match.group(1)
        if "." in number and unit in ("", "B"):
            raise UsageError(f"{option} {text!r} has a fraction of a byte — use a whole number")
        try:
            value = int(Decimal(number) * _UNITS[unit])
        except InvalidOperation:  # pragma: no cover - the regex admits only decimals
            raise UsageError(f"{option} {text!r} is not a size — write e.g. 512MiB") from None
    if value <= 0:
        raise UsageError(f"{option} {text!r} must be more than 0 bytes — write e.g. 512MiB")
    return value


def format_size(n: int) -> str:
    """Format ``n`` bytes the way Go ishard prints them: ``100B``, ``30.00KiB``, ``1.03MiB``."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.2f}{unit}"
    return f"{n}B"
