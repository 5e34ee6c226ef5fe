"""A sample's rows of the sample index held against the manifest before anything is read
(``ishard find``, ``cat``): one shard the manifest lists, each member once, offsets and
sizes that are whole numbers, in order and inside the shard's recorded size; and the keys
asked for, one ``str`` or an iterable of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..errors import DataError, UsageError
from ..formats.registry import read_as
from ..names import quoted

# a row as lookup's query selects it
KEY, SHARD, MEMBER, HEADER, DATA, SIZE, MTIME, FRAME_OFFSET, FRAME_SIZE = range(9)
NUMBERS = {"header_offset": HEADER, "data_offset": DATA, "size": SIZE, "mtime": MTIME}


def sample_keys(keys: object) -> list[str]:
    """``keys`` as a list: one sample key (a ``str``), or an iterable of them.

    Raises:
        UsageError: anything else (bytes, a number, None, an iterable holding one).
    """
    if isinstance(keys, str):
        return [keys]
    if isinstance(keys, (bytes, bytearray, memoryview)) or not isinstance(keys, Iterable):
        raise UsageError(
            f"keys must be a sample key (a str) or an iterable of them, got "
            f"{type(keys).__name__} — e.g. find(dst, ['n01440764_10026'])"
        )
    every = list(keys)
    for key in every:
        if not isinstance(key, str):
            raise UsageError(
                f"keys holds {key!r} ({type(key).__name__}): each must be a sample key (a "
                "str) — give the keys as text"
            )
    return every


class Claims:
    """The checks of one sample's rows: ``where`` names the index in the errors, ``shards``
    is the manifest's shard list (name → recorded size), ``options`` the run's recorded
    options (how its format's samples are reached may depend on them)."""

    def __init__(self, where: str, shards: Mapping[str, int], options: Mapping) -> None:
        self.where = where
        self.shards = shards
        self.options = options

    def _bad(self, key: str, what: str) -> DataError:
        return DataError(
            f"{self.where!r} says sample {quoted(key)} {what} — run ishard verify on the "
            "destination"
        )

    def check(self, key: str, rows: Sequence[tuple]) -> None:
        """Are ``rows`` (sorted by header offset) one sample's, in a shard the manifest
        lists, with offsets and sizes inside it?

        Raises:
            UsageError: the index has no offsets (an older ishard's).
            DataError: anything else the rows say that cannot be so.
        """
        shard = self._shard(key, rows)
        self._members(key, rows)
        if all(r[HEADER] is None and r[DATA] is None for r in rows):
            raise UsageError(
                "the sample index has no offsets (written by an older ishard) — shard again "
                "to write one"
            )
        self._numbers(key, rows)
        self._inside(key, shard, rows)
        if read_as(shard).reach(self.options) == "frames":
            self._frames(key, shard, rows)

    def _shard(self, key: str, rows: Sequence[tuple]) -> str:
        for row in rows:
            if not isinstance(row[SHARD], str) or row[SHARD] not in self.shards:
                raise self._bad(
                    key, f"is in shard {row[SHARD]!r}, which the manifest does not list"
                )  # fmt: skip
        named = list(dict.fromkeys(r[SHARD] for r in rows))
        if len(named) > 1:
            raise self._bad(
                key, f"is in two shards, {quoted(named[0])} and {quoted(named[1])}: a sample "
                "is in one"
            )  # fmt: skip
        return named[0]

    def _members(self, key: str, rows: Sequence[tuple]) -> None:
        seen: set[str] = set()
        for row in rows:
            if not isinstance(row[KEY], str) or not isinstance(row[MEMBER], str):
                raise self._bad(key, f"has a member named {row[MEMBER]!r}, not text")
            if row[MEMBER] in seen:
                raise self._bad(key, f"holds member {quoted(row[MEMBER])} twice")
            seen.add(row[MEMBER])

    def _numbers(self, key: str, rows: Sequence[tuple]) -> None:
        for row in rows:
            for column, at in NUMBERS.items():
                value = row[at]
                if not _whole(value) or (value < 0 and column != "mtime"):
                    raise self._bad(
                        key, f"gives member {quoted(row[MEMBER])} the {column} {value!r} (not "
                        "a whole number of at least 0)"
                    )  # fmt: skip
            if row[DATA] <= row[HEADER]:
                raise self._bad(
                    key, f"has member {quoted(row[MEMBER])}'s data at offset {row[DATA]}, not "
                    f"after its header at {row[HEADER]}"
                )  # fmt: skip

    def _inside(self, key: str, shard: str, rows: Sequence[tuple]) -> None:
        """Members one after another, and (where the offsets are the shard's own: a format
        with no reading filter, a ``.tar``, a ``.zip``) inside the shard's recorded size."""
        fmt = read_as(shard)
        ranged = fmt.reach(self.options) == "range"
        end = 0
        for row in rows:
            if row[HEADER] < end:
                raise self._bad(key, f"has member {quoted(row[MEMBER])} inside the one before it")
            end = row[DATA] + fmt.container.padded(row[SIZE])
            if ranged:
                last = end
            elif fmt.read is None:  # the member's size is not its bytes here (deflated)
                last = row[DATA]
            else:
                continue
            if last > self.shards[shard]:
                raise self._bad(
                    key, f"has member {quoted(row[MEMBER])} at bytes {row[HEADER]}-{last} of "
                    f"shard {quoted(shard)}, which has {self.shards[shard]} bytes (as the "
                    "manifest records)"
                )  # fmt: skip

    def _frames(self, key: str, shard: str, rows: Sequence[tuple]) -> None:
        """A seekable shard's rows of a sample name one run of frames inside the shard (or,
        all of them, none: the sample is read forward)."""
        frames = [(r[FRAME_OFFSET], r[FRAME_SIZE]) for r in rows]
        if all(f == (None, None) for f in frames):
            return
        offset, size = frames[0]
        if any(f != frames[0] for f in frames) or not (_whole(offset) and _whole(size)):
            raise self._bad(key, f"is in frames {frames}, not one run of them")
        if offset < 0 or size <= 0 or offset + size > self.shards[shard]:
            raise self._bad(
                key, f"is in the frames at bytes {offset}-{offset + size} of shard "
                f"{quoted(shard)}, which has {self.shards[shard]} bytes (as the manifest "
                "records)"
            )  # fmt: skip


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
