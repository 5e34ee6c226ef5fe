"""What Megatron-Energon reads of a dataset, checked against the shards as Python's ``tarfile``
reads them, and (where megatron-energon is installed) by Energon's own loader: shared by the
tests of ``--index energon`` and ``ishard index``."""

from __future__ import annotations

import json
import re
import sqlite3
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

# Energon's rules (megatron/energon/flavors/webdataset/config.py), restated for the check
SPLIT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
META = re.compile(r"__[^/]*__($|/)")


def tar_samples(path: Path) -> tuple[list[tuple[str, int, list[tuple[str, int, int]]]], int]:
    """A tar's samples as Energon groups them, read by tarfile: (key, first header's offset,
    [(part, data offset, size)]) each; and where its last member ends."""
    samples: list[tuple[str, int, list[tuple[str, int, int]]]] = []
    with tarfile.open(path) as tar:
        for member in tar:
            found = SPLIT.match(member.name)
            if not member.isreg() or META.match(member.name) or found is None:
                continue
            key, part = found.groups()
            if not samples or samples[-1][0] != key:
                samples.append((key, member.offset, []))
            samples[-1][2].append((part, member.offset_data, member.size))
        return samples, tar.offset


def shards_of(dst: Path) -> list[str]:
    return [e["url"] for e in json.loads((dst / "manifest.json").read_bytes())["shardlist"]]


def check_energon_files(dst: Path, split_parts: dict[str, list[str]] | None = None) -> None:
    """Every ``.tar.idx``, ``.info.json``, ``split.yaml`` and ``index.sqlite`` in ``dst`` says
    what tarfile finds in the manifest's shards; ``split.yaml`` the ``split_parts`` (None: every
    shard in train)."""
    shards = shards_of(dst)
    samples, parts = [], []
    counts = {}
    for number, shard in enumerate(shards):
        found, end = tar_samples(dst / shard)
        counts[shard] = len(found)
        starts = [start for _, start, _ in found] + [end]
        idx = (dst / f"{shard}.idx").read_bytes()
        assert idx == struct.pack(f"<{len(starts)}Q", *starts), shard
        for index, (key, start, members) in enumerate(found):
            size = starts[index + 1] - start
            samples.append((number, key, index, start, size))
            parts += [(number, index, part, offset, n) for part, offset, n in members]
    meta = dst / ".nv-meta"
    info = json.loads((meta / ".info.json").read_bytes())
    assert info == {"energon_version": "7.4.1", "shard_counts": counts}
    split = json.loads((meta / "split.yaml").read_bytes())  # JSON, which YAML reads too
    if split_parts is None:
        split_parts = {"train": shards, "val": [], "test": []}
    assert split == {"split_parts": split_parts, "exclude": []}
    db = sqlite3.connect(meta / "index.sqlite")
    try:
        got = db.execute("SELECT * FROM samples ORDER BY tar_file_id, sample_index").fetchall()
        assert got == samples
        got = db.execute("SELECT * FROM sample_parts ORDER BY 1, 2, 4").fetchall()
        assert got == sorted(parts, key=lambda p: (p[0], p[1], p[3]))
    finally:
        db.close()
    assert len((meta / "index.uuid").read_text()) == 36


def energon_command() -> list[str]:
    """``energon`` from the megatron-energon installed beside this Python, or skip."""
    pytest.importorskip("megatron.energon", reason="megatron-energon is not installed")
    return [sys.executable, "-c", "from megatron.energon.cli.main import main; main()"]


READ = """
import hashlib, json, sys
from dataclasses import dataclass
from megatron.energon import (
    Cooker, DefaultTaskEncoder, Sample, WorkerConfig, basic_sample_keys, get_loader,
    get_train_dataset, stateless,
)

@dataclass
class Raw(Sample):
    parts: dict

@stateless
def cook(raw):
    parts = {k: v for k, v in raw.items() if not k.startswith("__")}
    return Raw(**basic_sample_keys(raw), parts=parts)

class Encoder(DefaultTaskEncoder):
    decoder = None
    cookers = [Cooker(cook)]
    def batch(self, samples):
        return samples

config = WorkerConfig(rank=0, world_size=1, num_workers=0)
dataset = get_train_dataset(sys.argv[1], batch_size=None, shuffle_buffer_size=None,
    max_samples_per_sequence=None, worker_config=config, repeat=False, task_encoder=Encoder())
seen = {}
for sample in get_loader(dataset):
    sample = sample[0] if isinstance(sample, list) else sample
    assert sample.__key__ not in seen, sample.__key__
    seen[sample.__key__] = {k: hashlib.sha256(bytes(v)).hexdigest() for k, v in sample.parts.items()}
print(json.dumps(seen))
"""


def energon_reads(dst: Path) -> dict[str, dict[str, str]]:
    """Every sample Energon's own loader reads from ``dst`` (no ``energon prepare`` run): its
    parts' sha256 by extension, by key."""
    energon_command()
    done = subprocess.run(
        [sys.executable, "-c", READ, str(dst)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])
