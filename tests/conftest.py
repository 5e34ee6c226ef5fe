"""Shared test helpers: run the installed command, check its one-line errors, build small
source trees, read what was written."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import io
import os
import shutil
import signal
import subprocess
import sys
import time
import types
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Generic, TypeVar

import lz4.frame
import zstandard
import pytest

pytest_plugins = ["s3server", "azurite", "gcs_emulator"]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# How the tests read and write each tar format's bytes (compress, decompress) with the usual
# libraries, never with ishard's code; test_formats fails when a format of ishard's has none.
TAR_CODECS = {
    ".tar": (bytes, bytes),
    ".tgz": (gzip.compress, gzip.decompress),
    ".tar.gz": (gzip.compress, gzip.decompress),
    ".tar.lz4": (lz4.frame.compress, lz4.frame.decompress),
    ".tar.zst": (
        lambda data: zstandard.ZstdCompressor().compress(data),
        lambda data: (
            zstandard.ZstdDecompressor()  # every frame; the seek table passed over
            .stream_reader(io.BytesIO(data), read_across_frames=True)
            .read()
        ),
    ),
}

# what a finished run writes beside its shards
DATASET_RECORDS = {"manifest.json", "samples.parquet"}


WAIT = 120.0  # seconds: a bound for what must happen, never a synchronisation


def poll(what: str, check, bound: float = WAIT):
    """Wait (polling) until ``check()`` is truthy; fail after ``bound`` seconds."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def s3_env(s3_server, key: str | None = None, secret: str | None = None) -> dict[str, str]:
    """This environment for a process that reaches the test S3 server with its keys (or
    ``key``/``secret``) and nothing else: no AWS or AIStore settings, no proxy, no config."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AIS_")) and "proxy" not in k.lower()}  # fmt: skip
    env.update(
        AWS_ACCESS_KEY_ID=key or s3_server.access_key,
        AWS_SECRET_ACCESS_KEY=secret or s3_server.secret_key,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def tar_codec(name: str):
    """(compress, decompress) of the tar format ``name`` ends in (its longest such extension)."""
    ext = max((e for e in TAR_CODECS if name.endswith(e)), key=len)
    return TAR_CODECS[ext]


def read_members(name: str, data: bytes) -> list[tuple[str, bytes]]:
    """The regular-file members of the shard ``name`` (any format) in archive order, with their
    bytes, read with the standard tools: zipfile, or tarfile over the format's own codec."""
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return [(i.filename, zf.read(i)) for i in zf.infolist() if not i.is_dir()]
    with tarfile.open(fileobj=io.BytesIO(tar_codec(name)[1](data))) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()]


def run_ishard(
    *args: str, cwd: Path | None = None, input: str | None = None, env: dict | None = None
):
    """Run ``python -m ishard ARGS`` as a user would; return the CompletedProcess (text).

    ``env`` replaces the whole environment (default: this process's).
    """
    env = {**(os.environ if env is None else env), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "ishard", *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        input=input,
        timeout=300,
    )


@dataclass
class Ran:
    """What a command printed and how it ended (``subprocess.CompletedProcess``'s fields)."""

    returncode: int
    stdout: str
    stderr: str


def invoke_ishard(*args: str, input: str | None = None, env: dict | None = None) -> Ran:
    """Run ``ishard ARGS`` in this process, through click's ``CliRunner`` and the same
    ``ishard.cli.main`` the installed command runs (its Go-spelling translation, one-line errors
    and exit codes): for tests where a separate process is not the point. ``env`` adds to the
    environment."""
    from click.testing import CliRunner

    from ishard.cli import main

    runner = CliRunner()
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    handlers = {s: signal.getsignal(s) for s in stops}  # main() sets its own; give pytest's back
    with runner.isolation(input=input, env={"COLUMNS": "200", **(env or {})}) as (out, err, _):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        finally:
            for s, handler in handlers.items():
                signal.signal(s, handler)
        sys.stdout.flush()
        sys.stderr.flush()
        return Ran(code, out.getvalue().decode(), err.getvalue().decode())


def import_wids():
    """wids, imported for real. wids 0.1 imports torch at module level (``torch.distributed``,
    and ``torch.utils.data`` for two generic base classes) without declaring it; the dataset
    classes never call torch. When torch is absent, empty stand-ins satisfy those imports
    during the import only; everything wids reads and groups is its own code."""
    try:
        import torch  # noqa: F401
    except ImportError:
        T = TypeVar("T")
        names = ("torch", "torch.distributed", "torch.utils", "torch.utils.data")
        stubs = {name: types.ModuleType(name) for name in names}
        for base in ("Dataset", "Sampler"):
            setattr(stubs["torch.utils.data"], base, types.new_class(base, (Generic[T],)))
        sys.modules.update(stubs)
        try:
            return importlib.import_module("wids")
        finally:
            for name in names:
                del sys.modules[name]
    return importlib.import_module("wids")


def source_samples(src: Path) -> dict[str, dict[str, bytes]]:
    """Every sample of the source tree by key (the file name without extension): its files'
    bytes by extension — what a reader must find."""
    out: dict[str, dict[str, bytes]] = {}
    for path in sorted(src.rglob("*")):
        if path.is_file():
            key, _, ext = path.name.partition(".")
            out.setdefault(key, {})[ext] = path.read_bytes()
    return out


def webdataset_samples(urls: str | list[str]) -> dict[str, dict[str, bytes]]:
    """Every sample webdataset reads from ``urls`` (a list, or a string of brace patterns
    joined by ``::``), by key: its files' bytes by extension; no key read twice."""
    import webdataset as wds

    out: dict[str, dict[str, bytes]] = {}
    for sample in wds.WebDataset(urls, shardshuffle=False):
        assert sample["__key__"] not in out, sample["__key__"]
        out[sample["__key__"]] = {k: v for k, v in sample.items() if not k.startswith("__")}
    return out


def read_wids(manifest_path: Path, cache: Path) -> dict[str, dict[str, bytes]]:
    """Every sample wids reads through the manifest ``manifest_path``, by key: its files'
    bytes by extension (without wids' leading dot)."""
    wids = import_wids()
    dataset = wids.ShardListDataset(str(manifest_path), cache_dir=str(cache), transformations=[])
    got = {}
    for i in range(len(dataset)):
        sample = dataset[i]
        got[sample["__key__"]] = {k[1:]: v.read() for k, v in sample.items() if k[0] == "."}
    return got


def few_shards_note(shards: int, samples: int, where: str | None = None) -> str:
    """The line on stderr of a run (or a text dry run) whose dataset has fewer shards than the
    8 readers a training job often has: ``shards`` of them holding ``samples`` samples (so
    ``--num-shards`` can make at most that many); ``where``: a grown dataset's destination."""
    held = f"{shards} shard{'s' * (shards != 1)}"
    more = min(8, samples)
    fix = f"--num-shards {more} makes {more}" + (", a smaller --shard-size more" * (samples > 8))
    if where is not None:
        held, fix = f"the dataset in {where!r} holds {held}", f"re-shard it with --overwrite: {fix}"
    return (
        f"ishard: note: {held}, fewer than the 8 readers (ranks × DataLoader workers) a training "
        f"job often has; a reader without a shard reads nothing — {fix}"
    )


def without_note(stderr: str) -> str:
    """``stderr`` less the line a dataset of fewer than 8 shards gets (``few_shards_note``):
    what a test of something else expects to be empty."""
    return "".join(
        line for line in stderr.splitlines(True) if not line.startswith("ishard: note: ")
    )


def assert_error(result, code: int, *needles: str) -> str:
    """One ``ishard: error:`` line on stderr, nothing on stdout, no traceback; return the line."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("ishard: error: "), line
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too) with its bytes; {} if ``root`` is absent."""
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def stem(member: str) -> str:
    """The sample a member belongs to under base_file_name keys (computed here, not by ishard):
    its base name without the last extension (so same-named files in two directories meet)."""
    base = PurePosixPath(member).name
    return base.rsplit(".", 1)[0] if "." in base else base


def shard_checksum(data: bytes, algorithm: str) -> str:
    """The hex digest of a shard's bytes, computed here with the hash libraries themselves
    (xxhash, blake3, hashlib), not with ishard's code."""
    if algorithm == "xxh128":
        import xxhash

        return xxhash.xxh3_128_hexdigest(data)
    if algorithm == "blake3":
        from blake3 import blake3

        return blake3(data).hexdigest()
    return hashlib.new(algorithm, data).hexdigest()


def recorded_checksum(entry: dict) -> tuple[str, str] | None:
    """(algorithm, hex) that a manifest's shardlist entry records: wids' ``md5sum``, or
    ``checksum: "algorithm:hex"``; None when it records none."""
    if "md5sum" in entry:
        return "md5", entry["md5sum"]
    if "checksum" in entry:
        algorithm, _, value = entry["checksum"].partition(":")
        return algorithm, value
    return None


def checksum_fields(data: bytes, algorithm: str = "xxh128") -> dict:
    """The checksum fields a shardlist entry for these bytes has (``md5sum`` for md5)."""
    value = shard_checksum(data, algorithm)
    return {"md5sum": value} if algorithm == "md5" else {"checksum": f"{algorithm}:{value}"}


def entry_matches(entry: dict, data: bytes) -> bool:
    """Does the entry's recorded checksum belong to these bytes?"""
    recorded = recorded_checksum(entry)
    return recorded is not None and shard_checksum(data, recorded[0]) == recorded[1]


def joined_paths(parts: list[str], max_size: int):
    """A hypothesis strategy: lists of 1 to ``max_size`` paths, each 1 to 3 of ``parts``
    joined by '/'."""
    from hypothesis import strategies as st

    path = st.lists(st.sampled_from(parts), min_size=1, max_size=3).map("/".join)
    return st.lists(path, min_size=1, max_size=max_size)


def make_tree(root: Path, files: dict[str, bytes | int], mtime: int = 1_700_000_000) -> Path:
    """Create ``files`` under ``root`` (an int value means that many pseudo-random bytes)."""
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, int):
            content = (name.encode() * (content // max(len(name), 1) + 1))[:content]
        path.write_bytes(content)
        os.utime(path, (mtime, mtime))
    return root


# ``python -c VANISH PATH shard …``: the CLI, with the file PATH moved to PATH.away once the plan
# is made, so the run fails (deterministically) at the shard that holds it.
VANISH = (
    "import os, sys\n"
    "from ishard import cli\n"
    "from ishard.progress import Progress\n"
    "class Vanish(Progress):\n"
    "    def planned(self, shards, nbytes):\n"
    "        os.rename(sys.argv[1], sys.argv[1] + '.away')\n"
    "cli.shard.make_progress = lambda *a, **k: Vanish()\n"
    "cli.main(sys.argv[2:])\n"
)


@pytest.fixture
def ishard_cli():
    """The ``run_ishard`` helper as a fixture."""
    return run_ishard


# Fault trials counted by the tests that run them (e.g. the kill -9 loop), so the closing lines
# of a plain ``python -m pytest -q`` say how many ran and how many resumed byte-identical.
_FAULT_TRIALS: dict[str, list[int]] = {}


@pytest.fixture
def fault_trials():
    """``record(kind, trials, identical, whole=0)``: count fault trials (and the shards found
    whole under final names right after the fault) for the end-of-run summary."""

    def record(kind: str, trials: int, identical: int, whole: int = 0) -> None:
        _add_fault_trials({kind: [trials, identical, whole]})

    return record


# A command with SIGINT, SIGTERM and SIGHUP at their defaults, as a terminal gives them: a test
# run started in the background (SIGINT ignored) or under nohup (SIGHUP ignored) hands its
# children those signals ignored, exec keeps them so, and ishard leaves an ignored signal
# ignored (as it should: `nohup ishard …`). Tests that send a stop signal start ishard so.
_STOP_SIGNALS_AT_DEFAULT = (
    "import os, signal, sys\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):\n"
    "    signal.signal(s, signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def in_private_namespace(script: str, env: dict, rc: Path, why: str) -> None:
    """Run the shell ``script`` as root of a new user and mount namespace (``unshare``); it
    writes its command's exit code to ``rc``. Skips the test where ``unshare`` is missing or
    such a namespace cannot be made here (``why`` says what was wanted of it)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script]
    env = {**env, "PY": sys.executable, "RC": str(rc), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode == 99 or not rc.exists():
        pytest.skip(f"{why} here: {done.stderr.strip()}")


def with_stop_signals(argv) -> list[str]:
    """``argv`` (its first item a program's path) run with the stop signals at their defaults
    (the same process: exec keeps its pid and session)."""
    return [sys.executable, "-c", _STOP_SIGNALS_AT_DEFAULT, *map(str, argv)]


def _add_fault_trials(counts: dict[str, list[int]]) -> None:
    for kind, numbers in counts.items():
        done = _FAULT_TRIALS.setdefault(kind, [0, 0, 0])
        for i, n in enumerate(numbers):
            done[i] += n


def pytest_sessionfinish(session):
    # a pytest-xdist worker hands its counts to the controller, which prints the summary
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["fault_trials"] = dict(_FAULT_TRIALS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    # on the pytest-xdist controller: a worker is done; add its fault-trial counts
    _add_fault_trials(getattr(node, "workeroutput", {}).get("fault_trials", {}))


def pytest_terminal_summary(terminalreporter):
    for kind, (trials, identical, whole) in _FAULT_TRIALS.items():
        terminalreporter.write_line(
            f"{kind} trials: {trials}, resumed outputs identical: {identical} (shards already "
            f"under a final name after the {kind}, each byte-identical: {whole})"
        )


def pytest_configure(config):
    # no test may ask a cloud's instance metadata service (an address off 127.0.0.1)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    config.addinivalue_line(
        "markers",
        "damaged_destination: the test leaves a destination broken on purpose, so "
        "every_destination_verifies does not check it",
    )
    config.addinivalue_line(
        "markers",
        "slow: starts a server or a cluster, kills runs or draws many examples; "
        "`pytest -m 'not slow'` is the quick loop (README)",
    )


# The quick loop leaves out what needs a real server (S3, GCS, Azure), a Dask cluster, runs
# killed and resumed, or thousands of drawn examples: those files, and any test that asks
# for a server's fixture.
SLOW_FILES = {
    "test_claim.py", "test_columns.py", "test_dask.py", "test_dask_stops.py", "test_faults.py",
    "test_inventory_sources.py",
    "test_gcs.py", "test_lease.py", "test_overwrite.py", "test_plan_engine.py", "test_resume.py",
    "test_runstate.py", "test_s3.py", "test_s3_faults.py", "test_s3server.py",
    "test_split_streaming_reference.py", "test_store_contract.py", "test_store_messages.py",
    "test_store_settings.py",
}  # fmt: skip
SLOW_TESTS = {  # a few seconds to half a minute each
    "test_member_of_8gib_or_more_round_trips_through_the_cli",
    "test_every_example_prints_what_the_page_shows",
    "test_heavy_patterns_split_into_smaller_sets_quietly",
    "test_patterns_too_heavy_to_search_together_are_refused",
}
SERVER_FIXTURES = {"s3_server", "s3_bucket", "fake_gcs", "gcs_bucket", "azurite", "azure_container"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        slow = item.path.name in SLOW_FILES or item.originalname in SLOW_TESTS
        if slow or SERVER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def engine_reads():
    """How a property test's examples ended (``test_columns.agree_or_hand_back``: "same",
    "handed back", "both refuse"). A hand-back always agrees, so after the test at least a
    tenth of the examples must have been listed by the column engine itself: a source it
    always hands back fails."""
    from collections import Counter

    seen: Counter[str] = Counter()
    yield seen
    assert seen["same"] >= 0.1 * sum(seen.values()) > 0, seen


@pytest.fixture
def every_destination_verifies(request, tmp_path):
    """After the test, every finished destination it left under ``tmp_path`` (a folder with a
    ``manifest.json`` and no run in progress) passes ``ishard verify --deep``."""
    yield
    if request.node.get_closest_marker("damaged_destination"):
        return
    from ishard.readback.verify import verify

    for manifest in sorted(tmp_path.rglob("manifest.json")):
        dst = manifest.parent
        if (dst / ".ishard-run").exists() or manifest.is_symlink():
            continue  # a run still to be resumed, or a planted link: not a finished run
        result = verify(dst, deep=True)
        assert result.ok, (str(dst.relative_to(tmp_path)), result.problems)


def open_files_in(folder) -> list[str]:
    """How this process's open files in ``folder`` end (' (deleted)': a file with no name)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed since
        if target.startswith(f"{folder}/"):
            held.append(target.rsplit(" ", 1)[-1] if target.endswith(")") else "named")
    return held
