"""Read back the members of a shard of any supported format (for ``ishard ls``)."""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import lz4.frame

from .errors import SourceError, UsageError
from .plan import ARCHIVE_EXTS


@dataclass(frozen=True)
class Member:
    """One archive member: its name and size in bytes."""

    name: str
    size: int


def _tar_members(fileobj) -> Iterator[Member]:
    with tarfile.open(fileobj=fileobj, mode="r|*") as tar:
        for info in tar:
            if info.isfile():
                yield Member(info.name, info.size)


def members(path: str) -> Iterator[Member]:
    """Yield the regular-file members of ``path`` in archive order.

    Raises:
        UsageError: the path is missing or its extension is not an archive ishard writes.
        SourceError: the archive is damaged.
    """
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"archive {path!r} does not exist — give a shard file")
    if not p.name.endswith(ARCHIVE_EXTS):
        raise UsageError(
            f"{path!r} is not an archive ishard reads — give a file ending in {', '.join(ARCHIVE_EXTS)}"
        )
    try:
        if p.name.endswith(".zip"):
            with zipfile.ZipFile(p) as zf:
                for info in zf.infolist():
                    if not info.is_dir():
                        yield Member(info.filename, info.file_size)
        elif p.name.endswith(".tar.lz4"):
            with lz4.frame.open(p, "rb") as raw:
                yield from _tar_members(raw)
        else:
            with open(p, "rb") as raw:
                yield from _tar_members(raw)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, RuntimeError, OSError) as err:
        raise SourceError(f"cannot read archive {path!r}: {err}") from None
