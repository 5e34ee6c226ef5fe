"""Go ishard's spelling of the command line (``ishard -src_bck=… -shard_size=…``), rewritten
into ours with Go's meanings kept, and Go's refusals where a word only means something in Go."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Collection, Sequence

from ..errors import UsageError
from ..options import table
from ..options.record import GO_SHARD_SIZE
from ..planning.keys import go_pattern
from ..sizes import MAX_COUNT

# --dry-run's modes: the native spelling's bare --dry-run is "shards" (a row per shard and a
# histogram), Go's -dry_run is "text" (Go's listing of every member), which "files" names too
DRY_RUN_MODES = ("shards", "files", "text", "show_keys", "json", "summary")
# Go ishard's flag spellings -> ours, read from the option table's records (``go=``);
# src_bck and dst_bck become the two positional arguments.


def _go_flags() -> dict[str, str]:
    """Go's valued flags (``shard_size``) and our long flag for each."""
    return {go: o.flags[-1] for go, o in table.go_spellings().items() if o.kind not in _BOOLS}


def _go_bools() -> dict[str, tuple[str, str | None]]:
    """Go's bool flags and our spellings of on and off (off: None when we have none)."""
    out: dict[str, tuple[str, str | None]] = {}
    for go, o in table.go_spellings().items():
        if o.kind in _BOOLS:
            on, _, off = o.flags[-1].partition("/")
            out[go] = (on, off or None)
    return out


_BOOLS = ("flag", "switch")
GO_BUCKETS = ("src_bck", "dst_bck")
TRUE, FALSE = ("", "true", "1", "t"), ("false", "0", "f")


_GO_NAME = re.compile(r"-{1,2}([A-Za-z][A-Za-z0-9_-]*)(=.*)?", re.DOTALL)
# Words that ask for help: ours, and Go's flag package's (-h and -help, with one dash or two)
HELP_WORDS = ("-h", "--help", "-help", "--h")


def _short_flags() -> dict[str, bool]:
    """Our one-letter flags, from the option table's records (and -h), which click lets a user
    write together (``-qv``): whether each takes a value (``-j4``: the digits after it)."""
    letters = {o.short[1]: o.kind == "int" for o in table.SHARD_OPTIONS if o.short}
    return {**letters, "h": False}


def _letters(arg: str) -> list[str] | None:
    """``arg`` as our one-letter flags, one word each (``-qn`` → ``-q -n``, ``-qj4`` →
    ``-q -j4``); None when it is no such word (``-num_shards``, ``-x``)."""
    shorts, words = _short_flags(), list[str]()
    if not arg.startswith("-") or arg.startswith("--") or len(arg) < 2:
        return None
    for at, letter in enumerate(arg[1:], 1):
        if letter not in shorts:
            return None
        if shorts[letter]:  # a value follows: digits glued on, or the next word
            rest = arg[at + 1 :]
            return words + [f"-{arg[at:]}"] if rest.isdigit() or not rest else None
        words.append(f"-{letter}")
    return words


def _undefined_go_flag(
    arg: str, before: str | None, ours: Sequence[str], valued: Collection[str]
) -> UsageError | None:
    """Go's refusal of a flag it does not know (``-shard_sise``), with the closest known flag
    (Go's, or ``ours``: our long option names), for a word only a Go-style command line has:
    one dash and a long name, or a ``_`` in the name; None for anything else, or a word that
    is the value of the option ``before`` it (one of ``valued``, those that take a value)."""
    found = _GO_NAME.fullmatch(arg)
    if found is None or arg.startswith("---") or _go_flag(arg) is not None:
        return None
    name = found.group(1)
    if arg.startswith("--") and "_" not in name:
        return None  # our spelling: click says what is wrong with it
    if not arg.startswith("--") and (len(name) < 2 or _letters(arg) is not None):
        return None  # -x, -qv, -j4: click's short options
    if before is not None and before in valued:
        return None  # --prefix -a_b: a value that starts with a dash
    go = difflib.get_close_matches(name, [*_go_flags(), *_go_bools(), *GO_BUCKETS, "dry_run"], 1)
    mine = difflib.get_close_matches(name.replace("_", "-"), ours, 1)
    near = [f"-{g}" for g in go] + [f"--{o}" for o in mine]
    if "-" in name:  # -shard-size: ours, with one dash too few
        near.reverse()
    fix = (
        f"did you mean {near[0]}?"
        if near
        else "see 'ishard shard --help' for the options (Go's: -src_bck, -dst_bck, "
        "-shard_size, -sample_key_pattern, …)"
    )
    return UsageError(f"flag provided but not defined: {arg.partition('=')[0]} — {fix}")


def _go_flag(arg: str) -> tuple[str, str | None] | None:
    """('name', value or None) for a Go-style flag such as ``-shard_size=1MiB``; else None."""
    if not arg.startswith("-") or arg.startswith("---") or arg == "-":
        return None
    name, eq, value = arg.lstrip("-").partition("=")
    if name in _go_flags() or name in _go_bools() or name in (*GO_BUCKETS, "dry_run"):
        if arg.startswith("--") and "_" not in name and name not in ("ekm", "ext", "sort"):
            return None  # already our spelling
        return name, value if eq else None
    return None


def _go_shard_size(flag: str, value: str) -> str:
    """Go's meaning of a shard size in Go's spelling: ``-shard_size`` reads a number that fits
    an int32 as a sample count and a larger one as bytes; the older ``-max_shard_size`` read
    every bare number as bytes. Bytes get their unit (``B``) here. (Go's int32 parse takes no
    spaces, its size parse trims them: ``" 10"`` is 10 bytes there.)"""
    digits = value.strip().removeprefix("+")
    if (
        digits.isascii()
        and digits.isdigit()
        and (flag == "max_shard_size" or value != value.strip() or int(digits) > MAX_COUNT)
    ):
        return f"{digits}B"
    return value


def translate(argv: list[str], ours: Sequence[str] = (), valued: Collection[str] = ()) -> list[str]:
    """Rewrite Go ishard's command line (``-src_bck=… -shard_size=…``) into ours; ``ours``
    (our long option names) and ``valued`` (our options that take a value) tell a mistyped
    Go flag from the rest."""
    buckets: dict[str, str] = {}
    out = _rewritten(_separated(argv, valued), ours, valued, buckets)
    src, dst = buckets.get("src_bck"), buckets.get("dst_bck")
    if (src is None) != (dst is None):
        given, missing = ("-src_bck", "-dst_bck") if dst is None else ("-dst_bck", "-src_bck")
        raise UsageError(
            f"{given} needs {missing} too: Go ishard requires both (src_bck and dst_bck) — add "
            f"{missing}={missing[1:4].upper()}, or for a dry run without a destination: "
            "ishard shard SRC --dry-run"
        )
    if src is not None or dst is not None:
        if not out or out[0] != "shard":
            out.insert(0, "shard")
    elif any(_go_flag(a) for a in argv) and (
        not out or out[0] not in ("shard", "ls", "verify", "split")
    ):
        out.insert(0, "shard")
    if out and out[0] == "shard" and any(map(_go_spelt, argv)):
        _go_defaults(out)
    if src is not None or dst is not None:
        out += ["--"] + [v for v in (src, dst) if v is not None]
    return out


def help_asked(argv: list[str], valued: Collection[str], commands: Collection[str]) -> list[str]:
    """The command line that shows the help ``argv`` asks for, wherever among its flags the
    ask is (``-h`` or ``--help``, Go's ``-help``, ``--h`` and ``-h=…`` too: Go's flag package
    prints its usage for any of them and exits 0), whatever else is wrong with it: ``COMMAND
    --help`` for a command named first, ``shard --help`` for a command line in Go's spelling,
    (a word such as ``-shard_sise`` is one too), else ``--help``; empty when no word before ``--`` asks (the value of an option does not)."""
    words = _separated(argv, valued)
    end = words.index("--") if "--" in words else len(words)
    asked = any(
        w.partition("=")[0] in HELP_WORDS and not (at and _value_next(words[at - 1], valued))
        for at, w in enumerate(words[:end])
    )
    if not asked:
        return []
    if argv[0] in commands:
        return [argv[0], "--help"]
    go_like = [w for w in argv[:end] if _go_spelt(w) or re.match(r"-[^-=]*_", w)]  # -shard_sise
    return ["shard", "--help"] if go_like else ["--help"]


def _rewritten(
    argv: list[str], ours: Sequence[str], valued: Collection[str], buckets: dict[str, str]
) -> list[str]:
    """Each word of ``argv`` in our spelling, up to ``--`` (the rest kept as it is); the
    values of ``-src_bck`` and ``-dst_bck`` go into ``buckets``."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            out += argv[i - 1 :]
            break
        flag, before = _go_flag(arg), argv[i - 2] if i > 1 else None
        if flag is None:
            arg = _plain_word(arg, before, ours, valued)
        elif flag[1] is None and _go_spelt(arg) and i < len(argv):
            _bool_then_word(flag[0], argv[i])
        if arg == "--dry-run" or flag == ("dry_run", None):
            words, i = _dry_run_words(argv, i, "--dry-run=")
        elif arg == "-n" and not _value_next(before, valued):
            words, i = _dry_run_words(argv, i, "-n")
        elif flag is None:
            words = [arg]
        else:
            words, i = _go_words(arg, flag, argv, i, buckets)
        out += words
    return out


def _plain_word(arg: str, before: str | None, ours: Sequence[str], valued: Collection[str]) -> str:
    """A word that is no Go flag, as it is (``-help`` as ``--help``: Go's flag package knows
    it too), unless it is a mistyped Go flag (``before``: the word before it, or None)."""
    if arg in ("-help", "--help"):
        return "--help"
    undefined = _undefined_go_flag(arg, before, ours, valued)
    if undefined is not None:
        raise undefined
    return arg


def _dry_run_words(argv: list[str], i: int, spelt: str) -> tuple[list[str], int]:
    """A bare dry run flag at ``argv[i - 1]`` spelt with its mode (``spelt``: ``--dry-run=``,
    or ``-n``, whose mode click reads glued on: ``-nshards``), taking the mode after it
    (``--dry-run show_keys``) if one follows; and the index of the next word."""
    if i < len(argv) and argv[i] in DRY_RUN_MODES:
        return [f"{spelt}{argv[i]}"], i + 1
    _not_a_mistyped_mode(argv[i : i + 1])
    return [spelt + ("text" if any(map(_go_spelt, argv)) else "shards")], i


def _separated(argv: list[str], valued: Collection[str]) -> list[str]:
    """``argv`` with our one-letter flags written together one a word (``-qn`` → ``-q -n``),
    up to ``--``; a word that is the value of the option before it is kept as it is."""
    out: list[str] = []
    for at, arg in enumerate(argv):
        if arg == "--":
            return out + argv[at:]
        letters = None if at and _value_next(argv[at - 1], valued) else _letters(arg)
        out += [arg] if letters is None else letters
    return out


def _value_next(word: str | None, valued: Collection[str]) -> bool:
    """Does ``word`` take the next word as its value: one of our options that take a value
    (``valued``), or a Go flag that does, given without ``=`` (``-prefix``)?"""
    flag = None if word is None else _go_flag(word)
    return word in valued or (flag is not None and flag[1] is None and flag[0] in _go_flags())


def _go_words(
    arg: str, flag: tuple[str, str | None], argv: list[str], i: int, buckets: dict[str, str]
) -> tuple[list[str], int]:
    """The Go flag ``arg`` (``flag``: its name and ``=value`` or None) in our spelling, taking
    its value from ``argv[i]`` where it needs one; and the index of the next word."""
    name, value = flag
    if name in _go_bools():
        return _go_bool(name, value), i
    if name == "dry_run":
        return _go_dry_run(value), i
    if value is None and i < len(argv):
        value, i = argv[i], i + 1
    return _go_valued(arg, name, value, buckets), i


def _not_a_mistyped_mode(after: list[str]) -> None:
    """Refuse the word after a bare ``--dry-run`` (``after``: it, or nothing) that is a near
    miss of a mode (``sumary``): it would be taken as DST and the wrong plan printed. A path
    (a ``/`` or a ``:`` in it), an option, or a name that exists is DST as ever.

    Raises:
        UsageError: naming the word and the mode it is close to (exit 2).
    """
    word = after[0] if after else "-"
    if word.startswith("-") or "/" in word or ":" in word or os.path.lexists(word):
        return
    near = difflib.get_close_matches(word.lower(), DRY_RUN_MODES, 1, cutoff=0.8)
    if near:
        raise UsageError(
            f"{word!r} after --dry-run is no dry-run mode, and no file or folder by that name "
            f"exists — did you mean --dry-run={near[0]}? (a new destination of that name: "
            f"write ./{word})"
        )


def _go_bool(name: str, value: str | None) -> list[str]:
    """Our spelling of Go's bool flag ``-name`` or ``-name=value``."""
    on, off = _go_bools()[name]
    given = (value or "").lower()
    if given in TRUE:
        return [on]
    if given in FALSE:
        return [off] if off else []
    raise UsageError(f"-{name}={value!r} is not true or false — write -{name} or -{name}=false")


def _go_dry_run(given: str | None) -> list[str]:
    """Our spelling of Go's ``-dry_run=given``: true (Go's listing of every member), false
    (none), or one of our modes."""
    mode = given if given is not None else "true"
    if mode.lower() in TRUE:
        return ["--dry-run=text"]
    if mode.lower() not in FALSE:
        return [f"--dry-run={mode}"]
    return []


def _go_valued(arg: str, name: str, value: str | None, buckets: dict[str, str]) -> list[str]:
    """Our spelling of Go's flag ``name`` (given as ``arg``) with its value: Go's meaning of a
    key regex or a shard size kept; a bucket's value kept in ``buckets``."""
    if value is None:
        return [arg]  # click reports the missing value
    if name == "ekm" and not value.strip() and _go_spelt(arg):
        raise UsageError(  # Go's JSON parse of an empty map fails as its flag is set
            f"-ekm={value!r} is empty (Go ishard refuses it too) — give a JSON file "
            """(-ekm=map.json) or inline JSON (-ekm='{"fish-%d.tar": ["^n01440764/"]}'), """
            "or leave -ekm out for no key map"
        )
    if name in GO_BUCKETS:
        buckets[name] = value
        return []
    if name == "sample_key_pattern":  # Go's meaning for a group-less regex
        value = go_pattern(value)
    elif name in ("shard_size", "max_shard_size"):
        value = _go_shard_size(name, value)
    return [f"{_go_flags()[name]}={value}"]


def _go_defaults(out: list[str]) -> None:
    """The Go spelling's defaults, put in ``out`` (before any ``--``) where not given: Go's
    member names (the source paths), md5, the checksum wids reads (md5sum), which the Go
    spelling's manifests have always had, and names Go shards though they differ only in case
    or Unicode form, warned about; no look for duplicates, which Go does not tell; and Go's
    documented 1 MiB shard size."""
    for option, default in (
        ("--member-names", "original"),
        ("--checksum", "md5"),
        ("--lookalike-names", "warn"),
        ("--duplicates", "off"),
        ("--shard-size", GO_SHARD_SIZE),
    ):
        if not any(a == option or a.startswith(f"{option}=") for a in out):
            end = out.index("--") if "--" in out else len(out)
            out.insert(end, f"{option}={default}")


def _bool_then_word(name: str, word: str) -> None:
    """Refuse Go's bool flag followed by what looks like its value (``-dry_run show_keys``,
    ``-collapse true``): Go's flag package takes the word for an argument and stops reading
    flags there, so it never means what it seems to."""
    if name != "dry_run" and name not in _go_bools():
        return
    modes = DRY_RUN_MODES if name == "dry_run" else ()
    if word in modes or word.lower() in (*TRUE[1:], *FALSE):
        raise UsageError(
            f"-{name} {word}: Go's -{name} is a bool flag, so {word!r} would not be its value "
            f"but an argument, where Go stops reading flags — write -{name}={word}"
        )


def _go_spelt(arg: str) -> bool:
    """Is ``arg`` a Go ishard flag spelt as only Go spells it (``-shard_size``, ``-ext``), not
    one that is also ours (``--ext``)?"""
    flag = _go_flag(arg)
    return flag is not None and (not arg.startswith("--") or "_" in flag[0])
