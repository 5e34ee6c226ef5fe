"""Shard checksums: the algorithms ``--checksum`` chooses, and digests kept as ``algorithm:hex``
(in the run state and the API) so whoever checks a shard knows how it was hashed."""

from __future__ import annotations

import hashlib
from typing import Any, BinaryIO, Final, Protocol

ALGORITHMS = ("xxh128", "blake3", "sha256", "md5")
# a shard composed in its store: the CRC the store computes of each part, combined
COMPOSED = ("crc32c", "crc64nvme")
RECORDED = (*ALGORITHMS, *COMPOSED)  # the algorithms a manifest may name
DEFAULT: Final = "xxh128"  # the native spelling's; the Go spelling keeps md5 (wids' md5sum)
MEMBER_CHECKSUM: Final = "xxh3_64"  # the sample index's column of each member's hash
CHUNK = 8 << 20  # bytes read at a time when a finished shard is hashed again


class Hasher(Protocol):
    def update(self, data: bytes, /) -> object: ...

    def hexdigest(self) -> str: ...


def hasher(algorithm: str) -> Hasher:
    """A new hash object for ``algorithm`` (one of ``RECORDED``)."""
    if algorithm == "xxh128":
        import xxhash

        return xxhash.xxh3_128()
    if algorithm == "blake3":
        from blake3 import blake3

        return blake3(max_threads=1)
    if algorithm in ("sha256", "md5"):
        return hashlib.new(algorithm)
    if algorithm in COMPOSED:
        return Crc(algorithm)
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


def plain_md5(etag: str | None) -> str | None:
    """The MD5 an S3 ETag is, where it is one (an object uploaded whole, without KMS: 32 hex
    digits, quoted or not); None for a multipart upload's (``…-N``) or none."""
    text = (etag or "").strip().strip('"').lower()
    return text if len(text) == 32 and all(c in "0123456789abcdef" for c in text) else None


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


class Crc:
    """A CRC a store computes of what it copies (``COMPOSED``: CRC-32C for S3, CRC-64/NVME
    for Azure), by awscrt's code: ``update``, ``hexdigest`` (8 or 16 digits, big-endian)."""

    def __init__(self, algorithm: str) -> None:
        from awscrt import checksums

        self._step = checksums.crc32c if algorithm == "crc32c" else checksums.crc64nvme
        self._digits = 8 if algorithm == "crc32c" else 16
        self.value = 0

    def update(self, data: bytes | bytearray | memoryview) -> None:
        """Add ``data``."""
        self.value = self._step(data, self.value)

    def hexdigest(self) -> str:
        """The CRC in hex."""
        return f"{self.value:0{self._digits}x}"


def crc_of(algorithm: str, data: bytes | bytearray | memoryview) -> int:
    """The CRC (``COMPOSED``) of ``data``."""
    crc = Crc(algorithm)
    crc.update(data)
    return crc.value


def crc_combine(algorithm: str, first: int, second: int, second_size: int) -> int:
    """The CRC (``COMPOSED``) of ``A + B`` from A's (``first``), B's and B's length: how a
    composed shard's checksum is had from its parts' without reading the bytes a store
    copied."""
    from awscrt import checksums

    if algorithm == "crc32c":
        return checksums.combine_crc32c(first, second, second_size)
    return checksums.combine_crc64nvme(first, second, second_size)
