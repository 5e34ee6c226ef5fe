"""``--index dali``: the DALI v1.2 index written beside a plain ``.tar`` shard."""

from __future__ import annotations

from ..names import wds_split


def index_name(shard: str) -> str:
    """The DALI index beside a shard: ``shard-000001.tar`` → ``shard-000001.idx``."""
    return shard.removesuffix(".tar") + ".idx"


def dali_index(names: list[str], offsets: list[int], sizes: list[int]) -> bytes:
    """A DALI v1.2 index of one tar: ``v1.2 <samples>``, then a line per sample of
    ``<ext> <data offset> <size> <member name>`` groups.

    Members are grouped as readers group them (consecutive names with one key); members readers
    skip (no dot, or a leading dot, in the basename) are left out, as DALI's own tool does.
    """
    lines: list[str] = []
    last = None
    for name, offset, size in zip(names, offsets, sizes):
        key, ext = wds_split(name)
        if not ext or key.endswith("/") or not key:
            continue
        part = f"{ext} {offset} {size} {name}"
        if key == last:
            lines[-1] += " " + part
        else:
            lines.append(part)
            last = key
    return f"v1.2 {len(lines)}\n".encode() + "".join(f"{line}\n" for line in lines).encode(
        "utf-8", "surrogateescape"
    )
