"""ishard: shard raw datasets into size-bounded archives whose samples never cross a shard."""

from .api import index, plan, shard
from .errors import IshardError, IshardWarning, StrictError, UsageError
from .inspection import diff, find, ls, read_sample, shard_urls, split, verify
from .model import Plan, Report
from .readback.verify import Problem, Verification
from .version import __version__

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
    "diff",
    "find",
    "index",
    "ls",
    "plan",
    "read_sample",
    "shard",
    "shard_urls",
    "split",
    "verify",
]


def __dir__() -> list[str]:
    """The public API alone: the submodules stay importable (``ishard.api``), unlisted."""
    return sorted(__all__)
