"""What every command does around its output: -q/-v checked (-v logs each step to stderr),
JSON written to stdout."""

from __future__ import annotations

import logging
import sys

import orjson

from ..errors import UsageError
from ..names import printable


def talk(quiet: bool, verbose: bool) -> None:
    """Check -q/-v; with -v, the library's log (logger "ishard") goes to stderr."""
    if quiet and verbose:
        raise UsageError("-q/--quiet and -v/--verbose cannot be used together — choose one")
    log = logging.getLogger("ishard")
    for old in [h for h in log.handlers if getattr(h, "ishard_verbose", False)]:
        log.removeHandler(old)  # a second command in one process (tests, scripts) logs once
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.ishard_verbose = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter("ishard: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def emit_json(doc: dict) -> None:
    """``doc`` as indented JSON on stdout."""
    try:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    except TypeError:  # a name that is not UTF-8 (a local file's): shown with \xNN escapes
        data = orjson.dumps(printable(doc), option=orjson.OPT_INDENT_2)
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()
