"""Archive writers behind one small protocol: ``add(name, size, mtime, source)`` then ``close()``."""

from __future__ import annotations

from typing import BinaryIO, Protocol

from ..errors import UsageError
from ..model import ShardPlan
from .compress import GzipSink, Lz4Sink, Sink
from .tar import TarWriter
from .zip import ZipWriter

ARCHIVE_EXTS = (".tar", ".tgz", ".tar.gz", ".zip", ".tar.lz4")  # every format ishard writes


class ArchiveWriter(Protocol):
    """Writes members one after another into a byte sink."""

    def add(self, name: str, size: int, mtime: int, source: BinaryIO) -> None:
        """Append one member whose ``size`` bytes are read from ``source``."""

    def close(self) -> None:
        """Finish the archive (end blocks, central directory, compressor flush)."""

    def abort(self) -> None:
        """Abandon the archive after a failure: write nothing more, now or when collected."""


def check_names(shard: ShardPlan) -> None:
    """Refuse, before writing, member names the shard's format cannot store.

    Raises:
        UsageError: a name that is not UTF-8 bound for a zip shard.
    """
    if not shard.name.endswith(".zip"):
        return
    for f in shard.members():
        try:
            f.arcname.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"file {f.arcname!r} has a name that is not UTF-8, which zip cannot store — "
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
    if shard_name.endswith(".zip"):
        return ZipWriter(sink, deflate=zip_deflate, level=compress_level)
    if shard_name.endswith((".tgz", ".tar.gz")):
        level = 6 if compress_level is None else compress_level
        return TarWriter(GzipSink(sink, level, gzip_library))
    if shard_name.endswith(".tar.lz4"):
        return TarWriter(Lz4Sink(sink, 0 if compress_level is None else compress_level))
    if shard_name.endswith(".tar"):
        return TarWriter(sink)
    raise ValueError(f"no archive format for {shard_name!r}")
