"""What each option of a run takes from Python (the command line's values always fit), and
how a value of another type is refused: one line naming the keyword and what it takes."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from . import choices

_TEXT = (str,)
# What each option takes from Python (the CLI's values always fit), and how to say so: by its
# annotation in Options, or as listed here. A bool is no int, and a string no bool:
# collapse="false" is refused, not taken as True.
_BY_ANNOTATION: dict[str, tuple[tuple[type, ...], str]] = {
    "bool": ((bool,), "True or False"),
    "str": (_TEXT, "a string"),
    **{f"choices.{name}": (_TEXT, "a string") for name in choices.CHOICE_TYPES},
    "str | None": (_TEXT, "a string or None"),
    "int": ((int,), "a whole number (an int)"),
    "int | None": ((int,), "a whole number (an int) or None"),
}
_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "shard_size": (
        (int, float, str),
        (
            "bytes as an int (or a whole float such as 3e9), or a "
            "string as on the command line: '512MiB', '10' samples"
        ),
    ),
    "part_size": ((int, str), "an int or a string such as '16MiB'"),
    "compose_min_size": ((int, str), "an int or a string such as '64MiB'"),
    "read_buffer": ((int, str), "an int or a string such as '256MiB'"),
    "sample_exts": (
        (str, list, tuple),
        ("a list of extensions such as ['.jpg', '.xml'] (or one string '.jpg,.xml')"),
    ),
    "ekm": (
        (str, os.PathLike, Mapping),
        (
            "a dict such as {'fish-%d.tar': ['^n01440764/']}, "
            "its JSON text, or the path of a JSON file"
        ),
    ),
    "src_list": ((str, os.PathLike), "a path, a URL or None"),
    "tmp_dir": ((str, os.PathLike), "a directory path or None"),
    "memory_limit": ((int, str), "an int (bytes) or a string such as '1GiB'"),
    "max_remove": ((int, str), "a whole percent from 0 to 100 (an int), or 'all'"),
    "storage_options": ((Mapping, list, tuple, str), "a dict, or a list of 'KEY=VALUE' strings"),
}


def kind_of(name: str, annotation: str) -> tuple[tuple[type, ...], str] | None:
    """The types option ``name`` (its field annotated ``annotation`` in ``Options``) takes
    from Python and their description; None if none is known."""
    return _KINDS.get(name) or _BY_ANNOTATION.get(annotation)


def typed(name: str, value: Any, kind: tuple[tuple[type, ...], str] | None) -> Any:
    """``value`` if it has a type option ``name`` takes (``kind``: ``kind_of``'s; a path as
    its text, an EKM dict as its JSON), else a ``UsageError`` naming the keyword and what it
    takes."""
    kinds, want = kind or ((object,), "")

    def wrong() -> UsageError:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:76] + " ..."
        return UsageError(f"{name} must be {want}, not {shown}")

    if value is None:
        return value
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise wrong()
    if isinstance(value, (list, tuple)) and not all(isinstance(item, str) for item in value):
        raise wrong()  # sample_exts or storage_options: strings only
    if isinstance(value, os.PathLike):
        text = os.fspath(value)
        if not isinstance(text, str):
            raise wrong()
        return text
    if name == "ekm" and isinstance(value, Mapping):
        try:
            return json.dumps(dict(value))
        except (TypeError, ValueError):
            raise wrong() from None
    return value
