#!/usr/bin/env python3
"""S3 benchmark: ``ishard shard`` between two SeaweedFS buckets against raw concurrent GETs.

The script starts a private SeaweedFS S3 server on 127.0.0.1 (``tests/support/s3server.py``), uploads
a deterministic ImageNet-like set of small objects into one bucket::

    train/<wnid>/<wnid>_<i>.JPEG        lognormal sizes, mean about 40 KiB

then times, in the same run, alternating and repeating:

- **raw GETs** (the reference): a fresh Python process fetches every object once with many
  concurrent GETs through obstore (``get_async``), at each ``--raw-concurrency``; the fastest
  is the reference; s3fs's GETs (``_cat_file``, 32 in flight) are timed beside it;
- **ishard S3 → S3**: ``python -m ishard shard s3://SRC/train s3://DST/run-N ...``, wall time
  of the whole command (start-up, listing, planning, reading, tar, md5, multipart upload);
- **ishard S3 → local** (unless ``--no-local``): the same into a local directory.

and prints objects/s and MiB/s of each with ishard's rate as a fraction of the raw rate,
and the CPU used by the client and by the server. Then, each on a fresh server: listing
``--listing`` prefixes of 1,000 objects (one paginated listing against ishard's), and local →
S3 of ``--put-mib`` MiB in 64 MiB shards against raw obstore multipart PUTs of the same shard
files. Everything stays on 127.0.0.1.

    python benchmarks/bench_s3.py --small        # smoke run: 1,000 objects, about a minute
    python benchmarks/bench_s3.py                # 20,000 objects of ~40 KiB, about 8 minutes
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import io
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import MIB, machine_line, seaweedfs

ROOT = Path(__file__).resolve().parents[1]
SRC_BUCKET, DST_BUCKET = "bench-src", "bench-dst"
PREFIX = "train"
MIN_SIZE, MAX_SIZE = 2 << 10, 512 << 10
SIGMA = 0.5  # lognormal spread of object sizes
POOL_SIZE = 8 << 20  # object bodies are slices of one pseudo-random pool
UPLOAD_CONCURRENCY = 64


# ---------------------------------------------------------------------------------------------
# The data set


@dataclass(frozen=True)
class Obj:
    key: str
    size: int
    offset: int  # into the pool


def plan_objects(count: int, mean_kib: float, wnids: int, seed: int) -> tuple[list[Obj], bytes]:
    """Every object (key, size, pool offset) and the pool the bodies come from."""
    rng = random.Random(seed)
    pool = rng.randbytes(POOL_SIZE)
    names: set[str] = set()
    while len(names) < wnids:
        names.add(f"n{rng.randrange(10**7, 10**8):08d}")
    classes = sorted(names)
    mean = mean_kib * 1024
    mu = math.log(mean) - SIGMA**2 / 2
    objs = []
    for i in range(count):
        wnid = classes[i % wnids]
        size = int(min(MAX_SIZE, max(MIN_SIZE, rng.lognormvariate(mu, SIGMA))))
        objs.append(Obj(f"{PREFIX}/{wnid}/{wnid}_{i}.JPEG", size, rng.randrange(POOL_SIZE - size)))
    return objs, pool


def body(obj: Obj, pool: bytes) -> bytes:
    """An object's bytes: a JPEG-like header naming the object (no two are equal), then pool."""
    head = (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + obj.key.encode())[: obj.size]
    return head + pool[obj.offset : obj.offset + obj.size - len(head)]


def upload(fs, objs: list[Obj], pool: bytes) -> float:
    """PUT every object into the source bucket, many at a time; the seconds it took."""
    import fsspec.asyn

    async def run() -> None:
        todo = iter(objs)

        async def worker() -> None:
            for obj in todo:
                await fs._pipe_file(f"{SRC_BUCKET}/{obj.key}", body(obj, pool))

        await asyncio.gather(*(worker() for _ in range(UPLOAD_CONCURRENCY)))

    started = time.perf_counter()
    fsspec.asyn.sync(fs.loop, run)
    return time.perf_counter() - started


# ---------------------------------------------------------------------------------------------
# CPU accounting (Linux /proc)

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PF_KTHREAD = 0x00200000


def _stat(pid: int | str) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()
    except OSError:
        return None


def group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the processes of one process group."""
    ticks = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat(entry.name)) and int(fields[2]) == pgid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / TICK


class PeakRss:
    """Polls a process's peak resident set (VmHWM) from a thread until ``stop()``.

    wait4's ru_maxrss would count this script's own size (a forked child starts with it).
    """

    def __init__(self, pid: int) -> None:
        self._path, self.kib, self._done = f"/proc/{pid}/status", 0, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._done.wait(0.1):
            try:
                with open(self._path) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.kib = max(self.kib, int(line.split()[1]))
            except (OSError, ValueError):
                pass

    def stop(self) -> float:
        """Stop polling; the highest peak seen, in MiB."""
        self._done.set()
        self._thread.join()
        return self.kib / 1024


def other_cpu(exclude_pgid: int) -> float:
    """CPU seconds used so far by every user-space process but this one and the server's."""
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        fields = _stat(entry.name)
        if not fields or int(fields[6]) & PF_KTHREAD or int(fields[2]) == exclude_pgid:
            continue
        ticks += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / TICK


# ---------------------------------------------------------------------------------------------
# The raw reference: a separate process (``--raw-worker``) so it starts as cold as ishard


def raw_worker(spec_path: str) -> None:
    """Fetch every listed object once with ``concurrency`` GETs in flight; print JSON."""
    spec = json.loads(Path(spec_path).read_text())
    if spec.get("client") == "obstore":
        raw_obstore(spec)
        return
    import fsspec.asyn
    import s3fs

    keys = Path(spec["keys"]).read_text().split("\n")
    conc = spec["concurrency"]
    fs = s3fs.S3FileSystem(
        endpoint_url=spec["endpoint"],
        skip_instance_cache=True,
        max_concurrency=1,  # one plain GET per object (above 1 s3fs adds a HEAD before it)
        config_kwargs={"max_pool_connections": max(10, conc),
                       "retries": {"max_attempts": 2, "mode": "standard"}},
    )  # fmt: skip
    bucket = spec["bucket"]

    async def fetch() -> tuple[int, int]:
        todo = iter(keys)
        got = [0, 0]

        async def worker() -> None:
            for key in todo:
                data = await fs._cat_file(f"{bucket}/{key}")
                got[0] += 1
                got[1] += len(data)

        await asyncio.gather(*(worker() for _ in range(conc)))
        return got[0], got[1]

    # not timed: client set-up and the first connection
    fsspec.asyn.sync(fs.loop, fs._cat_file, f"{bucket}/{keys[0]}")
    report_fetch(spec, lambda: fsspec.asyn.sync(fs.loop, fetch))


def report_fetch(spec: dict, fetch_all) -> None:
    """Time ``fetch_all()`` (→ objects, bytes) with the client's and server's CPU; print JSON."""
    weed0, cpu0, started = group_cpu(spec["server_pgid"]), time.process_time(), time.perf_counter()
    count, nbytes = fetch_all()
    seconds = time.perf_counter() - started
    out = {"seconds": seconds, "objects": count, "bytes": nbytes,
           "client_cpu": time.process_time() - cpu0,
           "server_cpu": group_cpu(spec["server_pgid"]) - weed0}  # fmt: skip
    with open("/proc/self/status") as f:
        out["rss_mib"] = next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024
    print(json.dumps(out))


def raw_obstore(spec: dict) -> None:
    """The reference: obstore's ``get_async`` of every object, ``concurrency`` in flight."""
    import obstore
    from obstore.store import S3Store

    keys = Path(spec["keys"]).read_text().split("\n")
    conc = spec["concurrency"]
    store = S3Store(
        spec["bucket"],
        endpoint=spec["endpoint"],
        region="us-east-1",
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )

    async def fetch() -> tuple[int, int]:
        todo = iter(keys)
        got = [0, 0]

        async def worker() -> None:
            for key in todo:
                data = await (await obstore.get_async(store, key)).bytes_async()
                got[0] += 1
                got[1] += len(data)

        await asyncio.gather(*(worker() for _ in range(conc)))
        return got[0], got[1]

    async def first() -> None:  # obstore's coroutines are made inside the running loop
        await obstore.get_async(store, keys[0])

    loop = asyncio.new_event_loop()
    loop.run_until_complete(first())  # not timed: set-up
    report_fetch(spec, lambda: loop.run_until_complete(fetch()))


# ---------------------------------------------------------------------------------------------
# Timing


@dataclass
class Run:
    seconds: float
    client_cpu: float
    server_cpu: float
    rss_mib: float = 0.0


@dataclass
class Tool:
    label: str
    kind: str  # raw, s3, local
    args: list[str] = field(default_factory=list)
    concurrency: int = 0
    client: str = "obstore"  # raw GETs: obstore or s3fs
    runs: list[Run] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    def med(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs)


class Bench:
    def __init__(self, args, server, objs: list[Obj], pool: bytes, work: Path) -> None:
        self.args, self.server, self.objs, self.pool, self.work = args, server, objs, pool, work
        self.total = sum(o.size for o in objs)
        self.pgid = server._proc.pid  # weed runs in its own session: pid == pgid
        self.fs = server.filesystem()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.env.update(AWS_ACCESS_KEY_ID=server.access_key,
                        AWS_SECRET_ACCESS_KEY=server.secret_key, NO_PROXY="*")  # fmt: skip
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            self.env.pop(var, None)
        self.keys_file = work / "keys.txt"
        self.keys_file.write_text("\n".join(o.key for o in objs))
        self.local_out = work / "local-out"
        self.counter = 0
        self.checked = ""  # what the last ishard run's check found

    # -- one run of each kind ------------------------------------------------------------
    def run_raw(self, tool: Tool) -> Run:
        spec = self.work / "raw.json"
        spec.write_text(json.dumps({
            "endpoint": self.server.endpoint_url, "bucket": SRC_BUCKET,
            "keys": str(self.keys_file), "concurrency": tool.concurrency,
            "server_pgid": self.pgid, "client": tool.client,
        }))  # fmt: skip
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--raw-worker", str(spec)],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"bench_s3: the raw GET worker failed:\n{proc.stderr[-3000:]}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if (out["objects"], out["bytes"]) != (len(self.objs), self.total):
            raise SystemExit(
                f"bench_s3: raw GETs fetched {out['objects']} objects / {out['bytes']} bytes, "
                f"expected {len(self.objs)} / {self.total}"
            )
        return Run(out["seconds"], out["client_cpu"], out["server_cpu"], out["rss_mib"])

    def ishard_argv(self, tool: Tool, dst: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "ishard",
            "shard",
            f"s3://{SRC_BUCKET}/{PREFIX}",
            dst,
            "--endpoint-url",
            self.server.endpoint_url,
            "--shard-size",
            self.args.shard_size,
            "--no-progress",
            "--json",
            "--member-names",
            "original",
            *tool.args,
        ]  # fmt: skip  (members are checked against the object names)

    def run_ishard(self, tool: Tool, check: bool = False) -> Run:
        self.counter += 1
        if tool.kind == "s3":
            prefix = f"run-{self.counter:03d}"  # a fresh, empty prefix every time
            dst = f"s3://{DST_BUCKET}/{prefix}"
        else:
            shutil.rmtree(self.local_out, ignore_errors=True)
            os.sync()
            dst = str(self.local_out)
        argv = self.ishard_argv(tool, dst)
        out, err = self.work / "ishard.out", self.work / "ishard.err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            weed0 = group_cpu(self.pgid)
            started = time.perf_counter()
            proc = subprocess.Popen(argv, env=self.env, stdout=stdout, stderr=stderr)
            peak = PeakRss(proc.pid)
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - started
            weed = group_cpu(self.pgid) - weed0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(
                f"bench_s3: {tool.label} exited with {proc.returncode}:\n"
                + err.read_text(errors="replace")[-3000:]
            )
        summary = json.loads(out.read_text())
        if summary["files"] != len(self.objs) or summary["bytes"] != self.total:
            raise SystemExit(f"bench_s3: {tool.label} summary: {summary}")
        if tool.kind == "s3":
            self.checked = self.check_s3(prefix, full=check)
        else:
            self.checked = self.check_local(full=check)
        return Run(seconds, usage.ru_utime + usage.ru_stime, weed, peak.stop())

    # -- checks -----------------------------------------------------------------------------
    def _check_manifest(self, manifest: dict, sizes: dict[str, int]) -> str:
        totals = manifest["ishard"]["totals"]
        listed = {s["url"]: s["filesize"] for s in manifest["shardlist"]}
        problems = []
        if totals["files"] != len(self.objs):
            problems.append(f"manifest says {totals['files']} files, not {len(self.objs)}")
        if totals["payload_bytes"] != self.total:
            problems.append(f"manifest says {totals['payload_bytes']} bytes, not {self.total}")
        if listed != sizes:
            problems.append(f"manifest lists {listed}, the destination holds {sizes}")
        if problems:
            raise SystemExit("bench_s3: ishard output is wrong: " + "; ".join(problems))
        return f"{len(sizes)} shards, {totals['files']:,} files"

    def _check_members(self, shards: list[tuple[str, bytes]], manifest: dict) -> str:
        """Every object exactly once across the shards, byte for byte; md5s as recorded."""
        expected = {o.key: o for o in self.objs}
        md5 = {s["url"]: s.get("md5sum") for s in manifest["shardlist"]}  # none: --checksum none
        seen = hashed = 0
        for name, data in shards:
            if md5.get(name):
                if md5[name] != hashlib.md5(data).hexdigest():
                    raise SystemExit(f"bench_s3: md5 of {name} differs from the manifest")
                hashed += 1
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                for member in tar:
                    obj = expected.pop(member.name, None)
                    content = tar.extractfile(member).read()
                    if obj is None or content != body(obj, self.pool):
                        raise SystemExit(f"bench_s3: {name}: unexpected member {member.name}")
                    seen += 1
        if expected:
            raise SystemExit(f"bench_s3: {len(expected)} objects missing from the shards")
        return f"every object once, byte for byte ({seen:,}); {hashed} shard md5s match"

    def check_s3(self, prefix: str, full: bool) -> str:
        base = f"{DST_BUCKET}/{prefix}"
        manifest = json.loads(self.fs.cat_file(f"{base}/manifest.json"))
        found = self.fs.find(base, detail=True)
        sizes = {p[len(base) + 1 :]: info["size"] for p, info in found.items()
                 if not p.endswith("manifest.json")}  # fmt: skip
        text = self._check_manifest(manifest, sizes)
        if full:
            text += "; " + self._check_members(
                ((n, self.fs.cat_file(f"{base}/{n}")) for n in sorted(sizes)), manifest
            )
        return text

    def check_local(self, full: bool) -> str:
        manifest = json.loads((self.local_out / "manifest.json").read_text())
        sizes = {p.name: p.stat().st_size for p in self.local_out.iterdir()
                 if p.name != "manifest.json"}  # fmt: skip
        text = self._check_manifest(manifest, sizes)
        if full:
            text += "; " + self._check_members(
                ((n, (self.local_out / n).read_bytes()) for n in sorted(sizes)), manifest
            )
        return text

    def run(self, tool: Tool, check: bool = False) -> Run:
        return self.run_raw(tool) if tool.kind == "raw" else self.run_ishard(tool, check)


# ---------------------------------------------------------------------------------------------
# Report


def versions(weed: str) -> str:
    from importlib.metadata import version

    out = subprocess.run([weed, "version"], capture_output=True, text=True, check=False).stdout
    # "version 8000GB 4.48 pypi linux amd64": the build's volume-size flavour, then the version
    weed_version = next((w for w in out.split() if w[:1].isdigit() and "." in w), "?")
    libs = ", ".join(f"{p} {version(p)}" for p in ("ishard", "obstore", "s3fs", "botocore"))
    return f"{libs}; SeaweedFS {weed_version}"


def print_table(tools: list[Tool], ref: Tool, count: int, total: int) -> None:
    header = (
        f"{'tool':<34} {'median s':>9} {'objects/s':>10} {'MiB/s':>7} {'client CPU s':>13} "
        f"{'server CPU s':>13} {'cores used':>11} {'peak RSS MiB':>13} {'rate vs raw':>12}"
    )
    print(header)
    print("-" * len(header))
    for t in tools:
        med = t.median
        client, server = t.med("client_cpu"), t.med("server_cpu")
        mark = " (reference)" if t is ref else ""
        print(
            f"{t.label:<34} {med:>9.2f} {count / med:>10,.0f} {total / MIB / med:>7.1f} "
            f"{client:>13.1f} {server:>13.1f} {(client + server) / med:>11.2f} "
            f"{max(r.rss_mib for r in t.runs):>13.0f} {ref.median / med:>11.0%}{mark}"
        )
    print()
    for t in tools:
        print(f"  {t.label:<32} runs (s): " + ", ".join(f"{r.seconds:.2f}" for r in t.runs))


def main(argv: list[str] | None = None) -> None:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--raw-worker":
        raw_worker(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--objects",
        type=int,
        default=20_000,
        help="objects (default 20000; 0: only the listing and local -> S3 parts)",
    )
    ap.add_argument("--kib", type=float, default=40, help="mean object size in KiB (default 40)")
    ap.add_argument("--wnids", type=int, default=100, help="class directories (default 100)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--small", action="store_true", help="smoke run: 1,000 objects")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--shard-size", default="64MiB", help="ishard --shard-size (default 64MiB)")
    ap.add_argument(
        "--raw-concurrency", default="32,128",
        help="GETs in flight for the raw reference, comma-separated; the fastest is the "
             "reference (default 32,128)",
    )  # fmt: skip
    ap.add_argument("--no-local", action="store_true", help="skip ishard S3 -> local")
    ap.add_argument(
        "--listing",
        type=int,
        default=100,
        metavar="PREFIXES",
        help="also time listing PREFIXES x 1,000 objects (0: skip; default 100)",
    )
    ap.add_argument(
        "--put-mib",
        type=int,
        default=1024,
        metavar="MIB",
        help="also time local -> S3 of MIB MiB in 64 MiB shards against raw "
        "multipart PUTs (0: skip; default 1024)",
    )
    ap.add_argument(
        "--jobs", type=int, action="append", default=[],
        help="also time ishard S3 -> S3 with --jobs N (repeatable)",
    )  # fmt: skip
    ap.add_argument(
        "--ishard-arg", action="append", default=[], metavar="ARG",
        help="extra argument for every ishard run (repeatable), e.g. --ishard-arg=--read-buffer=64MiB",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.small:
        args.objects, args.listing, args.put_mib = 1_000, 10, 128
    if sys.platform != "linux":
        raise SystemExit("bench_s3: needs Linux (/proc for the CPU accounting)")

    s3server, weed = seaweedfs("bench_s3")
    probe = subprocess.run([sys.executable, "-m", "ishard", "--version"], capture_output=True,
                           text=True, check=False)  # fmt: skip
    if probe.returncode != 0:
        raise SystemExit(f"bench_s3: ishard does not run under {sys.executable}:\n{probe.stderr}")

    print(machine_line())
    print(versions(weed))
    if not args.objects:  # the listing and local -> S3 parts only
        if args.listing:
            listing_bench(args, s3server)
        if args.put_mib:
            put_bench(args, s3server)
        return
    objs, pool = plan_objects(args.objects, args.kib, args.wnids, args.seed)
    total = sum(o.size for o in objs)
    sizes = sorted(o.size for o in objs)
    print(
        f"data: {len(objs):,} objects, {total:,} bytes ({total / MIB:,.0f} MiB), "
        f"mean {total / len(objs) / 1024:.1f} KiB, median {sizes[len(sizes) // 2] / 1024:.1f} "
        f"KiB, {sizes[0] / 1024:.1f}-{sizes[-1] / 1024:.0f} KiB, {args.wnids} classes "
        f"(seed {args.seed})"
    )

    # a SIGTERM must still stop the server (a shell's background job ignores SIGINT)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(tempfile.mkdtemp(prefix="ishard-bench-s3-"))
    server = s3server.S3Server()  # its own temp dir, killed and removed by close()
    try:
        server.start()
        print(
            f"server: SeaweedFS on {server.endpoint_url} (started in {server.startup_seconds:.1f} s)"
        )
        server.make_bucket(SRC_BUCKET)
        server.make_bucket(DST_BUCKET)
        bench = Bench(args, server, objs, pool, work)
        weed0 = group_cpu(bench.pgid)
        seconds = upload(bench.fs, objs, pool)
        print(
            f"upload: {len(objs):,} PUTs, {UPLOAD_CONCURRENCY} in flight: {seconds:.1f} s "
            f"({len(objs) / seconds:,.0f} objects/s; server CPU {group_cpu(bench.pgid) - weed0:.1f} s)"
        )

        extra = list(args.ishard_arg)
        tools = [Tool(f"raw obstore GETs, {c} in flight", "raw", concurrency=c)
                 for c in (int(x) for x in args.raw_concurrency.split(","))]  # fmt: skip
        if importlib.util.find_spec("s3fs") is not None:
            tools.append(Tool("raw s3fs GETs, 32 in flight", "raw", concurrency=32, client="s3fs"))
        tools.append(Tool("ishard S3 -> S3", "s3", extra))
        for j in args.jobs:
            tools.append(Tool(f"ishard S3 -> S3 --jobs {j}", "s3", [*extra, "--jobs", str(j)]))
        if not args.no_local:
            tools.append(Tool("ishard S3 -> local", "local", extra))

        # Untimed first: one raw pass (the server reads every object once) and one run of
        # each ishard variant, whose output is checked in full (every member byte for byte).
        for t in tools[:1] + [t for t in tools if t.kind != "raw"]:
            run = bench.run(t, check=True)
            print(f"warm-up: {t.label}: {run.seconds:.1f} s"
                  + (f"; check: {bench.checked}" if t.kind != "raw" else ""))  # fmt: skip

        print(f"timing: {args.repeat} rounds, order rotated each round, medians reported")
        other0, wall0 = other_cpu(bench.pgid), time.perf_counter()
        paired: list[float] = []
        for r in range(args.repeat):
            round_other, round_wall = other_cpu(bench.pgid), time.perf_counter()
            for t in tools[r % len(tools) :] + tools[: r % len(tools)]:
                t.runs.append(bench.run(t))
            best_raw = min(
                t.runs[-1].seconds for t in tools if t.kind == "raw" and t.client == "obstore"
            )
            s3 = next(t for t in tools if t.kind == "s3")
            paired.append(best_raw / s3.runs[-1].seconds)
            share = (other_cpu(bench.pgid) - round_other) / (time.perf_counter() - round_wall)
            print(f"  round {r + 1}: " + ", ".join(f"{t.label} {t.runs[-1].seconds:.2f} s"
                                                   for t in tools)
                  + f"; other processes {share:.2f} CPUs")  # fmt: skip
        busy = (other_cpu(bench.pgid) - other0) / (time.perf_counter() - wall0)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)

    print(f"other processes used {busy:.2f} CPUs on average while timing")
    if busy > 0.25:
        print("warning: the machine was busy with other work while timing — numbers are noisy")
    raws = [t for t in tools if t.kind == "raw" and t.client == "obstore"]
    ref = min(raws, key=lambda t: t.median)
    print(f"\n{len(objs):,} objects, {total / MIB:,.0f} MiB, shard size {args.shard_size}\n")
    print_table(tools, ref, len(objs), total)
    s3 = next(t for t in tools if t.kind == "s3")
    print(
        "\nclient CPU: the raw worker's own CPU while fetching; ishard's whole process. "
        "server CPU: the weed process group during the same time. cores used: both, per "
        f"second of wall time (the machine has {os.cpu_count()}). peak RSS: of the client process."
    )
    print(
        f"\nverdict: ishard S3 -> S3 runs at {ref.median / s3.median:.0%} of the raw "
        f"concurrent-GET rate ({ref.label}); per round, against the best raw run of the same "
        f"round: " + ", ".join(f"{p:.0%}" for p in paired) + " (target: 80%)"
    )
    local = next((t for t in tools if t.kind == "local"), None)
    if local is not None:
        print(
            f"verdict: ishard S3 -> local runs at {ref.median / local.median:.0%} of it "
            "(target: 90%)"
        )
    if args.listing:
        listing_bench(args, s3server)
    if args.put_mib:
        put_bench(args, s3server)


# ---------------------------------------------------------------------------------------------
# Listing: one paginated listing against ishard's (split by folder, folders listed at once)


def _obstore(server, bucket: str):
    from obstore.store import S3Store

    return S3Store(
        bucket,
        endpoint=server.endpoint_url,
        region="us-east-1",
        access_key_id=server.access_key,
        secret_access_key=server.secret_key,
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )


def _put_many(store, items: list[tuple[str, bytes]], conc: int = 64) -> None:
    import obstore

    async def run() -> None:
        todo = iter(items)

        async def worker() -> None:
            for key, data in todo:
                await obstore.put_async(store, key, data)

        await asyncio.gather(*(worker() for _ in range(conc)))

    asyncio.run(run())


def alternate(runs: list, times: dict[str, list[float]], rounds: int) -> None:
    """Time each ``(label, fn)`` of ``runs`` ``rounds`` times, the order rotated each round."""
    for r in range(rounds):
        for label, fn in runs[r % 2 :] + runs[: r % 2]:
            began = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - began)


def listing_bench(args, s3server) -> None:
    import obstore

    from ishard.store import open_store
    from ishard.store.retry import Retrier

    server = s3server.S3Server()
    try:
        server.start()
        bucket = server.make_bucket("bench-list")
        store = _obstore(server, bucket)
        keys = [f"p{p:03d}/obj-{i:05d}.jpg" for p in range(args.listing) for i in range(1000)]
        started = time.perf_counter()
        _put_many(store, [(k, b"x") for k in keys])
        print(
            f"\nlisting: {len(keys):,} objects under {args.listing} prefixes, uploaded in "
            f"{time.perf_counter() - started:.1f} s"
        )
        ours = open_store(
            f"s3://{bucket}",
            endpoint_url=server.endpoint_url,
            storage_options={"key": server.access_key, "secret": server.secret_key},
        )

        def plain() -> int:
            return sum(len(page) for page in obstore.list(store, chunk_size=1000))

        def ishard_listing() -> int:
            return sum(len(page) for page in ours.pages("", Retrier()))

        times: dict[str, list[float]] = {
            "one paginated listing (obstore.list)": [],
            "ishard's listing (split by folder)": [],
        }
        runs = list(zip(times, (plain, ishard_listing)))
        for label, fn in runs:  # warm-up, and a check
            if fn() != len(keys):
                raise SystemExit(f"bench_s3: {label} listed the wrong number of objects")
        alternate(runs, times, max(3, args.repeat))
        base = statistics.median(times[runs[0][0]])
        for label, values in times.items():
            med = statistics.median(values)
            print(
                f"  {label:<40} median {med:6.2f} s  {len(keys) / med:>9,.0f} objects/s  "
                f"{base / med:5.2f}x"
            )
        speedup = base / statistics.median(times[runs[1][0]])
        print(f"verdict: ishard lists {speedup:.1f}x as fast as one paginated listing (target: 3x)")
        seconds, peak = dry_run_peak(server, bucket)
        print(
            f"  a dry run planning the bucket (--dry-run=summary): {seconds:.1f} s, peak RSS "
            f"{peak:,.0f} MiB for {len(keys):,} objects (target: at most 512 MiB at 1,000,000)"
        )
    finally:
        server.close()


def dry_run_peak(server, bucket: str) -> tuple[float, float]:
    """Seconds and peak RSS (MiB, by GNU time) of ``ishard shard s3://BUCKET --dry-run=summary``."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": server.access_key,
           "AWS_SECRET_ACCESS_KEY": server.secret_key}  # fmt: skip
    with tempfile.NamedTemporaryFile(delete=False) as out:
        pass
    argv = [shutil.which("time") or "/usr/bin/time", "-f", "%M", "-o", out.name, sys.executable,
            "-m", "ishard", "shard", f"s3://{bucket}", "--endpoint-url", server.endpoint_url,
            "--dry-run=summary", "--shard-size", "512MiB", "--member-names", "original"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bench_s3: the dry run failed:\n{done.stderr[-2000:]}")
    peak = int(Path(out.name).read_text().split()[-1]) / 1024
    os.unlink(out.name)
    return seconds, peak


# ---------------------------------------------------------------------------------------------
# local -> S3: ishard's shards against raw multipart PUTs of the same bytes


def put_bench(args, s3server) -> None:
    import obstore

    work = Path(tempfile.mkdtemp(prefix="ishard-bench-put-"))
    server = s3server.S3Server()
    try:
        server.start()
        bucket = server.make_bucket("bench-put")
        src = work / "src"
        src.mkdir()
        rng = random.Random(args.seed)
        pool = rng.randbytes(8 << 20)
        for i in range(args.put_mib):  # 1 MiB files, pseudo-random bytes (incompressible)
            start = (i * 7919) % (len(pool) - MIB)
            (src / f"{i:06d}.bin").write_bytes(pool[start : start + MIB])
        shards = work / "shards"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ishard",
                "shard",
                str(src),
                str(shards),
                "--shard-size",
                "64MiB",
                "--no-progress",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        files = sorted(p for p in shards.iterdir() if p.name != "manifest.json")
        total = sum(p.stat().st_size for p in files)
        store = _obstore(server, bucket)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID=server.access_key, AWS_SECRET_ACCESS_KEY=server.secret_key)
        counter = [0]

        def raw() -> None:
            counter[0] += 1

            async def run() -> None:
                todo = iter(files)

                async def worker() -> None:
                    for path in todo:
                        await obstore.put_async(
                            store,
                            f"raw-{counter[0]}/{path.name}",
                            path,
                            chunk_size=16 << 20,
                            max_concurrency=2,
                        )

                await asyncio.gather(*(worker() for _ in range(4)))

            asyncio.run(run())

        def ours() -> None:
            counter[0] += 1
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ishard",
                    "shard",
                    str(src),
                    f"s3://{bucket}/ishard-{counter[0]}",
                    "--shard-size",
                    "64MiB",
                    "--endpoint-url",
                    server.endpoint_url,
                    "--no-progress",
                ],
                check=True,
                env=env,
                stdout=subprocess.DEVNULL,
            )

        times: dict[str, list[float]] = {"raw obstore multipart PUTs": [], "ishard local -> S3": []}
        runs = list(zip(times, (raw, ours)))
        for _, fn in runs:
            fn()  # warm-up
        alternate(runs, times, max(3, args.repeat))
        base = statistics.median(times[runs[0][0]])
        print(f"\nlocal -> S3: {len(files)} shards of 64 MiB, {total / MIB:,.0f} MiB")
        for label, values in times.items():
            med = statistics.median(values)
            print(
                f"  {label:<40} median {med:6.2f} s  {total / MIB / med:7.1f} MiB/s  "
                f"{base / med:5.0%}"
            )
        ratio = base / statistics.median(times[runs[1][0]])
        print(
            f"verdict: ishard local -> S3 runs at {ratio:.0%} of raw multipart PUTs (target: 80%)"
        )
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
