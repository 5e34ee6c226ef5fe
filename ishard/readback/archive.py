"""Read back the members of a shard of any supported format (``ishard ls``, ``ishard verify``)."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, BinaryIO

from ..errors import IshardError, SourceError, UsageError
from ..formats import extensions
from ..formats.reading import READ_STEP, Entry, PlacedDamage
from ..formats.registry import read_as
from ..names import wds_split
from ..store import parse_storage_options, resolve


@dataclass(frozen=True)
class Member:
    """One archive member: its name and size in bytes."""

    name: str
    size: int


class DamagedArchive(SourceError):
    """An archive that cannot be read to its end; ``reason`` says what broke, and where."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"cannot read archive {name!r}: {reason}")
        self.reason = reason


def _read_all(stream: IO[bytes]) -> int:
    """Read ``stream`` to its end (checks run as the bytes go by); the byte count."""
    total = 0
    while chunk := stream.read(READ_STEP):
        total += len(chunk)
    return total


def _read_member(archive: str, entry: Entry, damage: tuple[type[BaseException], ...]) -> None:
    """Read one member's bytes in full; any damage is named after the member."""
    member, size, opener = entry
    try:
        with opener() as data:
            got = _read_all(data)
    except damage as err:
        raise DamagedArchive(archive, f"member {member!r}: {err or type(err).__name__}") from None
    if got != size:
        raise DamagedArchive(archive, f"member {member!r} holds {got} of its {size} bytes")


@contextmanager
def damage_as_error(name: str, where: list[str] | None = None) -> Iterator[None]:
    """Turn any sign of a damaged archive ``name`` (as its format names damage) into a
    one-line ``DamagedArchive``; ``where[0]``, if given, names the last member read well."""
    try:
        yield
    except SourceError:
        raise
    except PlacedDamage as err:
        raise DamagedArchive(name, str(err)) from None
    except read_as(name).damage_errors as err:
        reason = str(err) or type(err).__name__
        if where:
            reason += f" (after member {where[0]!r})"
        raise DamagedArchive(name, reason) from None


def _entries(
    name: str, fileobj: BinaryIO, whole: bool = False, only: Collection[str] | None = None
) -> Iterator[Entry]:
    fmt = read_as(name)
    return fmt.container.members(fmt.opened(fileobj), whole, only)


def scan(name: str, fileobj: BinaryIO, *, read_data: bool = False) -> Iterator[Member]:
    """Yield the regular-file members of archive ``name`` (format from its extension).

    A tar format is read forward only, in bounded memory; a container that seeks (a zip) needs
    a seekable ``fileobj``.

    Args:
        name: the archive's file name; its extension says the format.
        fileobj: the archive's bytes.
        read_data: also read every member's bytes in full: a member shorter than its header
            says, a bad zip CRC-32 or a bad compressed stream's trailer is then an error too.

    Raises:
        DamagedArchive: the archive is damaged (a ``SourceError``).
    """
    last: list[str] = []
    damage = read_as(name).damage_errors
    with damage_as_error(name, last):
        for entry in _entries(name, fileobj, whole=read_data):
            if read_data:
                _read_member(name, entry, damage)
            last[:] = [entry[0]]
            yield Member(entry[0], entry[1])


def _member_streams(
    name: str, fileobj: BinaryIO, last: list[str], only: Collection[str] | None = None
) -> Iterator[tuple[str, int, IO[bytes]]]:
    """(name, size, stream) of each regular-file member of archive ``name`` (or those
    ``only`` names, where the container can pick them), in archive order, each stream read
    before the next member is asked for; ``last[0]`` names the member being read."""
    for member, size, opener in _entries(name, fileobj, only=only):
        last[:] = [member]
        with opener() as data:
            yield member, size, data


def contents(
    name: str, fileobj: BinaryIO, only: Collection[str] | None = None
) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each regular-file member of archive ``name``, in archive order, read
    as :func:`scan` reads; ``only``: at least these members (a container that seeks reads
    them alone).

    Raises:
        DamagedArchive: the archive is damaged (a ``SourceError``).
    """
    last: list[str] = []
    with damage_as_error(name, last):
        for member, _, data in _member_streams(name, fileobj, last, only):
            yield member, data.read()


def digests(name: str, fileobj: BinaryIO) -> Iterator[tuple[Member, bytes]]:
    """Each regular-file member of archive ``name`` with a 16-byte BLAKE2b digest of its
    bytes, read ``READ_STEP`` bytes at a time (a member of any size in bounded memory).

    Raises:
        DamagedArchive: the archive is damaged (a ``SourceError``).
    """
    last: list[str] = []
    with damage_as_error(name, last):
        for member, size, data in _member_streams(name, fileobj, last):
            digest = hashlib.blake2b(digest_size=16)
            while chunk := data.read(READ_STEP):
                digest.update(chunk)
            yield Member(member, size), digest.digest()


def _is_a_directory(path: str) -> UsageError:
    where = path.rstrip("/")
    return UsageError(
        f"{path!r} is a directory — give a shard file (e.g. "
        f"{where}/shard-000000.tar), or use ishard verify {where}"
    )


def members(
    path: str, *, endpoint_url: str | None = None, storage_options=None
) -> Iterator[Member]:
    """Yield the regular-file members of the archive ``path`` (a local file or a store URL
    such as ``s3://bucket/shard-000000.tar``) in archive order.

    Raises:
        UsageError: the path is missing, a directory, or its extension is not an archive
            ishard writes.
        SourceError: the archive is damaged; IshardError: the store cannot be read.
    """
    location = resolve(
        path,
        endpoint_url=endpoint_url,
        role="archive",
        storage_options=parse_storage_options(storage_options),
    )
    store, key = location.store, location.prefix
    exts = extensions()
    # a store has no directories, only prefixes: ask only when the name is no archive's
    if (store.capabilities.folders or not path.endswith(exts)) and store.is_folder(key):
        raise _is_a_directory(path)
    if not path.endswith(exts):
        raise UsageError(
            f"{path!r} is not an archive ishard reads — give a file ending in {', '.join(exts)}"
        )
    try:
        with store.open_read(key) as raw, damage_as_error(path):
            yield from scan(path, raw)
    except FileNotFoundError:
        raise UsageError(f"archive {path!r} does not exist — give a shard file") from None
    except IshardError:
        raise
    except Exception as err:  # noqa: BLE001 — a store's many error types, translated once
        raise location.error(err, "archive") from None


@dataclass
class ReaderSamples:
    """An archive's members grouped as WebDataset readers group them."""

    samples: list[tuple[str, list[Member]]] = field(default_factory=list)
    skipped: list[Member] = field(default_factory=list)  # readers pass over these
    repeated: list[str] = field(default_factory=list)  # keys with an extension twice (any case)

    def problems(self) -> list[str]:
        """Warning lines: members readers skip, samples webdataset refuses."""
        lines = [
            f"member {m.name!r} has no dot in its basename: WebDataset readers skip it"
            if "." not in m.name[m.name.rfind("/") + 1 :]
            else f"member {m.name!r} has a leading dot: DALI skips it, webdataset keys it by its "
            "directory"
            for m in self.skipped
        ]
        lines += [
            f"sample {k!r} has one extension twice (ignoring case): webdataset stops "
            "with a duplicate-file error"
            for k in self.repeated
        ]
        return lines


def reader_samples(found: list[Member]) -> ReaderSamples:
    """Group members by WebDataset's rule: consecutive members with one key (the path up to the
    basename's first dot) form a sample; names with no dot or a leading dot are skipped."""
    out = ReaderSamples()
    last: str | None = None
    exts: set[str] = set()
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
