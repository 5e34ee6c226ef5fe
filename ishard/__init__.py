"""ishard: shard raw datasets into size-bounded archives whose samples never cross a shard."""

from __future__ import annotations

__version__ = "0.1.0"

from .api import plan, shard
from .errors import IshardError, IshardWarning, StrictError, UsageError
from .model import Plan, Report

__all__ = [
    "IshardError",
    "IshardWarning",
    "Plan",
    "Report",
    "StrictError",
    "UsageError",
    "__version__",
    "plan",
    "shard",
]
