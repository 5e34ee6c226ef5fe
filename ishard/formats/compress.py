"""Byte sinks: a plain pass-through target and streaming gzip / LZ4-frame compressors over it."""

from __future__ import annotations

import zlib
from typing import Protocol

import lz4.frame


class Sink(Protocol):
    """Anything bytes can be written to, then closed."""

    def write(self, data: bytes) -> object:
        """Take ``data``."""

    def close(self) -> None:
        """Flush what is left."""


class GzipSink:
    """A gzip member with fixed header fields (mtime 0, no file name), so output is repeatable."""

    def __init__(self, out: Sink, level: int) -> None:
        self._out = out
        self._z = zlib.compressobj(level, zlib.DEFLATED, 31)

    def write(self, data: bytes) -> None:
        """Compress and pass on."""
        chunk = self._z.compress(data)
        if chunk:
            self._out.write(chunk)

    def close(self) -> None:
        """Write the rest and the gzip trailer."""
        self._out.write(self._z.flush())
        self._out.close()


class Lz4Sink:
    """An LZ4 frame (what the ``lz4`` tool reads), with a content checksum."""

    def __init__(self, out: Sink, level: int) -> None:
        self._out = out
        self._z = lz4.frame.LZ4FrameCompressor(
            block_size=lz4.frame.BLOCKSIZE_MAX4MB, compression_level=level, content_checksum=True
        )
        self._out.write(self._z.begin())

    def write(self, data: bytes) -> None:
        """Compress and pass on."""
        chunk = self._z.compress(data)
        if chunk:
            self._out.write(chunk)

    def close(self) -> None:
        """Write the end mark and the checksum."""
        self._out.write(self._z.flush())
        self._out.close()
