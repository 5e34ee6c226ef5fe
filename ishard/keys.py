"""Sample keys: Go ishard's key patterns as ``name -> key`` functions; Go's and WebDataset's extensions."""

from __future__ import annotations

from collections.abc import Callable

import regex

from .errors import DataError, UsageError

KeyFunction = Callable[[str], str]

REGEX_SECONDS = 1.0  # per name: a pattern that backtracks for longer is refused, not waited on

BUILT_IN = ("base_file_name", "full_name", "collapse_all_dir")
ALIASES = {"base_filename": "base_file_name", "base_name": "base_file_name", "": "base_file_name"}


def extension(name: str) -> str:
    """Go's ``filepath.Ext``: from the last dot of the final path element, dot included."""
    base = name[name.rfind("/") + 1 :]
    dot = base.rfind(".")
    return base[dot:] if dot >= 0 else ""


def wds_split(name: str) -> tuple[str, str]:
    """WebDataset's rule: (path up to the basename's first dot, the rest after that dot);
    a basename with no dot gives (name, "")."""
    dot = name.find(".", name.rfind("/") + 1)
    return (name, "") if dot < 0 else (name[:dot], name[dot + 1 :])


def _base_file_name(name: str) -> str:
    return name[name.rfind("/") + 1 :]


def _full_name(name: str) -> str:
    return name


def _collapse_all_dir(name: str) -> str:
    return name.replace("/", "")


def _custom(text: str) -> KeyFunction:
    try:
        pattern = regex.compile(text)
    except regex.error as err:
        raise UsageError(
            f"--sample-key-pattern {text!r} is not a valid regular expression ({err}) — "
            "use base_file_name, full_name, collapse_all_dir or a regex with one group"
        ) from None
    with_group = pattern.groups >= 1

    def key(name: str) -> str:
        # Go's ReplaceAllString(name, "$1"): every match replaced by group 1, empty matches
        # right after a previous match skipped; no match leaves the name as it is.
        out, pos, last_end = [], 0, -1
        try:
            for m in pattern.finditer(name, timeout=REGEX_SECONDS):
                start, end = m.span()
                if start == end == last_end:
                    continue
                out.append(name[pos:start])
                out.append((m.group(1) or "") if with_group else "")
                pos = last_end = end
        except TimeoutError:
            raise DataError(
                f"--sample-key-pattern {text!r} took over {REGEX_SECONDS:g}s on {name!r} — "
                "simplify the regex (avoid nested repeats such as (a+)+)"
            ) from None
        out.append(name[pos:])
        return "".join(out)

    return key


def key_function(pattern: str) -> KeyFunction:
    """The key function for a built-in pattern name or a custom regex (group 1 is the key).

    Raises:
        UsageError: a custom pattern is not a valid regex.
    """
    pattern = ALIASES.get(pattern, pattern)
    builtin = {
        "base_file_name": _base_file_name,
        "full_name": _full_name,
        "collapse_all_dir": _collapse_all_dir,
    }
    return builtin.get(pattern) or _custom(pattern)


def sample_key(name: str, key: KeyFunction) -> str:
    """The sample a file belongs to: its key with the file's extension trimmed off the end."""
    k = key(name)
    ext = extension(name)
    return k[: -len(ext)] if ext and k.endswith(ext) else k
