"""Parse and format byte sizes: ``512MiB`` and ``1.5GiB`` are binary, ``100KB`` decimal; a
shard size without a unit is a sample count."""

from __future__ import annotations

import re
from dataclasses import dataclass
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
_COUNT = re.compile(r"[ \t]*([+-]?[0-9]+)[ \t]*")
MAX_COUNT = (1 << 31) - 1  # Go ishard reads a shard size that fits an int32 as a count
_SIZE = re.compile(r"[ \t]*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)[ \t]*([A-Za-z]*)[ \t]*")


def parse_size(text: str | int, *, option: str = "--shard-size") -> int:
    """Return the number of bytes ``text`` names.

    ``KiB/MiB/GiB/TiB`` (and ``K/M/G/T``) are powers of 1024, ``KB/MB/GB/TB`` powers of 1000,
    a bare integer is bytes (for ``--shard-size`` use :func:`parse_shard_size`, which reads a
    bare integer as a sample count); fractions are allowed with a unit (``1.5GiB``).

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
                f"{option} {text!r} is not a size — write e.g. 512MiB, 100KB, 1.5GiB or 1048576B"
            )
        number = match.group(1)
        if "." in number and unit in ("", "B"):
            raise UsageError(
                f"{option} {text!r} has a fraction of a byte — write whole "
                "bytes (e.g. 2B) or a larger unit (1.5KiB)"
            )
        try:
            value = int(Decimal(number) * _UNITS[unit])
        except InvalidOperation:  # pragma: no cover - the regex admits only decimals
            raise UsageError(f"{option} {text!r} is not a size — write e.g. 512MiB") from None
    if value <= 0:
        raise UsageError(f"{option} {text!r} must be more than 0 bytes — write e.g. 512MiB")
    return value


@dataclass(frozen=True)
class ShardSize:
    """What a shard size names: a byte target (``size``) or a sample count (``count``)."""

    size: int | None = None
    count: int | None = None


def parse_shard_size(value: str | float, *, option: str = "--shard-size") -> ShardSize:
    """Read a shard size the way Go ishard does: text that is a whole number without a unit
    (``10``, ``+10``) counts samples; with a unit (``100B``, ``64MiB``) it is bytes. In Python
    an ``int`` (or a float that is a whole number, ``3e9``) is bytes, as webdataset's
    ``maxsize``.

    Raises:
        UsageError: not a size or a count, not positive, a count over 2^31-1, a fraction of a
            byte.
    """
    if isinstance(value, float) and not isinstance(value, bool):
        if not value.is_integer() or value <= 0:
            raise UsageError(
                f"{option} {value!r} must be a whole number of bytes above 0 — "
                "write e.g. 512 * 2**20 or '512MiB'"
            )
        return ShardSize(size=int(value))
    if isinstance(value, str):
        match = _COUNT.fullmatch(value)
        if match is not None:
            return ShardSize(count=_count(value, int(match.group(1)), option))
        sized = _SIZE.fullmatch(value)
        if sized is None or sized.group(2).upper() not in _UNITS:
            raise UsageError(
                f"{option} {value!r} is neither a size nor a sample count — write a size with "
                "a unit (512MiB, 100KB, 1048576B) or a number of samples (10)"
            )
    return ShardSize(size=parse_size(value, option=option))


def _count(text: str, count: int, option: str) -> int:
    if count < 1:
        raise UsageError(
            f"{option} {text!r} must be at least 1 sample (a number without a unit "
            "counts samples) — write e.g. 10, or a size with a unit: 512MiB"
        )
    if count > MAX_COUNT:
        exact = describe_size(count)
        also = f" or {exact}" if exact != f"{count}B" else ""
        raise UsageError(
            f"{option} {text!r} is a sample count over {MAX_COUNT} (a number without a unit "
            f"counts samples) — for bytes write {count}B{also}"
        )
    return count


def describe_size(n: int) -> str:
    """``n`` bytes as an exact size a user could write back, in the fewest digits: ``256KiB``,
    ``300KB``, ``1TB``, ``1001B``."""
    exact = [(n, "B")]
    for shift, unit in ((10, "KiB"), (20, "MiB"), (30, "GiB"), (40, "TiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            exact.append((n >> shift, unit))
    for power, unit in ((3, "KB"), (6, "MB"), (9, "GB"), (12, "TB")):
        if n >= 10**power and n % 10**power == 0:
            exact.append((n // 10**power, unit))
    number, unit = min(exact, key=lambda c: len(str(c[0])))  # a tie keeps the binary unit
    return f"{number}{unit}"


def format_size(n: int) -> str:
    """Format ``n`` bytes the way Go ishard prints them: ``100B``, ``30.00KiB``, ``1.03MiB``."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.2f}{unit}"
    return f"{n}B"


def counted(n: int, noun: str) -> str:
    """``1 sample``, ``2 samples``: a count with its noun."""
    return f"{n} {noun}{'s' * (n != 1)}"
