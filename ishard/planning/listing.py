"""List a source (a local directory or a store location) into a bytewise-sorted ``FileTable``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..model import Tally
from ..store.base import SourceListing
from ..store.retry import Retrier
from .table import FileTable

if TYPE_CHECKING:
    from ..store.location import Location


def list_source(
    location: Location,
    *,
    prefix: str = "",
    include_hidden: bool = False,
    tally: Tally | None = None,
    on_file: Callable[..., None] | None = None,
    retrier: Retrier | None = None,
    follow_symlinks: bool = False,
    etags: bool = False,
) -> FileTable:
    """The files of a source whose names start with ``prefix``, sorted bytewise, as its store
    lists them (a local tree walked under its path rules, a store's pages filtered); what is
    left out is counted in ``tally``; each store request is retried by ``retrier`` (a default
    one if not given); with ``etags``, a store's ETags are kept too (``FileTable.etags``).

    Raises:
        UsageError: the source (directory, bucket or path) does not exist.
        IshardError: it cannot be read: access denied, the endpoint unreachable.
    """
    entries = FileTable()
    tally = tally if tally is not None else Tally()
    listing = SourceListing(
        prefix, include_hidden, tally, on_file, retrier or Retrier(), follow_symlinks, etags
    )
    location.store.list_source(location, entries, listing)
    entries.sort()
    return entries
