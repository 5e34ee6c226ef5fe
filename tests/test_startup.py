"""What the command loads: duckdb (71 MB) and numpy (71 MB) only where a run needs them, so
``ishard --help``, ``ls`` and ``verify`` start without them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import FIXTURES

# the command in a fresh interpreter (its own process: nothing imported before), then which of
# the heavy libraries it left loaded
LOADED = (
    "import json, sys\n"
    "from ishard.cli import main\n"
    "code = 0\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as stop:\n"
    "    code = stop.code\n"
    "heavy = ('duckdb', 'numpy')\n"
    "print(json.dumps({'code': code, 'loaded': [m for m in heavy if m in sys.modules]}))\n"
)


def loaded_by(*args: str) -> list[str]:
    """The heavy libraries ``ishard ARGS`` imported, checking that it succeeded."""
    ran = subprocess.run(
        [sys.executable, "-c", LOADED, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    result = json.loads(ran.stdout.splitlines()[-1])
    assert result["code"] in (0, None), ran.stderr
    return result["loaded"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A small local run's destination."""
    dst = tmp_path_factory.mktemp("startup") / "out"
    loaded = loaded_by("shard", FIXTURES / "imagenet", dst, "--shard-size", "100KiB", "-q")
    assert "duckdb" in loaded  # it writes the sample index (samples.parquet)
    return dst


def test_a_small_local_run_without_a_sample_index_leaves_duckdb_out(tmp_path):
    args = ("shard", FIXTURES / "imagenet", tmp_path / "out", "--no-sample-index", "-q")
    assert "duckdb" not in loaded_by(*args)
    assert not (tmp_path / "out" / "samples.parquet").exists()


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("shard", "--help")])
def test_help_and_version_load_neither(args):
    assert loaded_by(*args) == []


def test_ls_and_verify_load_neither(dataset):
    shard = min(dataset.glob("*.tar"))
    assert loaded_by("ls", shard) == []
    assert loaded_by("ls", shard, "--samples") == []
    assert loaded_by("verify", dataset, "-q") == []
    assert loaded_by("verify", dataset, "--deep", "-q") == []


def test_small_local_dry_run_leaves_duckdb_out():
    dry = loaded_by("shard", FIXTURES / "imagenet", "--dry-run=summary")
    assert "duckdb" not in dry
