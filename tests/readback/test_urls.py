"""A dataset's shard URLs come from its manifest: ``ishard ls DST --urls`` prints them as brace
patterns, one per run of consecutive names, which WebDataset expands to exactly the listed
shards — gaps an ``--update`` leaves included; ``ishard.shard_urls`` returns them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_error, invoke_ishard, make_tree, source_samples, webdataset_samples
from webdataset.shardlists import expand_urls

import ishard

pytestmark = pytest.mark.usefixtures("every_destination_verifies")

# 24 samples (.jpg + .cls): with --shard-size 2 (samples) 12 shards
TREE = {
    **{f"d/{i:02d}.jpg": 200 + i for i in range(24)},
    **{f"d/{i:02d}.cls": 2 for i in range(24)},
}


def listed(dst: Path) -> list[str]:
    """Every shard the manifest lists, as a path under ``dst``, in its order."""
    return [
        str(dst / e["url"]) for e in json.loads((dst / "manifest.json").read_bytes())["shardlist"]
    ]


@pytest.fixture
def updated(tmp_path):
    """A dataset of 12 shards whose shard-000004.tar an update replaced (a label changed)."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "out"
    assert invoke_ishard("shard", src, dst, "--shard-size", "2").returncode == 0
    (src / "d/09.cls").write_bytes(b"relabelled")
    done = invoke_ishard("shard", src, dst, "--update")
    assert done.returncode == 0, done.stderr
    assert "replaced 1 shard holding them ('shard-000004.tar')" in done.stdout
    return src, dst


def test_urls_are_the_manifests_shards_as_brace_patterns_around_the_gap(updated):
    src, dst = updated
    done = invoke_ishard("ls", dst, "--urls")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines() == [
        f"{dst}/shard-{{000000..000003}}.tar",
        f"{dst}/shard-{{000005..000012}}.tar",
    ]
    joined = "::".join(done.stdout.splitlines())
    assert expand_urls(joined) == listed(dst)  # webdataset's own expansion
    assert webdataset_samples(joined) == source_samples(src)


def test_urls_as_json_and_from_the_api(updated):
    _src, dst = updated
    text = invoke_ishard("ls", dst / "manifest.json", "--urls").stdout.splitlines()
    document = json.loads(invoke_ishard("ls", dst, "--urls", "--json").stdout)
    assert document == {"urls": listed(dst), "patterns": text}
    assert ishard.shard_urls(dst) == listed(dst)
    assert ishard.shard_urls(dst / "manifest.json", patterns=True) == text


def test_braces_in_the_path_are_escaped_and_a_new_width_starts_a_new_pattern(tmp_path):
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "x{y}"
    made = invoke_ishard("shard", src, dst, "--shard-size", "2", "--shard-template", "s-%d")
    assert made.returncode == 0, made.stderr
    patterns = invoke_ishard("ls", dst, "--urls").stdout.splitlines()
    base = str(tmp_path).replace("{", "\\{").replace("}", "\\}")
    assert patterns == [f"{base}/x\\{{y\\}}/s-{{0..9}}.tar", f"{base}/x\\{{y\\}}/s-{{10..11}}.tar"]
    assert expand_urls("::".join(patterns)) == listed(dst)


def test_urls_need_a_dataset_and_go_alone(updated, tmp_path):
    _src, dst = updated
    assert_error(invoke_ishard("ls", dst, "--urls", "--samples"), 2, "give one of them")
    assert_error(invoke_ishard("ls", tmp_path / "nowhere", "--urls"), 2, "does not exist")
    (tmp_path / "empty").mkdir()
    assert_error(invoke_ishard("ls", tmp_path / "empty", "--urls"), 1, "no manifest.json")
