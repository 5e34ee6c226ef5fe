"""How names are checked and shown: unsafe names, hidden ones, escapes for printing, sort key."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .model import Tally
from .rules import Rule

HIDDEN = "hidden (name starts with '.'; --include-hidden keeps it)"
UNSAFE = (
    "unsafe name (absolute, a '..' part, or a control character): no archive may "
    "extract outside its folder"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"[A-Za-z]:")


def has_control(name: str) -> bool:
    """Does ``name`` hold a C0 or DEL control character?"""
    return _CONTROL.search(name) is not None


def unsafe_name(name: str) -> bool:
    """Would this member name extract outside its folder somewhere, or break a listing?

    Absolute names (``/x``, ``\\x``, ``C:x``), any ``..`` part (parts split on ``/`` and on
    ``\\``, which Windows tools treat as a separator), and C0/DEL control characters.
    """
    if not name or name[0] in "/\\" or _DRIVE.match(name) or _CONTROL.search(name):
        return True
    return ".." in name and ".." in re.split(r"[/\\]", name)


def folder_marker(name: str) -> bool:
    """Is ``name`` no file's: empty, or a folder marker (ending in '/')?"""
    return not name or name.endswith("/")


def hidden_name(name: str) -> bool:
    """Is a part of ``name`` hidden (starting with '.')?"""
    return name.startswith(".") or "/." in name


# The object-store name rules, which the column engine states in SQL over an inventory's names
FOLDER_MARKER = Rule("folder marker", folder_marker, "{name} = '' OR ends_with({name}, '/')")
UNSAFE_NAME = Rule(
    "unsafe name",
    unsafe_name,
    r"{name} = '' OR regexp_matches({name}, '^[/\\]|^[A-Za-z]:|[\x00-\x1f\x7f]|"
    r"(^|[/\\])\.\.([/\\]|$)')",
)
HIDDEN_NAME = Rule("hidden name", hidden_name, "starts_with({name}, '.') OR contains({name}, '/.')")
UNDER_PREFIX = Rule("under a prefix", str.startswith, "starts_with({name}, {prefix})")
SKIP_REASONS = {"unsafe": UNSAFE, "hidden": HIDDEN}  # what a name left out is tallied as


def skip_reason(name: str, include_hidden: bool) -> str | None:
    """Why a listed file is left out (a key of ``SKIP_REASONS``: unsafe before hidden), or
    None."""
    if unsafe_name(name):
        return "unsafe"
    return "hidden" if not include_hidden and hidden_name(name) else None


SKIP_REASON = Rule(  # {include_hidden}: an SQL truth value
    "why a file is left out",
    skip_reason,
    f"CASE WHEN {UNSAFE_NAME.over(name='{name}')} THEN 'unsafe' WHEN NOT {{include_hidden}} "
    f"AND {HIDDEN_NAME.over(name='{name}')} THEN 'hidden' END",
)

SURROGATE = re.compile(r"[\ud800-\udfff]")
_REPR_SURROGATE = re.compile(r"(\\\\)|\\udc([89a-f][0-9a-f])")


def _escape(match) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def shown(name: str) -> str:
    """``name`` fit for JSON and terminals: an undecodable byte of a local file name (kept as
    a surrogate escape, U+DC80..U+DCFF) is written ``\\xNN``, any other lone surrogate
    ``\\uNNNN``; every other name is returned as it is."""
    if name.isascii() or not SURROGATE.search(name):
        return name
    return SURROGATE.sub(_escape, name)


_TERMINAL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printed(name: str) -> str:
    """``name`` fit for a line of text on a terminal: :func:`shown`, and every C0, DEL and C1
    control character (an escape sequence, a newline) written ``\\xNN``, so a name read from
    a record anyone could write neither drives the terminal nor splits the line."""
    name = shown(name)
    if not _TERMINAL.search(name):
        return name
    return _TERMINAL.sub(lambda m: f"\\x{ord(m.group()):02x}", name)


def quoted(name: str, code_points: bool = False) -> str:
    """``repr(name)`` with undecodable bytes shown as ``\\xNN`` (as Python shows bytes); with
    ``code_points``, every character past ASCII escaped too (``'caf\\xe9'``, ``'cafe\\u0301'``:
    names that look alike told apart)."""
    text = ascii(name) if code_points else repr(name)
    if "\\udc" not in text:
        return text
    return _REPR_SURROGATE.sub(lambda m: m.group(1) or f"\\x{m.group(2)}", text)


def abridged(name: str, limit: int = 120) -> str:
    """``name`` with its middle left out (``…``) past ``limit`` characters: its start and its
    end, where long names tell themselves apart, stay."""
    if len(name) <= limit:
        return name
    head = limit * 2 // 3
    return f"{name[:head]}…{name[len(name) - (limit - head - 1) :]}"


def printable(value):
    """A JSON-ready copy of ``value`` (dicts, lists, tuples, strings) with every string
    :func:`shown`."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(v) for v in value]
    return value


def sort_key(name: str) -> bytes:
    """Bytewise order of a member name (the order object stores list in)."""
    return name.encode("utf-8", "surrogateescape")


# DuckDB orders text by its UTF-8 bytes
NAME_ORDER = Rule("bytewise order", sort_key, "{name}")


def combined_prefix(a: str, b: str) -> str | None:
    """The prefix names must have to start with both ``a`` and ``b``; None if none can."""
    if a.startswith(b):
        return a
    if b.startswith(a):
        return b
    return None


def keep_remote_name(name: str, include_hidden: bool, tally: Tally) -> bool:
    """Object-store rules: directory markers are not files; hidden path parts are skipped."""
    if folder_marker(name):
        return False
    why = skip_reason(name, include_hidden)
    if why is not None:
        tally.add(SKIP_REASONS[why], name)
        return False
    return True


def wds_split(name: str) -> tuple[str, str]:
    """WebDataset's rule: (path up to the basename's first dot, the rest after that dot);
    a basename with no dot gives (name, "")."""
    dot = name.find(".", name.rfind("/") + 1)
    return (name, "") if dot < 0 else (name[:dot], name[dot + 1 :])


def wds_extension(name: str) -> str:
    """The extension WebDataset readers take: the basename after its first dot ("": none)."""
    return name.rpartition("/")[2].partition(".")[2]


def member_name(key: str, name: str) -> str:
    """File ``name``'s member name in sample ``key`` under ``--member-names sample``:
    ``<key>.<extension>``, the extension as ``wds_extension`` takes it."""
    return key + "." + name.rpartition("/")[2].partition(".")[2]


def sample_members(keys: Iterable[str], names: Iterable[str]) -> list[str]:
    """Files ``names`` named by their samples' ``keys`` (``member_name``, what
    ``--member-names sample`` writes)."""
    return list(map(member_name, keys, names))


# The basename in SQL; the SQL forms answer names with a dot in it (a file without one takes
# no member name of its sample's: ``--member-names sample`` refuses it)
_BASE = "parse_filename({name}, false, 'forward_slash')"
_EXTENSION = f"substr({_BASE}, instr({_BASE}, '.') + 1)"
EXTENSION = Rule("an extension", wds_extension, _EXTENSION, where=f"contains({_BASE}, '.')")
MEMBER_NAME = Rule(
    "a member name of a sample's",
    member_name,
    f"{{key}} || '.' || {_EXTENSION}",
    where=f"contains({_BASE}, '.')",
)
