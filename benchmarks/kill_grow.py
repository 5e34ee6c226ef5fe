#!/usr/bin/env python3
"""kill -9 trials of ``--append`` and ``--update``: each trial starts from a copy of a
finished dataset, runs an append (or, every other trial, an update) over a source that grew
(and had a label fixed), kills it with SIGKILL after a random part of an uninterrupted run's
time, looks at what the kill left, then runs the same command with ``--resume``.

After every kill the destination must hold either the old dataset as it was (its manifest,
every shard it lists and its sample index byte for byte) or the new one whole (the new
manifest, and every shard it lists); after the ``--resume``, exactly what an uninterrupted
run writes (every file, byte for byte, no run records left). The counts are printed; any
other outcome stops the script. Locally by default; ``--s3`` runs them against a private
SeaweedFS server on 127.0.0.1 (``tests/support/s3server.py``).

    python benchmarks/kill_grow.py --trials 100
    python benchmarks/kill_grow.py --s3 --trials 20
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from benchlib import machine_line

ROOT = Path(__file__).resolve().parents[1]
ISHARD = [sys.executable, "-m", "ishard"]
COMMON = ("--shard-size", "64KB", "--no-progress", "-q")
BUCKET = "kill-grow"


def tree(samples: int, first: int = 0) -> dict[str, bytes]:
    """``samples`` samples (a .jpg of 6-9 KB, a .cls) over 4 folders, numbered from ``first``."""
    files = {}
    for i in range(first, first + samples):
        files[f"d{i % 4}/{i:05d}.jpg"] = bytes([i % 251]) * (6_000 + 37 * (i % 97))
        files[f"d{i % 4}/{i:05d}.cls"] = str(i % 10).encode()
    return files


class Local:
    """Trials in folders of this machine."""

    def __init__(self, work: Path) -> None:
        self.work = work

    def put_source(self, source: str, files: dict[str, bytes]) -> str:
        for name, data in files.items():
            path = self.work / source / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            os.utime(path, (1_700_000_000, 1_700_000_000))
        return str(self.work / source)

    def dst(self, name: str) -> str:
        return str(self.work / name)

    def copy(self, src: str, to: str) -> None:
        shutil.rmtree(to, ignore_errors=True)
        shutil.copytree(src, to)

    def files(self, dst: str) -> dict[str, bytes]:
        root = Path(dst)
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "lock"
        }

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def extra(self) -> tuple[str, ...]:
        return ()


class S3:
    """Trials in a bucket of a private SeaweedFS server on 127.0.0.1."""

    def __init__(self, server) -> None:
        self.server = server
        self.client = server.client()
        server.make_bucket(BUCKET)

    def put_source(self, source: str, files: dict[str, bytes]) -> str:
        for name, data in files.items():
            self.client.put_object(Bucket=BUCKET, Key=f"{source}/{name}", Body=data)
        return f"s3://{BUCKET}/{source}"

    def dst(self, name: str) -> str:
        return f"s3://{BUCKET}/{name}"

    def _keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def copy(self, src: str, to: str) -> None:
        old, new = src.split("/", 3)[3] + "/", to.split("/", 3)[3] + "/"
        for key in self._keys(new):
            self.client.delete_object(Bucket=BUCKET, Key=key)
        for key in self._keys(old):
            source = {"Bucket": BUCKET, "Key": key}
            self.client.copy_object(Bucket=BUCKET, Key=new + key[len(old) :], CopySource=source)

    def files(self, dst: str) -> dict[str, bytes]:
        prefix = dst.split("/", 3)[3] + "/"
        return {
            key[len(prefix) :]: self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            for key in self._keys(prefix)
            if not key.endswith("/.ishard-run/lock")
        }

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            AWS_ACCESS_KEY_ID=self.server.access_key,
            AWS_SECRET_ACCESS_KEY=self.server.secret_key,
            AWS_EC2_METADATA_DISABLED="true",
            NO_PROXY="127.0.0.1,localhost",
        )
        return env

    def extra(self) -> tuple[str, ...]:
        return ("--endpoint-url", self.server.endpoint_url)


def ishard(place, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*ISHARD, *args, *place.extra()],
        capture_output=True,
        text=True,
        check=False,
        env=place.env(),
    )
    if check and done.returncode != 0:
        sys.exit(f"kill_grow: ishard {' '.join(args)} failed: {done.stderr}")
    return done


def describes(files: dict[str, bytes], whole: dict[str, bytes]) -> bool:
    """Does ``files`` hold the manifest of ``whole`` and every shard it lists, as ``whole``
    has them?"""
    if files.get("manifest.json") != whole["manifest.json"]:
        return False
    listed = [e["url"] for e in json.loads(whole["manifest.json"])["shardlist"]]
    return all(files.get(n) == whole[n] for n in listed)


def after_kill(left: dict[str, bytes], old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """What a kill left: the old dataset (with its own index, or with the new index already
    published: the one window where ``verify`` reports the index), or the new one."""
    if describes(left, old):
        same = left.get("samples.parquet") == old["samples.parquet"]
        return "old dataset intact" if same else "old manifest and shards, new index published"
    if describes(left, new) and left.get("samples.parquet") == new["samples.parquet"]:
        return "new dataset complete"
    sys.exit("kill_grow: the kill left neither dataset whole")


def trials(place, count: int, seed: int, say: Callable[[str], None]) -> Counter:
    """Per mode, a source and its dataset; the source grows (new samples; for ``--update`` a
    label fixed in place too) and an uninterrupted run over a copy is the reference; then
    the trials, the modes taking turns."""
    cases = {}
    for mode in ("--append", "--update"):
        name = mode.strip("-")
        source = place.put_source(f"src-{name}", tree(400))
        dataset = place.dst(f"dataset-{name}")
        ishard(place, "shard", source, dataset, *COMMON)
        old = place.files(dataset)
        place.put_source(f"src-{name}", tree(12, first=1000))  # new samples
        if mode == "--update":
            place.put_source(f"src-{name}", {"d1/00001.cls": b"fixed"})  # changed in place
        reference = place.dst(f"reference-{name}")
        place.copy(dataset, reference)
        started = time.monotonic()
        ishard(place, "shard", source, reference, *COMMON, mode)
        whole = time.monotonic() - started
        cases[mode] = (source, dataset, old, place.files(reference), whole)
    outcomes: Counter = Counter()
    rng = random.Random(seed)
    for trial in range(count):
        mode = ("--append", "--update")[trial % 2]
        source, dataset, old, expected, whole = cases[mode]
        target = place.dst(f"trial{trial}")
        place.copy(dataset, target)
        run = subprocess.Popen(
            [*ISHARD, "shard", source, target, *COMMON, mode, *place.extra()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=place.env(),
        )
        time.sleep(rng.uniform(0.02, 1.1) * whole)
        run.send_signal(signal.SIGKILL)
        run.wait()
        after = after_kill(place.files(target), old, expected)
        ishard(place, "shard", source, target, *COMMON, mode, "--resume")
        if place.files(target) != expected:
            sys.exit(f"kill_grow: trial {trial} ({mode}): --resume differs from the reference")
        outcomes[f"{mode}: {after}, resumed byte-identical"] += 1
        say(f"trial {trial}: {mode}, {after}, resumed byte-identical")
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--s3", action="store_true", help="trials in a SeaweedFS bucket")
    parser.add_argument("--verbose", action="store_true", help="a line per trial")
    args = parser.parse_args()
    say = print if args.verbose else (lambda _line: None)
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="ishard-kill-grow-") as work:
        if not args.s3:
            outcomes = trials(Local(Path(work)), args.trials, args.seed, say)
        else:
            spec = importlib.util.spec_from_file_location(
                "s3server", ROOT / "tests" / "support" / "s3server.py"
            )
            assert spec is not None and spec.loader is not None
            s3server = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(s3server)
            with s3server.S3Server() as server:
                outcomes = trials(S3(server), args.trials, args.seed, say)
    where = "S3 (SeaweedFS on 127.0.0.1)" if args.s3 else "local"
    print(f"{sum(outcomes.values())} kill -9 trials, {where}; every --resume byte-identical:")
    for outcome, count in sorted(outcomes.items()):
        print(f"  {count:4d}  {outcome}")


if __name__ == "__main__":
    main()
