#!/usr/bin/env python3
"""Local-disk benchmark: ``ishard shard`` against GNU ``tar -cf`` on the same ImageNet-like tree.

The script makes (once, deterministically) a tree shaped like ImageNet's training set::

    Annotations/<wnid>/<wnid>_<i>.xml        500 B - 2 KiB
    Data/train/<wnid>/<wnid>_<i>.JPEG        lognormal, mean about 110 KiB

warms the page cache, then times GNU tar (the reference), ishard (the manifest's checksum:
xxh128, the default; md5; none) and webdataset's ShardWriter in
the same run, alternating tools and repeating, and prints medians with the ratio to tar. A
second group times ishard's ``.tgz`` against the same job with Python's built-in zlib. Numbers
from one machine are only comparable with the reference lines printed beside them.

    python benchmarks/bench_local.py --small          # smoke run: ~2,000 files / 50 MiB
    python benchmarks/bench_local.py                  # ~85,000 files / ~2 GiB
    python benchmarks/bench_local.py --jobs 1         # also time ishard --jobs 1
    python benchmarks/bench_local.py --no-tgz         # skip the (slow) .tgz group
    python benchmarks/bench_local.py --dask           # also .tgz on a Dask LocalCluster, 1 vs 2
    python benchmarks/bench_local.py --dask --dask-gzip-library zlib --no-tgz --no-webdataset
    python benchmarks/bench_local.py --profile prof   # also profile one in-process ishard run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import GIB, MIB, machine_line

GENERATOR_VERSION = 1  # bump when the tree's shape or content changes
XML_MIN, XML_MAX = 500, 2048
JPEG_MIN, JPEG_MAX = 4 << 10, 4 << 20
JPEG_SIGMA = 0.6  # lognormal spread of JPEG sizes (ImageNet's is of this order)
POOL_SIZE = 16 << 20  # file bodies are slices of one pseudo-random pool: fast to generate


# ---------------------------------------------------------------------------------------------
# The data set


@dataclass(frozen=True)
class Params:
    """What the generated tree depends on; equal params mean an identical tree."""

    files: int
    total_bytes: int
    wnids: int
    jpeg_mean: int
    seed: int

    def as_dict(self) -> dict:
        return {"generator": GENERATOR_VERSION, **self.__dict__}


def file_mix(p: Params) -> tuple[int, int]:
    """(JPEG count, XML count) so that ``files`` and ``total_bytes`` hold at the JPEG mean.

    ImageNet's file count and byte count cannot both be scaled down with one annotation per
    image, so the counts are solved from the JPEG and XML means instead.
    """
    xml_mean = (XML_MIN + XML_MAX) / 2
    jpegs = round((p.total_bytes - p.files * xml_mean) / (p.jpeg_mean - xml_mean))
    jpegs = max(1, min(p.files - 1, jpegs))
    return jpegs, p.files - jpegs


def _split(count: int, parts: int) -> list[int]:
    return [count // parts + (1 if i < count % parts else 0) for i in range(parts)]


def plan_tree(p: Params) -> tuple[list[tuple[str, int, int]], bytes]:
    """Every file as (relative name, size, pool offset), and the pool the bodies come from."""
    rng = random.Random(p.seed)
    pool = rng.randbytes(POOL_SIZE)
    wnids: set[str] = set()
    while len(wnids) < p.wnids:
        wnids.add(f"n{rng.randrange(10**7, 10**8):08d}")
    order = sorted(wnids)
    jpegs, xmls = file_mix(p)

    xml_sizes = [rng.randint(XML_MIN, XML_MAX) for _ in range(xmls)]
    jpeg_budget = p.total_bytes - sum(xml_sizes)
    if jpeg_budget < jpegs * JPEG_MIN:
        raise SystemExit(
            f"bench_local: --total-gib is too small for {p.files} files — raise it or lower --files"
        )
    mu = math.log(p.jpeg_mean) - JPEG_SIGMA**2 / 2
    raw = [min(JPEG_MAX, max(JPEG_MIN, rng.lognormvariate(mu, JPEG_SIGMA))) for _ in range(jpegs)]
    scale = jpeg_budget / sum(raw)
    jpeg_sizes = [max(JPEG_MIN, min(JPEG_MAX, int(s * scale))) for s in raw]

    files: list[tuple[str, int, int]] = []
    it_xml, it_jpeg = iter(xml_sizes), iter(jpeg_sizes)
    for wnid, n_xml, n_jpeg in zip(order, _split(xmls, p.wnids), _split(jpegs, p.wnids)):
        for i in range(1, n_xml + 1):
            size = next(it_xml)
            files.append(
                (f"Annotations/{wnid}/{wnid}_{i}.xml", size, rng.randrange(POOL_SIZE - size))
            )
        for i in range(1, n_jpeg + 1):
            size = next(it_jpeg)
            name = f"Data/train/{wnid}/{wnid}_{i}.JPEG"
            files.append((name, size, rng.randrange(POOL_SIZE - size)))
    return files, pool


def file_body(name: str, size: int, offset: int, pool: memoryview) -> list[bytes | memoryview]:
    """A file's bytes: a short header naming the file (so no two files are equal), then pool."""
    if name.endswith(".xml"):
        head = f'<?xml version="1.0"?>\n<annotation><filename>{name}</filename>\n'.encode()
    else:
        head = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + name.encode()
    head = head[:size]
    return [head, pool[offset : offset + size - len(head)]]


def generate(data: Path, p: Params) -> None:
    """Write the tree for ``p`` into the (empty or missing) directory ``data``."""
    files, pool_bytes = plan_tree(p)
    pool = memoryview(pool_bytes)
    made: set[str] = set()
    started = time.perf_counter()
    for name, size, offset in files:
        parent = name.rpartition("/")[0]
        if parent not in made:
            (data / parent).mkdir(parents=True, exist_ok=True)
            made.add(parent)
        fd = os.open(data / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for part in file_body(name, size, offset, pool):
                view = memoryview(part)
                while view:
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    print(f"generated {len(files):,} files in {time.perf_counter() - started:.1f} s")


def scan(data: Path, read: bool) -> dict[str, int]:
    """Size of every regular file under ``data`` by relative name; optionally read every byte
    once, which puts the tree in the page cache."""
    sizes: dict[str, int] = {}
    buf = bytearray(4 * MIB)
    for top, dirs, files in os.walk(data):
        dirs.sort()
        rel = os.path.relpath(top, data)
        for f in files:
            path = os.path.join(top, f)
            name = f if rel == "." else f"{rel}/{f}".replace(os.sep, "/")
            size = 0
            if read:
                with open(path, "rb", buffering=0) as fh:
                    while n := fh.readinto(buf):
                        size += n
            else:
                size = os.stat(path).st_size
            sizes[name] = size
    return sizes


def ensure_data(data: Path, marker: Path, p: Params) -> None:
    """Generate the tree unless ``marker`` says this exact tree is already there."""
    want = p.as_dict()
    if marker.exists() and data.is_dir():
        try:
            if json.loads(marker.read_text())["params"] == want:
                print("data: reusing it (same parameters)")
                return
        except (ValueError, KeyError):
            pass
    if data.exists() and any(data.iterdir()):
        if not marker.exists():
            raise SystemExit(
                f"bench_local: {data} is not empty and was not made by this script — "
                "give an empty or new --data directory"
            )
        print(f"data: parameters changed, regenerating {data}")
        shutil.rmtree(data)
    marker.unlink(missing_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    print(f"data: generating into {data} (seed {p.seed})")
    generate(data, p)
    sizes = scan(data, read=False)
    marker.write_text(
        json.dumps({"params": want, "files": len(sizes), "bytes": sum(sizes.values())}) + "\n"
    )


# ---------------------------------------------------------------------------------------------
# Timing


@dataclass
class Run:
    seconds: float
    cpu_seconds: float
    max_rss_mib: float
    pss_mib: float  # peak of the summed PSS of the tool and all its processes (0: not seen)


@dataclass
class Tool:
    label: str
    argv: list[str]
    out: Path  # what the tool writes; removed before every run
    check: object = None  # called with no arguments after the untimed run; returns a summary
    runs: list[Run] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(r.seconds for r in self.runs)


def _rss_mib(maxrss: int) -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    return maxrss / (MIB if sys.platform == "darwin" else 1024)


def clear(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    # Flush the previous run's dirty pages now, so their writeback is not timed in the next run.
    os.sync()


def gnu_time() -> str | None:
    """GNU time's path, if it is there: it reports the peak RSS of the program itself."""
    path = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)
    if path is None:
        return None
    probe = subprocess.run([path, "-f", "%M", "true"], check=False, capture_output=True, text=True)
    return path if probe.returncode == 0 and probe.stderr.strip().isdigit() else None


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it (Linux /proc)."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    parent[int(entry.name)] = int(f.read().rpartition(b")")[2].split()[1])
            except OSError:
                continue
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += [child for child, ppid in parent.items() if ppid == pid]
    return found


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class PssSampler(threading.Thread):
    """Samples the summed PSS (shared pages counted once) of a process tree every 50 ms: with
    writer processes, GNU time's peak RSS is that of the largest process, not of them all."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.peak_kib = root, 0
        self.done = threading.Event()

    def run(self) -> None:
        if not os.path.exists("/proc/self/smaps_rollup"):
            return
        while not self.done.wait(0.05):
            pids = _descendants(self.root)[1:]  # below GNU time (or the tool itself)
            self.peak_kib = max(self.peak_kib, sum(map(_pss_kib, pids or [self.root])))


def run_once(tool: Tool, log: Path, timer: str | None) -> Run:
    """Run ``tool`` once on a clean output; wall time, CPU time and peak RSS of that child.

    The peak RSS comes from GNU time when it is there: a child forked from this process
    inherits this process's high-water mark until it execs, so wait4's ru_maxrss would report
    at least the benchmark's own size (then it is only an upper bound). It is the largest
    single process; the summed PSS of the whole process tree is sampled beside it.
    """
    clear(tool.out)
    rss_file = log.with_suffix(".rss")
    argv = [timer, "-f", "%M", "-o", str(rss_file), *tool.argv] if timer else tool.argv
    with open(log, "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        sampler = PssSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        sampler.done.set()
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(
            f"bench_local: {tool.label} exited with {proc.returncode}:\n"
            + log.read_text(errors="replace")[-2000:]
        )
    if timer:
        rss = int(rss_file.read_text().split()[-1]) / 1024  # GNU time: KiB
    else:
        rss = _rss_mib(usage.ru_maxrss)
    # wait4's CPU times include the grandchild GNU time waited for.
    return Run(elapsed, usage.ru_utime + usage.ru_stime, rss, sampler.peak_kib / 1024)


PF_KTHREAD = 0x00200000


def other_cpu_seconds() -> float | None:
    """CPU seconds used so far by every user-space process but this one (Linux), else None.

    Children count once reaped (in their reaper's cutime), so work that comes and goes between
    two readings is seen; this process's children (the timed tools) are left out with it.
    """
    if not os.path.isdir("/proc/self"):
        return None
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if int(fields[6]) & PF_KTHREAD:
            continue
        ticks += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def startup_seconds(ishard: list[str]) -> float:
    """Median wall time of ``python -m ishard --version``: the fixed cost in every ishard run."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run(ishard, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def archive_members(path: Path) -> list[tuple[str, int]]:
    """(name, size) of a shard's regular members, read with zipfile, lz4 + tarfile, tarfile."""
    if path.name.endswith(".zip"):
        import zipfile

        with zipfile.ZipFile(path) as zf:
            return [(i.filename, i.file_size) for i in zf.infolist() if not i.is_dir()]
    if path.name.endswith(".lz4"):
        import lz4.frame

        with lz4.frame.open(path) as raw, tarfile.open(fileobj=raw, mode="r|") as tf:
            return [(m.name, m.size) for m in tf if m.isfile()]
    with tarfile.open(path) as tf:
        return [(m.name, m.size) for m in tf if m.isfile()]


def check_ishard_output(
    shards: Path, sizes: dict[str, int], ext: str = ".tar", algorithm: str | None = "xxh128"
) -> str:
    """Every file exactly once across the shards, with its size; the manifest agrees."""
    manifest = json.loads((shards / "manifest.json").read_text())
    totals = manifest["ishard"]["totals"]
    found: dict[str, int] = {}
    members = 0
    tars = sorted(shards.glob("*" + ext))
    for path in tars:
        for name, size in archive_members(path):
            found[name.removeprefix("./")] = size
            members += 1
    problems = []

    def recorded(entry: dict) -> str | None:
        if "md5sum" in entry:
            return "md5"
        return entry["checksum"].partition(":")[0] if "checksum" in entry else None

    with_sum = sum(recorded(e) == algorithm for e in manifest["shardlist"])
    if with_sum != len(tars):
        problems.append(f"{with_sum} of {len(tars)} manifest entries have a {algorithm} checksum")
    if totals["files"] != len(sizes):
        problems.append(f"manifest says {totals['files']} files, the tree has {len(sizes)}")
    if totals["shards"] != len(tars):
        problems.append(f"manifest says {totals['shards']} shards, found {len(tars)}")
    if members != len(sizes) or found != sizes:
        problems.append(
            f"shards hold {members} members ({len(found)} distinct names, "
            f"{sum(found[n] != s for n, s in sizes.items() if n in found)} with a wrong size, "
            f"{len(sizes.keys() - found.keys())} missing), the tree has {len(sizes)} files"
        )
    if problems:
        raise SystemExit("bench_local: ishard output is incomplete: " + "; ".join(problems))
    return (
        f"{len(tars)} shards, {members:,} members, {sum(found.values()):,} payload bytes "
        "— every file once, sizes match"
    )


def check_webdataset_output(shards: Path, sizes: dict[str, int]) -> str:
    """As many members as files, and the same multiset of sizes (names are ``key.ext``)."""
    found: list[int] = []
    tars = sorted(shards.glob("*.tar"))
    for path in tars:
        with tarfile.open(path) as tf:
            found += [m.size for m in tf]
    if sorted(found) != sorted(sizes.values()):
        raise SystemExit(
            f"bench_local: webdataset wrote {len(found)} members ({sum(found):,} bytes), "
            f"the tree has {len(sizes)} files ({sum(sizes.values()):,} bytes)"
        )
    return f"{len(tars)} shards, {len(found):,} members, {sum(found):,} payload bytes"


def webdataset_job(data: Path, out: Path, shard_size: int) -> None:
    """The same job with webdataset's ShardWriter, written as its documentation shows: list,
    group files into samples by base name (as ishard's default key does), read each file, and
    ``sink.write`` one dict per sample, a new shard when ``maxsize`` is reached."""
    import webdataset as wds

    samples: dict[str, dict[str, str]] = {}
    for top, dirs, files in os.walk(data):
        dirs.sort()
        for name in sorted(files):
            key, _, ext = name.partition(".")
            samples.setdefault(key, {})[ext.lower()] = os.path.join(top, name)
    out.mkdir(parents=True, exist_ok=True)
    with wds.ShardWriter(
        str(out / "shard-%06d.tar"),
        maxcount=1 << 40,
        maxsize=shard_size,
        verbose=0,
        encoder=False,
    ) as sink:
        for key, parts in samples.items():
            sample: dict[str, object] = {"__key__": key}
            for ext, path in parts.items():
                with open(path, "rb") as f:
                    sample[ext] = f.read()
            sink.write(sample)


# Runs ishard's command line with Python's built-in zlib as the gzip compressor.
BUILTIN_GZIP = (
    "import sys; from ishard.formats import compress; compress.GZIP_PREFERENCE = ('zlib',); "
    "from ishard.cli import main; main(sys.argv[1:])"
)


def gzip_library_name() -> str:
    """Which gzip compressor ishard uses here at its default level."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ishard.formats.compress import gzip_library; print(gzip_library(6)[0])",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return probe.stdout.strip()


def profile_ishard(data: Path, out: Path, shard_size: str, dest: str) -> None:
    """Run ishard once in this process with the shard writers on the main thread, under
    cProfile (which sees only the thread it runs in), and print the top costs."""
    import cProfile
    import pstats
    from concurrent.futures import Future

    from ishard.run import write

    class SerialPool:
        """Stands in for the writer thread pool: runs each job at submit time."""

        def __init__(self, *args, **kwargs) -> None:
            pass

        def __enter__(self) -> SerialPool:  # noqa: PYI034 - Self needs Python 3.11
            return self

        def __exit__(self, *exc) -> None:
            return None

        def submit(self, fn, *args, **kwargs) -> Future:
            future: Future = Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as err:  # noqa: BLE001 - handed back like a pool would
                future.set_exception(err)
            return future

    import ishard

    clear(out)
    if hasattr(write, "ThreadPoolExecutor"):
        write.ThreadPoolExecutor = SerialPool  # type: ignore[assignment, misc]
        write.FORK = None  # no writer processes either: everything on this thread
    else:
        print(
            "profile: ishard.run.write has no ThreadPoolExecutor to replace — shard writers run in "
            "their own threads, which cProfile does not see"
        )
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    ishard.shard(
        str(data), str(out), shard_size=shard_size, overwrite=True, member_names="original"
    )
    profiler.disable()
    print(f"\nprofile: one in-process run, writers serial: {time.perf_counter() - started:.2f} s")
    profiler.dump_stats(dest)
    stats = pstats.Stats(profiler).strip_dirs().sort_stats("tottime")
    stats.print_stats(18)
    print(f"profile saved to {dest} (python -m pstats {dest})")
    clear(out)


# ---------------------------------------------------------------------------------------------
# Report


def print_table(tools: list[Tool], files: int, total: int, ref: Tool, ref_name: str) -> None:
    header = (
        f"{'tool':<34} {'median s':>9} {'MiB/s':>8} {'files/s':>9} {'CPU s':>7} "
        f"{'peak RSS MiB':>13} {'all procs PSS':>14} {'vs ' + ref_name:>9}"
    )
    print(header)
    print("-" * len(header))
    for t in tools:
        med = t.median
        cpu = statistics.median(r.cpu_seconds for r in t.runs)
        rss = max(r.max_rss_mib for r in t.runs)
        pss = max(r.pss_mib for r in t.runs)
        print(
            f"{t.label:<34} {med:>9.2f} {total / MIB / med:>8.0f} {files / med:>9,.0f} "
            f"{cpu:>7.2f} {rss:>13.1f} {f'{pss:.1f}' if pss else '-':>14} "
            f"{med / ref.median:>8.2f}x"
        )
    print()
    for t in tools:
        print(f"  {t.label:<32} runs: " + ", ".join(f"{r.seconds:.2f}" for r in t.runs))


def verdict(tool: Tool, ref: Tool) -> str:
    ratio = tool.median / ref.median
    if ratio <= 1.1:
        word = "on par with or faster than tar"
    elif ratio <= 1.5:
        word = "somewhat slower than tar"
    else:
        word = "much slower than tar"
    return f"verdict: {tool.label} takes {ratio:.2f}x the time of {ref.label} ({word})"


def target(what: str, value: float, limit: float, at_most: bool = True) -> str:
    met = value <= limit if at_most else value >= limit
    sign = "<=" if at_most else ">="
    return f"target: {what} = {value:.2f} ({sign} {limit:g} wanted): {'met' if met else 'NOT met'}"


def tree_location(args: argparse.Namespace) -> tuple[Params, Path]:
    """The tree's parameters from the options (``--small``: 2,000 files, 50 MiB) and where it
    is: ``--data``, or a folder under the temp dir named by the parameters."""
    if args.small:
        args.files, args.total_gib = 2_000, 50 / 1024
    p = Params(args.files, int(args.total_gib * GIB), args.wnids, args.jpeg_kib << 10, args.seed)
    if args.data is None:
        tag = f"imagenet-f{p.files}-b{p.total_bytes}-w{p.wnids}-j{args.jpeg_kib}-s{p.seed}"
        args.data = Path(tempfile.gettempdir()) / "ishard-bench" / tag
    return p, args.data.resolve()


def tell_other_cpu(other_before: float | None, wall_before: float) -> None:
    """Print how busy other processes kept the machine since ``other_before`` (CPU seconds
    from ``other_cpu_seconds``), with a warning when the figures are noisy."""
    if other_before is None:
        return
    share = ((other_cpu_seconds() or 0.0) - other_before) / (time.perf_counter() - wall_before)
    print(f"other processes used {share:.2f} CPUs on average while timing")
    if share > 0.25:
        print("warning: the machine was busy with other work while timing — numbers are noisy")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data",
        type=Path,
        default=None,
        help="where the tree lives (made if missing); default: under the temp dir",
    )
    ap.add_argument("--files", type=int, default=85_000, help="number of files (default 85000)")
    ap.add_argument("--total-gib", type=float, default=2.0, help="total size in GiB (default 2)")
    ap.add_argument("--wnids", type=int, default=100, help="class directories (default 100)")
    ap.add_argument("--jpeg-kib", type=int, default=110, help="mean JPEG size (default 110)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--small", action="store_true", help="smoke run: 2,000 files / 50 MiB")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per tool (default 3)")
    ap.add_argument("--shard-size", default="512MiB")
    ap.add_argument(
        "--jobs",
        type=int,
        action="append",
        default=[],
        help="also time ishard --jobs N (repeatable)",
    )
    ap.add_argument("--no-tgz", action="store_true", help="skip the .tgz group (the slow part)")
    ap.add_argument(
        "--no-formats",
        action="store_true",
        help="skip the .tar.lz4 and .zip group (against tar | lz4 -1 and zip -0)",
    )
    ap.add_argument(
        "--dask",
        action="store_true",
        help="also time .tgz with --executor dask, 1 worker against 2 (ishard[dask])",
    )
    ap.add_argument(
        "--dask-gzip-library",
        default="auto",
        help="--gzip-library of the Dask group (default auto: the fastest installed)",
    )
    ap.add_argument(
        "--dask-shard-size",
        default="64MiB",
        help="shard size of the Dask group (default 64MiB: enough shards to balance)",
    )
    ap.add_argument("--no-webdataset", action="store_true", help="skip webdataset's ShardWriter")
    ap.add_argument(
        "--profile",
        metavar="FILE",
        default=None,
        help="also profile one in-process ishard run (writers serial) into FILE",
    )
    ap.add_argument(
        "--run-webdataset", nargs=3, metavar=("DATA", "OUT", "BYTES"), help=argparse.SUPPRESS
    )  # the timed webdataset job, in its own process
    args = ap.parse_args(argv)
    if args.run_webdataset:
        data_dir, out_dir, nbytes = args.run_webdataset
        webdataset_job(Path(data_dir), Path(out_dir), int(nbytes))
        return

    p, data = tree_location(args)
    marker = data.with_name(data.name + ".bench.json")
    work = data.with_name(data.name + "-bench-out")  # beside the data: same filesystem

    probe = subprocess.run(
        [sys.executable, "-m", "ishard", "--version"], check=False, capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise SystemExit(
            f"bench_local: ishard does not run under {sys.executable} — run this script with the "
            "Python ishard is installed in (pip install -e .):\n" + probe.stderr[-1000:]
        )
    if shutil.which("tar") is None:
        raise SystemExit("bench_local: GNU tar is not on PATH — install it (apt-get install tar)")
    with_wds = not args.no_webdataset
    if with_wds:
        try:
            import webdataset  # noqa: F401
        except ImportError:
            print("webdataset: not installed (pip install -e '.[bench]') — left out")
            with_wds = False
    print(machine_line())
    print(f"data: {data}")
    ensure_data(data, marker, p)
    started = time.perf_counter()
    sizes = scan(data, read=True)
    names, total = list(sizes), sum(sizes.values())
    jpeg = [s for n, s in sizes.items() if n.endswith(".JPEG")]
    print(
        f"data: {len(names):,} files, {total:,} bytes ({total / GIB:.2f} GiB): "
        f"{len(jpeg):,} .JPEG (mean {statistics.mean(jpeg) / 1024:.0f} KiB, "
        f"median {statistics.median(jpeg) / 1024:.0f} KiB, max {max(jpeg) / MIB:.1f} MiB), "
        f"{len(names) - len(jpeg):,} .xml; page cache warmed in "
        f"{time.perf_counter() - started:.1f} s"
    )
    recorded = json.loads(marker.read_text())
    if (recorded["files"], recorded["bytes"]) != (len(names), total):
        raise SystemExit(
            f"bench_local: {data} changed since it was generated — delete {marker} "
            "and run again to regenerate it"
        )

    work.mkdir(parents=True, exist_ok=True)
    log = work / "stderr.log"
    ishard = [sys.executable, "-m", "ishard", "shard"]
    shards = work / "shards"
    common = [
        str(data),
        str(shards),
        "--shard-size",
        args.shard_size,
        "--overwrite",
        "--no-progress",
        "--member-names",  # source paths, as tar -cf keeps them (and the checks expect)
        "original",
    ]
    jobs = min(8, os.cpu_count() or 1)

    def ishard_check(ext: str = ".tar", algorithm: str | None = "xxh128"):
        return lambda: check_ishard_output(shards, sizes, ext, algorithm)

    tar_tool = Tool(
        "tar -cf (GNU tar)",
        ["tar", "-cf", str(work / "ref.tar"), "-C", str(data), "."],
        work / "ref.tar",
    )
    default = Tool(
        f"ishard (default: xxh128, jobs {jobs})", ishard + common, shards, ishard_check()
    )
    md5 = Tool(
        "ishard --checksum md5",
        ishard + common + ["--checksum", "md5"],
        shards,
        ishard_check(algorithm="md5"),
    )
    no_md5 = Tool(
        "ishard --checksum none",
        ishard + common + ["--checksum", "none"],
        shards,
        ishard_check(algorithm=None),
    )
    tools = [tar_tool, default, md5, no_md5]
    wds_tool = None
    if with_wds:
        wds_out = work / "wds"
        parse = "import sys; from ishard.sizes import parse_size; print(parse_size(sys.argv[1]))"
        size_bytes = subprocess.run(
            [sys.executable, "-c", parse, args.shard_size],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        wds_tool = Tool(
            "webdataset ShardWriter",
            [
                sys.executable,
                os.path.abspath(__file__),
                "--run-webdataset",
                str(data),
                str(wds_out),
                size_bytes,
            ],
            wds_out,
            lambda: check_webdataset_output(wds_out, sizes),
        )
        tools.append(wds_tool)
    for j in args.jobs:
        tools.append(
            Tool(f"ishard --jobs {j}", ishard + common + ["--jobs", str(j)], shards, ishard_check())
        )
    formats: list[Tool] = []
    if not args.no_formats:
        lz4_ref, zip_ref = work / "ref.tar.lz4", work / "ref.zip"
        formats = [
            Tool(
                "tar -cf - | lz4 -1",
                ["bash", "-c", f"tar -cf - -C '{data}' . | lz4 -1 -q > '{lz4_ref}'"],
                lz4_ref,
            ),
            Tool(
                f"ishard .tar.lz4 (jobs {jobs})",
                ishard + common + ["--ext", ".tar.lz4"],
                shards,
                ishard_check(".tar.lz4"),
            ),
            Tool("zip -0 -qr", ["bash", "-c", f"cd '{data}' && zip -0 -qr '{zip_ref}' ."], zip_ref),
            Tool(
                f"ishard .zip stored (jobs {jobs})",
                ishard + common + ["--ext", ".zip"],
                shards,
                ishard_check(".zip"),
            ),
        ]
    tgz: list[Tool] = []
    if not args.no_tgz:
        library = gzip_library_name()
        tgz_args = common + ["--ext", ".tgz"]
        tgz = [
            Tool(
                f"ishard .tgz ({library}, jobs {jobs})",
                ishard + tgz_args,
                shards,
                ishard_check(".tgz"),
            ),
            Tool(
                f"ishard .tgz (built-in zlib, jobs {jobs})",
                [sys.executable, "-c", BUILTIN_GZIP, "shard", *tgz_args],
                shards,
                ishard_check(".tgz"),
            ),
        ]
        if library == "zlib":
            print(
                "gzip: only the built-in zlib is installed (pip install -e '.[fast]' adds "
                "ISA-L), so the .tgz group compares zlib with itself"
            )

    dask: list[Tool] = []
    if args.dask:
        dask_args = [
            str(data),
            str(shards),
            "--shard-size",
            args.dask_shard_size,
            "--overwrite",
            "--no-progress",
            "--ext",
            ".tgz",
            "--executor",
            "dask",
            "--gzip-library",
            args.dask_gzip_library,
        ]
        dask = [
            Tool(
                f"ishard .tgz ({args.dask_gzip_library}) dask --jobs {n}",
                ishard + dask_args + ["--jobs", str(n)],
                shards,
                ishard_check(".tgz"),
            )
            for n in (1, 2)
        ]

    timer = gnu_time()
    print(
        "peak RSS: "
        + (
            "GNU time (%M)"
            if timer
            else "wait4 ru_maxrss (no GNU time: an upper bound, includes this script)"
        )
    )
    print(
        f"ishard start-up (python -m ishard --version): "
        f"{startup_seconds([sys.executable, '-m', 'ishard', '--version']):.3f} s"
    )
    # One untimed run of each: warms the programs' own files and checks their output.
    tar_version = subprocess.run(["tar", "--version"], check=True, capture_output=True, text=True)
    print(f"tar: {tar_version.stdout.splitlines()[0]}")
    everything = tools + formats + tgz + dask
    for t in everything:
        run_once(t, log, timer)
        if t.check is not None:
            print(f"check: {t.label}: {t.check()}")

    print(f"timing: {args.repeat} rounds, tool order rotated each round, medians reported")
    other_before, wall_before = other_cpu_seconds(), time.perf_counter()
    for r in range(args.repeat):
        for t in everything[r % len(everything) :] + everything[: r % len(everything)]:
            t.runs.append(run_once(t, log, timer))
    for t in everything:
        clear(t.out)

    tell_other_cpu(other_before, wall_before)
    print(f"\n{len(names):,} files, {total / MIB:,.0f} MiB, shard size {args.shard_size}\n")
    print_table(tools, len(names), total, tar_tool, "tar")
    print()
    for t in tools[1:]:
        print(verdict(t, tar_tool))
    print(target(f"{default.label} / tar", default.median / tar_tool.median, 0.85))
    if wds_tool is not None:
        print(target(f"{default.label} / webdataset", default.median / wds_tool.median, 0.35))
    peak = max(max(r.max_rss_mib, r.pss_mib) for t in (default, md5, no_md5) for r in t.runs)
    print(target("ishard peak memory MiB (RSS or all processes' PSS)", peak, 250))
    if formats:
        print()
        print_table(formats[:2], len(names), total, formats[0], "tar|lz4")
        print_table(formats[2:], len(names), total, formats[2], "zip -0")
        print()
        print(
            target(f"{formats[1].label} / tar | lz4 -1", formats[1].median / formats[0].median, 1.0)
        )
        print(target(f"{formats[3].label} / zip -0", formats[3].median / formats[2].median, 1.0))
    if tgz:
        print()
        print_table(tgz, len(names), total, tgz[1], "zlib")
        print()
        print(
            target(
                f"{tgz[0].label} throughput / built-in zlib's",
                tgz[1].median / tgz[0].median,
                2,
                at_most=False,
            )
        )
    if dask:
        print()
        print_table(dask, len(names), total, dask[0], "1 worker")
        print()
        print(
            target(
                "Dask speed-up, 2 workers over 1",
                dask[0].median / dask[1].median,
                1.6,
                at_most=False,
            )
        )
    if args.profile:
        profile_ishard(data, shards, args.shard_size, args.profile)
    print(f"\ndata left at {data}")


if __name__ == "__main__":
    main()
