"""The archive formats: one record each (extensions, writing and reading filters, levels, the
library its bytes depend on); every list of formats, check and help text reads ``FORMATS``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO, Literal, Protocol

from .compress import GzipSink, Lz4Sink, Sink, gzip_library, open_gzip, open_lz4
from .tar import TarWriter
from .zip import ZipWriter


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
    """One archive format."""

    name: str  # the codec, as help text names it
    exts: tuple[str, ...]  # its extensions: the first its own, the rest aliases
    container: Literal["tar", "zip"]  # read forward with tarfile, or (seeking) with zipfile
    write: Callable[[Sink, Settings], ArchiveWriter]  # the writing filter
    read: Callable[[BinaryIO], BinaryIO]  # the reading filter: the container's bytes
    levels: range | None = None  # the --compress-level values it takes
    default_level: int | None = None  # the level without --compress-level (None: its library's)
    level_when: tuple[str, str] | None = None  # the option value its level needs
    level_help: str = ""  # --compress-level's help for it, when not "<name> 0-9 (default N)"
    level_target: str = ""  # what a level has effect on, when not its extensions
    options: tuple[str, ...] = ()  # the options only it reads (a warning when unused)
    identity: Identity | None = None
    utf8_names: bool = False  # member names must be UTF-8
    seekable: bool = False  # each sample in frames of its own, found through a seek table

    def takes_level(self, options: object) -> bool:
        """Does ``--compress-level`` change this format's bytes under ``options``?"""
        if self.levels is None:
            return False
        return self.level_when is None or getattr(options, self.level_when[0]) == self.level_when[1]


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


def _same(fileobj: BinaryIO) -> BinaryIO:
    return fileobj


def _gzip_name(options: Mapping) -> str:
    level = options.get("compress_level")
    return gzip_library(6 if level is None else level, options.get("gzip_library", "auto"))[0]


# In --ext's order of choices; extensions that end in another's (.tar.gz, .gz) go by the longest
FORMATS: tuple[Format, ...] = (
    Format("tar", (".tar",), "tar", lambda sink, s: TarWriter(sink), _same),
    Format(
        "gzip",
        (".tgz", ".tar.gz"),
        "tar",
        lambda sink, s: TarWriter(GzipSink(sink, s.level, s.gzip_library)),  # type: ignore[arg-type]
        open_gzip,
        levels=range(10),
        default_level=6,
        options=("gzip_library",),
        identity=Identity("gzip", "gzip library", _gzip_name),
    ),
    Format(
        "zip",
        (".zip",),
        "zip",
        lambda sink, s: ZipWriter(sink, deflate=s.zip_deflate, level=s.level),
        _same,
        levels=range(10),
        level_when=("zip_compression", "deflated"),
        level_help="zip with deflate",
        level_target="a deflated .zip",
        options=("zip_compression",),
        utf8_names=True,
    ),
    Format(
        "lz4",
        (".tar.lz4",),
        "tar",
        lambda sink, s: TarWriter(Lz4Sink(sink, s.level)),  # type: ignore[arg-type]
        open_lz4,
        levels=range(10),
        default_level=0,
    ),
    Format(
        "zstd",
        (".tar.zst",),
        "tar",
        _seekable_zstd,
        _open_zstd,
        levels=range(1, 23),
        default_level=3,
        identity=Identity("zstd", "zstd library", _zstd_name),
        seekable=True,
    ),
)
ARCHIVE_EXTS = tuple(e for f in FORMATS for e in f.exts)  # every extension ishard writes
_BY_LENGTH = sorted(((e, f) for f in FORMATS for e in f.exts), key=lambda p: -len(p[0]))
# levels apply always first, then those an option value enables: how help and warnings list them
LEVELLED = tuple(sorted((f for f in FORMATS if f.levels), key=lambda f: f.level_when is not None))
IDENTITIES = tuple({f.identity.key: f.identity for f in FORMATS if f.identity}.values())


def find_format(name: str) -> Format | None:
    """The format of a shard named ``name`` (by its longest matching extension), or None."""
    return next((f for e, f in _BY_LENGTH if name.endswith(e)), None)


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
    return range(min(f.levels.start for f in LEVELLED), max(f.levels.stop for f in LEVELLED))  # type: ignore[union-attr]


def level_help() -> str:
    """``--compress-level``'s help: each format's levels and default."""

    def one(f: Format) -> str:
        levels = f.levels or range(0)
        return f.level_help or f"{f.name} {levels[0]}-{levels[-1]} (default {f.default_level})"

    return ", ".join(map(one, LEVELLED)) + "."


def spelt(items: list[str]) -> str:
    """``a, b or c``."""
    return " or ".join(filter(None, (", ".join(items[:-1]), items[-1])))


def level_targets() -> str:
    """What a ``--compress-level`` has effect on: ``.tgz, .tar.gz, .tar.lz4 or a deflated .zip``."""
    return spelt([t for f in LEVELLED for t in ((f.level_target,) if f.level_target else f.exts)])


def exts_reading(option: str) -> tuple[str, ...]:
    """The extensions of the formats that read ``option`` (say ``gzip_library``)."""
    return tuple(e for f in FORMATS if option in f.options for e in f.exts)


def identities(options: Mapping) -> dict[str, str]:
    """The libraries whose output the shards' bytes depend on, by their record field."""
    return {i.key: i.name(options) for i in IDENTITIES}


def writer(shard_name: str, sink: Sink, settings: Settings) -> ArchiveWriter:
    """The writer of ``shard_name``'s format over ``sink``, its default level filled in."""
    fmt = format_of(shard_name)
    if settings.level is None and fmt.default_level is not None:
        settings = Settings(fmt.default_level, settings.zip_deflate, settings.gzip_library)
    return fmt.write(sink, settings)
