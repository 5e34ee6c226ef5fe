"""Shard checksums: the algorithms ``--checksum`` chooses, and digests kept as ``algorithm:hex``
(in the run state and the API) so whoever checks a shard knows how it was hashed."""

from __future__ import annotations

import hashlib
from typing import Any, BinaryIO, Final, Protocol

ALGORITHMS = ("xxh128", "blake3", "sha256", "md5")
DEFAULT: Final = "xxh128"  # the native spelling's; the Go spelling keeps md5 (wids' md5sum)
MEMBER_CHECKSUM: Final = "xxh3_64"  # the sample index's column of each member's hash
CHUNK = 8 << 20  # bytes read at a time when a finished shard is hashed again


class Hasher(Protocol):
    def update(self, data: bytes, /) -> object: ...

    def hexdigest(self) -> str: ...


def hasher(algorithm: str) -> Hasher:
    """A new hash object for ``algorithm`` (one of ``ALGORITHMS``)."""
    if algorithm == "xxh128":
        import xxhash

        return xxhash.xxh3_128()
    if algorithm == "blake3":
        from blake3 import blake3

        return blake3(max_threads=1)
    if algorithm in ("sha256", "md5"):
        return hashlib.new(algorithm)
    raise ValueError(f"unknown checksum algorithm {algorithm!r}")


def member_hasher() -> Any:
    """A new hash of one member's bytes, as the sample index keeps it (``MEMBER_CHECKSUM``:
    xxh3-64, whatever ``--checksum`` says; ``intdigest()`` its value)."""
    import xxhash

    return xxhash.xxh3_64()


def member_checksum(data: bytes | memoryview) -> int:
    """The xxh3-64 of one member's bytes (``member_hasher``'s value for them)."""
    import xxhash

    return xxhash.xxh3_64_intdigest(data)


def tagged(algorithm: str, hexdigest: str) -> str:
    """``algorithm:hex``, the form a digest is recorded in."""
    return f"{algorithm}:{hexdigest}"


def split(digest: str) -> tuple[str, str]:
    """(algorithm, hex) of a recorded digest; a bare 32-digit hex is an md5 (the records of
    earlier versions)."""
    algorithm, sep, value = digest.partition(":")
    return (algorithm, value) if sep else ("md5", digest)


def digest_of(stream: BinaryIO, algorithm: str) -> str:
    """The tagged digest of everything left in ``stream``."""
    state = hasher(algorithm)
    while chunk := stream.read(CHUNK):
        state.update(chunk)
    return tagged(algorithm, state.hexdigest())
