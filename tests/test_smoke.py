"""A first end-to-end check: the installed command shards a small tree that tar reads back."""

import tarfile

from helpers import make_tree, run_ishard


def test_shard_small_tree_reads_back_with_tarfile(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 300, "a/1.xml": 20, "b/2.jpg": 500})
    result = run_ishard("shard", src, tmp_path / "out", "--shard-size", "100B")
    assert result.returncode == 0, result.stderr
    with tarfile.open(tmp_path / "out" / "shard-000000.tar") as tar:  # <sample key>.<extension>
        assert tar.getnames() == ["1.jpg", "1.xml"]
        assert tar.extractfile("1.jpg").read() == (src / "a/1.jpg").read_bytes()
    with tarfile.open(tmp_path / "out" / "shard-000001.tar") as tar:
        assert tar.getnames() == ["2.jpg"]
