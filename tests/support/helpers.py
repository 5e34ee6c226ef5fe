"""The tests' shared helpers (the fixtures are conftest.py's): run the installed command and
check its one-line errors, build source trees, read what was written with the standard tools,
and reach the test S3 server's objects."""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import types
import zipfile
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Generic, TypeVar

import lz4.frame
import pytest
import zstandard
from hypothesis import event
from hypothesis import strategies as st

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
WAIT = 120.0  # seconds: a bound for what must happen, never a synchronisation
MiB = 1 << 20
# what a finished run writes beside its shards, and a run's lock (under its destination)
DATASET_RECORDS = {"manifest.json", "samples.parquet"}
LOCK = ".ishard-run/lock"
# options that change how a run goes and never what it writes: a --resume may change them
HOW_IT_RUNS = ("--jobs", "2", "--retries", "3", "--read-buffer", "64MiB")

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


# ---------------------------------------------------------------- running ishard


def run_ishard(
    *args: str,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict | None = None,
    timeout: float = 300,
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
        timeout=timeout,
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


def without_root_powers() -> list[str]:
    """A command prefix under which a mode-000 file is unreadable: nothing for a normal user;
    for root, GNU setpriv dropping the capabilities that bypass file modes."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root reads files whatever their mode, and setpriv is not installed")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def assert_ok(result) -> None:
    """The command succeeded and printed nothing on stderr (but the few-shards note)."""
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert without_note(result.stderr) == ""


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


def run_losing(path: Path, *args, env: dict | None = None) -> subprocess.CompletedProcess:
    """``ishard ARGS`` with the source file ``path`` moved away once the plan is made
    (VANISH), so the run fails at the shard that holds it; the file is put back after."""
    done = subprocess.run(
        [sys.executable, "-c", VANISH, str(path), *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    away = Path(f"{path}.away")
    if away.exists():
        away.rename(path)
    return done


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


def with_stop_signals(argv) -> list[str]:
    """``argv`` (its first item a program's path) run with the stop signals at their defaults
    (the same process: exec keeps its pid and session)."""
    return [sys.executable, "-c", _STOP_SIGNALS_AT_DEFAULT, *map(str, argv)]


def start_ishard(endpoint: str, env: dict, *args, **extra_env) -> subprocess.Popen:
    """``ishard ARGS --endpoint-url ENDPOINT`` started in the background."""
    return subprocess.Popen(
        with_stop_signals([sys.executable, "-m", "ishard", *args, "--endpoint-url", endpoint]),
        env={**env, **extra_env, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(run: subprocess.Popen) -> subprocess.CompletedProcess:
    """Wait for ``run`` (of ``start_ishard``) to end; what it printed and its exit code."""
    out, err = run.communicate(timeout=WAIT)
    return subprocess.CompletedProcess(run.args, run.returncode, out, err)


def poll(what: str, check, bound: float = WAIT):
    """Wait (polling) until ``check()`` is truthy; fail after ``bound`` seconds."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ``python HOLD ARGS`` (or a `dask worker` preloading it): shards held mid-write, see hold_writers.py
HOLD = str(Path(__file__).with_name("hold_writers.py"))


def start_dask_worker(start, address: str, *, held: bool, first: str = "") -> subprocess.Popen:
    """A `dask worker` (no nanny: a killed one stays dead) of one thread, started with
    ``start`` (the ``processes`` fixture); ``held``: every shard but ``first`` is held after
    its first member until the run is cancelled (HOLD)."""
    preload = ("--preload", HOLD) if held else ()
    return start(
        "-m", "distributed.cli.dask_worker", address, "--no-nanny", "--nthreads", "1",
        "--no-dashboard", "--host", "127.0.0.1", *preload, env={"ISHARD_TEST_FIRST": first},
    )  # fmt: skip


def in_private_namespace(script: str, env: dict, rc: Path, why: str) -> None:
    """Run the shell ``script`` as root of a new user and mount namespace (``unshare``); it
    writes its command's exit code to ``rc``. Skips the test where ``unshare`` is missing or
    such a namespace cannot be made here (``why`` says what was wanted of it)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script]
    env = {**env, "PY": sys.executable, "RC": str(rc), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
    done = subprocess.run(
        command, check=False, env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode == 99 or not rc.exists():
        pytest.skip(f"{why} here: {done.stderr.strip()}")


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


# ---------------------------------------------------------------- sources


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


def blob(seed: str, size: int) -> bytes:
    """``size`` pseudo-random bytes, the same for the same seed."""
    return random.Random(seed).randbytes(size)


# A small dataset whose samples (base_file_name keys) are known from the names alone.
# Sample "0001" spans two directories, so its files are only adjacent if ishard keeps
# samples together; "big/0005.bin" is above the 1 MiB size where writers stream the file.
SMALL_TREE: dict[str, bytes | int] = {
    "ann/0001.xml": 100,
    "big/0005.bin": (1 << 20) + 12345,
    "binary/0004.bin": bytes(range(256)) * 20,
    "top.txt": b"top level file\n",
    "train/a/0001.cls": b"3",
    "train/a/0001.jpg": 3000,
    "train/a/0001.json": 50,
    "train/a/0002.jpg": 2500,
    "train/a/0002.json": 60,
    "train/b/0003.jpg": 4000,
    "train/b/0003.json": b"",
    "ключ.txt": "значение".encode(),
}


def joined_paths(parts: list[str], max_size: int):
    """A hypothesis strategy: lists of 1 to ``max_size`` paths, each 1 to 3 of ``parts``
    joined by '/'."""
    from hypothesis import strategies as st

    path = st.lists(st.sampled_from(parts), min_size=1, max_size=3).map("/".join)
    return st.lists(path, min_size=1, max_size=max_size)


# ---------------------------------------------------------------- reading what was written


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


def read_members_checked(name: str, data: bytes) -> list[tuple[str, bytes]]:
    """The regular-file members of a shard (``read_members``), after checking that its bytes
    begin as its format's do and that a zip's member checksums hold."""
    if name.endswith(".zip"):
        assert data[:4] == b"PK\x03\x04"
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            assert zf.testzip() is None
    elif name.endswith((".tgz", ".tar.gz")):
        assert data[:2] == b"\x1f\x8b"
    return read_members(name, data)


def shard_files(dst: Path) -> list[Path]:
    """The shards in ``dst`` (everything but the manifest), sorted by name."""
    return sorted(p for p in dst.iterdir() if p.name not in DATASET_RECORDS)


def tar_stream(path: Path) -> bytes:
    """The uncompressed tar bytes of a tar-family shard (gzip / lz4 decoded by their libraries)."""
    return decode_tar(path.name, path.read_bytes())


def decode_tar(name: str, data: bytes) -> bytes:
    """The tar bytes inside shard ``name``'s ``data``."""
    return tar_codec(name)[1](data)


def member_names(name: str, data: bytes) -> list[str]:
    """Member names of shard ``name`` whose bytes are ``data``, read with zipfile or tarfile."""
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return zf.namelist()
    with tarfile.open(fileobj=io.BytesIO(decode_tar(name, data))) as tar:
        return tar.getnames()


def read_shard(path: Path) -> list[tuple[str, bytes]]:
    """(name, content) of every member in archive order, read with tarfile or zipfile."""
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            assert zf.testzip() is None
            return [(i.filename, zf.read(i)) for i in zf.infolist()]
    with tarfile.open(fileobj=io.BytesIO(tar_stream(path))) as tar:
        out = []
        for info in tar:
            assert info.isfile(), f"{path.name}: {info.name!r} is not a regular file"
            out.append((info.name, tar.extractfile(info).read()))
        return out


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


def snapshot_but_lock(dst: Path) -> dict[str, bytes]:
    """Every file under ``dst`` (hidden ones too, but the lock: it names the last run) with its
    bytes, the manifest's too: a resumed run's manifest is byte for byte an uninterrupted one's."""
    return {name: data for name, data in snapshot(dst).items() if Path(name).name != "lock"}


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


def read_webdataset(dst: Path, names: list[str]) -> dict[str, dict[str, bytes]]:
    """Every sample of the shards ``names`` in ``dst`` as webdataset reads them: its files'
    bytes by extension, by key."""
    return webdataset_samples([str(dst / n) for n in names])


def webdataset_samples(urls: str | list[str]) -> dict[str, dict[str, bytes]]:
    """Every sample webdataset reads from ``urls`` (a list, or a string of brace patterns
    joined by ``::``): its files' bytes by extension, by key; no key read twice."""
    import webdataset as wds

    got: dict[str, dict[str, bytes]] = {}
    for sample in wds.WebDataset(urls, shardshuffle=False):
        assert sample["__key__"] not in got, sample["__key__"]
        got[sample["__key__"]] = {k: v for k, v in sample.items() if not k.startswith("__")}
    return got


def source_samples(src: Path) -> dict[str, dict[str, bytes]]:
    """Every sample of the source tree by key (the file name without extension): its files'
    bytes by extension — what a reader must find."""
    out: dict[str, dict[str, bytes]] = {}
    for path in sorted(src.rglob("*")):
        if path.is_file():
            key, _, ext = path.name.partition(".")
            out.setdefault(key, {})[ext] = path.read_bytes()
    return out


def read_wids(manifest_path: Path, cache: Path) -> dict[str, dict[str, bytes]]:
    """Every sample of the dataset whose manifest is ``manifest_path`` as wids reads it."""
    wids = import_wids()
    dataset = wids.ShardListDataset(str(manifest_path), cache_dir=str(cache), transformations=[])
    got = {}
    for i in range(len(dataset)):
        sample = dataset[i]
        got[sample["__key__"]] = {k[1:]: v.read() for k, v in sample.items() if k[0] == "."}
    return got


def final_lines(stderr: str) -> tuple[list[str], str]:
    """The plain progress lines that tell the listing, and the last line."""
    lines = [line for line in stderr.splitlines() if line.startswith("ishard: ")]
    return [line for line in lines if line.startswith("ishard: listed ")], lines[-1]


def assert_true_totals(src: Path, dst: Path, result) -> list[str]:
    """The last listing line and the last line: files listed, bytes and shards written."""
    from ishard.sizes import format_size

    assert result.returncode == 0, result.stderr
    files = [p for p in src.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    shards = sorted(p.name for p in dst.iterdir() if p.suffix == ".tar")
    manifest = json.loads((dst / "manifest.json").read_text())
    assert len(manifest["shardlist"]) == len(shards) > 1
    listed, last = final_lines(without_note(result.stderr))  # the progress lines
    assert listed[-1] == f"ishard: listed {len(files)} files, {format_size(total)}"
    assert last.startswith(
        f"ishard: wrote {format_size(total)} of {format_size(total)} (100%), "
        f"{len(shards)}/{len(shards)} shards, "
    )
    return listed


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


# ---------------------------------------------------------------- the test S3 server


def s3_env(s3_server, key: str | None = None, secret: str | None = None) -> dict[str, str]:
    """This environment for a process that reaches the test S3 server with its keys (or
    ``key``/``secret``) and nothing else: no AWS, AIStore or ishard settings, no proxy, no
    config."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AIS_", "ISHARD_")) and "proxy" not in k.lower()}  # fmt: skip
    env.update(
        AWS_ACCESS_KEY_ID=key or s3_server.access_key,
        AWS_SECRET_ACCESS_KEY=secret or s3_server.secret_key,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def put(client, bucket: str, files: dict[str, bytes]) -> None:
    """Upload ``files`` (key -> bytes) to ``bucket``."""
    for key, data in files.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)


def listing(client, bucket: str, prefix: str = "") -> list[dict]:
    """Every object (Key, Size, LastModified, ETag) under ``prefix``, all pages."""
    out, token = [], None
    while True:
        page = client.list_objects_v2(
            Bucket=bucket, Prefix=prefix, **({"ContinuationToken": token} if token else {})
        )
        out += page.get("Contents", [])
        if not page.get("IsTruncated"):
            return out
        token = page["NextContinuationToken"]


def objects(client, bucket: str, prefix: str = "") -> dict[str, bytes]:
    """Every object under ``prefix`` with its bytes."""
    return {
        o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for o in listing(client, bucket, prefix)
    }


def download(client, bucket: str, prefix: str, folder: Path) -> Path:
    """Every object under ``prefix`` written under ``folder`` by its name after the prefix."""
    for key, data in objects(client, bucket, prefix).items():
        path = folder / key.removeprefix(prefix)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


def uploads(client, bucket: str) -> list:
    """Multipart uploads still open in ``bucket``."""
    return client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


# ---------------------------------------------------------------- inventories


SCHEMA = "Bucket, Key, Size, LastModifiedDate, StorageClass"


def s3_csv_report(root: Path, lines: list[list[str]], parts: int = 2, schema: str = SCHEMA) -> Path:
    """An AWS S3 Inventory report in CSV, laid out as AWS writes it: ``lines`` (fields as
    written, keys already encoded, in the order of ``schema``) over ``parts`` gzip'ed,
    headerless data files."""
    config = root / "inv" / "src-bucket" / "daily"
    (config / "data").mkdir(parents=True)
    (config / "2024-01-02T00-00Z").mkdir()
    files = []
    for part in range(parts):
        text = io.StringIO()
        csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(lines[part::parts])
        name = f"{part}c1e5d9a-1b2c-4d3e-8f90-a1b2c3d4e5f6.csv.gz"
        (config / "data" / name).write_bytes(gzip.compress(text.getvalue().encode()))
        files.append({"key": f"inv/src-bucket/daily/data/{name}", "size": 1, "MD5checksum": "0"})
    manifest = {"sourceBucket": "src-bucket", "fileFormat": "CSV", "fileSchema": schema,
                "files": files}  # fmt: skip
    path = config / "2024-01-02T00-00Z" / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def s3_parquet_report(root: Path, rows: list[tuple], parts: int = 2) -> Path:
    """An AWS S3 Inventory report in Parquet: ``rows`` of (key, size, ISO time or None), and
    an ETag where a row has a fourth field (``e_tag``: then every row has one), over ``parts``
    data files, with AWS's column names and types."""
    etag = bool(rows) and len(rows[0]) > 3
    config = root / "inv" / "src-bucket" / "daily"
    (config / "data").mkdir(parents=True)
    (config / "2024-01-02T00-00Z").mkdir()
    import duckdb

    files = []
    with duckdb.connect() as con:
        for part in range(parts):
            con.execute("CREATE OR REPLACE TABLE t (bucket VARCHAR, key VARCHAR, size BIGINT, "
                        f"last_modified_date TIMESTAMP{', e_tag VARCHAR' if etag else ''})")  # fmt: skip
            chunk = [list(r) for r in rows[part::parts]]
            if chunk:
                con.executemany(
                    "INSERT INTO t VALUES ('src-bucket', ?, ?, CAST(? AS TIMESTAMP)"
                    f"{', ?' if etag else ''})",
                    chunk,
                )
            name = f"{part}c1e5d9a.parquet"
            con.execute(f"COPY t TO '{config / 'data' / name}' (FORMAT parquet)")
            files.append({"key": f"inv/src-bucket/daily/data/{name}", "size": 1})
    manifest = {
        "sourceBucket": "src-bucket",
        "fileFormat": "Parquet",
        "fileSchema": "message s3.inventory { required binary bucket (STRING); required binary "
        "key (STRING); optional int64 size; optional int64 last_modified_date "
        "(TIMESTAMP(MILLIS,true));" + (" optional binary e_tag (STRING);" if etag else "") + "}",
        "files": files,
    }
    path = config / "2024-01-02T00-00Z" / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def s3_orc_report(root: Path, rows: list[tuple], parts: int = 2) -> Path:
    """The report of ``s3_parquet_report`` in ORC, its data files written by pyarrow (times
    in milliseconds, as AWS's ORC reports hold them)."""
    import pyarrow as pa
    from pyarrow import orc

    path = s3_parquet_report(root, rows, parts)
    manifest = json.loads(path.read_text())
    manifest["fileFormat"] = "ORC"
    manifest["fileSchema"] = (
        "struct<bucket:string,key:string,size:bigint,last_modified_date:timestamp>"
    )
    for part, item in enumerate(manifest["files"]):
        (root / item["key"]).unlink()
        item["key"] = item["key"].replace(".parquet", ".orc")
        chunk = rows[part::parts]
        millis = [
            None
            if t is None
            else round(datetime.fromisoformat(t).replace(tzinfo=timezone.utc).timestamp() * 1000)
            for _, _, t in chunk
        ]
        table = pa.table({
            "bucket": pa.array(["src-bucket"] * len(chunk), pa.string()),
            "key": pa.array([r[0] for r in chunk], pa.string()),
            "size": pa.array([r[1] for r in chunk], pa.int64()),
            "last_modified_date": pa.array(millis, pa.timestamp("ms")),
        })  # fmt: skip
        orc.write_table(table, str(root / item["key"]))
    path.write_text(json.dumps(manifest))
    return path


# inventory rows as the column engine and the row reader must read alike: names of parts
# (some that no name may hold), sizes and mtimes as text, and sizes no reader takes
_GOOD = ["a", "b", "img", "x.jpg", "y.cls", "é", "sp ace", 'q,u"o', "😀", "a.b.c", "Z"]
_PARTS = _GOOD * 3 + [".hid", "..", "C:", "\x01", "t\tab", "n\nl", "c\rr", "r\r\nn", ""]

inventory_names = st.one_of(
    *[st.lists(st.sampled_from(_PARTS), min_size=1, max_size=4).map("/".join)] * 4,
    st.sampled_from(["/abs", "a/", "./x", "a/../b", "C:x", "\\\\srv\\x", "a\\..\\b"]),
)
inventory_sizes = st.integers(0, 10**12).map(str)
spoilt_sizes = st.sampled_from([None] * 24 + ["-1", "1.5", "", " 3", "+4", "x"])
inventory_mtimes = st.integers(0, 2 * 10**9).map(str) | st.sampled_from(
    [
        "",
        "1700000000.7",
        "2024-01-02T03:04:05Z",
        "2024-01-02T03:04:05+02:00",
        "garbage",
        "1e9",
        "nan",
        "123456789012345678",
    ]
)


def same_listing(a, b) -> None:
    """Two answers of inventory readers, (files, tally), list the same files and skip alike."""
    (fa, ta), (fb, tb) = a, b
    assert fa.names == fb.names
    assert list(fa.sizes) == list(fb.sizes)
    assert list(fa.mtimes) == list(fb.mtimes)
    assert ta == tb


def agree_or_hand_back(by_rows, by_engine, seen: Counter | None = None) -> None:
    """Both readers refuse, or the engine hands the listing back, or both list the same;
    ``seen`` counts which (``engine_reads``)."""
    from ishard.errors import UsageError
    from ishard.planning.engine.connection import Fallback

    seen = Counter() if seen is None else seen
    try:
        rows_answer = by_rows()
    except UsageError:
        with pytest.raises((Fallback, UsageError)):
            by_engine()
        event("both refuse")
        seen["both refuse"] += 1
        return
    try:
        engine_answer = by_engine()
    except Fallback:
        event("handed back")
        seen["handed back"] += 1
        return
    same_listing(engine_answer, rows_answer)
    event(f"same listing ({'some' if len(engine_answer[0]) else 'no'} files)")
    seen["same"] += 1


def crc64nvme(data: bytes) -> int:
    """CRC-64/NVME (reflected polynomial 0x9A6C9329AC4BC9B5, all-ones start and end), as Azure
    computes it, by a table of the tests' own (never the code under test's library)."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x9A6C9329AC4BC9B5 if crc & 1 else crc >> 1
        table.append(crc)
    crc = 0xFFFFFFFFFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF
