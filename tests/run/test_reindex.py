"""``ishard index DST``: the sample index, DALI's and Energon's indexes for shards that exist —
WebDataset's ``ShardWriter`` shards (their headers read, locally and in a bucket), ishard's own
(from their sample index, no shard byte read; or from their headers when it is gone) — read
back by ``ishard find``/``cat``/``verify``, tarfile and, where installed, Energon's loader."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import webdataset as wds
from energon_checks import check_energon_files, energon_reads, shards_of
from helpers import assert_error, download, invoke_ishard, make_tree, snapshot

KEYS = [f"sample{i:04d}" for i in range(57)]


def parts_of(number: int) -> dict[str, bytes]:
    return {
        "jpg": os.urandom(300 + 41 * number),
        "cls": str(number % 7).encode(),
        "seg.png": bytes([number % 251]) * (number * 13),
    }


def write_webdataset(
    folder: Path, pattern: str = "train-%04d.tar", prefix: str = ""
) -> dict[str, dict]:
    """Shards as WebDataset's own writer writes them; every sample's parts by key."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = {prefix + key: parts_of(i) for i, key in enumerate(KEYS)}
    with wds.ShardWriter(str(folder / pattern), maxcount=10, verbose=0) as sink:
        for key, parts in samples.items():
            sink.write({"__key__": key, **parts})
    return samples


def cat_sample(dst: str, key: str, tmp: Path, run=invoke_ishard) -> dict[str, bytes]:
    """A sample read back with ``ishard cat -o``: its members' bytes by extension."""
    out = tmp / f"cat-{key}"
    done = run("cat", dst, key, "-o", str(out))
    assert done.returncode == 0, done.stderr
    return {p.name.split(".", 1)[1]: p.read_bytes() for p in out.rglob("*") if p.is_file()}


def dali_entries(dst: Path, shard: str) -> list[list[tuple[str, int, int, str]]]:
    """The DALI index beside ``shard``, each sample's (ext, offset, size, member)."""
    lines = (dst / shard.replace(".tar", ".idx")).read_text().splitlines()
    assert lines[0] == f"v1.2 {len(lines) - 1}"
    samples = []
    for line in lines[1:]:
        tokens = line.split()
        samples.append([(tokens[i], int(tokens[i + 1]), int(tokens[i + 2]), tokens[i + 3])
                        for i in range(0, len(tokens), 4)])  # fmt: skip
    return samples


def check_dali(dst: Path, shard: str) -> None:
    """Each index entry is the member tarfile finds there; one line a sample, in order."""
    with tarfile.open(dst / shard) as tar:
        members = [m for m in tar if m.isfile()]
    entries = dali_entries(dst, shard)
    flat = [e for sample in entries for e in sample]
    assert [(e[3], e[1], e[2]) for e in flat] == [(m.name, m.offset_data, m.size) for m in members]
    assert [s[0][3].split(".")[0] for s in entries] == list(
        dict.fromkeys(m.name.split(".")[0] for m in members)
    )


def test_webdataset_shards_get_every_index_and_a_manifest(tmp_path):
    dst = tmp_path / "wds"
    samples = write_webdataset(dst)
    done = invoke_ishard("index", str(dst))
    assert done.returncode == 0, done.stderr
    assert "read the headers of 6 shards" in done.stdout
    shards = shards_of(dst)
    assert shards == [f"train-{i:04d}.tar" for i in range(6)]
    manifest = json.loads((dst / "manifest.json").read_bytes())
    assert [e["nsamples"] for e in manifest["shardlist"]] == [10] * 5 + [7]
    assert [e["filesize"] for e in manifest["shardlist"]] == [
        (dst / s).stat().st_size for s in shards
    ]
    assert manifest["ishard"]["options"]["index"] == "dali,energon"
    for shard in shards:
        check_dali(dst, shard)
    check_energon_files(dst)
    for key in (KEYS[0], KEYS[23], KEYS[-1]):
        assert cat_sample(str(dst), key, tmp_path) == samples[key]
    found = invoke_ishard("find", str(dst), KEYS[23], "--json")
    assert json.loads(found.stdout)["samples"][0]["shard"] == "train-0002.tar"
    deep = invoke_ishard("verify", str(dst), "--deep")
    assert deep.returncode == 0, deep.stdout + deep.stderr
    assert not (dst / ".ishard-run").exists()


def test_energons_loader_reads_shards_indexed_after_the_fact(tmp_path):
    dst = tmp_path / "wds"
    samples = write_webdataset(dst)
    assert invoke_ishard("index", str(dst), "--index", "energon").returncode == 0
    read = energon_reads(dst)  # skips where megatron-energon is not installed
    assert read == {
        key: {ext: hashlib.sha256(data).hexdigest() for ext, data in parts.items()}
        for key, parts in samples.items()
    }


def test_webdataset_shards_in_a_bucket(cli, client, s3_bucket, tmp_path):
    local = tmp_path / "wds"
    samples = write_webdataset(local)
    for path in local.iterdir():
        client.put_object(Bucket=s3_bucket, Key=f"wds/{path.name}", Body=path.read_bytes())
    url = f"s3://{s3_bucket}/wds"
    done = cli("index", url)
    assert done.returncode == 0, done.stderr
    copy = download(client, s3_bucket, "wds/", tmp_path / "copy")
    check_energon_files(copy)
    for shard in shards_of(copy):
        check_dali(copy, shard)
    assert cat_sample(url, KEYS[31], tmp_path, run=cli) == samples[KEYS[31]]
    again = cli("index", url, "--json")  # its sample index is there now: no shard is read
    assert json.loads(again.stdout)["headers_read"] == 0


def test_a_split_by_the_shards_own_folders(tmp_path):
    dst = tmp_path / "wds"
    write_webdataset(dst / "train")
    write_webdataset(dst / "val", "part-%02d.tar", prefix="val-")
    top = invoke_ishard("index", str(dst), "--energon-split", "folders")
    assert top.returncode == 0, top.stderr
    shards = shards_of(dst)
    train = [s for s in shards if s.startswith("train/")]
    val = [s for s in shards if s.startswith("val/")]
    assert len(train) == 6 and len(val) == 6 and len(shards) == 12
    check_energon_files(dst, {"train": train, "val": val, "test": []})
    recorded = json.loads((dst / "manifest.json").read_bytes())["ishard"]["options"]
    assert recorded["energon_split"] == "folders"
    again = invoke_ishard("index", str(dst), "--index", "energon")  # the recorded split kept
    assert again.returncode == 0, again.stderr
    check_energon_files(dst, {"train": train, "val": val, "test": []})


def test_shards_named_on_the_command_line(tmp_path):
    dst = tmp_path / "wds"
    write_webdataset(dst)
    done = invoke_ishard("index", str(dst), "train-0001.tar", str(dst / "train-0003.tar"))
    assert done.returncode == 0, done.stderr  # by name in DST, or by path
    assert shards_of(dst) == ["train-0001.tar", "train-0003.tar"]
    refused = invoke_ishard("index", str(dst), "train-0001.tar")
    assert_error(refused, 2, "lists the shards of this dataset — leave out the shard names")


def test_compressed_shards_are_read_forward(tmp_path):
    dst = tmp_path / "wds"
    samples = write_webdataset(dst, "part-%04d.tgz")
    done = invoke_ishard("index", str(dst))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((dst / "manifest.json").read_bytes())
    assert manifest["ishard"]["options"]["index"] == "none"  # DALI and Energon read plain tars
    assert cat_sample(str(dst), KEYS[44], tmp_path) == samples[KEYS[44]]
    refused = invoke_ishard("index", str(dst), "--index", "energon")
    assert_error(refused, 2, "--index energon indexes .tar shards, and none of these is one")


def test_a_dataset_ishard_wrote_is_indexed_from_its_sample_index_alone(tmp_path):
    src = make_tree(tmp_path / "src", {f"d{i % 3}/{i:02d}.{e}": 200 + i for i in range(20)
                                       for e in ("jpg", "cls")})  # fmt: skip
    shard = ("shard", "--shard-size", "3KiB")
    with_energon = tmp_path / "with"
    assert (
        invoke_ishard(*shard, str(src), str(with_energon), "--index", "dali,energon").returncode
        == 0
    )
    plain = tmp_path / "plain"
    assert invoke_ishard(*shard, str(src), str(plain)).returncode == 0
    for name in shards_of(plain):  # bytes no header walk could read: none is read
        size = (plain / name).stat().st_size
        (plain / name).write_bytes(b"\xff" * size)
    done = invoke_ishard("index", str(plain), "--index", "energon", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["headers_read"] == 0
    ours, theirs = snapshot(plain / ".nv-meta"), snapshot(with_energon / ".nv-meta")
    assert ours == theirs
    for name in shards_of(plain):
        assert (plain / f"{name}.idx").read_bytes() == (with_energon / f"{name}.idx").read_bytes()
    recorded = json.loads((plain / "manifest.json").read_bytes())["ishard"]
    assert recorded["options"]["index"] == "energon"  # growth keeps it current from now on


def test_growth_keeps_the_indexes_ishard_index_added(tmp_path):
    src = make_tree(tmp_path / "src", {f"{i:02d}.{e}": 300 + i for i in range(12)
                                       for e in ("jpg", "cls")})  # fmt: skip
    dst = tmp_path / "out"
    assert invoke_ishard("shard", str(src), str(dst), "--shard-size", "3KiB").returncode == 0
    assert invoke_ishard("index", str(dst), "--index", "energon").returncode == 0
    make_tree(src, {"50.jpg": 900, "50.cls": 2})
    grown = invoke_ishard("shard", str(src), str(dst), "--append")
    assert grown.returncode == 0, grown.stderr
    check_energon_files(dst)
    assert (
        len(shards_of(dst))
        == json.loads((dst / ".nv-meta/.info.json").read_text()).get("shard_counts").__len__()
    )


def test_a_dataset_whose_sample_index_is_gone_is_read_from_its_headers(tmp_path):
    src = make_tree(tmp_path / "src", {f"{i:02d}.{e}": 300 + i for i in range(12)
                                       for e in ("jpg", "cls")})  # fmt: skip
    dst = tmp_path / "out"
    assert invoke_ishard("shard", str(src), str(dst), "--shard-size", "3KiB").returncode == 0
    (dst / "samples.parquet").unlink()
    done = invoke_ishard("index", str(dst), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["headers_read"] == len(shards_of(dst))
    assert cat_sample(str(dst), "07", tmp_path) == {
        "jpg": (src / "07.jpg").read_bytes(), "cls": (src / "07.cls").read_bytes()
    }  # fmt: skip
    check_energon_files(dst)
    make_tree(src, {"50.jpg": 900})
    refused = invoke_ishard("shard", str(src), str(dst), "--append")
    assert_error(refused, 2, "was read from its shards' headers (ishard index)")


def test_a_shard_that_is_not_the_one_the_manifest_lists_is_refused(tmp_path):
    src = make_tree(tmp_path / "src", {f"{i:02d}.jpg": 300 + i for i in range(12)})
    dst = tmp_path / "out"
    assert invoke_ishard("shard", str(src), str(dst), "--shard-size", "3KiB").returncode == 0
    (dst / "samples.parquet").unlink()
    first = dst / shards_of(dst)[0]
    with tarfile.open(first, "a") as tar:  # one more member: a size the manifest does not say
        info = tarfile.TarInfo("extra.jpg")
        tar.addfile(info)
    before = snapshot(dst)
    refused = invoke_ishard("index", str(dst))
    assert_error(refused, 1, f"{str(first)!r} has", "but manifest.json records", "ishard verify")
    assert snapshot(dst) == before


@pytest.mark.parametrize(
    "prepare, args, code, says",
    [
        (lambda d: d.mkdir(), (), 2, "holds no shards (.tar"),
        (
            write_webdataset,
            ("../elsewhere.tar",),
            2,
            "'../elsewhere.tar' is not a shard inside DST",
        ),
        (
            write_webdataset,
            ("train-0000.tar", "train-0000.tar"),
            2,
            "'train-0000.tar' is named twice",
        ),
        (write_webdataset, ("--index", "wds"), 2, "'wds'"),
        (lambda d: make_tree(d, {"a.zip": 10}), ("a.zip",), 2, "is not a shard ishard index reads"),
        (lambda d: make_tree(d, {"a.tar": 700}), (), 1, "a.tar' cannot be read as a tar shard"),
        (lambda d: make_tree(d, {".ishard-run/1.json": 3, "a.tar": 1}), (), 2, "has not finished"),
        (write_webdataset, ("--energon-split", "folders"), 2, "'train-0000.tar' is in none"),
    ],
    ids=["empty", "outside", "twice", "no-index", "zip", "not-a-tar", "a-run-going", "no-folder"],
)
def test_what_ishard_index_refuses(tmp_path, prepare, args, code, says):
    dst = tmp_path / "wds"
    prepare(dst)
    before = snapshot(dst)
    assert_error(invoke_ishard("index", str(dst), *args), code, says)
    assert snapshot(dst) == before


def test_a_shard_that_is_a_link_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    write_webdataset(outside)
    dst = tmp_path / "wds"
    dst.mkdir()
    shutil.copy(outside / "train-0000.tar", dst / "train-0000.tar")
    (dst / "train-0001.tar").symlink_to(outside / "train-0001.tar")
    result = invoke_ishard("index", str(dst), "train-0000.tar", "train-0001.tar")
    assert_error(result, 1, "train-0001.tar")
    assert not (dst / "manifest.json").exists()


def test_the_gnu_tar_of_a_folder_is_indexed(tmp_path):
    """Shards GNU tar wrote (folders, GNU long names) are read as tarfile reads them."""
    tree = make_tree(tmp_path / "tree", {"a/" + "n" * 120 + ".jpg": 900, "a/b.cls": 2})
    dst = tmp_path / "wds"
    dst.mkdir()
    subprocess.run(["tar", "-cf", str(dst / "s.tar"), "-C", str(tree), "a"], check=True)
    done = invoke_ishard("index", str(dst), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["members"] == 2
    check_dali(dst, "s.tar")


DALI_READ = """
import hashlib, json, sys
from nvidia.dali import fn, pipeline_def, types

shards, indexes = json.loads(sys.argv[1]), json.loads(sys.argv[2])
exts = ["jpg", "cls", "seg.png"]

@pipeline_def(batch_size=1, num_threads=1, device_id=None)
def read():
    return tuple(fn.readers.webdataset(paths=shards, index_paths=indexes, ext=exts,
                                       dtypes=[types.UINT8] * 3, name="wds"))

pipe = read()
pipe.build()
seen = []
for _ in range(pipe.reader_meta("wds")["epoch_size"]):
    parts = pipe.run()
    seen.append({e: hashlib.sha256(bytes(p.as_array()[0])).hexdigest() for e, p in zip(exts, parts)})
print(json.dumps(seen))
"""


def test_dalis_reader_reads_shards_indexed_after_the_fact(tmp_path):
    """Where NVIDIA DALI is installed, its WebDataset reader (a CPU pipeline) reads every
    sample, byte for byte and in order, through the ``.idx`` files ``ishard index`` wrote."""
    pytest.importorskip("nvidia.dali", reason="nvidia-dali is not installed")
    dst = tmp_path / "wds"
    samples = write_webdataset(dst)
    assert invoke_ishard("index", str(dst), "--index", "dali").returncode == 0
    shards = shards_of(dst)
    indexes = [str(dst / s.replace(".tar", ".idx")) for s in shards]
    done = subprocess.run(
        [sys.executable, "-c", DALI_READ, json.dumps([str(dst / s) for s in shards]),
         json.dumps(indexes)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    expected = [
        {ext: hashlib.sha256(data).hexdigest() for ext, data in parts.items()}
        for parts in samples.values()
    ]
    assert json.loads(done.stdout.splitlines()[-1]) == expected


def test_a_stopped_index_goes_on_with_resume_reading_only_what_it_had_not(tmp_path):
    """A damaged shard stops ``ishard index`` after the shards before it were read; once it
    is repaired, ``--resume`` reads only it (the others from the records in DST), and the
    result is what one uninterrupted ``ishard index`` writes."""
    dst = tmp_path / "wds"
    write_webdataset(dst)
    whole = tmp_path / "whole"
    shutil.copytree(dst, whole)
    assert invoke_ishard("index", str(whole), "--json", "-j", "1").returncode == 0
    fourth = dst / "train-0003.tar"
    good = fourth.read_bytes()
    fourth.write_bytes(b"not a tar" * 100)
    stopped = invoke_ishard("index", str(dst), "-j", "1")
    assert_error(stopped, 1, "train-0003.tar' cannot be read as a tar shard")
    assert not (dst / "manifest.json").exists()
    fourth.write_bytes(good)
    again = invoke_ishard("index", str(dst))
    assert_error(again, 2, "stopped before it finished", "add --resume")
    resumed = invoke_ishard("index", str(dst), "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["headers_read"] == 3  # the shards not recorded: 3 to 5
    assert snapshot(dst) == snapshot(whole)  # the records gone, the rest as one run wrote it
