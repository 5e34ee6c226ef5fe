"""Where bytes live: one storage contract (``base.Store``) and its implementations."""

from . import fsspec, local, obstore  # noqa: F401 - each registers its backend
from .base import ObjectInfo, Refused, Store, Unconditional
from .location import Location, open_store, open_url, parse_storage_options, resolve

__all__ = [
    "Location",
    "ObjectInfo",
    "Refused",
    "Store",
    "Unconditional",
    "open_store",
    "open_url",
    "parse_storage_options",
    "resolve",
]
