"""The archive formats: one record each (extensions, writing and reading filters, levels, the
library its bytes depend on, its damage, how one sample is reached); every list of formats,
check and help text reads the registry (``FORMATS`` built in, ``register`` for more)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO, Literal, Protocol

from .compress import Sink, gzip_library, gzip_sink, lz4_sink, open_gzip, open_lz4
from .reading import COMMON_DAMAGE, Container, Frames, FrameWalker
from .tar import TarWriter
from .tarread import TAR
from .zip import ZipWriter
from .zipread import ZIP

Reach = Literal["range", "frames", "forward"]


class ArchiveWriter(Protocol):
    """Writes members one after another into a byte sink."""

    def add(self, name: str, size: int, mtime: int, source: BinaryIO) -> None:
        """Append one member whose ``size`` bytes are read from ``source``."""

    def sample(self) -> None:
        """A new sample begins (called before its first member)."""

    def layout(self) -> tuple[list[int], list[int], list[int] | None]:
        """Where each member's header and data start (in the shard, or in the tar stream a
        compressor takes), and where each sample's frames start in the shard and the last
        ends, for a format cut into frames (else None)."""

    def checksums(self) -> list[int]:
        """Each member's xxh3-64, taken as its bytes went into the archive."""

    def close(self) -> None:
        """Finish the archive (end blocks, central directory, compressor flush)."""

    def abort(self) -> None:
        """Abandon the archive after a failure: write nothing more, now or when collected."""


@dataclass(frozen=True)
class Settings:
    """The archive options as a format's writer takes them."""

    level: int | None  # --compress-level, or the format's default when not given
    zip_deflate: bool = False
    gzip_library: str = "auto"


@dataclass(frozen=True)
class Identity:
    """A library whose output differs from another's: the plan record and fingerprint name
    the one the options lead to, so a ``--resume`` elsewhere does not mix their bytes."""

    key: str  # its field in the plan record and the fingerprint
    label: str  # how a refused --resume names it
    name: Callable[[Mapping], str]  # the shaping options → the library's name


@dataclass(frozen=True)
class Format:
    """One archive format: how its shards are written and read back."""

    name: str  # the codec, as help text names it
    exts: tuple[str, ...]  # its extensions: the first its own, the rest aliases
    container: Container  # the archive inside the filter: tar read forward, zip seeking
    write: Callable[[Sink, Settings], ArchiveWriter]  # the writing filter
    read: Callable[[BinaryIO], BinaryIO] | None = None  # the reading filter (None: the shard's
    # bytes are the container's, so the sample index's offsets are the shard's own)
    damage: tuple[type[BaseException], ...] = ()  # what its reading filter raises on damage
    levels: range | None = None  # the --compress-level values it takes
    default_level: int | None = None  # the level without --compress-level (None: its library's)
    level_when: tuple[str, str] | None = None  # the option value its level needs
    level_help: str = ""  # --compress-level's help for it, when not "<name> 0-9 (default N)"
    level_target: str = ""  # what a level has effect on, when not its extensions
    options: tuple[str, ...] = ()  # the options only it reads (a warning when unused)
    identity: Identity | None = None
    utf8_names: bool = False  # member names must be UTF-8
    frames: Frames | None = None  # each sample in frames of its own, found through a seek table
    # can one sample be read with one ranged read of the shard, under the run's options?
    ranged: Callable[[Mapping], bool] = lambda options: False
    # does a member's data stand in the shard byte for byte, after a header of the writer's,
    # so a store can copy it there (its writer has ``place``: ``--compose``)?
    composable: bool = False

    def takes_level(self, options: object) -> bool:
        """Does ``--compress-level`` change this format's bytes under ``options``?"""
        if self.levels is None:
            return False
        return self.level_when is None or getattr(options, self.level_when[0]) == self.level_when[1]

    @property
    def damage_errors(self) -> tuple[type[BaseException], ...]:
        """What reading a damaged shard of this format raises."""
        return COMMON_DAMAGE + self.container.damage + self.damage

    def opened(self, fileobj: BinaryIO) -> BinaryIO:
        """The container's bytes out of a shard's."""
        return fileobj if self.read is None else self.read(fileobj)

    def reach(self, options: Mapping) -> Reach:
        """How one sample's bytes are reached, under the run's recorded ``options``: a byte
        range of the shard, the sample's frames, or the shard read forward to it."""
        if self.frames is not None:
            return "frames"
        return "range" if self.ranged(options) else "forward"


class _ZstdFrames:
    """Seekable zstd's frames (its library loaded when a shard of it is read)."""

    def walk(self) -> FrameWalker:
        from .zstd import FrameWalk

        return FrameWalk()

    def problem(self, walk: FrameWalker) -> str | None:
        from .zstd import seek_table_problem

        return seek_table_problem(walk)  # type: ignore[arg-type]

    def decompress(self, data: bytes, size: int) -> bytes:
        from .zstd import decompress

        return decompress(data, size)

    def leading(self, data: bytes, size: int) -> bytes:
        from .zstd import leading

        return leading(data, size)


def _seekable_zstd(sink: Sink, settings: Settings) -> ArchiveWriter:
    from .zstd import SeekableZstdSink  # its library is loaded by the runs that write it

    return TarWriter(SeekableZstdSink(sink, settings.level))  # type: ignore[arg-type]


def _open_zstd(fileobj: BinaryIO) -> BinaryIO:
    from .zstd import open_zstd

    return open_zstd(fileobj)


def _zstd_name(options: Mapping) -> str:
    if not str(options.get("ext", "")).endswith(".tar.zst"):
        return "none"
    from .zstd import zstd_library

    return zstd_library()


def _gzip_name(options: Mapping) -> str:
    level = options.get("compress_level")
    return gzip_library(6 if level is None else level, options.get("gzip_library", "auto"))[0]


# In --ext's order of choices; extensions that end in another's (.tar.gz, .gz) go by the longest
FORMATS: tuple[Format, ...] = (
    Format(
        "tar",
        (".tar",),
        TAR,
        lambda sink, s: TarWriter(sink),
        ranged=lambda options: True,
        composable=True,
    ),
    Format(
        "gzip",
        (".tgz", ".tar.gz"),
        TAR,
        lambda sink, s: TarWriter(gzip_sink(sink, s.level, s.gzip_library)),  # type: ignore[arg-type]
        open_gzip,
        damage=(zlib.error,),  # a damaged deflate stream (a bad header or trailer: OSError)
        levels=range(10),
        default_level=6,
        options=("gzip_library",),
        identity=Identity("gzip", "gzip library", _gzip_name),
    ),
    Format(
        "zip",
        (".zip",),
        ZIP,
        lambda sink, s: ZipWriter(sink, deflate=s.zip_deflate, level=s.level),
        levels=range(10),
        level_when=("zip_compression", "deflated"),
        level_help="zip with deflate",
        level_target="a deflated .zip",
        options=("zip_compression",),
        utf8_names=True,
        ranged=lambda options: options.get("zip_compression") != "deflated",
    ),
    Format(
        "lz4",
        (".tar.lz4",),
        TAR,
        lambda sink, s: TarWriter(lz4_sink(sink, s.level)),  # type: ignore[arg-type]
        open_lz4,
        damage=(RuntimeError,),  # lz4.frame's word for a damaged frame
        levels=range(10),
        default_level=0,
    ),
    Format(
        "zstd",
        (".tar.zst",),
        TAR,
        _seekable_zstd,
        _open_zstd,  # libzstd's errors come out of it as FormatDamage
        levels=range(1, 23),
        default_level=3,
        identity=Identity("zstd", "zstd library", _zstd_name),
        frames=_ZstdFrames(),
    ),
)
ARCHIVE_EXTS = tuple(e for f in FORMATS for e in f.exts)  # every extension of a built-in format
_registered: list[Format] = list(FORMATS)
_by_length: list[tuple[str, Format]] = []


def register(fmt: Format) -> None:
    """Make ``fmt`` a format ishard writes and reads, after the ones known.

    Raises:
        ValueError: one of its extensions is another format's.
    """
    taken = set(fmt.exts) & set(extensions())
    if taken:
        raise ValueError(f"extension {min(taken)!r} is another format's already")
    _registered.append(fmt)
    _by_length.clear()


def unregister(fmt: Format) -> None:
    """Forget ``fmt`` (registered by :func:`register`)."""
    _registered.remove(fmt)
    _by_length.clear()


def registered() -> tuple[Format, ...]:
    """Every format known now: the built-in ones, then those registered."""
    return tuple(_registered)


def extensions() -> tuple[str, ...]:
    """Every extension of a format known now."""
    return tuple(e for f in _registered for e in f.exts)


def _levelled() -> tuple[Format, ...]:
    """Levels apply always first, then those an option value enables: how help and warnings
    list them."""
    return tuple(
        sorted((f for f in _registered if f.levels), key=lambda f: f.level_when is not None)
    )


def identity_fields() -> tuple[Identity, ...]:
    """The libraries the plan record and fingerprint name, each once."""
    return tuple({f.identity.key: f.identity for f in _registered if f.identity}.values())


def find_format(name: str) -> Format | None:
    """The format of a shard named ``name`` (by its longest matching extension), or None."""
    if not _by_length:
        _by_length.extend(
            sorted(((e, f) for f in _registered for e in f.exts), key=lambda p: -len(p[0]))
        )
    return next((f for e, f in _by_length if name.endswith(e)), None)


def format_of(name: str) -> Format:
    """The format of a shard named ``name``.

    Raises:
        ValueError: ``name`` ends in no extension of a format.
    """
    found = find_format(name)
    if found is None:
        raise ValueError(f"no archive format for {name!r}")
    return found


def read_as(name: str) -> Format:
    """How archive ``name`` is read back: by its format, a name of none as a plain tar."""
    return find_format(name) or FORMATS[0]


def level_range(ext: str) -> range:
    """The ``--compress-level`` values a run writing ``ext`` takes: its format's, or for a
    format without levels (where the level is only warned about) any format's."""
    own = format_of(ext).levels
    if own is not None:
        return own
    levelled = _levelled()
    return range(min(f.levels.start for f in levelled), max(f.levels.stop for f in levelled))  # type: ignore[union-attr]


def level_help() -> str:
    """``--compress-level``'s help: each format's levels and default."""

    def one(f: Format) -> str:
        levels = f.levels or range(0)
        return f.level_help or f"{f.name} {levels[0]}-{levels[-1]} (default {f.default_level})"

    return ", ".join(map(one, _levelled())) + "."


def spelt(items: list[str]) -> str:
    """``a, b or c``."""
    return " or ".join(filter(None, (", ".join(items[:-1]), items[-1])))


def level_targets() -> str:
    """What a ``--compress-level`` has effect on: ``.tgz, .tar.gz, .tar.lz4 or a deflated .zip``."""
    return spelt(
        [t for f in _levelled() for t in ((f.level_target,) if f.level_target else f.exts)]
    )


def exts_reading(option: str) -> tuple[str, ...]:
    """The extensions of the formats that read ``option`` (say ``gzip_library``)."""
    return tuple(e for f in _registered if option in f.options for e in f.exts)


def identities(options: Mapping) -> dict[str, str]:
    """The libraries whose output the shards' bytes depend on, by their record field."""
    return {i.key: i.name(options) for i in identity_fields()}


def writer(shard_name: str, sink: Sink, settings: Settings) -> ArchiveWriter:
    """The writer of ``shard_name``'s format over ``sink``, its default level filled in."""
    fmt = format_of(shard_name)
    if settings.level is None and fmt.default_level is not None:
        settings = Settings(fmt.default_level, settings.zip_deflate, settings.gzip_library)
    return fmt.write(sink, settings)
