"""Exceptions a person can act on: each carries its exit code and a one-line message."""

from __future__ import annotations


class IshardError(Exception):
    """Base of every error ishard raises on purpose; ``str(err)`` is the one-line message."""

    exit_code = 1


class UsageError(IshardError, ValueError):
    """A bad invocation or option value, found before anything is listed or written."""

    exit_code = 2


class SourceError(IshardError, OSError):
    """The source cannot be listed or a file in it cannot be read as listed."""

    exit_code = 1


class DataError(IshardError, ValueError):
    """The dataset itself breaks a rule the options ask for (missing extension, EKM conflict)."""

    exit_code = 1


class WriteError(IshardError, OSError):
    """A shard or the manifest could not be written to the destination."""

    exit_code = 1


class Interrupted(IshardError):
    """The run was stopped (Ctrl-C or SIGTERM); nothing partial was left behind."""

    exit_code = 130
    MESSAGE = (
        "interrupted — complete shards were kept and no partial one was left; "
        "run again with --resume to finish the job (or --overwrite to start over)"
    )
