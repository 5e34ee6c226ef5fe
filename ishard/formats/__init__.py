"""The archive formats as records: writers behind one small protocol (``add(name, size, mtime,
source)`` then ``close()``), and what reading a shard back needs of its format."""

from __future__ import annotations

from ..errors import UsageError
from ..model import ShardPlan
from .compress import Sink
from .reading import Container, FormatDamage
from .registry import (
    ARCHIVE_EXTS,
    FORMATS,
    ArchiveWriter,
    Format,
    Settings,
    extensions,
    exts_reading,
    find_format,
    format_of,
    level_help,
    level_range,
    level_targets,
    register,
    registered,
    spelt,
    unregister,
    writer,
)
from .tarread import TAR
from .zipread import ZIP

__all__ = [
    "ARCHIVE_EXTS",
    "FORMATS",
    "TAR",
    "ZIP",
    "ArchiveWriter",
    "Container",
    "Format",
    "FormatDamage",
    "check_names",
    "extensions",
    "exts_reading",
    "format_of",
    "level_help",
    "level_range",
    "level_targets",
    "open_writer",
    "register",
    "registered",
    "spelt",
    "unregister",
]


def check_names(shard: ShardPlan) -> None:
    """Refuse, before writing, member names the shard's format cannot store.

    Raises:
        UsageError: a name that is not UTF-8 bound for a zip shard.
    """
    fmt = find_format(shard.name)
    if fmt is None or not fmt.utf8_names:
        return
    for f in shard.members():
        try:
            f.arcname.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"file {f.arcname!r} has a name that is not UTF-8, which {fmt.name} cannot store — "
                "use a tar format (--ext .tar)"
            ) from None


def open_writer(
    shard_name: str,
    sink: Sink,
    *,
    compress_level: int | None = None,
    zip_deflate: bool = False,
    gzip_library: str = "auto",
) -> ArchiveWriter:
    """The writer for the archive format that ``shard_name``'s extension names."""
    return writer(shard_name, sink, Settings(compress_level, zip_deflate, gzip_library))
