#!/usr/bin/env python3
"""Composed shards: ``ishard shard S3 -> S3 --compose auto`` against ``--compose never``.

With ``--compose auto`` (the default) a ``.tar`` shard whose source and destination share an
S3 service is composed inside the store: members of ``--compose-min-size`` and up are copied
there (UploadPartCopy of a byte range); the headers, the small members and up to 5 MiB of
each large member's first bytes go in parts the client writes. ``--compose never`` moves
every byte through the client (GET, then PUT). This script measures what that saves.

It starts a private SeaweedFS S3 server on 127.0.0.1 (``tests/support/s3server.py``) and a
byte-counting TCP proxy in front of it (127.0.0.1 too; bytes pass unchanged, so SigV4
signatures stay valid), uploads a deterministic data set into one bucket::

    data/clip-NNN.mp4   --large members of --large-mib MiB (random bytes), each with
    data/clip-NNN.json  a member of about 40 KiB
    data/img-NNN.jpg    --small minus --large samples of one 40 KiB member

then runs, in rounds (never, auto, never, auto, ...),
``python -m ishard shard s3://SRC/data/ s3://DST/run-K-MODE/ --endpoint-url PROXY
--compose MODE --shard-size 512MiB -q``, each with its wall time, the bytes through the proxy
both ways, the CPU seconds of the ishard process (its rusage), of the server (the ``weed``
process group) and of the proxy (this process). After the first round the shards of every
mode are compared byte for byte, directly against the server: a difference stops the script
with exit code 1.

The floor is what the client must move at least when composing: one minimum-size part
(5 MiB) read and written per composed member (2 x 5 MiB), and everything else of the shards
(headers, padding, small members: the shards' bytes minus the composed members') read and
written (x 2). Reported: each mode's client bytes (median), auto's bytes over the floor
(target <= 1.25) and over never's (target about <= 0.20), auto's wall time over never's
(target <= 0.5), medians and per round. A missed target is reported, not an error.

``--min-size-sweep`` times instead, on a data set whose large members are ``--sweep-large-mib``
(24) MiB, never against auto with ``--compose-min-size`` 16MiB (the members composed), 32MiB
and 64MiB (not composed): where composing starts to pay. The order rotates each round there.

    python benchmarks/bench_compose.py                    # 20 x 64 MiB + 200 x 40 KiB, 3 rounds
    python benchmarks/bench_compose.py --min-size-sweep   # 20 x 24 MiB, min size 16/32/64 MiB
    python benchmarks/bench_compose.py --large 4 --small 40 --large-mib 32 --rounds 1   # smoke
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench_s3 import group_cpu, other_cpu
from benchlib import MIB, machine_line, seaweedfs

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
REGION = "us-east-1"
SRC_BUCKET, DST_BUCKET = "compose-src", "compose-dst"
PREFIX = "data"
MIN_PART = 5 * MIB  # S3's smallest part but the last: what each composed member costs the client
SMALL_SIZE = 40 << 10
DEFAULT_MIN_SIZE = 16 * MIB  # ishard's --compose-min-size default
UPLOADS_IN_FLIGHT = 4
TARGET_FLOOR, TARGET_BYTES, TARGET_TIME = 1.25, 0.20, 0.5


# ---------------------------------------------------------------------------------------------
# The data set


@dataclass(frozen=True)
class Obj:
    key: str
    size: int


def plan_objects(large: int, large_mib: int, small: int) -> list[Obj]:
    """``large`` samples of a large clip and a ~40 KiB json, then ``small - large`` samples of
    one 40 KiB image (``small`` members of about 40 KiB in all)."""
    rng = random.Random(f"sizes-{large}-{small}")
    objs = []
    for i in range(large):
        objs.append(Obj(f"{PREFIX}/clip-{i:03d}.mp4", large_mib * MIB))
        objs.append(Obj(f"{PREFIX}/clip-{i:03d}.json", SMALL_SIZE + rng.randrange(-2048, 2049)))
    for i in range(large, small):
        objs.append(Obj(f"{PREFIX}/img-{i:03d}.jpg", SMALL_SIZE))
    return objs


def body(obj: Obj, seed: int) -> bytes:
    """An object's bytes: pseudo-random, fixed by its key, its size and ``seed``."""
    return random.Random(f"{seed}-{obj.key}-{obj.size}").randbytes(obj.size)


def s3_client(endpoint: str, access_key: str, secret_key: str):
    """A plain botocore client straight to the server (not through the proxy)."""
    import botocore.config
    import botocore.session

    return botocore.session.get_session().create_client(
        "s3",
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        config=botocore.config.Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=300,
            max_pool_connections=UPLOADS_IN_FLIGHT * 2,
        ),
    )


def upload(client, objs: list[Obj], seed: int) -> float:
    """PUT every object into the source bucket, a few at a time; the seconds it took."""

    def put(obj: Obj) -> None:
        client.put_object(Bucket=SRC_BUCKET, Key=obj.key, Body=body(obj, seed))

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(UPLOADS_IN_FLIGHT) as pool:
        for _ in pool.map(put, objs):
            pass
    return time.perf_counter() - started


# ---------------------------------------------------------------------------------------------
# The byte-counting proxy: raw TCP, both directions, a thread each


class CountingProxy:
    """Listens on 127.0.0.1:0 and forwards every connection, byte for byte, to ``port`` on
    127.0.0.1, counting the bytes client -> server (``up``) and server -> client (``down``)."""

    CHUNK = 256 << 10

    def __init__(self, port: int) -> None:
        self.upstream = (HOST, port)
        self._listener = socket.create_server((HOST, 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._counts = {"up": 0, "down": 0}
        self.active = 0
        self.connections = 0
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return self._counts["up"], self._counts["down"]

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until no connection is open (a finished client's sockets are closed)."""
        deadline = time.monotonic() + timeout
        while self.active and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self.active += 1
            self.connections += 1
        back = threading.Thread(target=self._pump, args=(server, client, "down"), daemon=True)
        back.start()
        self._pump(client, server, "up")
        back.join()
        client.close()
        server.close()
        with self._lock:
            self.active -= 1

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        buf = bytearray(self.CHUNK)
        view = memoryview(buf)
        try:
            while True:
                n = src.recv_into(buf)
                if not n:
                    break
                with self._lock:
                    self._counts[direction] += n
                dst.sendall(view[:n])
            dst.shutdown(socket.SHUT_WR)  # pass the half-close on
        except OSError:
            for s in (src, dst):  # a reset: end the other direction too
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


# ---------------------------------------------------------------------------------------------
# Runs


@dataclass
class Run:
    seconds: float
    up: int  # client -> server bytes through the proxy
    down: int  # server -> client
    cpu: float  # the ishard process: user + system
    server_cpu: float
    proxy_cpu: float
    tar_bytes: int = 0
    shards: int = 0
    composed: int = 0  # shards the manifest records with a CRC-32C (composed in the store)

    @property
    def total(self) -> int:
        return self.up + self.down


@dataclass
class Mode:
    label: str
    args: list[str]
    min_size: int | None  # None: never composes
    runs: list[Run] = field(default_factory=list)

    def med(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs)


class Bench:
    def __init__(self, args, server, proxy: CountingProxy, objs: list[Obj], work: Path) -> None:
        self.args, self.server, self.proxy, self.objs = args, server, proxy, objs
        self.pgid = server._proc.pid  # weed runs in its own session: pid == pgid
        self.client = s3_client(server.endpoint_url, server.access_key, server.secret_key)
        (work / "aws-config").write_text("")
        (work / "aws-credentials").write_text("")
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "AIS_", "ISHARD_"))
            and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        }
        self.env.update(
            AWS_ACCESS_KEY_ID=server.access_key,
            AWS_SECRET_ACCESS_KEY=server.secret_key,
            AWS_REGION=REGION,
            AWS_CONFIG_FILE=str(work / "aws-config"),
            AWS_SHARED_CREDENTIALS_FILE=str(work / "aws-credentials"),
            AWS_EC2_METADATA_DISABLED="true",
            NO_PROXY="127.0.0.1,localhost",
            PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        )

    def argv(self, mode: Mode, dst: str) -> list[str]:
        return [
            sys.executable, "-m", "ishard", "shard", f"s3://{SRC_BUCKET}/{PREFIX}/", dst,
            "--endpoint-url", self.proxy.endpoint_url,
            *mode.args,
            "--shard-size", self.args.shard_size,
            "-q",
        ]  # fmt: skip

    def run(self, mode: Mode, prefix: str) -> Run:
        """One ishard run into ``DST/prefix/``, timed and counted."""
        argv = self.argv(mode, f"s3://{DST_BUCKET}/{prefix}/")
        self.proxy.settle()
        up0, down0 = self.proxy.counts()
        weed0, mine0 = group_cpu(self.pgid), time.process_time()
        with tempfile.TemporaryFile() as err:
            started = time.perf_counter()
            proc = subprocess.Popen(
                argv, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=err
            )
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - started
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                err.seek(0)
                raise SystemExit(
                    f"bench_compose: ishard exited with {proc.returncode}: {' '.join(argv)}\n"
                    + err.read().decode(errors="replace")[-3000:]
                )
        self.proxy.settle()
        up1, down1 = self.proxy.counts()
        run = Run(
            seconds=seconds,
            up=up1 - up0,
            down=down1 - down0,
            cpu=usage.ru_utime + usage.ru_stime,
            server_cpu=group_cpu(self.pgid) - weed0,
            proxy_cpu=time.process_time() - mine0,
        )
        sizes = self.listing(prefix)
        tars = {k: s for k, s in sizes.items() if k.endswith(".tar")}
        run.tar_bytes, run.shards = sum(tars.values()), len(tars)
        manifest = json.loads(self.get(f"{prefix}/manifest.json"))
        run.composed = sum(
            1 for e in manifest["shardlist"] if str(e.get("checksum", "")).startswith("crc32c:")
        )
        return run

    # -- the destination, read directly from the server -----------------------------------
    def listing(self, prefix: str) -> dict[str, int]:
        """Every object under ``DST/prefix/``: its name below the prefix and its size."""
        out = {}
        pages = self.client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=DST_BUCKET, Prefix=f"{prefix}/"):
            for item in page.get("Contents", []):
                out[item["Key"][len(prefix) + 1 :]] = item["Size"]
        return out

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=DST_BUCKET, Key=key)["Body"].read()

    def digest(self, key: str) -> str:
        h = hashlib.sha256()
        for chunk in self.client.get_object(Bucket=DST_BUCKET, Key=key)["Body"].iter_chunks(
            8 * MIB
        ):
            h.update(chunk)
        return h.hexdigest()

    def same_shards(self, prefixes: dict[str, str]) -> tuple[bool, str]:
        """Are the ``.tar`` shards under each prefix (label -> prefix) the same, byte for byte?"""
        found: dict[str, dict[str, str]] = {}
        for label, prefix in prefixes.items():
            tars = sorted(k for k in self.listing(prefix) if k.endswith(".tar"))
            found[label] = {k: self.digest(f"{prefix}/{k}") for k in tars}
        (first, ref), *others = found.items()
        problems = []
        for label, got in others:
            if set(got) != set(ref):
                problems.append(f"{label} has shards {sorted(got)}, {first} has {sorted(ref)}")
                continue
            problems += [f"{label}: {k} differs from {first}'s" for k in ref if got[k] != ref[k]]
        if problems:
            return False, "; ".join(problems)
        return True, (f"{len(ref)} shards, the same sha256 under every mode ({', '.join(found)})")


# ---------------------------------------------------------------------------------------------
# Report


def floor_bytes(run: Run, objs: list[Obj], min_size: int | None) -> int:
    """What the client moves at least: 2 x 5 MiB per composed member, 2 x the rest."""
    placed = [o.size for o in objs if min_size is not None and o.size >= min_size]
    return 2 * MIN_PART * len(placed) + 2 * (run.tar_bytes - sum(placed))


def mib(n: float) -> str:
    return f"{n / MIB:,.1f}"


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else "MISSED"


def report(modes: list[Mode], objs: list[Obj], rounds_done: int) -> None:
    never = modes[0]
    print(f"\nmedians over {rounds_done} rounds; bytes are what went through the proxy\n")
    header = (
        f"{'mode':<28} {'wall s':>7} {'up MiB':>9} {'down MiB':>9} {'total MiB':>10} "
        f"{'floor MiB':>10} {'/ floor':>8} {'/ never B':>10} {'/ never t':>10} "
        f"{'ishard CPU s':>13} {'weed CPU s':>11} {'proxy CPU s':>12} {'composed':>9}"
    )
    print(header)
    print("-" * len(header))
    for m in modes:
        floor = statistics.median(floor_bytes(r, objs, m.min_size) for r in m.runs)
        total = m.med("total")
        print(
            f"{m.label:<28} {m.med('seconds'):>7.2f} {mib(m.med('up')):>9} "
            f"{mib(m.med('down')):>9} {mib(total):>10} {mib(floor):>10} "
            f"{total / floor:>8.3f} {total / never.med('total'):>10.3f} "
            f"{m.med('seconds') / never.med('seconds'):>10.3f} {m.med('cpu'):>13.1f} "
            f"{m.med('server_cpu'):>11.1f} {m.med('proxy_cpu'):>12.1f} "
            f"{m.runs[0].composed:>4}/{m.runs[0].shards:<4}"
        )
    print(
        "\nup: client -> server; down: server -> client. floor: 2 x 5 MiB per composed member "
        "+ 2 x the rest of the shards (for never: 2 x the shards). / never B, / never t: "
        "client bytes and wall time against never's (medians). composed: shards the manifest "
        "records with a CRC-32C, of all shards."
    )
    print("\nper round (wall s, client MiB; ratios to the same round's never):")
    for k in range(rounds_done):
        base = never.runs[k]
        cells = [f"{never.label} {base.seconds:.2f} s {mib(base.total)} MiB"]
        for m in modes[1:]:
            r = m.runs[k]
            cells.append(
                f"{m.label} {r.seconds:.2f} s {mib(r.total)} MiB "
                f"(t {r.seconds / base.seconds:.3f}, B {r.total / base.total:.3f})"
            )
        print(f"  round {k + 1}: " + "; ".join(cells))


def targets(modes: list[Mode], objs: list[Obj]) -> None:
    never = modes[0]
    for m in modes[1:]:
        floor = statistics.median(floor_bytes(r, objs, m.min_size) for r in m.runs)
        of_floor = m.med("total") / floor
        of_never = m.med("total") / never.med("total")
        times = [r.seconds / n.seconds for r, n in zip(m.runs, never.runs)]
        of_time = m.med("seconds") / never.med("seconds")
        print(f"\n{m.label}:")
        if not any(r.composed for r in m.runs):
            print(f"  composed no shard (no member of its min size): the targets do not apply; "
                  f"client bytes / never's {of_never:.3f}, wall time / never's {of_time:.3f} "
                  "(per round: " + ", ".join(f"{t:.3f}" for t in times) + ")")  # fmt: skip
            continue
        print(f"  client bytes / floor:        {of_floor:.3f}  (target <= {TARGET_FLOOR}: "
              f"{verdict(of_floor, TARGET_FLOOR)})")  # fmt: skip
        print(f"  client bytes / never's:      {of_never:.3f}  (target about <= {TARGET_BYTES}: "
              f"{verdict(of_never, TARGET_BYTES)})")  # fmt: skip
        print(f"  wall time / never's:         {of_time:.3f}  (target <= {TARGET_TIME}: "
              f"{verdict(of_time, TARGET_TIME)}); per round: "
              + ", ".join(f"{t:.3f}" for t in times))  # fmt: skip


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--large", type=int, default=20, help="samples with a large member (20)")
    ap.add_argument("--large-mib", type=int, default=64, help="size of a large member (64 MiB)")
    ap.add_argument(
        "--small", type=int, default=200, help="members of about 40 KiB in all (200): one "
        "beside each large member, the rest samples of their own",
    )  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (3)")
    ap.add_argument("--shard-size", default="512MiB", help="ishard --shard-size (512MiB)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument(
        "--min-size-sweep", action="store_true",
        help="time auto at --compose-min-size 16MiB, 32MiB, 64MiB against never, on large "
             "members of --sweep-large-mib",
    )  # fmt: skip
    ap.add_argument("--sweep-large-mib", type=int, default=24, help="large members (24 MiB)")
    args = ap.parse_args(argv)
    if args.small < args.large:
        raise SystemExit("bench_compose: --small counts the large samples' json too: >= --large")
    if sys.platform != "linux":
        raise SystemExit("bench_compose: needs Linux (/proc for the server's CPU)")

    s3server, weed = seaweedfs("bench_compose")

    if args.min_size_sweep:
        large_mib = args.sweep_large_mib
        modes = [Mode("never", ["--compose", "never"], None)] + [
            Mode(f"auto, min size {n}MiB", ["--compose", "auto", "--compose-min-size", f"{n}MiB"],
                 n * MIB)
            for n in (16, 32, 64)
        ]  # fmt: skip
    else:
        large_mib = args.large_mib
        modes = [
            Mode("never", ["--compose", "never"], None),
            Mode("auto", ["--compose", "auto"], DEFAULT_MIN_SIZE),  # the default min size
        ]
    objs = plan_objects(args.large, large_mib, args.small)
    total = sum(o.size for o in objs)

    print(machine_line())
    from importlib.metadata import version

    out = subprocess.run([weed, "version"], capture_output=True, text=True, check=False).stdout
    weed_version = next((w for w in out.split() if w[:1].isdigit() and "." in w), "?")
    print(f"obstore {version('obstore')}, botocore {version('botocore')}; SeaweedFS {weed_version}")
    print(
        f"data: {len(objs)} objects, {total:,} bytes ({total / MIB:,.1f} MiB): {args.large} of "
        f"{large_mib} MiB, {args.small} of about 40 KiB, in {args.small} samples (seed "
        f"{args.seed}); --shard-size {args.shard_size}"
    )

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the server is still stopped
    work = Path(tempfile.mkdtemp(prefix="ishard-bench-compose-"))
    server = s3server.S3Server()  # its own temp dir, killed and removed by close()
    proxy = None
    failed = ""
    try:
        server.start()
        proxy = CountingProxy(server.ports["s3"])
        print(f"server: SeaweedFS on {server.endpoint_url}, proxy on {proxy.endpoint_url}")
        server.make_bucket(SRC_BUCKET)
        server.make_bucket(DST_BUCKET)
        bench = Bench(args, server, proxy, objs, work)
        probe = subprocess.run(
            [sys.executable, "-c", "import ishard; print(ishard.__file__)"],
            cwd=ROOT, env=bench.env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if probe.returncode != 0:
            raise SystemExit(f"bench_compose: ishard does not import:\n{probe.stderr}")
        where = Path(probe.stdout.strip()).resolve()
        if ROOT not in where.parents:
            raise SystemExit(f"bench_compose: the ishard run is not this checkout's: {where}")
        print("ishard: this checkout's (python -m ishard, cwd and PYTHONPATH the checkout)")
        seconds = upload(bench.client, objs, args.seed)
        print(f"upload: {len(objs)} PUTs in {seconds:.1f} s")

        order = "rotated each round" if args.min_size_sweep else "in this order each round"
        print(f"timing: {args.rounds} rounds, {', '.join(m.label for m in modes)} ({order})")
        other0, wall0 = other_cpu(bench.pgid), time.perf_counter()
        rounds_done = 0
        for k in range(args.rounds):
            shift = k % len(modes) if args.min_size_sweep else 0
            prefixes = {}
            for m in modes[shift:] + modes[:shift]:
                prefix = f"run-{k + 1}-{m.label.replace(', ', '-').replace(' ', '-')}"
                m.runs.append(bench.run(m, prefix))
                prefixes[m.label] = prefix
                r = m.runs[-1]
                print(
                    f"  round {k + 1} {m.label}: {r.seconds:.2f} s, up {mib(r.up)} MiB, down "
                    f"{mib(r.down)} MiB, ishard CPU {r.cpu:.1f} s, weed CPU "
                    f"{r.server_cpu:.1f} s, proxy CPU {r.proxy_cpu:.1f} s, "
                    f"{r.composed}/{r.shards} shards composed"
                )
            rounds_done += 1
            if k == 0:
                same, text = bench.same_shards({m.label: prefixes[m.label] for m in modes})
                print(f"  check after round 1: {'same' if same else 'DIFFERENT'}: {text}")
                if not same:
                    failed = text
                    break
        busy = (other_cpu(bench.pgid) - other0) / (time.perf_counter() - wall0)
    finally:
        if proxy is not None:
            proxy.close()
        server.close()
        shutil.rmtree(work, ignore_errors=True)

    if failed:
        print(f"\nbench_compose: the shards are not byte-identical across modes: {failed}")
        return 1
    print(f"other processes used {busy:.2f} CPUs on average while timing")
    if busy > 0.25:
        print("warning: the machine was busy with other work while timing — numbers are noisy")
    report(modes, objs, rounds_done)
    targets(modes, objs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
