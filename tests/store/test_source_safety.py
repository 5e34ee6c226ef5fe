"""One path rule for every local read, whatever named the file (a walk, an inventory) and whatever
changed after listing: no symbolic link followed without --follow-symlinks (and never out of the
source), regular files only, opened so that nothing can block for good."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from helpers import make_tree, run_ishard

import ishard
from ishard.errors import SourceError
from ishard.progress import Progress

# Every finished destination a test here leaves must pass `ishard verify --deep`.
pytestmark = pytest.mark.usefixtures("every_destination_verifies")

SECRET = b"TOP SECRET, NEVER SHIP"
HANG_GUARD = 120  # seconds: only a hang (the bug) ever gets near this


def inventory(path: Path, rows: dict[str, int]) -> Path:
    path.write_text("".join(json.dumps({"name": n, "size": s}) + "\n" for n, s in rows.items()))
    return path


def no_secret_anywhere(dst: Path) -> None:
    """No file in DST (shards, temp files, records) holds the outside file's bytes."""
    for path in dst.rglob("*") if dst.exists() else ():
        if path.is_file():
            assert SECRET not in path.read_bytes(), path


def finals(dst: Path) -> list[str]:
    """Shards and manifest under final names (hidden run records and temp files excluded)."""
    return (
        sorted(p.name for p in dst.iterdir() if not p.name.startswith(".")) if dst.exists() else []
    )


@pytest.fixture
def outside(tmp_path) -> Path:
    return make_tree(tmp_path / "outside", {"key.txt": SECRET, "d/key.txt": SECRET})


@pytest.fixture
def src(tmp_path) -> Path:
    return make_tree(tmp_path / "src", {"a/1.jpg": b"one", "a/2.jpg": b"two", "b/3.jpg": b"3"})


def run(*args) -> subprocess.CompletedProcess:
    """The CLI with a hang guard (a FIFO used to block it for good)."""
    return run_ishard(*args, timeout=HANG_GUARD)


def run_python(*args) -> subprocess.CompletedProcess:
    """This Python with ``args``, under the same hang guard."""
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        check=False,
        text=True,
        timeout=HANG_GUARD,
    )


def test_src_list_naming_a_link_out_of_src_is_refused(src, outside, tmp_path):
    """Finding: --src-list put a file outside SRC into a shard through a link, without
    --follow-symlinks. Now the read refuses the link, naming it; nothing is shipped."""
    os.symlink(outside / "key.txt", src / "a" / "link.jpg")
    inv = inventory(tmp_path / "l.jsonl", {"a/1.jpg": 3, "a/link.jpg": len(SECRET)})
    for extra in ((), ("--follow-symlinks",)):
        dst = tmp_path / f"out{len(extra)}"
        done = run("shard", src, dst, "--src-list", inv, "--no-progress", *extra)
        assert done.returncode == 1, done.stderr
        line = done.stderr.strip()
        assert line.count("\n") == 0 and line.startswith("ishard: error: source file 'a/link.jpg'")
        assert ("leads outside the source" if extra else "is a symbolic link") in line
        assert "Traceback" not in done.stderr
        assert finals(dst) == []
        no_secret_anywhere(dst)


def test_src_list_through_a_linked_directory_is_refused(src, outside, tmp_path):
    """A link in an intermediate directory is caught too (the final name is a plain file)."""
    os.symlink(outside / "d", src / "linked")
    os.symlink("a", src / "inner")  # a link that stays inside SRC
    inv = inventory(tmp_path / "l.jsonl", {"a/1.jpg": 3, "linked/key.txt": len(SECRET)})
    done = run("shard", src, tmp_path / "out", "--src-list", inv, "--no-progress")
    assert done.returncode == 1
    assert (
        "source file 'linked/key.txt' is reached through the symbolic link 'linked'" in done.stderr
    )
    done = run(
        "shard", src, tmp_path / "out2", "--src-list", inv, "--no-progress", "--follow-symlinks"
    )
    assert done.returncode == 1 and "'linked/key.txt' leads outside the source" in done.stderr
    for dst in ("out", "out2"):
        assert finals(tmp_path / dst) == []
        no_secret_anywhere(tmp_path / dst)
    # links that stay inside SRC: refused without --follow-symlinks, read with it
    inv = inventory(tmp_path / "in.jsonl", {"inner/1.jpg": 3, "b/3.jpg": 1})
    done = run("shard", src, tmp_path / "out3", "--src-list", inv, "--no-progress")
    assert done.returncode == 1 and "through the symbolic link 'inner'" in done.stderr
    done = run(
        "shard",
        src,
        tmp_path / "out4",
        "--src-list",
        inv,
        "--no-progress",
        "--follow-symlinks",
        "--member-names",
        "original",
    )
    assert done.returncode == 0, done.stderr
    with tarfile.open(next((tmp_path / "out4").glob("*.tar"))) as tar:
        assert tar.extractfile("inner/1.jpg").read() == b"one"


def test_a_fifo_named_in_an_inventory_fails_at_once(src, tmp_path):
    """Finding: a FIFO in an inventory hung the run for good, deaf to Ctrl-C. Now it is opened
    without blocking and refused as not a regular file."""
    os.mkfifo(src / "a" / "pipe.jpg")
    inv = inventory(tmp_path / "l.jsonl", {"a/1.jpg": 3, "a/pipe.jpg": 10})
    for ext in (".tar", ".tgz", ".zip"):
        dst = tmp_path / f"out{ext}"
        done = run("shard", src, dst, "--src-list", inv, "--no-progress", "--ext", ext)
        assert done.returncode == 1, done.stderr
        assert (
            "cannot read 'a/pipe.jpg' from the source: it is a FIFO, not a regular file"
            in done.stderr
        )
        assert finals(dst) == []
        # the lock is free again: the same destination takes a good run
        good = run("shard", src, dst, "--no-progress", "--ext", ext, "--overwrite")
        assert good.returncode == 0, good.stderr


class Swap(Progress):
    """Once the plan is made (before any shard is written), replace a listed file."""

    def __init__(self, path: Path, into) -> None:
        self.path, self.into = path, into

    def planned(self, shards: int, nbytes: int) -> None:
        self.path.unlink()
        self.into(self.path)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_file_swapped_for_a_link_or_fifo_after_listing_is_refused(src, outside, tmp_path, jobs):
    """Finding: a file replaced by a symlink between listing and reading was followed."""
    swaps = {
        "link": (lambda p: os.symlink(outside / "key.txt", p), "is a symbolic link"),
        "fifo": (os.mkfifo, "it is a FIFO, not a regular file"),
        "dir-link": (None, "is reached through the symbolic link 'a'"),
    }
    for what, (into, message) in swaps.items():
        tree = make_tree(tmp_path / f"src-{what}-{jobs}", {"a/1.jpg": b"one", "b/3.jpg": b"3"})
        dst = tmp_path / f"out-{what}-{jobs}"
        if into is None:  # the whole directory becomes a link to a copy outside
            make_tree(tmp_path / f"copy-{what}-{jobs}", {"1.jpg": SECRET[:3]})

            class DirSwap(Progress):
                def planned(self, shards, nbytes, tree=tree, copy=tmp_path / f"copy-{what}-{jobs}"):
                    (tree / "a" / "1.jpg").unlink()
                    (tree / "a").rmdir()
                    os.symlink(copy, tree / "a")

            hook = DirSwap()
        else:
            hook = Swap(tree / "a" / "1.jpg", into)
        with pytest.raises(SourceError, match=message) as err:
            ishard.shard(tree, dst, progress=hook, jobs=jobs, shard_size="1B")
        assert "'a/1.jpg'" in str(err.value)
        assert [n for n in finals(dst) if n.endswith(".tar")] in ([], ["shard-000001.tar"])
        assert "manifest.json" not in finals(dst)
        no_secret_anywhere(dst)


# The same swaps through the command: the CLI with a progress hook that swaps the file once
# the plan is made (the moment between listing and reading, hit for certain).
SWAP_THEN_RUN = """
import os, sys
from ishard import cli
from ishard.progress import Progress
kind, path, target = sys.argv[1:4]
class Swap(Progress):
    def planned(self, shards, nbytes):
        if kind == "dir-link":
            os.unlink(os.path.join(path, "1.jpg"))
            os.rmdir(path)
            os.symlink(target, path)
            return
        os.unlink(path)
        os.symlink(target, path) if kind == "link" else os.mkfifo(path)
cli.shard.make_progress = lambda *a, **k: Swap()
cli.main(sys.argv[4:])
"""


@pytest.mark.parametrize(
    "kind,message",
    [
        ("link", "source file 'a/1.jpg' is a symbolic link, which ishard does not follow"),
        ("fifo", "cannot read 'a/1.jpg' from the source: it is a FIFO, not a regular file"),
        ("dir-link", "source file 'a/1.jpg' is reached through the symbolic link 'a'"),
    ],
)
def test_cli_a_file_swapped_after_listing_is_refused_in_one_line(kind, message, outside, tmp_path):
    tree = make_tree(tmp_path / "src", {"a/1.jpg": b"one", "b/3.jpg": b"3"})
    copy = make_tree(tmp_path / "copy", {"1.jpg": SECRET[:3]})
    path, target = {
        "link": (tree / "a" / "1.jpg", outside / "key.txt"),
        "fifo": (tree / "a" / "1.jpg", ""),
        "dir-link": (tree / "a", copy),
    }[kind]
    dst = tmp_path / "out"
    done = run_python(
        "-c",
        SWAP_THEN_RUN,
        kind,
        path,
        target,
        "shard",
        tree,
        dst,
        "--shard-size",
        "1B",
        "--jobs",
        "2",
    )
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("ishard: error: " + message), line
    assert "manifest.json" not in finals(dst)
    no_secret_anywhere(dst)


# ---------------------------------------------------------------- inventory rows

BAD_ROWS = {
    # id: (inventory file name, its bytes, the message after "--src-list 'NAME' line N: ")
    "jsonl-not-utf8": (
        "l.jsonl",
        (b'{"name": "a/1.jpg", "size": 3}\n{"name": "a/\xff.jpg", "size": 3}\n'),
        "line 2: not UTF-8 (byte 0xff at column 13) — write the inventory as UTF-8",
    ),
    "csv-not-utf8": (
        "l.csv",
        b"name,size\na/1.jpg,3\na/\xfe.jpg,3\n",
        "line 3: not UTF-8 (byte 0xfe at column 3)",
    ),
    "name-is-a-list": (
        "l.jsonl",
        b'{"name": ["a/1.jpg"], "size": 3}\n',
        "line 1: the name is a list, not a string",
    ),
    "name-is-an-object": (
        "l.jsonl",
        (b'{"name": "a/1.jpg", "size": 3}\n{"name": {"a": 1}, "size": 3}\n'),
        "line 2: the name is a dict, not a string",
    ),
    "name-missing": ("l.jsonl", b'{"size": 3}\n', "line 1: the name is missing"),
    "row-is-a-list": (
        "l.jsonl",
        b'{"name": "a/1.jpg", "size": 3}\n["a/2.jpg", 3]\n',
        "line 2: a JSON list, not an object",
    ),
    "size-float": (
        "l.jsonl",
        b'{"name": "a/1.jpg", "size": 2.5}\n',
        "line 1: the size is 2.5, not a whole number of bytes (0 or more)",
    ),
    "size-negative": (
        "l.csv",
        b"name,size\na/1.jpg,3\na/2.jpg,-3\n",
        "line 3: the size is '-3', not a whole number of bytes (0 or more)",
    ),
    "size-negative-json": (
        "l.jsonl",
        b'{"name": "a/1.jpg", "size": -1}\n',
        "line 1: the size is -1, not a whole number",
    ),
    "size-bool": ("l.jsonl", b'{"name": "a/1.jpg", "size": true}\n', "line 1: the size is True"),
    "field-over-128KiB-json": (
        "l.jsonl",
        b'{"name": "' + b"n" * (129 << 10) + b'", "size": 3}\n',
        "line 1: the name is longer than 128 KiB",
    ),
    "field-over-128KiB-csv": (
        "l.csv",
        b'name,size\n"' + b"n" * (129 << 10) + b'",3\n',
        "line 2: a field is longer than 128 KiB",
    ),
    "size-2^63-csv": (
        "l.csv",
        b"name,size\na/1.jpg,9223372036854775807\na/2.jpg,9223372036854775808\n",
        (
            "line 3: the size is 9223372036854775808, over 9223372036854775807 (2^63-1), "
            "the most bytes a file can have — give each file's size in bytes, e.g. 123"
        ),
    ),
    "size-2^63-json": (
        "l.jsonl",
        b'{"name": "a/1.jpg", "size": 9223372036854775808}\n',
        "line 1: the size is 9223372036854775808, over 9223372036854775807 (2^63-1)",
    ),
    "size-past-64-bits-json": (
        "l.jsonl",
        b'{"name": "a/1.jpg", "size": 92233720368547758080000}\n',
        "line 1: the size is 92233720368547758080000, over 9223372036854775807 (2^63-1)",
    ),
    "size-exponent-json": (
        "l.jsonl",
        b'{"name": "a/1.jpg", "size": 25e2}\n',
        "line 1: the size is 25e2, not a whole number of bytes (0 or more)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_inventory_rows_that_break_the_format_are_one_clear_line(case, src, tmp_path):
    """Finding: such rows gave 'unexpected …' or passed. Each is now one line, exit 2."""
    name, data, message = BAD_ROWS[case]
    inv = tmp_path / name
    inv.write_bytes(data)
    done = run("shard", src, tmp_path / "out", "--src-list", inv, "--no-progress")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"ishard: error: --src-list '{inv}' {message}"), done.stderr
    assert done.stderr.count("\n") == 1 and "unexpected" not in done.stderr
    assert finals(tmp_path / "out") == []


@pytest.mark.parametrize("start", [b'{"name": "', b"name,size\n"])
def test_an_inventory_without_newlines_fails_at_once_in_bounded_memory(start, src, tmp_path):
    """Finding: a 7 GB line grew memory without bound. A 600 MiB line (a sparse file: cheap to
    make) now stops at the first MiB with the line-length error; the run's peak memory stays
    far below the line's size."""
    inv = tmp_path / ("l.jsonl" if start.startswith(b"{") else "l.csv")
    with open(inv, "wb") as f:
        f.write(start)
        f.truncate(600 << 20)  # NUL bytes, no newline
    # The run is the only child of a small watcher process, which reports that child's peak
    # memory (this process's own children include every earlier test's runs and servers).
    watcher = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(done.returncode, peak)\n"
        "sys.stderr.write(done.stderr)\n"
    )
    command = ("shard", src, tmp_path / "out", "--src-list", inv, "--no-progress")
    done = run_python("-c", watcher, sys.executable, "-m", "ishard", *command)
    code, peak_kib = map(int, done.stdout.split())
    assert code == 2, done.stderr
    line = 2 if start.startswith(b"name") else 1
    assert done.stderr == (
        f"ishard: error: --src-list '{inv}' line {line}: longer than 1 MiB (no "
        "end of line) — an inventory has one file per line; check that this "
        "is one\n"
    )
    assert peak_kib / 1024 < 400, peak_kib / 1024  # the line alone is 600 MiB


@pytest.mark.parametrize("name", ["l.csv", "l.jsonl"])
def test_an_inventory_after_a_byte_order_mark_is_read(name, src, tmp_path):
    """Finding: a UTF-8 byte order mark (Excel's "CSV UTF-8") before the header made the CSV
    inventory 'have no header'. It is read as the same file without the mark."""
    inv = tmp_path / name
    text = (
        "name,size\na/1.jpg,3\nb/3.jpg,1\n"
        if name.endswith(".csv")
        else '{"name": "a/1.jpg", "size": 3}\n{"name": "b/3.jpg", "size": 1}\n'
    )
    inv.write_bytes(b"\xef\xbb\xbf" + text.encode())
    done = run(
        "shard",
        src,
        tmp_path / "out",
        "--src-list",
        inv,
        "--no-progress",
        "--member-names",
        "original",
    )
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / "out" / "shard-000000.tar") as tar:
        assert sorted(tar.getnames()) == ["a/1.jpg", "b/3.jpg"]


# ---------------------------------------------------------------- names that are not UTF-8


def undecodable(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def test_names_that_are_not_utf8_are_shown_escaped_and_never_crash_a_run(tmp_path):
    """Finding: a non-UTF-8 name among the left-out files crashed the run after every shard
    was written (no manifest; --resume and --dry-run=json the same). Such names are now shown
    with \\xNN escapes in the manifest, the summaries, the dry runs, and a sharded one keeps
    its exact bytes in the archive."""
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one", "a/1.cls": b"c", "a/2.jpg": b"two"})
    top = os.fsencode(src)
    for raw, data in (
        (b"a/.hidden\xff.jpg", b"h"),
        (b"a/unsafe\xfe\n.jpg", b"u"),
        (b"a/3.\xfdx", b"x"),  # its sample is excluded below (no .cls)
        (b"a/ok\xfc.jpg", b"ok"),
        (b"a/ok\xfc.cls", b"k"),
    ):
        fd = os.open(top + b"/" + raw, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, data)
        os.close(fd)
    opts = (
        "--sample-exts",
        ".jpg,.cls",
        "--missing-extension-action",
        "exclude",
        "--no-progress",
        "--member-names",
        "original",
    )
    dst = tmp_path / "out"
    done = run("shard", src, dst, *opts, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    examples = sorted(e for s in summary["skipped"] for e in s["examples"])
    assert r"a/.hidden\xff.jpg" in examples and "a/unsafe\\xfe\n.jpg" in examples
    assert r"a/3.\xfdx" in examples
    manifest = json.loads((dst / "manifest.json").read_text(encoding="utf-8"))
    shown = [e for s in manifest["ishard"]["skipped"] for e in s["examples"]]
    assert r"a/.hidden\xff.jpg" in shown
    with tarfile.open(next(dst.glob("*.tar")), encoding="utf-8", errors="surrogateescape") as tar:
        members = tar.getnames()
        assert undecodable(b"a/ok\xfc.jpg") in members and len(members) == 4
        assert tar.extractfile(undecodable(b"a/ok\xfc.jpg")).read() == b"ok"
    extract = tmp_path / "x"
    extract.mkdir()
    tar_bin = next(dst.glob("*.tar"))
    subprocess.run(["tar", "-xf", str(tar_bin), "-C", str(extract)], check=True)
    with open(os.fsencode(extract) + b"/a/ok\xfc.jpg", "rb") as f:
        assert f.read() == b"ok"
    # the dry runs: JSON parses, text shows the escapes
    dry = run("shard", src, "--dry-run=json", *opts)
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    names = [f["name"] for sh in plan["shards"] for s in sh["samples"] for f in s["files"]]
    assert r"a/ok\xfc.jpg" in names
    text = run("shard", src, "--dry-run=files", *opts)
    assert text.returncode == 0, text.stderr
    assert r"a/ok\xfc.jpg" in text.stdout and r"'a/.hidden\xff.jpg'" in text.stdout
    # --resume rewrites the manifest; verify reads everything back
    again = run("shard", src, dst, *opts, "--resume")
    assert again.returncode == 0, again.stderr
    for deep in ((), ("--deep",)):
        checked = run("verify", dst, *deep)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "all ok" in checked.stdout


def test_an_inventory_name_with_a_lone_surrogate_is_one_clear_line(tmp_path, src):
    inv = tmp_path / "l.jsonl"
    inv.write_text('{"name": "a/1.jpg", "size": 3}\n{"name": "a/\\ud800.jpg", "size": 3}\n')
    done = run("shard", src, tmp_path / "out", "--src-list", inv, "--no-progress")
    assert done.returncode == 2
    assert f"--src-list '{inv}' line 2: the name has a lone surrogate (\\ud800)" in done.stderr


# ---------------------------------------------------------------- names that collide on extraction

NFC, NFD = "caf\u00e9", "cafe\u0301"
LONG = "n" * 252 + ".jpg"  # 256 bytes
LONG_UTF8 = "\u00e9" * 126 + ".jpg"  # 130 characters, 256 bytes


def write_local(root: Path, names: list[str]) -> None:
    for name in names:
        make_tree(root, {name: name.encode()})


COLLISIONS = {
    # id: (local files, inventory names (None: walk the tree), extra options, message part)
    "repeated-slash": (
        ["a/b.jpg", "c/d.jpg"],
        ["a/b.jpg", "a//b.jpg", "c/d.jpg"],
        [],
        (
            "member names 'a//b.jpg' and 'a/b.jpg' would extract to one file (they "
            "differ only in repeated slashes or './' parts)"
        ),
    ),
    "dot-part": (
        ["a/b.jpg"],
        ["a/b.jpg", "a/./b.jpg"],
        ["--include-hidden"],
        "member names 'a/./b.jpg' and 'a/b.jpg' would extract to one file",
    ),
    "nfc-nfd": (
        [f"u/{NFC}.jpg", f"u/{NFD}.jpg"],
        None,
        [],
        (
            "member names 'u/cafe\\u0301.jpg' and 'u/caf\\xe9.jpg' would extract to one "
            "file (the same text in two Unicode normalisations, composed and decomposed)"
        ),
    ),
    "nfc-nfd-backslash": (
        [f"w/x\\{NFC}.jpg", f"w/x\\{NFD}.jpg"],
        None,
        [],
        (
            "member names 'w/x\\\\cafe\\u0301.jpg' and 'w/x\\\\caf\\xe9.jpg' would "
            "extract to one file"
        ),
    ),  # a backslash shown as \\, once
    "case-across-shards": (
        ["A.jpg", "B.jpg", "a.jpg"],
        None,
        ["--shard-size", "1B"],
        (
            "member names 'A.jpg' and 'a.jpg' would extract to one file (they "
            "differ only in case, which macOS and Windows ignore)"
        ),
    ),
    "case-directories": (
        ["Train/x.jpg", "train/x.jpg"],
        None,
        [],
        "member names 'Train/x.jpg' and 'train/x.jpg'",
    ),
    "case-one-sample": (["e.JPG", "e.jpg"], None, [], "member names 'e.JPG' and 'e.jpg'"),
    "case-sample-keys": (
        ["x/A.jpg", "y/a.jpg"],
        None,
        ["--member-names", "sample"],
        "member names 'A.jpg' and 'a.jpg' would extract to one file",
    ),
    "file-and-directory": (
        ["a/b.jpg"],
        ["a/b.jpg", "x/y", "x/y/z.jpg"],
        [],
        (
            "member name 'x/y' is a file, but 'x/y/z.jpg' needs a directory of "
            "that name, so they cannot both be extracted"
        ),
    ),
    "file-and-directory-case": (
        ["a/b.jpg"],
        ["a/b.jpg", "X/Y", "x/y/z/w.jpg"],
        [],
        "member name 'X/Y' is a file, but 'x/y/z/w.jpg' needs a directory",
    ),
    "long-part": (
        ["a/b.jpg"],
        ["a/b.jpg", f"d/{LONG}"],
        [],
        (
            f"member name 'd/{LONG[:38]}…{LONG[-30:]}' has a part of 256 bytes, more "
            "than the 255 most file systems allow, so it cannot be extracted"
        ),
    ),
    "long-part-utf8": (
        ["a/b.jpg"],
        ["a/b.jpg", f"{LONG_UTF8}/x.jpg"],
        [],
        (f"member name '{LONG_UTF8[:40]}…{LONG_UTF8[-24:]}/x.jpg' has a part of 256 bytes"),
    ),
}


@pytest.mark.parametrize("case", sorted(COLLISIONS))
def test_names_that_collide_on_extraction_are_refused_before_writing(case, tmp_path):
    """Finding: names that extract to one file (or cannot be created) were written without a
    word. The whole plan is checked (users extract every shard into one folder): exit 1, both
    names in the line, nothing written; the dry run says the same."""
    files, listed, extra, message = COLLISIONS[case]
    if "--member-names" not in extra:  # source paths, unless the case is about sample names
        extra = [*extra, "--member-names", "original"]
    src = tmp_path / "src"
    write_local(src, files)
    if listed is not None:
        inv = tmp_path / "l.jsonl"
        inv.write_text("".join(json.dumps({"name": n, "size": 7}) + "\n" for n in listed))
        extra = [*extra, "--src-list", str(inv)]
    for args in ([tmp_path / "out"], ["--dry-run"]):
        done = run("shard", src, *args, "--no-progress", *extra)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.startswith(f"ishard: error: {message}"), done.stderr
        assert done.stderr.count("\n") == 1 and done.stdout == ""
    assert finals(tmp_path / "out") == []


def test_names_that_differ_in_more_than_case_or_form_still_shard_and_extract_apart(tmp_path):
    src = tmp_path / "src"
    names = [
        "a/b.jpg",
        "a/b.jpg.x",
        "A2/b.jpg",
        f"u/{NFC}.jpg",
        f"v/{NFD}.jpg",
        "n" * 200 + ".jpg",
        "c/d",
        "c/de/f.jpg",
    ]
    write_local(src, names)
    done = run(
        "shard",
        src,
        tmp_path / "out",
        "--no-progress",
        "--shard-size",
        "1B",
        "--member-names",
        "original",
    )
    assert done.returncode == 0, done.stderr
    target = tmp_path / "x"
    target.mkdir()
    for shard in (tmp_path / "out").glob("*.tar"):
        subprocess.run(["tar", "-xf", str(shard), "-C", str(target)], check=True)
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == sorted(
        names
    )


def test_names_that_are_not_utf8_print_on_a_strict_terminal(tmp_path):
    """Where stdout refuses undecodable bytes (a UTF-8 locale's strict encoding), the dry run,
    ls and ls --samples still print, with \\xNN escapes."""
    src = make_tree(tmp_path / "src", {"a/1.jpg": b"one"})
    with open(os.fsencode(src) + b"/a/ok\xfe.jpg", "wb") as f:
        f.write(b"two")
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    done = run_ishard(
        "shard", src, tmp_path / "out", "--no-progress", "--member-names", "original", env=env
    )
    assert done.returncode == 0, done.stderr
    shard = next((tmp_path / "out").glob("*.tar"))
    for args in (
        ["shard", src, "--dry-run=show_keys", "--member-names", "original"],
        ["ls", shard],
        ["ls", shard, "--samples"],
    ):
        out = run_ishard(*args, env=env)
        assert out.returncode == 0, out.stderr
        assert r"a/ok\xfe.jpg" in out.stdout
