"""What a format record says about reading its shards back: the container (tar read forward,
zip through its directory) with its members, damage and header check, and for a format cut
into frames, how one sample's frames are read."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import IO, BinaryIO, Protocol

from ..names import quoted

READ_STEP = 1 << 20  # bytes per read when member data is read back


class FormatDamage(Exception):
    """A reader met bytes its format cannot hold (a damaged compressed stream, an archive
    that goes on past a damaged header)."""


class PlacedDamage(FormatDamage):
    """Damage whose reason already says where it is (not after which member)."""


# what any reader may raise on damaged bytes, whatever the format
COMMON_DAMAGE: tuple[type[BaseException], ...] = (OSError, EOFError, FormatDamage)

# one regular-file member: its name, size, and how to open its bytes
Entry = tuple[str, int, Callable[[], AbstractContextManager[IO[bytes]]]]


class Place(Protocol):
    """Where the sample index says a member is (``readback.lookup.MemberPlace``)."""

    @property
    def member(self) -> str: ...
    @property
    def header_offset(self) -> int: ...
    @property
    def data_offset(self) -> int: ...
    @property
    def size(self) -> int: ...


@dataclass
class Headers:
    """An archive's regular-file members as their headers describe them, in archive order:
    one list a column (the sample index's ``member``, ``header_offset``, ``data_offset``,
    ``size`` and ``mtime``)."""

    member: list[str] = field(default_factory=list)
    header_offset: list[int] = field(default_factory=list)
    data_offset: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    mtime: list[int] = field(default_factory=list)

    def add(self, member: str, header_offset: int, data_offset: int, size: int, mtime) -> None:
        """One more member."""
        self.member.append(member)
        self.header_offset.append(header_offset)
        self.data_offset.append(data_offset)
        self.size.append(size)
        self.mtime.append(int(mtime))

    def __len__(self) -> int:
        return len(self.member)


@dataclass(frozen=True)
class Container:
    """How the archive inside a format's reading filter is read."""

    name: str
    #: every regular-file member in archive order, each opened (if at all) before the next
    #: is asked for: ``(stream, whole, only)``; ``whole``: read to the end and check what
    #: follows the last member; ``only``: just these names, where the container can pick
    members: Callable[[BinaryIO, bool, Collection[str] | None], Iterator[Entry]]
    #: what the member's header at ``place.header_offset`` says that the index does not
    #: (None: nothing), and the member's name as the header has it: ``(data, base, place)``
    mismatch: Callable[[bytes, int, Place], tuple[str | None, str]]
    damage: tuple[type[BaseException], ...]  # its reader's errors on damaged bytes
    seeks: bool = False  # read through a directory at its end: needs a seekable file
    block: int = 1  # each member's data is padded to a multiple of this many bytes
    trailer: int = 0  # at most this many bytes after a member's data still belong to it
    #: every regular-file member's header (``Headers``) read without member bytes where the
    #: stream seeks: ``(stream, seekable)``; None: ``ishard index`` does not read this container
    headers: Callable[[BinaryIO, bool], Headers] | None = None

    def padded(self, size: int) -> int:
        """The bytes a member of ``size`` bytes of data takes up to the next header."""
        return size + (-size % self.block)


class FrameWalker(Protocol):
    """A shard's frames walked as its bytes go by."""

    def feed(self, data: bytes | memoryview) -> None:
        """The shard's next bytes."""


class Frames(Protocol):
    """A format cut into frames, a sample's own, found through a seek table."""

    def walk(self) -> FrameWalker:
        """A walker that follows the frames as ``verify --deep`` reads the shard."""

    def problem(self, walk: FrameWalker) -> str | None:
        """What is wrong with the seek table against the frames ``walk`` saw (None: nothing)."""

    def decompress(self, data: bytes, size: int) -> bytes:
        """One sample's frames, exactly ``size`` bytes of the container (``ValueError`` if not)."""

    def leading(self, data: bytes, size: int) -> bytes:
        """As much of ``data``'s first ``size`` decompressed bytes as can be read."""


def compared(pairs: Mapping[str, tuple[object, object]]) -> str | None:
    """The first of ``pairs`` (the header's value, the index's) that differ, worded."""
    for what, (header, index) in pairs.items():
        if header != index:
            if what == "names":
                header, index = quoted(str(header)), quoted(str(index))
            return f"has a header that {what} {header} (the index says {index})"
    return None
