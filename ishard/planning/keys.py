"""Sample keys: Go ishard's key patterns (custom ones in RE2) as ``name -> key`` functions; extensions."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import re2

from ..errors import UsageError

KeyFunction = Callable[[str], str]

# Surrogate-escaped bytes (a name that is not UTF-8) stand in as private-use characters while
# matching: Go counts each such byte as one character that ``.`` and ``[^/]`` match; RE2 would
# match nothing there.
_TO_PRIVATE = {0xDC80 + i: 0xF780 + i for i in range(128)}
_FROM_PRIVATE = {v: k for k, v in _TO_PRIVATE.items()}


def re2_options() -> re2.Options:
    """RE2 options for user regexes: Go's defaults, and no logging to stderr (errors are
    reported as one line of ours)."""
    options = re2.Options()
    options.log_errors = False
    return options


def compile_re2(text: str, max_mem: int = 0) -> re2._Regexp:
    """``text`` compiled with RE2 (Go's regexp syntax and semantics), as UTF-8 bytes.

    Raises:
        re2.error: not a valid RE2 regex (the message says why, e.g. ``missing ): (a``).
    """
    options = re2_options()
    if max_mem:
        options.max_mem = max_mem
    try:
        return re2.compile(text.encode("utf-8", "surrogatepass"), options)
    except re2.error as err:
        reason = err.args[0] if err.args else err
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise re2.error(str(reason)) from None


def utf8(name: str) -> tuple[bytes, bool]:
    """``name`` as the bytes RE2 matches; True when they must be decoded with :func:`unutf8`."""
    try:
        return name.encode(), False
    except UnicodeEncodeError:
        if any(0xF780 <= ord(c) <= 0xF7FF for c in name):  # already holds those characters
            return name.encode("utf-8", "surrogatepass"), True
        return name.translate(_TO_PRIVATE).encode("utf-8", "surrogatepass"), True


def unutf8(data: bytes, odd: bool) -> str:
    """The inverse of :func:`utf8`."""
    if not odd:
        return data.decode()
    return data.decode("utf-8", "surrogatepass").translate(_FROM_PRIVATE)


def extension(name: str) -> str:
    """Go's ``filepath.Ext``: from the last dot of the final path element, dot included."""
    base = name[name.rfind("/") + 1 :]
    dot = base.rfind(".")
    return base[dot:] if dot >= 0 else ""


def _base_file_name(name: str) -> str:
    return name[name.rfind("/") + 1 :]


def _full_name(name: str) -> str:
    return name


def _collapse_all_dir(name: str) -> str:
    return name.replace("/", "")


def mirrored_dirs(name: str) -> str:
    """The key of ``mirrored_dirs``: the name below its first folder (``images/train/01.jpg``
    → ``train/01.jpg``); a name at the top, in no folder, whole."""
    return name[name.find("/") + 1 :]


def _trimmed(names: Iterable[str]) -> Iterator[str]:
    """Each name up to the last dot of its basename."""
    return (n[: n.rfind(".")] if n.rfind(".") > n.rfind("/") else n for n in names)


@dataclass(frozen=True)
class KeyPattern:
    """A built-in ``--sample-key-pattern``."""

    name: str
    help: str  # which files form a sample (the user guide's table says the same)
    key: KeyFunction  # a file's name → its key, before the extension is trimmed off
    # the sample keys of many names (sample_key of each, in one generator)
    sample_keys: Callable[[Iterable[str]], Iterator[str]]
    sql: str  # the sample key in DuckDB SQL over the column ``name`` (the column engine)
    aliases: tuple[str, ...] = ()  # other spellings of the name


PATTERNS: tuple[KeyPattern, ...] = (
    KeyPattern(
        "base_file_name",
        "same base name anywhere in the tree",
        _base_file_name,
        lambda names: (
            b[: b.rfind(".")] if "." in b else b for b in (n[n.rfind("/") + 1 :] for n in names)
        ),
        "parse_filename(name, true, 'forward_slash')",
        aliases=("base_filename", "base_name", ""),
    ),
    KeyPattern(
        "full_name",
        "same path without extension; keys contain `/` (tree mode, see `--collapse`)",
        _full_name,
        _trimmed,
        r"regexp_replace(name, '\.[^./]*$', '')",
    ),
    KeyPattern(
        "collapse_all_dir",
        "the path with every `/` removed",
        _collapse_all_dir,
        lambda names: (n.replace("/", "") for n in _trimmed(names)),
        r"replace(regexp_replace(name, '\.[^./]*$', ''), '/', '')",
    ),
    KeyPattern(
        "mirrored_dirs",
        "same path below the first folder, without extension: `images/train/01.jpg` and "
        "`labels/train/01.txt` form `train/01`; keys keep the deeper folders (tree mode, see "
        "`--collapse`)",
        mirrored_dirs,
        lambda names: (n[n.find("/") + 1 :] for n in _trimmed(names)),
        r"regexp_replace(regexp_replace(name, '\.[^./]*$', ''), '^[^/]*/', '')",
    ),
)
BUILT_IN = tuple(p.name for p in PATTERNS)
ALIASES = {a: p.name for p in PATTERNS for a in p.aliases}
_BY_KEY = {p.key: p for p in PATTERNS}


def _searcher(pattern: re2._Regexp) -> Callable[[bytes, int], tuple | None]:
    """``search(data, pos)`` → (start, end, group 1 bytes or None) of the leftmost match at or
    after ``pos`` (text before ``pos`` is context for ``^`` and ``\\b``), or None.

    Calls RE2's binding directly when it is there: the wrapper's ``search`` builds a generator
    and a match object per call, which costs 2.5x the matching itself on short names.
    """
    raw = getattr(pattern, "_regexp", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    with_group = pattern.groups >= 1
    if raw is not None and anchor is not None and hasattr(raw, "Match"):

        def search(data: bytes, pos: int) -> tuple | None:
            spans = raw.Match(anchor, data, pos, len(data))
            start, end = spans[0]
            if start < 0:
                return None
            if not with_group or spans[1][0] < 0:
                return start, end, None
            return start, end, data[spans[1][0] : spans[1][1]]

        return search

    def search_public(data: bytes, pos: int) -> tuple | None:
        m = pattern.search(data, pos)
        if m is None:
            return None
        return m.start(), m.end(), m.group(1) if with_group else None

    return search_public


def _width(data: bytes, pos: int) -> int:
    """Bytes of the UTF-8 character at ``pos`` (Go's ``utf8.DecodeRune`` width; 0 at the end)."""
    if pos >= len(data):
        return 0
    lead = data[pos]
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def _custom(text: str) -> KeyFunction:
    try:
        pattern = compile_re2(text)
    except re2.error as err:
        raise UsageError(
            f"--sample-key-pattern {text!r} is not a valid regular expression ({err}) — "
            f"use {', '.join(BUILT_IN)} or an RE2 regex with one group "
            "(no lookaround or backreferences)"
        ) from None
    search = _searcher(pattern)

    def key(name: str) -> str:
        # Go's regexp.ReplaceAllString(name, "$1") step by step (RE2 is linear in the name):
        # every match replaced by group 1, an empty match right after a match skipped, no
        # match leaves the name as it is.
        data, odd = utf8(name)
        end = len(data)
        out: list[bytes] = []
        last_end = search_pos = 0
        while search_pos <= end:
            found = search(data, search_pos)
            if found is None:
                break
            a0, a1, group = found
            out.append(data[last_end:a0])
            if a1 > last_end or a0 == 0:
                out.append(group or b"")
            last_end = a1
            if a1 == end and end:  # only an empty match at the end is left: Go skips it
                break
            width = _width(data, search_pos)
            if search_pos + width > a1:
                search_pos += width
            elif search_pos + 1 > a1:
                search_pos += 1
            else:
                search_pos = a1
        if not out:
            return name
        out.append(data[last_end:])
        return unutf8(b"".join(out), odd)

    return key


def key_function(pattern: str) -> KeyFunction:
    """The key function for a built-in pattern name or a custom regex (group 1 is the key).

    Raises:
        UsageError: a custom pattern is not a valid regex.
    """
    pattern = ALIASES.get(pattern, pattern)
    return next((p.key for p in PATTERNS if p.name == pattern), None) or _custom(pattern)


_BARE_WORD = re.compile(r"[A-Za-z0-9_]+")
REGEX_EXAMPLE = r"^(.*)\.[^.]+$"


def check_pattern(text: str) -> None:
    """Refuse what is surely a typo before any listing: a bare word that is not a built-in
    name, or a regex without the capture group whose text becomes the key.

    Raises:
        UsageError: the pattern is such a typo, or not a valid regex.
    """
    pattern = ALIASES.get(text, text)
    if pattern in BUILT_IN:
        return
    if _BARE_WORD.fullmatch(pattern):
        close = difflib.get_close_matches(
            pattern, (*BUILT_IN, *filter(None, ALIASES)), n=1, cutoff=0.4
        )
        fix = (
            f"did you mean {ALIASES.get(close[0], close[0])}? (built-ins: {', '.join(BUILT_IN)}; "
            if close
            else f"use {', '.join(BUILT_IN)} ("
        )
        raise UsageError(
            f"--sample-key-pattern {text!r} is not a built-in pattern — {fix}"
            f"a regex needs one capture group, e.g. {REGEX_EXAMPLE})"
        )
    if _groups(pattern) == 0:
        raise UsageError(
            f"--sample-key-pattern {text!r} has no capture group — a regex needs one capture "
            f"group, e.g. {REGEX_EXAMPLE} (group 1 is the sample key)"
        )


def _groups(text: str) -> int:
    try:
        return compile_re2(text).groups
    except re2.error:
        key_function(text)  # raises the usual "not a valid regular expression" line
        raise


def go_pattern(text: str) -> str:
    """Go ishard's ``-sample_key_pattern`` in a form :func:`check_pattern` accepts, same keys:
    Go compiles any non-built-in word as a regex and expands ``$1`` to "" when it has no
    group, so such a pattern gets an empty group 1 appended (``(?:P)()``)."""
    pattern = ALIASES.get(text, text)
    if pattern in BUILT_IN:
        return text
    try:
        groups = compile_re2(pattern).groups
    except re2.error:
        return text  # reported by make_options in the usual terms
    return f"(?:{pattern})()" if groups == 0 else text


def sample_key(name: str, key: KeyFunction) -> str:
    """The sample a file belongs to: its key with the file's extension trimmed off the end."""
    k = key(name)
    ext = extension(name)
    return k[: -len(ext)] if ext and k.endswith(ext) else k


def sample_keys(names: Iterable[str], key: KeyFunction) -> Iterator[str]:
    """:func:`sample_key` of each name in turn; for the built-in patterns with string methods
    inside one generator, not three calls a name (the same keys: a test compares them)."""
    pattern = _BY_KEY.get(key)
    if pattern is not None:
        return pattern.sample_keys(names)
    return (sample_key(n, key) for n in names)
