"""ishard: shard raw datasets into size-bounded archives whose samples never cross a shard."""

from __future__ import annotations

__version__ = "0.1.0"

from .api import plan, shard
from .errors import IshardError, IshardWarning, StrictError, UsageError
from .inspection import ls, split, verify
from .model import Plan, Report
from .verify import Problem, Verification

__all__ = [
    "IshardError",
    "IshardWarning",
    "Plan",
    "Problem",
    "Report",
    "StrictError",
    "UsageError",
    "Verification",
    "__version__",
    "ls",
    "plan",
    "shard",
    "split",
    "verify",
]
