"""Listings from inventory files (``--src-list``): the planner that reads one, chosen by name
(the column engine, ``engine/``, or the row reader, ``rows/``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from ..errors import UsageError
from ..model import Tally
from ..names import combined_prefix
from .rowrules import MAX_SIZE, InventoryRead
from .rows.lines import read_head
from .rows.names import Sizes, names_only
from .rows.reader import read_rows
from .table import FileTable

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .engine.columns import EngineReading
    from .engine.selects import Inventory

LOG = logging.getLogger("ishard")  # the planner chosen, with -v


ENGINE_FROM = 8 << 20  # inventory bytes from which the column engine reads a local file
ENGINE_FROM_COMPRESSED = 1 << 20  # … a gzip'ed one (an S3 Inventory report's data files)
PLANNER = "ISHARD_PLANNER"  # names the planner of an inventory, whatever its size
PLANNERS = ("engine", "rows")


def choose_planner(
    where: str, wanted: str | None, opener: Callable[[str], BinaryIO] | None = None
) -> tuple[str, str, Inventory | None]:
    """Which planner reads the inventory ``where``, by name, and why: ``"engine"`` (the column
    engine, with the inventory as ``selects.describe`` finds it) or ``"rows"`` (the row reader;
    None). The engine reads CSV and JSON Lines from ``ENGINE_FROM`` bytes on
    (``ENGINE_FROM_COMPRESSED`` gzip'ed, and an S3 Inventory report's data files), any
    Parquet file and any inventory in a store (whose size is known only once fetched; the
    engine fetches it). ``$ISHARD_PLANNER`` names one whatever the size: ``engine`` where the
    engine can read the inventory, ``rows`` where the row reader can (not Parquet). A list of
    names alone is the row reader's: each size is asked of the source, a request a name.

    Raises:
        UsageError: ``$ISHARD_PLANNER`` names no planner.
    """
    from .engine.selects import describe

    named = os.environ.get(PLANNER, "").strip()
    if named not in ("", *PLANNERS):
        raise UsageError(f"{PLANNER}={named!r} names no planner — give engine or rows, or unset it")
    inventory = describe(where, opener)
    if inventory is not None and inventory.kind == "parquet":
        return "engine", "a Parquet file, which only the column engine reads", inventory
    if _names_alone(where, inventory, opener):
        return "rows", "a list of names alone: each size is read from the source", None
    if inventory is None:
        return "rows", "not an inventory the column engine reads", None
    if wanted is None:
        return "rows", "no name can have the prefix", None
    if named:
        return named, f"{PLANNER}={named}", inventory if named == "engine" else None
    if inventory.kind in ("s3-parquet", "s3-orc"):
        form = "Parquet" if inventory.kind == "s3-parquet" else "ORC"
        return "engine", f"an S3 Inventory report in {form}", inventory
    if inventory.nbytes is None:
        return "engine", "in a store: the column engine fetches it", inventory
    least = ENGINE_FROM_COMPRESSED if inventory.compressed else ENGINE_FROM
    size = inventory.nbytes
    if size < least:
        return "rows", f"{size} bytes, under {least >> 20} MiB", None
    return "engine", f"{size} bytes, from {least >> 20} MiB on", inventory


def _names_alone(
    where: str, inventory: Inventory | None, opener: Callable[[str], BinaryIO] | None
) -> bool:
    """Whether the inventory is a list of names alone (``rows.names``): one the engine would
    read as CSV, or not at all, whose first line names no column."""
    if inventory is not None and inventory.kind != "csv":
        return False
    return names_only(read_head(where, opener, 1 << 16).decode("utf-8", "replace"), where)


def _by_engine(
    read: InventoryRead, inventory: Inventory, reading: EngineReading
) -> FileTable | None:
    """The listing read by the column engine (``columns``), or None: the engine hands it back
    to the row reader (it does not take it as it is)."""
    from .engine.columns import read_inventory
    from .engine.connection import Fallback

    try:
        files, nbytes = read_inventory(
            read.where,
            inventory,
            wanted=read.wanted,
            include_hidden=read.include_hidden,
            tally=read.tally,
            opener=read.opener,
            **reading,
        )
    except Fallback:  # never for Parquet: the engine names what is wrong
        return None
    _total_fits(read.where, nbytes)
    if read.on_file is not None:
        read.on_file(nbytes, len(files))
    return files


def _total_fits(where: str, total: int) -> None:
    """The listing's bytes fit a 64-bit count (shard totals, the plan's, are such sums)."""
    if total > MAX_SIZE:
        raise UsageError(
            f"--src-list {where!r}: its files' sizes add up to {total} bytes, over {MAX_SIZE} "
            "(2^63-1), the most ishard counts — check the size column; exabytes are a mistake"
        )


def _sizes_fit(where: str, sizes) -> None:
    """``_total_fits`` for a row reader's listing: summed only when its largest size times its
    count may not fit."""
    import numpy as np

    from .table import int_view

    if len(sizes) and int(np.max(int_view(sizes))) > MAX_SIZE // len(sizes):
        _total_fits(where, sum(sizes))


def list_inventory(
    where: str,
    *,
    list_prefix: str = "",
    prefix: str = "",
    include_hidden: bool = False,
    tally: Tally | None = None,
    on_file: Callable[..., None] | None = None,
    opener: Callable[[str], BinaryIO] | None = None,
    sizes: Sizes | None = None,
    **reading: Unpack[EngineReading],
) -> FileTable:
    """The entries an inventory file names, filtered like a listing, sorted bytewise.

    ``opener`` opens a ``where`` that is a store URL (and an S3 Inventory's data files there).
    ``key``: the run's key function; the column engine also groups the files by it when it
    is a built-in pattern (the table's ``handover.grouping``), and finds the files whose member
    names (``<key>.<extension>`` when ``renamed``) may clash on extraction (``clashes``).
    ``on_file(size)`` is called per file, or ``on_file(total, count)`` once for a listing
    read by the column engine. ``sizes`` gives the sizes and mtimes of a list of names alone
    (``rows.names``) from the source. ``tmp_dir`` and ``memory_limit``: where the column engine
    spills and past how many bytes (``engine.MEMORY_LIMIT`` when None); the table's
    ``handover.spilled`` says how much it wrote there.

    Raises:
        UsageError: the file is missing or malformed.
    """
    tally = tally if tally is not None else Tally()
    wanted = combined_prefix(list_prefix, prefix)
    planner, why, inventory = choose_planner(where, wanted, opener)
    read = InventoryRead(where, wanted, include_hidden, tally, on_file, opener)
    fast = None
    if planner == "engine" and inventory is not None:
        fast = _by_engine(read, inventory, reading)
        if fast is None:
            planner, why = "rows", "the column engine handed it back: it does not take it as it is"
    LOG.info("planner: %s (%s)", planner, why)
    if fast is not None:
        return fast
    entries = read_rows(read, sizes)
    _sizes_fit(where, entries.sizes)
    entries.sort()
    return entries
