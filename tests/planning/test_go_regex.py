"""Key patterns are Go's regexp (RE2) with ``ReplaceAllString(name, "$1")``: a table of patterns
× names whose expected keys were worked out by hand from Go's semantics, checked through the
command line's ``--dry-run=json``.

Go's rules used below: ``\\w \\d \\s \\b [[:alpha:]]`` are ASCII-only, ``\\pL`` is Unicode,
``\\Q…\\E`` quotes, ``(?U)`` makes ``+`` lazy; the search is unanchored unless the pattern
anchors itself, every match is replaced by group 1, and no match leaves the name as it is. The
sample key is then the result with the file's extension trimmed if it ends with it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import make_tree

NAMES = [
    "café_1.jpg",
    "café_2.jpg",
    "naïve_10.txt",
    "abc_3.jpg",
    "Ωmega9.jpg",
    "a.b-7.png",
    "axb-5.jpg",
    "ab_1_2.jpg",
    "nb\u00a0sp x.jpg",
    "v\u0663_4.jpg",
]  # U+00A0 NBSP, U+0663 ٣

# pattern -> the key of each name in NAMES, in order
TABLE = {
    # \w is [0-9A-Za-z_]: é, ï, Ω and ٣ are not word characters
    r"^(\w+).*": ["caf", "caf", "na", "abc_3", "Ωmega9", "a", "axb", "ab_1_2", "nb", "v"],
    # \pL is every Unicode letter (٣ is a digit, not a letter)
    r"^(\pL+).*": ["café", "café", "naïve", "abc", "Ωmega", "a", "axb", "ab", "nb", "v"],
    # [[:alpha:]] is ASCII letters only
    r"^([[:alpha:]]+).*": ["caf", "caf", "na", "abc", "Ωmega9", "a", "axb", "ab", "nb", "v"],
    # \Q…\E: the dot is literal, so axb-5 does not match; a.b-7's key "-7.png" loses ".png"
    r"^\Qa.b\E(.*)$": [
        "café_1",
        "café_2",
        "naïve_10",
        "abc_3",
        "Ωmega9",
        "-7",
        "axb-5",
        "ab_1_2",
        "nb\u00a0sp x",
        "v\u0663_4",
    ],
    # (?U): (.+) stops before the first ASCII digit; the rest of the name stays
    r"(?U)^(.+)\d": [
        "café_",
        "café_",
        "naïve_0",
        "abc_",
        "Ωmega",
        "a.b-",
        "axb-",
        "ab__2",
        "nb\u00a0sp x",
        "v\u0663_",
    ],
    # unanchored: every match replaced by group 1
    r"_(\d)": [
        "café1",
        "café2",
        "naïve10",
        "abc3",
        "Ωmega9",
        "a.b-7",
        "axb-5",
        "ab12",
        "nb\u00a0sp x",
        "v\u06634",
    ],
    # \b between ASCII word and non-word characters: each ASCII word becomes its first letter
    r"\b(\w)\w*": [
        "cé_.j",
        "cé_.j",
        "nïv.t",
        "a.j",
        "Ωm.j",
        "a.b-7.p",
        "a-5.j",
        "a.j",
        "n\u00a0s x.j",
        "v\u0663_.j",
    ],
    # \s is ASCII whitespace only: the no-break space is part of \S+
    r"^(\S+)\s.*": [
        "café_1",
        "café_2",
        "naïve_10",
        "abc_3",
        "Ωmega9",
        "a.b-7",
        "axb-5",
        "ab_1_2",
        "nb\u00a0sp",
        "v\u0663_4",
    ],
}


def test_table_is_complete():
    assert all(len(keys) == len(NAMES) for keys in TABLE.values())


# The command line (``cli.main``, what ``ishard`` runs) once per argument list, in one process
# to spare the start-up time; each run's stdout ends with a NUL byte.
RUNS = (
    "import json, sys\n"
    "from ishard import cli\n"
    "for args in json.loads(sys.argv[1]):\n"
    "    try:\n"
    "        cli.main(args)\n"
    "    except SystemExit as done:\n"
    "        if done.code:\n"
    "            raise\n"
    "    sys.stdout.flush()\n"
    "    sys.stdout.buffer.write(b'\\0')\n"
    "    sys.stdout.flush()\n"
)


def test_keys_are_gos_through_the_command_line(tmp_path):
    """One dry run per pattern, alternating our spelling and Go's."""
    src = make_tree(tmp_path / "src", dict.fromkeys(NAMES, 3))
    runs = []
    for row, pattern in enumerate(TABLE):
        if row % 2:
            runs.append(
                [
                    f"-src_bck={src}",
                    f"-dst_bck={tmp_path / 'out'}",
                    f"-sample_key_pattern={pattern}",
                    "-dry_run=json",
                ]
            )
        else:
            runs.append(
                [
                    "shard",
                    str(src),
                    "--sample-key-pattern",
                    pattern,
                    "--dry-run=json",
                    "--member-names",
                    "original",
                ]
            )  # keys, not member names, are the subject
    done = subprocess.run(
        [sys.executable, "-c", RUNS, json.dumps(runs)],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    # (warnings about how readers would group such keys are expected; errors are not)
    assert all(ln.startswith("ishard: warning: ") for ln in done.stderr.decode().splitlines())
    outputs = done.stdout.split(b"\0")
    assert len(outputs) == len(TABLE) + 1 and outputs[-1] == b""
    failures = []
    for pattern, out in zip(TABLE, outputs):
        doc = json.loads(out)
        got = {
            f["name"]: s["key"]
            for shard in doc["shards"]
            for s in shard["samples"]
            for f in s["files"]
        }
        want = dict(zip(NAMES, TABLE[pattern]))
        failures += [(pattern, n, got.get(n), k) for n, k in want.items() if got.get(n) != k]
    assert failures == []
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("pattern", "python_key"),
    [
        (r"^(\w+).*", "café_1"),  # Python's \w is Unicode
        (r"\b(\w)\w*", "c.j"),
    ],
)
def test_the_table_differs_from_pythons_re(pattern, python_key):
    """The rows are not Python's answers: Python's re gives another key for café_1.jpg."""
    import re

    assert re.sub(pattern, r"\1", NAMES[0]).removesuffix(".jpg") == python_key
    assert TABLE[pattern][0] != python_key
