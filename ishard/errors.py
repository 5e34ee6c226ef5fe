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


class SizeChanged(SourceError):
    """A source file is not the size it was listed with: ``name``, ``listed`` and ``now``
    (None: more than listed, by how much not read)."""

    def __init__(self, message: str, name: str = "", listed: int = 0, now: int | None = None):
        super().__init__(message)
        self.name, self.listed, self.now = name, listed, now

    def stale(self, inventory: str) -> SourceError:
        """The same error where the size came from an inventory (``--src-list``): the
        inventory is what is out of date, not the source."""
        now = f"{self.now} bytes" if self.now is not None else f"more than {self.listed} bytes"
        return SourceError(
            f"file {self.name!r} is {now} in the source, but --src-list {inventory!r} says "
            f"{self.listed}: the inventory is stale — write it again, or give the names alone "
            "(a name a line: ishard reads each size from the source)"
        )


class DataError(IshardError, ValueError):
    """The dataset itself breaks a rule the options ask for (missing extension, EKM conflict)."""

    exit_code = 1


class StrictError(DataError):
    """``strict=True`` (``--strict``) and the plan has warnings (in ``warnings``): nothing was
    written."""

    exit_code = 1

    def __init__(self, message: str, warnings: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.warnings = warnings


class WriteError(IshardError, OSError):
    """A shard or the manifest could not be written to the destination."""

    exit_code = 1


class OutOfMemory(IshardError, MemoryError):
    """This process could not get the memory it asked for (a failure while running)."""

    exit_code = 1
    MESSAGE = (
        "out of memory{what} — free memory on this machine, or ask for less at once: a lower "
        "--memory-limit, fewer --jobs or --workers, a smaller --read-buffer (ishard shard), "
        "fewer keys at a time (ishard cat)"
    )

    def __init__(self, what: str = "") -> None:
        super().__init__(self.MESSAGE.format(what=f" {what}" if what else ""))


class Interrupted(IshardError):
    """The run was stopped (Ctrl-C, SIGTERM or SIGHUP); nothing partial was left behind. The
    exit code is the shell's for the signal: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP)."""

    exit_code = 130
    MESSAGE = (
        "interrupted ({signal}) — complete shards were kept and no partial one was left; "
        "run again with --resume to finish the job (or --overwrite to start over)"
    )

    def __init__(self, signum: int = 2, name: str = "SIGINT") -> None:
        super().__init__(self.MESSAGE.format(signal=name))
        self.exit_code = 128 + signum


class IshardWarning(UserWarning):
    """A plan that ishard makes but would rather not: readers would see other samples than the
    plan holds, or an option has no effect. Issued with ``warnings.warn`` after planning and
    before anything is written; ``warnings.simplefilter("error", IshardWarning)`` or
    ``strict=True`` stops the run there."""
