"""Member names as an extracting file system may see them: the rule the extraction check
(``naming``) and the column engine's clash marks (``clashes``) share."""

from __future__ import annotations

import posixpath
import unicodedata

NAME_MAX = 255  # bytes in a path part most file systems allow


def folded_names(chunk: list[str]) -> tuple[list[str], str]:
    """The names as an extracting file system may see them: repeated slashes and '.' parts
    gone, Unicode composed (NFC), lower case (macOS and Windows ignore case by default); as a
    list and as lines of one string."""
    blob = "\n".join(chunk)
    if not blob.isascii():
        blob = unicodedata.normalize("NFC", blob)
    blob = blob.lower()
    lines = blob.split("\n")
    if "//" in blob or "./" in blob or blob.endswith("/.") or "/.\n" in blob:
        lines = [posixpath.normpath(n) for n in lines]  # no '..' parts: unsafe names are gone
        blob = "\n".join(lines)
    return lines, blob


def fold_names(names: list[str]) -> list[str]:
    """The names as the extraction check folds them (see ``folded_names``)."""
    return folded_names(names)[0]
