"""The values an option with a fixed set of choices takes, as types: the Python API's
signatures say them, and a type checker catches ``checksum="md4"`` before the run does
(``make_options`` still checks every value at run time, for untyped callers). The archive
extension is the exception: formats are a registry, so ``Ext`` is a string checked at run time."""

from __future__ import annotations

from typing import Literal, TypeAlias

# an archive's extension: one of ``formats.extensions()``, the registry's (checked at run time,
# so that a new format is one registry entry; a type checker sees a string)
Ext: TypeAlias = str
Checksum: TypeAlias = Literal["xxh128", "blake3", "sha256", "md5", "none"]
MissingExtensionAction: TypeAlias = Literal["ignore", "warn", "abort", "exclude"]
MemberNames: TypeAlias = Literal["original", "sample"]
Executor: TypeAlias = Literal["local", "dask"]
ZipCompression: TypeAlias = Literal["stored", "deflated"]
GzipLibrary: TypeAlias = Literal["auto", "isal", "zlib-ng", "zlib"]
Index: TypeAlias = Literal["none", "dali", "energon", "dali,energon"]
Policy: TypeAlias = Literal["dali", "whale", "webdataset", "torch", "streaming"]
LastBatchPolicy: TypeAlias = Literal["fill", "drop", "partial"]
StreamingShuffle: TypeAlias = Literal["naive", "py1s", "py2s", "py1b", "py1br", "py1e"]

# the names of Options' fields typed by one of these (each takes a string from Python)
CHOICE_TYPES = (
    "Ext",
    "Checksum",
    "MissingExtensionAction",
    "MemberNames",
    "Executor",
    "ZipCompression",
    "GzipLibrary",
    "Index",
)
