"""``--sample-key-pattern mirrored_dirs`` on a YOLO-shaped tree (``images/{train,val}`` beside
``labels/{train,val}``): one image and its label per sample, train and val apart, read back with
webdataset; the refusal of the default key's merged samples names it; the Go spelling takes it."""

from __future__ import annotations

import json
import random
import tarfile
from pathlib import Path

import pytest
import webdataset as wds
from helpers import assert_error, invoke_ishard, make_tree

from ishard.split.read import ShardedSamples

# Every finished destination a test here leaves must pass `ishard verify --deep`.
pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# numbers 01-06 in train and 03-07 in val: 03-06 are in both
SPLITS = {"train": range(1, 7), "val": range(3, 8)}


def yolo_tree(root: Path) -> Path:
    """images/<split>/NN.jpg (random bytes) and labels/<split>/NN.txt for each split, and
    data.yaml at the top, as YOLO datasets have."""
    rng = random.Random(45)
    files: dict[str, bytes | int] = {"data.yaml": b"train: images/train\nval: images/val\n"}
    for split, numbers in SPLITS.items():
        for n in numbers:
            files[f"images/{split}/{n:02d}.jpg"] = rng.randbytes(rng.randrange(200, 900))
            files[f"labels/{split}/{n:02d}.txt"] = f"{n % 3} 0.5 0.5 0.{n} 0.2\n".encode()
    return make_tree(root, files)


def read_back(shards: list[Path]) -> list[list[dict]]:
    """Each shard's samples as webdataset reads them."""
    return [list(wds.WebDataset(str(s), shardshuffle=False, empty_check=False)) for s in shards]


def test_yolo_tree_shards_into_one_image_and_its_label_per_sample(tmp_path):
    src, dst = yolo_tree(tmp_path / "yolo"), tmp_path / "out"
    done = invoke_ishard(
        "shard", src, dst, "--sample-key-pattern", "mirrored_dirs", "--shard-size", "1KiB"
    )
    assert done.returncode == 0, done.stderr
    shards = sorted(dst.glob("shard-*.tar"))
    read = read_back(shards)
    assert len(shards) > 3  # the size bound cuts each split into several shards
    keys = []
    for shard, samples in zip(shards, read):
        splits = {s["__key__"].partition("/")[0] for s in samples if "/" in s["__key__"]}
        assert len(splits) <= 1, (shard.name, splits)  # train and val never share a shard
        for sample in samples:
            key = sample["__key__"]
            keys.append(key)
            if key == "data":  # the file at the top, in no folder: its name without extension
                assert set(sample) - {"__key__", "__url__", "__local_path__"} == {"yaml"}
                assert sample["yaml"] == (src / "data.yaml").read_bytes()
                continue
            split, number = key.split("/")
            assert set(sample) - {"__key__", "__url__", "__local_path__"} == {"jpg", "txt"}
            assert sample["jpg"] == (src / "images" / split / f"{number}.jpg").read_bytes()
            assert sample["txt"] == (src / "labels" / split / f"{number}.txt").read_bytes()
    expected = ["data"] + [f"{s}/{n:02d}" for s, numbers in SPLITS.items() for n in numbers]
    assert sorted(keys) == sorted(expected)
    assert len(keys) == len(expected)  # each sample once
    manifest = json.loads((dst / "manifest.json").read_text())
    assert manifest["ishard"]["options"]["sample_key_pattern"] == "mirrored_dirs"
    assert [e["nsamples"] for e in manifest["shardlist"]] == [len(s) for s in read]


def test_sharded_samples_reads_the_keys_the_run_gave(tmp_path):
    """ShardedSamples groups ``train/03.jpg`` and ``train/03.txt`` as sample ``train/03``, as
    webdataset does, with --collapse putting train's and val's remainders in one shard."""
    src, dst = yolo_tree(tmp_path / "yolo"), tmp_path / "out"
    args = ("--sample-key-pattern", "mirrored_dirs", "--shard-size", "2KiB", "--collapse")
    done = invoke_ishard("shard", src, dst, *args)
    assert done.returncode == 0, done.stderr
    read = read_back(sorted(dst.glob("shard-*.tar")))
    by_webdataset = [(s["__key__"], s["jpg" if "jpg" in s else "yaml"]) for r in read for s in r]
    reader = ShardedSamples(
        str(dst / "manifest.json"), rank=0, world_size=1, worker=0, num_workers=1
    )
    by_reader = [(s.key, s.files["jpg" if "jpg" in s.files else "yaml"]) for s in reader]
    assert by_reader == by_webdataset
    assert len(by_reader) == 1 + sum(map(len, SPLITS.values()))


def test_the_default_keys_refusal_suggests_mirrored_dirs(tmp_path):
    src, dst = yolo_tree(tmp_path / "yolo"), tmp_path / "out"
    refused = invoke_ishard("shard", src, dst)
    assert_error(
        refused,
        1,
        "sample '03' has two files with the same extension ('images/train/03.jpg' and "
        "'images/val/03.jpg')",
        "— use --sample-key-pattern mirrored_dirs, whose keys tell them apart ('train/03' and "
        "'val/03'), keep one with --sample-exts",
    )
    assert not dst.exists()
    took = invoke_ishard("shard", src, dst, "--sample-key-pattern", "mirrored_dirs")
    assert took.returncode == 0, took.stderr  # the suggestion works


def test_the_refusal_keeps_its_advice_when_mirrored_dirs_would_not_tell_them_apart(tmp_path):
    """``a/x/01.jpg`` and ``b/x/01.jpg`` have one mirrored_dirs key, ``x/01``: not suggested."""
    src = make_tree(tmp_path / "src", {"a/x/01.jpg": 10, "b/x/01.jpg": 20})
    line = assert_error(
        invoke_ishard("shard", src, "--dry-run"),
        1,
        "sample '01' has two files with the same extension ('a/x/01.jpg' and 'b/x/01.jpg')",
        "— keep one with --sample-exts and --missing-extension-action exclude, use a "
        "--sample-key-pattern that tells them apart, or --member-names original",
    )
    assert "mirrored_dirs" not in line
    assert_error(
        invoke_ishard("shard", src, "--dry-run", "--sample-key-pattern", "mirrored_dirs"),
        1,
        "sample 'x/01' has two files with the same extension",
    )


def test_the_go_spelling_takes_mirrored_dirs_as_ishard_does(tmp_path):
    """Go would compile the word as a regex (keys about full_name); ishard's Go spelling takes
    its built-in, with Go's source paths as member names."""
    src, dst = yolo_tree(tmp_path / "yolo"), tmp_path / "out"
    done = invoke_ishard(
        f"-src_bck={src}", f"-dst_bck={dst}", "-sample_key_pattern=mirrored_dirs", "-shard_size=4"
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((dst / "manifest.json").read_text())
    assert manifest["ishard"]["options"]["sample_key_pattern"] == "mirrored_dirs"
    members = []
    for shard in sorted(dst.glob("shard-*.tar")):
        with tarfile.open(shard) as tar:
            members.append(tar.getnames())
    pairs = [f"images/{s}/{n:02d}.jpg" for s, numbers in SPLITS.items() for n in numbers]
    for image in pairs:  # each image beside its label, in one shard
        label = image.replace("images/", "labels/", 1).replace(".jpg", ".txt")
        shard = next(m for m in members if image in m)
        assert shard[shard.index(image) + 1] == label, shard
    assert sorted(n for m in members for n in m) == sorted(
        [
            "data.yaml",
            *pairs,
            *(p.replace("images/", "labels/").replace(".jpg", ".txt") for p in pairs),
        ]
    )
