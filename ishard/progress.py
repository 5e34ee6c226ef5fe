"""Progress callbacks: the library reports through these no-op hooks; ``render`` draws them."""

from __future__ import annotations

from .model import ShardResult


class Progress:
    """Hooks called while a run lists, plans and writes. All are no-ops here.

    ``wrote``, ``shard_done``, ``verified`` and ``shard_verified`` are called from worker
    threads; implementations must be thread-safe.
    """

    def listing(self, files: int, nbytes: int) -> None:
        """So many files and bytes listed so far."""

    def planned(self, shards: int, nbytes: int) -> None:
        """The plan is made: this many shards holding this many payload bytes."""

    def wrote(self, nbytes: int) -> None:
        """Another ``nbytes`` of payload went into shards."""

    def shard_done(self, result: ShardResult) -> None:
        """One shard is complete under its final name."""

    def verifying(self, shards: int, nbytes: int) -> None:
        """``ishard verify`` starts: this many shards holding this many archive bytes."""

    def indexing(self, shards: int, nbytes: int) -> None:
        """``ishard index`` starts reading headers: this many shards of this many bytes (each
        then told through ``verified`` and ``shard_verified``)."""

    def verified(self, nbytes: int) -> None:
        """Another ``nbytes`` of archive bytes were read back by verify."""

    def shard_verified(self, name: str) -> None:
        """Verify is done with shard ``name``."""

    def notice(self, text: str) -> None:
        """Something the user should know now (e.g. cleanup after a failure is waiting)."""

    def warning(self, text: str) -> None:
        """One of the plan's warnings, told after planning and before anything is written."""

    def close(self) -> None:
        """The run is over (successfully or not)."""


SILENT = Progress()
