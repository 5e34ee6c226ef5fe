"""Every bad input of docs/bad-inputs.md: its exit code, its one-line message, and that nothing
was written under a final name. The table and CASES must list the same rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import invoke_ishard, make_tree

from ishard.errors import UsageError
from ishard.options.record import make_options

DOC = Path(__file__).resolve().parent.parent / "docs" / "bad-inputs.md"
TREE = {"a/1.jpg": b"x" * 10, "a/1.cls": b"1", "a/2.jpg": b"y" * 10, "b/3.jpg": b"z" * 10}

# id -> (arguments after SRC DST, exit code, fragment of the message); {src} {dst} {tmp} filled in
CASES: dict[str, tuple[tuple[str, ...], int, str]] = {
    "shard-size-zero": (("--shard-size", "0"), 2, "--shard-size '0' must be at least 1 sample"),
    "shard-size-negative": (
        ("--shard-size", "-5MiB"),
        2,
        "--shard-size '-5MiB' is neither a size nor a sample count",
    ),
    "shard-size-unit": (
        ("--shard-size", "12XB"),
        2,
        "--shard-size '12XB' is neither a size nor a sample count",
    ),
    "shard-size-count-too-big": (
        ("--shard-size", "2147483648"),
        2,
        "for bytes write 2147483648B or 2GiB",
    ),
    "shard-size-two-counts": (
        ("--shard-size", "10", "--samples-per-shard", "5"),
        2,
        "--samples-per-shard 5 is one too",
    ),
    "samples-per-shard-zero": (
        ("--samples-per-shard", "0"),
        2,
        "--samples-per-shard '0' must be a whole number of at least 1",
    ),
    "key-regex": (
        ("--sample-key-pattern", "(["),
        2,
        "--sample-key-pattern '([' is not a valid regular expression",
    ),
    "key-regex-lookaround": (
        ("--sample-key-pattern", "(?<=a)b"),
        2,
        (
            "--sample-key-pattern '(?<=a)b' is not a valid regular expression "
            "(invalid perl operator: (?<=)"
        ),
    ),
    "key-bare-word": (
        ("--sample-key-pattern", "basename"),
        2,
        "--sample-key-pattern 'basename' is not a built-in pattern — did you mean base_file_name?",
    ),
    "key-bare-word-fullname": (("--sample-key-pattern", "fullname"), 2, "did you mean full_name?"),
    "key-bare-word-no-guess": (
        ("--sample-key-pattern", "123"),
        2,
        (
            "--sample-key-pattern '123' is not a built-in pattern — use "
            "base_file_name, full_name, collapse_all_dir"
        ),
    ),
    "key-regex-no-group": (
        ("--sample-key-pattern", "[a-z]+[.]jpg$"),
        2,
        (
            "--sample-key-pattern '[a-z]+[.]jpg$' has no capture group — a regex "
            "needs one capture group, e.g. ^(.*)\\.[^.]+$"
        ),
    ),
    "missing-ext-action": (
        ("--missing-extension-action", "explode"),
        2,
        "--missing-extension-action 'explode' is not an action",
    ),
    "sample-exts-no-dot": (
        ("--sample-exts", "jpg"),
        2,
        "--sample-exts item 'jpg' must start with a dot",
    ),
    "missing-extension-abort": (
        ("--sample-exts", ".jpg,.cls", "--missing-extension-action", "abort"),
        1,
        "sample '2': no '.cls' file (--missing-extension-action abort) — fix the dataset",
    ),
    "ext": (("--ext", ".rar"), 2, "--ext '.rar' is not supported"),
    "template-two-numbers": (
        ("--shard-template", "%d-%d"),
        2,
        "--shard-template '%d-%d' is not a valid fmt template",
    ),
    "template-control-character": (
        ("--shard-template", "a\nb-%d"),
        2,
        ("--shard-template 'a\\nb-%d' would make unsafe shard names (a control character)"),
    ),
    "template-dot-dot": (
        ("--shard-template", ".."),
        2,
        (
            "--shard-template '..' would make unsafe shard names (an absolute or "
            "drive name, or a '..' part)"
        ),
    ),
    "template-hidden": (
        ("--shard-template", ".shard-%d"),
        2,
        (
            "--shard-template '.shard-%d' would make unsafe shard names (a name "
            "starting with '.', which listings hide)"
        ),
    ),
    "template-no-number": (
        ("--shard-template", "shard", "--shard-size", "1"),
        2,
        "shard template 'shard' yields 1 name(s) but the plan needs 3 shards",
    ),
    "template-exhausted": (
        ("--shard-template", "a-{0..1}", "--shard-size", "1"),
        2,
        (
            "shard template 'a-{0..1}' yields 2 name(s) but the plan needs 3 "
            "shards — widen its range or raise --shard-size"
        ),
    ),
    "template-other-ext": (
        ("--shard-template", "shard-%06d.tgz"),
        2,
        "--shard-template 'shard-%06d.tgz' ends in '.tgz' but --ext is '.tar' — use --ext .tgz",
    ),
    "template-other-ext-lz4": (
        ("--shard-template", "s-%d.tar", "--ext", ".tar.lz4"),
        2,
        "ends in '.tar' but --ext is '.tar.lz4'",
    ),
    "template-brace-expanded": (
        ("--shard-template", "shard-0", "shard-1", "shard-2", "shard-3"),
        2,
        (
            "got unexpected extra arguments 'shard-1 shard-2 shard-3' — they "
            "look like a brace template the shell expanded: quote it, e.g. "
            "--shard-template 'shard-{0..3}'"
        ),
    ),
    "template-brace-expanded-eq": (
        ("--shard-template=shard-0", "--shard-template=shard-1", "--shard-template=shard-2"),
        2,
        (
            "--shard-template is given 3 times (--shard-template=shard-0 "
            "… --shard-template=shard-2) — it looks like a brace template "
            "the shell expanded: quote it, e.g. "
            "--shard-template='shard-{0..2}'"
        ),
    ),
    "sort": (("--sort", "random"), 2, "--sort 'random' is not a sort order"),
    "sort-empty": (("--sort", ""), 2, "--sort '' is not a sort order"),
    "sort-case": (("--sort", "Alpha"), 2, "(lower case, no spaces: 'alpha')"),
    "sort-seed": (("--sort", "shuffle:abc"), 2, "--sort 'shuffle:abc' is not a sort order"),
    "sort-seed-range": (
        ("--sort", "shuffle:18446744073709551616"),
        2,
        ("--sort 'shuffle:18446744073709551616' has a seed over 9223372036854775807"),
    ),
    "jobs": (
        ("--jobs", "-1"),
        2,
        (
            "--jobs '-1' must be a whole number of at least 1, or 0 for "
            "the default (the CPUs, at most 8; 8 with an object store)"
        ),
    ),
    "compress-level": (
        ("--ext", ".tgz", "--compress-level", "12"),
        2,
        "--compress-level 12 must be a whole number from 0 to 9",
    ),
    "zip-compression": (
        ("--zip-compression", "bzip2"),
        2,
        "--zip-compression 'bzip2' must be stored or deflated",
    ),
    "checksum": (
        ("--checksum", "sha1"),
        2,
        "--checksum 'sha1' is not a checksum — use one of xxh128, blake3, sha256, md5, none",
    ),
    "executor": (("--executor", "spark"), 2, "--executor 'spark' must be local or dask"),
    "scheduler-without-dask": (("--scheduler", "tcp://127.0.0.1:8786"), 2, "needs --executor dask"),
    "gzip-library": (
        ("--ext", ".tgz", "--gzip-library", "pigz"),
        2,
        "--gzip-library 'pigz' must be one of auto, isal, zlib-ng, zlib",
    ),
    "dry-run-mode": (("--dry-run=yaml",), 2, "--dry-run='yaml' is not a dry-run mode"),
    "part-size": (("--part-size", "1MiB"), 2, "below S3's minimum part of 5MiB"),
    "compose": (("--compose", "always"), 2, "--compose 'always' is not a mode — use auto or never"),
    "compose-min-size": (
        ("--compose-min-size", "5MiB"),
        2,
        "--compose-min-size '5MiB' is below 10MiB",
    ),
    "read-buffer": (("--read-buffer", "0"), 2, "--read-buffer '0' must be more than 0 bytes"),
    "retries": (("--retries", "-1"), 2, "--retries '-1' must be a whole number of at least 0"),
    "storage-option": (
        ("--storage-option", "novalue"),
        2,
        "--storage-option 'novalue' is not KEY=VALUE",
    ),
    "ekm-json": (("--ekm", "{not-json"), 2, "inline --ekm JSON is not valid JSON"),
    "ekm-duplicate": (
        ("--ekm", '{"a-%d": ["x"], "a-%d": ["y"]}'),
        2,
        "lists format 'a-%d' more than once — merge its patterns into one list",
    ),
    "ekm-template-unsafe": (
        ("--ekm", '{"a\\nb-%d.tar": ["x"]}'),
        2,
        (
            "inline --ekm JSON: format 'a\\nb-%d.tar' would make unsafe shard "
            "names (a control character)"
        ),
    ),
    "ekm-regex-backreference": (
        ("--ekm", '{"a-%d.tar": ["(a)\\\\1"]}'),
        2,
        ("inline --ekm JSON: '(a)\\\\1' is not a valid regex (invalid escape sequence: \\1)"),
    ),
    "ekm-empty": (
        ("--ekm", ""),
        2,
        "--ekm '' is empty — give a JSON file (--ekm map.json) or inline JSON",
    ),
    "ekm-missing-file": (
        ("--ekm", "{tmp}/none.json"),
        2,
        "is neither inline JSON (starting with '{') nor an existing file",
    ),
    "prefix-nothing": (
        ("--prefix", "zzz"),
        1,
        "nothing to shard under '{src}' with prefix 'zzz': no file matches the prefix",
    ),
    "src-list-missing": (
        ("--src-list", "{tmp}/none.csv"),
        2,
        "--src-list '{tmp}/none.csv' does not exist — give an inventory file",
    ),
    "src-list-no-header": (
        ("--src-list", "{tmp}/headless.csv"),
        2,
        "--src-list '{tmp}/headless.csv' has no header with a name (or key) and a size column",
    ),
    "src-missing": (("@src={tmp}/nowhere",), 2, "does not exist — give an existing directory"),
    "src-is-file": (("@src={tmp}/afile",), 2, "is not a directory"),
    "src-protocol": (("@src=nosuch://bucket/x",), 2, "unsupported storage scheme 'nosuch://'"),
    "dst-inside-src": (("@dst={src}/a/out",), 2, "is inside the source"),
    "dst-is-file": (("@dst={tmp}/afile",), 2, "is a file — give a directory"),
    "dst-not-empty": (("@dst={tmp}/full",), 2, "is not empty — use an empty destination"),
    "dst-finished-run": (("@dst={tmp}/finished",), 2, "add --resume to finish it"),
    "resume-foreign": (("@dst={tmp}/full", "--resume"), 2, "holds no ishard run to resume"),
    "overwrite-and-resume": (
        ("@dst={tmp}/finished", "--overwrite", "--resume"),
        2,
        "--overwrite and --resume cannot be used together",
    ),
    "memory-limit-small": (
        ("--memory-limit", "100MiB"),
        2,
        "--memory-limit '100MiB' is below 128MiB",
    ),
    "memory-limit-not-size": (("--memory-limit", "lots"), 2, "--memory-limit 'lots' is not a size"),
}


def documented() -> dict[str, tuple[int, str]]:
    """Table 1 of the document: case id -> (exit code, message)."""
    rows = re.findall(
        r"^\| `([a-z0-9-]+)` \| [^|]+ \| (\d+) \| (ishard: error: [^|]+?) \|$",
        DOC.read_text(),
        flags=re.MULTILINE,
    )
    return {case: (int(code), message) for case, code, message in rows}


@pytest.fixture
def place(tmp_path) -> dict[str, str]:
    src = make_tree(tmp_path / "src", TREE)
    (tmp_path / "afile").write_bytes(b"a file")
    make_tree(tmp_path / "full", {"notes.txt": b"mine"})
    (tmp_path / "headless.csv").write_text("a/1.jpg,10\n")
    done = invoke_ishard("shard", src, tmp_path / "finished")
    assert done.returncode == 0, done.stderr
    return {"src": str(src), "tmp": str(tmp_path), "dst": str(tmp_path / "out")}


def final_names(folder: Path) -> list[str]:
    """Shards and manifests anywhere under ``folder`` (hidden run records are not output)."""
    if not folder.is_dir():
        return []
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file()
        and not p.name.startswith(".")
        and p.name != "notes.txt"
        and ".ishard-run" not in p.parts
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input(case, place, tmp_path):
    args, code, fragment = CASES[case]

    def fill(text: str) -> str:
        return text.replace("{tmp}", place["tmp"]).replace("{src}", place["src"])

    where = dict(place)
    rest = []
    for arg in args:
        if arg.startswith("@"):
            key, _, value = arg[1:].partition("=")
            where[key] = fill(value)
        else:
            rest.append(fill(arg))
    before = {d: final_names(Path(d)) for d in (where["dst"], place["src"])}
    done = invoke_ishard("shard", where["src"], where["dst"], *rest)
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ishard: error: "), done.stderr
    assert fill(fragment) in lines[0], lines[0]
    # the document shows the same line, with paths relative to the test's folder
    assert documented()[case] == (code, lines[0].replace(place["tmp"] + "/", "")), lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""
    for folder, names in before.items():  # nothing new under a final name
        assert final_names(Path(folder)) == names


def test_the_document_lists_exactly_these_cases():
    rows = re.findall(r"^\| `([a-z0-9-]+)` \|", DOC.read_text(), flags=re.MULTILINE)
    tested = re.findall(
        r"^\| [^|]+ \| [^|]+ \| [^|]+ \| `(tests/[^`]+)` \|", DOC.read_text(), flags=re.MULTILINE
    )
    assert sorted(rows) == sorted(CASES)
    assert len(rows) + len(tested) >= 30
    for ref in tested:  # rows answered by tests elsewhere name them; they must exist
        path, _, name = ref.partition("::")
        assert f"def {name}(" in (DOC.parent.parent / path).read_text(), ref


@pytest.mark.parametrize(
    ("seed", "ok"),
    [
        ("9223372036854775807", True),
        ("0", True),
        ("9223372036854775808", False),
        ("9" * 5000, False),
    ],
)
def test_shuffle_seed_range_is_gos_int64(seed, ok):
    """The library gives the CLI's answer; a 5000-digit seed is refused, not a ValueError."""
    if ok:
        assert make_options(sort=f"shuffle:{seed}").order.seed == int(seed)
        return
    with pytest.raises(UsageError) as err:
        make_options(sort=f"shuffle:{seed}")
    assert "has a seed over 9223372036854775807" in str(err.value)
