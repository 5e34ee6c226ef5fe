"""A dataset's shard URLs as its manifest lists them — the one list a reader goes by: an
``--update`` retires the names of the shards it replaces and never gives them other bytes, so
the numbers have gaps — and as brace patterns WebDataset expands, one per run of consecutive
numbers (``shard-{000000..000004}.tar``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from os import PathLike, fspath

from ..run.manifest import read_manifest
from .dataset import dataset

_NUMBERS = re.compile(r"([0-9]+)")
_SPECIAL = re.compile(r"([\\{}])")  # what brace expansion reads: escaped with a backslash


def shard_urls(given: str | PathLike[str], *, endpoint_url=None, storage_options=None) -> list[str]:
    """The URL (or path) of every shard the manifest of the dataset ``given`` (DST, or its
    ``manifest.json``) lists, in its order.

    Raises:
        UsageError: the destination does not exist.
        DataError: no manifest, or one that is not ishard's shape.
    """
    dest = dataset(fspath(given), endpoint_url=endpoint_url, storage_options=storage_options)
    document = read_manifest(dest)
    return [dest.child(entry["url"]) for entry in document["shardlist"]]


def brace_patterns(urls: Sequence[str]) -> list[str]:
    """``urls`` as brace patterns, in their order: each run of URLs alike but for one number
    that counts up by one, at one width, is one pattern (``out/shard-{000006..000010}.tar``);
    a URL alone is itself. Braces and backslashes in the text are escaped, so each pattern
    expands (``braceexpand``, WebDataset) to exactly its URLs."""
    out: list[str] = []
    start = 0
    while start < len(urls):
        first = _NUMBERS.split(urls[start])
        last, at, stop = first, None, start + 1
        while stop < len(urls):
            parts = _NUMBERS.split(urls[stop])
            step = _counts_up(last, parts)
            if step is None or at not in (None, step):
                break
            last, at, stop = parts, step, stop + 1
        if at is None:
            out.append(_escaped(urls[start]))
        else:
            range_ = "{" + first[at] + ".." + last[at] + "}"
            out.append(_escaped("".join(first[:at])) + range_ + _escaped("".join(first[at + 1 :])))
        start = stop
    return out


def _counts_up(before: list[str], after: list[str]) -> int | None:
    """Where ``after`` (a URL cut at its numbers) is ``before`` with one number one higher at
    the same width, the place of that number; else None."""
    if len(before) != len(after):
        return None
    differ = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    if len(differ) != 1 or differ[0] % 2 == 0:  # numbers sit at the odd places
        return None
    at = differ[0]
    same_width = len(before[at]) == len(after[at])
    return at if same_width and int(after[at]) == int(before[at]) + 1 else None


def _escaped(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", text)
