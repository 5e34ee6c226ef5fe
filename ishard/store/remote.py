"""What every store reached over a network shares: its source listed from pages, read ahead, locked by a lease."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..names import combined_prefix, keep_remote_name
from .base import Listing, SourceListing, Store
from .lease import LeaseLock, check_lease
from .readers import prefetching_reader

if TYPE_CHECKING:
    from .location import Location
    from .retry import Retrier

GARBLED = (
    "key listed with U+FFFD in place of a character the store's listing cannot carry (a "
    "control character), so it cannot be read: --storage-option backend=fsspec lists it as it is"
)


class RemoteStore(Store):
    """A bucket or an fsspec URL: the listing is :meth:`pages` filtered by the object-store
    name rules, reads run many at once ahead of the writer, and the destination is taken by a
    lease on an object."""

    def list_source(self, location: Location, entries: Listing, listing: SourceListing) -> None:
        """List the objects of a store location; names are relative to the bucket (or URL
        path); each store request is retried by the listing's ``retrier``.

        Raises:
            UsageError: the bucket or path does not exist.
            IshardError: access denied, the endpoint unreachable.
        """
        wanted = combined_prefix(location.prefix, listing.prefix)
        if wanted is None:
            return
        with location.translated("source"):
            for page in self.pages(wanted, listing.retrier):
                for obj in page:
                    if not keep_remote_name(obj.key, listing.include_hidden, listing.tally):
                        continue
                    if "\ufffd" in obj.key and not _there(self, obj.key, listing.retrier):
                        listing.tally.add(GARBLED, obj.key)  # SeaweedFS's XML writes ESC, BEL so
                        continue
                    etag = obj.etag if listing.etags else None
                    entries.add(obj.key, obj.size, obj.mtime, obj.stamp, etag)
                    if listing.on_file is not None:
                        listing.on_file(obj.size)

    def reader(
        self, location, retrier: Retrier, *, jobs: int, budget: int, follow_symlinks: bool = False
    ):
        """Many requests in flight, memory bounded by ``budget`` (``readers.prefetching_reader``)."""
        return prefetching_reader(location, retrier, jobs=jobs, budget=budget)

    def lock(self, location, retrier: Retrier):
        """A lease on an object (``lease.LeaseLock``)."""
        return LeaseLock(location, retrier)

    def check_unlocked(self, location, retrier: Retrier) -> None:
        """The lease object read and judged as ``LeaseLock`` judges it before taking it."""
        check_lease(location, retrier)


def _there(store: Store, key: str, retrier: Retrier) -> bool:
    """Is the listed ``key`` an object by that name (not a stand-in for another's)?"""
    try:
        retrier.run(lambda: store.stat(key))
    except FileNotFoundError:
        return False
    return True
