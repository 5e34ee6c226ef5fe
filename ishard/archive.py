"""Read back the members of a shard of any supported format (for ``ishard ls``)."""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import lz4.frame

from .errors import SourceError, UsageError
from .keys import wds_split
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


@dataclass
class ReaderSamples:
    """An archive's members grouped as WebDataset readers group them."""

    samples: list[tuple[str, list[Member]]] = field(default_factory=list)
    skipped: list[Member] = field(default_factory=list)  # readers pass over these
    repeated: list[str] = field(default_factory=list)  # keys with an extension twice (any case)

    def problems(self) -> list[str]:
        """Warning lines: members readers skip, samples webdataset refuses."""
        lines = [f"member {m.name!r} has no dot in its basename: WebDataset readers skip it"
                 if "." not in m.name[m.name.rfind("/") + 1 :] else
                 f"member {m.name!r} has a leading dot: DALI skips it, webdataset keys it by its "
                 "directory" for m in self.skipped]
        lines += [f"sample {k!r} has one extension twice (ignoring case): webdataset stops "
                  "with a duplicate-file error" for k in self.repeated]
        return lines


def reader_samples(found: list[Member]) -> ReaderSamples:
    """Group members by WebDataset's rule: consecutive members with one key (the path up to the
    basename's first dot) form a sample; names with no dot or a leading dot are skipped."""
    out = ReaderSamples()
    last, exts = None, set()
    for m in found:
        key, ext = wds_split(m.name)
        if not ext or not key or key.endswith("/"):
            out.skipped.append(m)
            continue
        if key != last:
            out.samples.append((key, []))
            last, exts = key, set()
        elif ext.lower() in exts and key not in out.repeated:
            out.repeated.append(key)
        exts.add(ext.lower())
        out.samples[-1][1].append(m)
    return out
