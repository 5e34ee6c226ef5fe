"""Argument checks shared by the split policies: one-line UsageErrors naming the value."""

from __future__ import annotations

from ishard.errors import UsageError


def positive(value: int, name: str) -> int:
    """``value`` if it is a whole number of at least 1, else a UsageError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} {value!r} must be a whole number of at least 1")
    return value


def non_negative(value: int, name: str) -> int:
    """``value`` if it is a whole number of at least 0, else a UsageError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{name} {value!r} must be a whole number of at least 0")
    return value


def index(value: int, count: int, name: str, count_name: str) -> int:
    """``value`` if ``0 <= value < count``, else a UsageError naming both."""
    non_negative(value, name)
    if value >= count:
        raise UsageError(f"{name} {value} must be below {count_name} {count}")
    return value


def numpy():
    """Import numpy, or say how to install it."""
    try:
        import numpy as np
    except ImportError:
        raise UsageError("the streaming policy needs numpy — pip install 'ishard[split]'") from None
    return np
