"""A dataset as the read commands take it: DST or DST/manifest.json, a path or a store URL."""

from __future__ import annotations

import os
from os import PathLike

from ..run.manifest import MANIFEST_NAME
from ..store import Location, parse_storage_options, resolve

# what a failed read of a dataset names (the store's wording of a read, never of a write)
ROLE = "dataset"


def dataset(
    given: str | PathLike[str], *, endpoint_url: str | None = None, storage_options=None
) -> Location:
    """The destination a read command (``find``, ``cat``, ``verify``, ``diff``, ``split``)
    was given: ``given`` itself, or the folder of the ``manifest.json`` it names (a local
    folder called ``manifest.json`` is taken as itself).

    Raises:
        UsageError: an unknown scheme, a missing backend, a bad endpoint or storage option.
    """
    url = os.fspath(given)
    head, _, last = url.rstrip("/").rpartition("/")
    if last == MANIFEST_NAME and not head.endswith(":/") and not os.path.isdir(url):
        url = head or ("/" if url.startswith("/") else ".")
    return resolve(
        url,
        endpoint_url=endpoint_url,
        storage_options=parse_storage_options(storage_options),
        role=ROLE,
    )
