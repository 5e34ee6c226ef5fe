"""The local walk's directory reader: its native and Python forms read a directory alike, and
the walk lists through either exactly what it lists through the other."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
from functools import partial
from pathlib import Path

import pytest
from helpers import without_root_powers

import ishard
from ishard.model import Tally
from ishard.store.local import scan as localscan
from ishard.store.local.walk import LINK_SEEN, _LocalWalk, local_stamp

SOURCE = Path(localscan.__file__).with_name("_scan.c")


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """The native reader: the one built with ishard, else built here from ``_scan.c``."""
    if localscan.native is not None:
        return localscan.native
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler: the native reader cannot be built here")
    out = tmp_path_factory.mktemp("native") / ("_scan" + sysconfig.get_config_var("EXT_SUFFIX"))
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", f"-I{include}", str(SOURCE), "-o", str(out)],
        check=True,
    )
    spec = importlib.util.spec_from_file_location("_scan", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readers(native):
    return {"native": partial(localscan.scan_natively, reader=native),
            "python": localscan.scan_in_python}  # fmt: skip


def make_mixed_tree(root: Path) -> None:
    """Nested folders, non-ASCII and undecodable names, hidden names, unsafe names, links to
    a file, to a folder, outside the tree and to nothing, a FIFO and a socket."""
    for name in ["a/1.jpg", "a/b/2.jpg", "a/b/c/3.jpg", "a-b/4.jpg", "é/5.jpg", "a.txt",
                 "a/.hid.jpg", ".hidden/6.jpg", "a/tab\t.jpg", "a/back\\..\\x.jpg", "z.jpg",
                 "a/b/empty.jpg"]:  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x" * len(name))
    raw = os.fsencode(root)
    os.mkdir(os.path.join(raw, b"q\xff"))
    with open(os.path.join(raw, b"q\xff", b"r\xfe.jpg"), "wb") as f:
        f.write(b"yy")
    os.symlink(root / "a" / "1.jpg", root / "a" / "link.jpg")
    os.symlink(root / "a" / "b", root / "linked")
    os.symlink("/", root / "a" / "outside")
    os.symlink(root / "nothing", root / "a" / "dangling.jpg")
    os.mkfifo(root / "a" / "pipe.jpg")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "a" / "sock.jpg"))
    os.utime(root / "z.jpg", ns=(-1_500_000_001, -1_500_000_001))  # before 1970


def test_native_and_python_reads_of_a_directory_agree(tmp_path, native):
    make_mixed_tree(tmp_path)
    for folder in [
        tmp_path,
        tmp_path / "a",
        tmp_path / "a" / "b",
        tmp_path / os.fsdecode(b"q\xff"),
    ]:
        seen = {name: read(folder) for name, read in readers(native).items()}
        assert seen["native"].children == seen["python"].children
        assert (seen["native"].stats == seen["python"].stats).all()
    folder = seen["native"]
    a = localscan.scan_natively(tmp_path / "a", native)
    kinds = {entry: kind for entry, kind, _ in a.children}
    assert kinds["b/"] == localscan.KIND_DIR and kinds["1.jpg"] == localscan.KIND_FILE
    assert kinds["link.jpg"] == kinds["dangling.jpg"] == kinds["outside"] == localscan.KIND_LINK
    assert kinds["pipe.jpg"] == kinds["sock.jpg"] == localscan.KIND_SPECIAL
    assert [entry for entry, _, _ in folder.children] == ["r\udcfe.jpg"]
    top = localscan.scan_natively(tmp_path, native)
    names = [entry for entry, _, _ in top.children]
    assert names == sorted(names, key=lambda n: n.encode("utf-8", "surrogateescape"))
    assert names.index("a-b/") < names.index("a.txt") < names.index("a/")  # '-' < '.' < '/'


def test_a_files_columns_are_its_lstat(tmp_path, native):
    """Size, whole-second mtime (toward minus infinity before 1970) and the stamp the walk
    always gave (``local_stamp``), whichever reader read the folder."""
    make_mixed_tree(tmp_path)
    for read in readers(native).values():
        folder = read(tmp_path)
        rows = {entry: row for entry, _, row in folder.children}
        for name in ["a.txt", "z.jpg"]:
            st = os.lstat(tmp_path / name)
            sizes, mtimes, stamps = folder.columns([rows[name]])
            assert sizes == [st.st_size]
            assert mtimes == [st.st_mtime_ns // 1_000_000_000]
            assert stamps == [local_stamp(st.st_mtime_ns, st.st_ino)]
    assert mtimes == [-2]


@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("include_hidden", [False, True])
@pytest.mark.parametrize("prefix", ["", "a/", "a/b", ".hidden/", "q"])
def test_the_walk_lists_alike_through_either_reader(tmp_path, native, follow, include_hidden,
                                                    prefix):  # fmt: skip
    make_mixed_tree(tmp_path)
    listed = {}
    for name, read in readers(native).items():
        tally = Tally()
        walk = _LocalWalk(tmp_path, str(tmp_path), prefix, include_hidden, follow, tally, None)
        walk.read = read
        walk.run()
        listed[name] = (walk.entries.rows, tally.freeze())
    assert listed["native"] == listed["python"]
    rows, _ = listed["native"]
    names = [row[0] for row in rows]
    assert all(n.startswith(prefix) for n in names)
    if not follow:  # (files reached through links come last)
        assert names == sorted(names, key=lambda n: n.encode("utf-8", "surrogateescape"))
    if prefix == "":
        assert ("a/b/c/3.jpg" in names) and ("a/pipe.jpg" not in names)
        assert ("a/link.jpg" in names) == follow and "linked/2.jpg" not in names
        reasons = {s.reason for s in listed["native"][1]}
        assert (LINK_SEEN in reasons) == follow  # 'linked' leads to 'a/b/', listed already
        assert (".hidden/6.jpg" in names) == include_hidden


UNREADABLE = """
import sys
from functools import partial
from importlib import util
from ishard.errors import SourceError
from ishard.model import Tally
from ishard.store.local import scan
from ishard.store.local.walk import _LocalWalk
spec = util.spec_from_file_location("_scan", sys.argv[2])
native = util.module_from_spec(spec)
spec.loader.exec_module(native)
for read in (partial(scan.scan_natively, reader=native), scan.scan_in_python):
    walk = _LocalWalk(__import__("pathlib").Path(sys.argv[1]), sys.argv[1], "", False, False,
                      Tally(), None)
    walk.read = read
    try:
        walk.run()
    except SourceError as err:
        print(err)
"""


@pytest.mark.parametrize("mode", [0o000, 0o444])
def test_an_unreadable_folder_fails_alike_through_either_reader(tmp_path, native, mode):
    """A folder that cannot be listed (mode 000) or whose entries cannot be looked at (no
    search permission): one error naming it, the same through either reader."""
    make_mixed_tree(tmp_path / "src")
    locked = tmp_path / "src" / "a" / "b"
    os.chmod(locked, mode)
    try:
        done = subprocess.run(
            [*without_root_powers(), sys.executable, "-c", UNREADABLE, str(tmp_path / "src"),
             native.__file__],
            capture_output=True, text=True, check=False, timeout=120,
            env={**os.environ, "PYTHONPATH": str(Path(ishard.__file__).parents[1])},
        )  # fmt: skip
    finally:
        os.chmod(locked, 0o755)
    message = (
        f"cannot read directory 'a/b/' in source {str(tmp_path / 'src')!r}: Permission denied"
        " — fix its permissions or narrow --prefix"
    )
    assert done.stdout.splitlines() == [message, message], done.stderr
