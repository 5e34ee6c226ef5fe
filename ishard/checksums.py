"""Shard checksums: the algorithms ``--checksum`` chooses, and digests kept as ``algorithm:hex``
(in the run state and the API) so whoever checks a shard knows how it was hashed."""

from __future__ import annotations

import hashlib
from typing import Any, BinaryIO, Final, Protocol

ALGORITHMS = ("xxh128", "blake3", "sha256", "md5")
COMPOSED: Final = "crc32c"  # a shard composed in its store: CRC-32C, combined from its parts'
RECORDED = (*ALGORITHMS, COMPOSED)  # the algorithms a manifest may name
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
    if algorithm == COMPOSED:
        return Crc32c()
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


class Crc32c:
    """CRC-32C (Castagnoli), the checksum S3 and GCS compute of bytes they copy or compose:
    ``update``, ``hexdigest`` (8 digits, big-endian), ``value`` (the integer)."""

    def __init__(self) -> None:
        import google_crc32c

        self._extend = google_crc32c.extend
        self.value = 0

    def update(self, data: bytes | bytearray | memoryview) -> None:
        """Add ``data``."""
        self.value = self._extend(self.value, data)

    def hexdigest(self) -> str:
        """The CRC as 8 hex digits."""
        return f"{self.value:08x}"


_CASTAGNOLI = 0x82F63B78  # CRC-32C's polynomial, bit-reflected


def _gf2_times(matrix: list[int], vector: int) -> int:
    out, row = 0, 0
    while vector:
        if vector & 1:
            out ^= matrix[row]
        vector >>= 1
        row += 1
    return out


def _gf2_square(matrix: list[int]) -> list[int]:
    return [_gf2_times(matrix, matrix[n]) for n in range(32)]


def crc32c_combine(first: int, second: int, second_size: int) -> int:
    """The CRC-32C of ``A + B`` from ``first`` (A's), ``second`` (B's) and B's length: the
    CRC of A advanced over ``second_size`` zero bytes (a matrix over GF(2) squared per bit of
    the length), then B's added. How a shard's checksum is had from its parts' without
    reading the bytes a store copied."""
    if second_size <= 0:
        return first
    odd = [_CASTAGNOLI] + [1 << n for n in range(31)]  # one zero bit
    even = _gf2_square(odd)  # two zero bits
    odd = _gf2_square(even)  # four zero bits
    while True:  # each turn: eight times more zero bits; apply where the length has a bit
        even = _gf2_square(odd)
        if second_size & 1:
            first = _gf2_times(even, first)
        second_size >>= 1
        if not second_size:
            break
        odd = _gf2_square(even)
        if second_size & 1:
            first = _gf2_times(odd, first)
        second_size >>= 1
        if not second_size:
            break
    return first ^ second
