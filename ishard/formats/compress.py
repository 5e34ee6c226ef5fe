"""Byte sinks: a plain pass-through target and streaming gzip / LZ4-frame compressors over it;
the readers that undo them."""

from __future__ import annotations

import functools
import gzip
import importlib
import zlib
from types import ModuleType
from typing import BinaryIO, Protocol

import lz4.frame

from ..errors import UsageError


class Sink(Protocol):
    """Anything bytes can be written to, then closed."""

    def write(self, data: bytes | bytearray | memoryview) -> object:
        """Take ``data``."""

    def close(self) -> None:
        """Flush what is left."""


# gzip compressors with zlib's API, fastest first: the first one installed is used
# (``pip install 'ishard[fast]'`` brings ISA-L). Each writes valid gzip, but not the same bytes.
GZIP_LIBRARIES = {"isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng", "zlib": "zlib"}
GZIP_PREFERENCE = ("isal", "zlib-ng", "zlib")
GZIP_INSTALL = {"isal": "pip install 'ishard[fast]'", "zlib-ng": "pip install zlib-ng"}
# Input is compressed in pieces of this size: ISA-L returns about as many bytes as it is given,
# and ~1 MiB outputs freed among the many small objects of a run fragment the C heap (a writer
# grew by ~45 MiB over a 2 GiB run). 256 KiB pieces keep that to a few MiB for ~5 % more CPU.
GZIP_STEP = 256 << 10


@functools.cache
def _load(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(GZIP_LIBRARIES[name])
    except ImportError:
        return None


def _library_level(name: str, level: int) -> int:
    """ISA-L has levels 1-3: zlib's 1-3, 4-6, 7-9 map onto them (the default 6 -> 2)."""
    return (level + 2) // 3 if name == "isal" else level


def gzip_library(level: int, choice: str = "auto") -> tuple[str, ModuleType]:
    """The name and module of the gzip compressor used at ``level``: ``choice``, or with
    "auto" the fastest installed (level 0, stored blocks: always zlib).

    Raises:
        UsageError: the chosen library is not installed.
    """
    if choice != "auto":
        module = _load(choice) if choice in GZIP_LIBRARIES else None
        if module is None:
            raise UsageError(
                f"--gzip-library {choice!r} is not installed — "
                f"{GZIP_INSTALL.get(choice, 'choose auto, isal, zlib-ng or zlib')}"
            )
        return choice, module
    for name in GZIP_PREFERENCE if level else ():
        module = _load(name)
        if module is not None:
            return name, module
    return "zlib", zlib


def open_gzip(fileobj: BinaryIO) -> BinaryIO:
    """The bytes inside a gzip stream, read forward."""
    return gzip.GzipFile(fileobj=fileobj, mode="rb")  # type: ignore[return-value]


def open_lz4(fileobj: BinaryIO) -> BinaryIO:
    """The bytes inside an LZ4 frame, read forward."""
    return lz4.frame.LZ4FrameFile(fileobj, "rb")  # type: ignore[return-value]


class CompressorSink:
    """A compressor's stream over a byte sink: ``compressor`` is anything with ``compress``
    and ``flush`` (zlib's, lzma's, bz2's, an LZ4 frame's), ``head`` what goes before its first
    output, and ``step`` the most bytes handed to it at once (None: each write whole) — the
    sink a format record's writer wraps a shard in."""

    def __init__(self, out: Sink, compressor, head: bytes = b"", step: int | None = None):
        self._out, self._z, self._step = out, compressor, step
        if head:
            out.write(head)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Compress and pass on."""
        view = memoryview(data)
        step = self._step or max(len(view), 1)
        for start in range(0, len(view), step):
            chunk = self._z.compress(view[start : start + step])
            if chunk:
                self._out.write(chunk)

    def close(self) -> None:
        """Write the rest (and the format's trailer)."""
        self._out.write(self._z.flush())
        self._out.close()


def gzip_sink(out: Sink, level: int, library: str = "auto") -> CompressorSink:
    """A gzip member with fixed header fields (mtime 0, no file name), so output is repeatable
    for a given compressor library and level (see ``gzip_library``), fed ``GZIP_STEP`` bytes
    at a time."""
    name, module = gzip_library(level, library)
    z = module.compressobj(_library_level(name, level), module.DEFLATED, 31)
    return CompressorSink(out, z, step=GZIP_STEP)


def lz4_sink(out: Sink, level: int) -> CompressorSink:
    """An LZ4 frame (what the ``lz4`` tool reads), with a content checksum."""
    z = lz4.frame.LZ4FrameCompressor(
        block_size=lz4.frame.BLOCKSIZE_MAX4MB, compression_level=level, content_checksum=True
    )
    return CompressorSink(out, z, head=z.begin())
