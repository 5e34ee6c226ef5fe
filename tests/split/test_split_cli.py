"""``ishard split``, balanced shard counts, and ShardedSamples reading real shards back."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from helpers import invoke_ishard, make_tree, run_ishard
from hypothesis import given, settings
from hypothesis import strategies as st

import ishard
from ishard.errors import UsageError
from ishard.planning.cut import balance
from ishard.split import dali, streaming, whale
from ishard.split import torch as sampler
from ishard.split import webdataset as wds
from ishard.split.read import ShardedSamples, assigned_ids
from ishard.split.world import World, describe


def split_json(*args):
    done = invoke_ishard("split", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_split_flags_uneven_webdataset_ranks_and_names_the_fix():
    done = invoke_ishard(
        "split", "--shard-sizes", "100,100,80", "--nodes", "2", "--batch-size", "10"
    )
    assert done.returncode == 0, done.stderr
    assert "rank 0: 180 samples, 18 batches" in done.stdout
    assert "rank 1: 100 samples, 10 batches" in done.stdout
    assert "WARNING: ranks get different batch counts (spread 8)" in done.stdout
    assert "--shards-multiple-of 2" in done.stdout


def split_fix(*args):
    """The epoch-0 advice ``ishard split --json`` gives, or None without a hang risk."""
    epoch = split_json(*args)["epochs"][0]
    assert epoch["hang_risk"] == (epoch["fix"] is not None)
    return epoch["fix"]


WDS_EVEN_COUNTS = ["--shard-sizes", "71,70,70,70", "--nodes", "2", "--workers", "2"]


def test_split_advice_when_shard_counts_already_divide():
    done = invoke_ishard("split", *WDS_EVEN_COUNTS, "--batch-size", "10")
    assert done.returncode == 0, done.stderr
    assert "WARNING: ranks get different batch counts (spread 1)" in done.stdout
    # 4 shards over 2 ranks x 2 workers: rounding up to a multiple of 4 would change nothing
    assert "--shards-multiple-of" not in done.stdout
    assert "ranks get 140 to 141 samples and equal batches need equal samples per rank" in (
        done.stdout
    )
    assert "pass --drop-last" in done.stdout and ".with_epoch(14)" in done.stdout
    # and the option it names does even them out
    assert split_fix(*WDS_EVEN_COUNTS, "--batch-size", "10", "--drop-last") is None


def test_split_advice_when_no_shard_count_can_help():
    sizes = ",".join(["63"] * 9 + ["62"] * 7)  # 1001 samples: never 4 equal parts
    fix = split_fix("--shard-sizes", sizes, "--nodes", "4", "--workers", "4", "--batch-size", "1")
    assert "--shards-multiple-of" not in fix and "--num-shards" not in fix
    assert "--drop-last" not in fix  # a batch of 1 has no partial batch to drop
    assert "ranks get 250 to 251 samples and equal batches need equal samples per rank" in fix
    assert "with any multiple of 16 shards the 16 workers get 62 or 63 samples each" in fix
    assert "loader.repeat(2).with_epoch(250)" in fix


def test_split_advice_for_whale_unbalanced_over_drop_last():
    whale_args = ["--shard-sizes", "10,10,10", "--policy", "whale", "--nodes", "2"]
    fix = split_fix(*whale_args, "--ranks-per-node", "2", "--unbalanced", "--drop-last")
    assert "pass --drop-last" not in fix  # it is passed; --unbalanced wins over it in EPL
    assert fix.startswith("leave out --unbalanced (EPL applies it before --drop-last)")
    assert split_fix(*whale_args, "--ranks-per-node", "2", "--drop-last") is None
    fix = split_fix("--shard-sizes", "10,12", "--policy", "whale", "--nodes", "2")
    assert "--drop-last" not in fix and "--unbalanced" not in fix  # 2 files: nothing to drop
    assert fix.startswith(
        "every task already gets 1 file(s) (2 files over 2 tasks), but tasks get 10 to 12 samples"
    )
    assert "--shards-multiple-of 2' (2 shards of 11 samples)" in fix


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 30), min_size=1, max_size=12),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 6),
    st.sampled_from(["webdataset", "whale"]),
    st.booleans(),
    st.booleans(),
)
def test_every_fix_named_evens_the_batches(sizes, nodes, per_node, batch, policy, one, two):
    """Whatever the warning names, applied (resharding by the real planner), gives no warning."""
    if policy == "webdataset":
        world = World(nodes=nodes, workers=per_node, batch_size=batch)
        opts = {"drop_last": one}
    else:
        world = World(nodes=nodes, ranks_per_node=per_node, batch_size=batch)
        opts = {"unbalanced": one, "drop_last": two}
    fix = describe(sizes, policy, world, **opts)["epochs"][0]["fix"]
    if fix is None:
        return
    cuts, start = [], 0
    for size in sizes:
        cuts.append(list(range(start, start + size)))
        start += size
    keys = [f"k{i}" for i in range(start)]
    for flag, value in re.findall(r"'ishard shard --(shards-multiple-of|num-shards) (\d+)'", fix):
        name = flag.replace("-", "_").replace("shards_multiple_of", "multiple_of")
        resharded = [len(s) for s in balance(cuts, keys, False, **{name: int(value)})]
        assert resharded != sizes
        assert describe(resharded, policy, world, **opts)["epochs"][0]["fix"] is None, fix
    if "pass --drop-last" in fix:
        fixed = (
            {**opts, "drop_last": True, "unbalanced": False}
            if policy == "whale"
            else {"drop_last": True}
        )
        assert describe(sizes, policy, world, **fixed)["epochs"][0]["fix"] is None, fix
    if "leave out --unbalanced" in fix:
        fixed = {**opts, "unbalanced": False}
        if "leave out --unbalanced and --drop-last" in fix:
            fixed["drop_last"] = False
        assert describe(sizes, policy, world, **fixed)["epochs"][0]["fix"] is None, fix
    if "leave out --drop-last" in fix:
        fixed = {**opts, "drop_last": False}
        assert describe(sizes, policy, world, **fixed)["epochs"][0]["fix"] is None, fix


@given(st.integers(1, 80), st.integers(1, 3), st.integers(1, 3), st.integers(1, 6))
def test_one_reshard_count_answers_for_all(n, ranks, workers, batch):
    """Why the advice tries one shard count: every multiple of ranks x workers, cut by the
    planner, gives each worker the same samples, so equal batches for one mean for all."""
    unit = ranks * workers
    keys = [f"k{i}" for i in range(n)]
    outcomes = set()
    for count in range(unit, n + 1, unit):
        sizes = [len(s) for s in balance([list(range(n))], keys, False, num_shards=count)]
        owners = wds.assign(count, ranks, workers)
        for r in range(ranks):
            for w in range(workers):  # worker q = r + ranks*w holds shards q, q + unit, ...
                extra = r + ranks * w < n % unit
                assert sum(sizes[s] for s in owners[r][w]) == n // unit + extra
        outcomes.add(len(set(wds.batches_per_rank(sizes, ranks, workers, batch))) == 1)
    assert len(outcomes) <= 1


def test_split_json_for_dali_padding():
    doc = split_json(
        "--shard-sizes",
        "4,3,3",
        "--policy",
        "dali",
        "--ranks-per-node",
        "3",
        "--batch-size",
        "4",
        "--pad-last-batch",
        "--epochs",
        "2",
    )
    first = doc["epochs"][0]
    assert [r["ranges"] for r in first["ranks"]] == [[[0, 3]], [[3, 6]], [[6, 10]]]
    assert [r["duplicates"] for r in first["ranks"]] == [1, 1, 0]
    assert not first["hang_risk"] and first["dropped"] == 0


def test_split_json_torch_drop_last_counts_the_dropped():
    doc = split_json("--shard-sizes", "10", "--policy", "torch", "--nodes", "3", "--drop-last")
    assert doc["epochs"][0]["dropped"] == 1
    assert [r["samples"] for r in doc["epochs"][0]["ranks"]] == [3, 3, 3]


def test_split_reads_a_manifest(tmp_path):
    src = make_tree(tmp_path / "src", {f"s{i:02d}.txt": 10 for i in range(10)})
    assert invoke_ishard("shard", src, tmp_path / "out", "--num-shards", "3").returncode == 0
    doc = split_json(tmp_path / "out" / "manifest.json", "--nodes", "3")
    assert [r["samples"] for r in doc["epochs"][0]["ranks"]] == [4, 3, 3]
    assert split_json(tmp_path / "out", "--nodes", "3") == doc  # the folder, as verify takes it


def test_split_of_a_folder_without_a_manifest_says_what_is_missing(tmp_path):
    """Finding: an existing folder was said not to exist; what it lacks is its manifest."""
    (tmp_path / "out").mkdir()
    done = invoke_ishard("split", tmp_path / "out")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"ishard: error: folder '{tmp_path / 'out'}' has no manifest.json (a run writes it when "
        f"it ends) — shard into it first (ishard shard SRC {tmp_path / 'out'}), finish its run "
        "with --resume, or give the path of a manifest.json\n"
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--shard-sizes", "1,x"], "--shard-sizes '1,x' is not a list of sample counts"),
        (["--shard-sizes", "4", "--policy", "horovod"], "--policy 'horovod' is not a policy"),
        (["--shard-sizes", "4", "--nodes", "0"], "--nodes 0 must be a whole number of at least 1"),
        (
            ["--shard-sizes", "4", "--policy", "torch", "--pad-last-batch"],
            "--pad-last-batch does not apply to --policy torch",
        ),
        (
            ["--shard-sizes", "4", "--policy", "streaming", "--shuffle", "py9"],
            "--shuffle 'py9' is not a Streaming shuffle",
        ),
        (
            ["--shard-sizes", "4", "--policy", "dali", "--last-batch-policy", "pad"],
            "--last-batch-policy 'pad' must be fill, drop or partial",
        ),
        ([], "give a MANIFEST or --shard-sizes"),
        (["no-such-manifest.json"], "manifest 'no-such-manifest.json' does not exist"),
        (["--shard-sizes", "2", "--policy", "dali", "--nodes", "3"], "2 samples cannot be split"),
    ],
)
def test_split_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    done = run_ishard("split", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("ishard: error: ") and needle in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_split_unreadable_manifest_exits_1(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    done = invoke_ishard("split", tmp_path / "manifest.json")
    assert done.returncode == 1 and "is not an ishard manifest: invalid JSON" in done.stderr


def test_reader_takes_the_options_ishard_split_takes():
    """``drop_last_batch`` (``ishard split --drop-last-batch``) drops the short last batch in
    the reader too; an option of another policy is refused with the same words."""
    assert assigned_ids([5], rank=0, world_size=1, policy="torch", batch_size=2) == [0, 1, 2, 3, 4]
    assert assigned_ids([5], rank=0, world_size=1, policy="torch", batch_size=2,
                        drop_last_batch=True) == [0, 1, 2, 3]  # fmt: skip
    with pytest.raises(ishard.UsageError, match="does not apply to --policy dali"):
        assigned_ids([5], rank=0, world_size=1, policy="dali", drop_last_batch=True)


def test_reader_divides_whale_with_whales_default_seed():
    """Unseeded, the reader's Whale division is ``ishard split``'s (seed 0), rank by rank."""
    counts = [3, 1, 4, 1, 5]
    doc = describe(counts, "whale", World(nodes=2), unbalanced=True)
    for rank in range(2):
        shown = doc["epochs"][0]["ranks"][rank]["workers"][0]["shards"]
        starts = [sum(counts[:i]) for i in range(len(counts) + 1)]
        want = [i for s in shown for i in range(starts[s], starts[s + 1])]
        assert (
            assigned_ids(counts, rank=rank, world_size=2, policy="whale", unbalanced=True) == want
        )


def _rank_lists(sizes, policy, world, epoch, opts):
    """Each rank's sample ids in ``epoch``, straight from the policy's own function, and its
    batch count as the framework yields them."""
    n, ranks, b = sum(sizes), world.ranks, world.batch_size
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]

    def shard_ids(shards):
        return [i for s in shards for i in range(starts[s], starts[s + 1])]

    if policy == "dali":
        got = [dali.epoch_batches(n, ranks, r, b, epoch + 1, **opts)[epoch] for r in range(ranks)]
        return [[i for batch in batches for i in batch] for batches in got], [len(x) for x in got]
    if policy == "torch":
        lists = [sampler.indices(n, ranks, r, **opts) for r in range(ranks)]
        return lists, [-(-len(ids) // b) for ids in lists]
    if policy == "streaming":
        ids = streaming.epoch_sample_ids(
            sizes, world.nodes, world.ranks_per_node, world.workers, b, epoch=epoch, **opts
        )
        per_rank = [ids[p, r] for p in range(world.nodes) for r in range(world.ranks_per_node)]
        lists = [
            [int(i) for i in rank.transpose(1, 0, 2).reshape(-1) if i >= 0] for rank in per_rank
        ]
        return lists, [int((rank >= 0).any(axis=2).sum()) for rank in per_rank]
    if policy == "webdataset":
        owners = wds.assign(len(sizes), ranks, world.workers)
        lists = [
            shard_ids(s for w in range(world.workers) for s in owners[r][w]) for r in range(ranks)
        ]
        return lists, wds.batches_per_rank(sizes, ranks, world.workers, b)
    names = [str(i) for i in range(len(sizes))]
    tasks = whale.assign(names, [world.ranks_per_node] * world.nodes, **opts)
    lists = [shard_ids(int(f) for f in task) for task in tasks]
    return lists, [-(-len(ids) // b) for ids in lists]


POLICY_OPTIONS = {
    "dali": st.fixed_dictionaries(
        {
            "last_batch_policy": st.sampled_from(["fill", "drop", "partial"]),
            "pad_last_batch": st.booleans(),
            "stick_to_shard": st.booleans(),
        }
    ),
    "torch": st.fixed_dictionaries({"drop_last": st.booleans()}),
    "streaming": st.fixed_dictionaries({"shuffle_algo": st.sampled_from([None, "py1s", "py1e"])}),
    "webdataset": st.just({}),
    "whale": st.fixed_dictionaries({"unbalanced": st.booleans(), "drop_last": st.booleans()}),
}
DESCRIBE_NAMES = {"shuffle_algo": "shuffle"}  # describe's option names where they differ


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=12).filter(any),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 6),
    st.sampled_from(sorted(POLICY_OPTIONS)),
    st.data(),
)
def test_describe_accounts_for_every_sample(sizes, ranks, nodes, workers, batch, policy, data):
    opts = data.draw(POLICY_OPTIONS[policy])
    world = World(nodes=nodes, ranks_per_node=ranks, workers=workers, batch_size=batch, epochs=3)
    given_opts = {DESCRIBE_NAMES.get(k, k): v for k, v in opts.items()}
    try:
        doc = describe(sizes, policy, world, **given_opts)
    except UsageError:  # DALI needs a sample per rank, py1e one per canonical node (= node)
        n = sum(sizes)
        assert (policy == "dali" and n < nodes * ranks) or (
            policy == "streaming" and opts["shuffle_algo"] == "py1e" and n < nodes
        )
        return
    n = sum(sizes)
    for e, epoch in enumerate(doc["epochs"]):
        lists, batches = _rank_lists(sizes, policy, world, e, opts)
        reads = Counter(i for ids in lists for i in ids)
        assert set(reads) <= set(range(n))
        seen, duplicates = set(), []
        for ids in lists:  # a read of an id already read this epoch, in rank order
            duplicates.append(0)
            for i in ids:
                duplicates[-1] += i in seen
                seen.add(i)
        got = epoch["ranks"]
        assert [r["samples"] for r in got] == [len(ids) for ids in lists]
        assert [r["duplicates"] for r in got] == duplicates
        assert sum(duplicates) == sum(c - 1 for c in reads.values())
        assert epoch["dropped"] == sum(1 for i in range(n) if i not in reads)
        assert [{i for a, b in r["ranges"] for i in range(a, b)} for r in got] == [
            set(ids) for ids in lists
        ]
        assert [r["batches"] for r in got] == batches
        assert epoch["hang_risk"] == (len(set(batches)) > 1)
        if policy in ("dali", "torch", "streaming"):
            assert len(set(batches)) == 1  # these frameworks guarantee equal batch counts


# ---- balanced creation ------------------------------------------------------------------


@given(st.integers(1, 60), st.integers(1, 20), st.data())
def test_balance_counts_differ_by_at_most_one(samples, planned, data):
    cuts = [list(range(samples))[k::planned] for k in range(min(planned, samples))]
    cuts = [sorted(c) for c in cuts if c]
    keys = [f"k{i}" for i in range(samples)]
    n = data.draw(st.integers(1, samples))
    got = balance(cuts, keys, False, num_shards=n)
    assert len(got) == n and max(map(len, got)) - min(map(len, got)) <= 1
    assert [i for s in got for i in s] == [i for s in cuts for i in s]
    k = data.draw(st.integers(1, 5))
    if -(-len(cuts) // k) * k <= samples:
        got = balance(cuts, keys, False, multiple_of=k)
        assert len(got) % k == 0 and len(got) >= len(cuts)
        assert max(map(len, got)) - min(map(len, got)) <= 1


def test_balance_needs_flat_keys_or_collapse():
    with pytest.raises(UsageError, match="keys form directories — add --collapse"):
        balance([[0], [1]], ["a/x", "b/y"], False, num_shards=2)
    assert [list(s) for s in balance([[0], [1]], ["a/x", "b/y"], True, num_shards=1)] == [[0, 1]]
    with pytest.raises(UsageError, match="asks for 3 shards but there are only 2 samples"):
        balance([[0], [1]], ["x", "y"], False, num_shards=3)


def test_balance_of_nothing(tmp_path):
    """No samples (everything skipped): no shards is a multiple of any count, and the run says
    there is nothing to shard, as it does without the option; a fixed count of shards is an
    error that says why."""
    assert list(balance([], [], False, multiple_of=4)) == []
    src = make_tree(tmp_path / "src", {".hidden.txt": 10})
    done = invoke_ishard("shard", src, "--dry-run=summary", "--shards-multiple-of", "4")
    assert done.returncode == 1 and "nothing to shard" in done.stderr, done
    fixed = invoke_ishard("shard", src, "--dry-run=summary", "--num-shards", "2")
    assert fixed.returncode == 2 and "only 0 samples" in fixed.stderr, fixed


def test_balanced_dry_run_and_errors(tmp_path):
    src = make_tree(tmp_path / "src", {f"d{i % 2}/s{i:02d}.txt": 100 for i in range(10)})
    done = invoke_ishard("shard", src, "--dry-run=summary", "--shards-multiple-of", "4")
    assert done.returncode == 0, done.stderr
    assert "would write 4 shards: 10 samples" in done.stdout  # =summary: the totals alone
    each = invoke_ishard("shard", src, "--dry-run=json", "--shards-multiple-of", "4")
    counts = [len(s["samples"]) for s in json.loads(each.stdout)["shards"]]
    assert sorted(counts) == [2, 2, 3, 3]
    tree = invoke_ishard(
        "shard", src, "--dry-run", "--num-shards", "3", "--sample-key-pattern", "full_name"
    )
    assert tree.returncode == 2 and "add --collapse" in tree.stderr
    both = invoke_ishard("shard", src, "--dry-run", "-num_shards=2", "--shards-multiple-of", "2")
    assert both.returncode == 2 and "give one" in both.stderr
    plan = ishard.plan(src, num_shards=3, sample_key_pattern="full_name", collapse=True)
    assert list(plan.shard_sample_counts) == [4, 3, 3]


# ---- the reader -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    root = tmp_path_factory.mktemp("read")
    files = {}
    for i in range(23):
        files[f"img{i:03d}.jpg"] = f"jpeg {i}".encode()
        files[f"img{i:03d}.cls"] = str(i % 5).encode()
    src = make_tree(root / "src", files)
    done = invoke_ishard(
        "shard", src, root / "out", "--shards-multiple-of", "4", "--shard-size", "60B"
    )
    assert done.returncode == 0, done.stderr
    return root / "out" / "manifest.json"


def test_two_ranks_two_workers_read_every_sample_once(sharded):
    doc = json.loads(sharded.read_text())
    assert len(doc["shardlist"]) % 4 == 0
    per_rank = {}
    keys = Counter()
    for rank in range(2):
        per_rank[rank] = 0
        for worker in range(2):
            for sample in ShardedSamples(
                str(sharded), rank=rank, world_size=2, worker=worker, num_workers=2
            ):
                keys[sample.key] += 1
                per_rank[rank] += 1
                n = int(sample.key[3:])
                assert sample.files == {"jpg": f"jpeg {n}".encode(), "cls": str(n % 5).encode()}
    assert keys == Counter({f"img{i:03d}": 1 for i in range(23)})
    assert abs(per_rank[0] - per_rank[1]) <= 1  # 23 samples: counts differ by the odd one


def test_shards_multiple_of_4_give_2_ranks_x_2_workers_equal_counts(tmp_path):
    """The issue's end to end case: 36 samples sharded with --shards-multiple-of 4, then 2
    ranks x 2 workers of ShardedSamples: every sample exactly once, equal counts per rank and
    per worker (each reads whole shards that differ by at most one sample)."""
    files = {}
    for i in range(36):
        files[f"d/s{i:03d}.jpg"] = bytes([i]) * (50 + i)
        files[f"d/s{i:03d}.cls"] = str(i % 7).encode()
    src = make_tree(tmp_path / "src", files)
    done = invoke_ishard(
        "shard", src, tmp_path / "out", "--shards-multiple-of", "4", "--shard-size", "300B"
    )
    assert done.returncode == 0, done.stderr
    manifest = tmp_path / "out" / "manifest.json"
    shardlist = json.loads(manifest.read_text())["shardlist"]
    assert len(shardlist) % 4 == 0 and len(shardlist) >= 8
    assert max(e["nsamples"] for e in shardlist) - min(e["nsamples"] for e in shardlist) <= 1
    counts, keys = {}, Counter()
    for rank in range(2):
        for worker in range(2):
            got = list(
                ShardedSamples(str(manifest), rank=rank, world_size=2, worker=worker, num_workers=2)
            )
            counts[rank, worker] = len(got)
            for sample in got:
                keys[sample.key] += 1
                assert sample.files == {
                    "jpg": files[f"d/{sample.key}.jpg"],
                    "cls": files[f"d/{sample.key}.cls"],
                }
    assert keys == Counter({f"s{i:03d}": 1 for i in range(36)})
    assert len(set(counts.values())) == 1, counts  # 9 samples each (shards of 5,5,5,5,4,4,4,4)


@pytest.mark.parametrize(
    "policy, extra",
    [
        ("torch", {}),
        ("dali", {"pad_last_batch": True}),
        ("streaming", {}),
        ("whale", {"unbalanced": True}),
    ],
)
def test_sample_level_policies_read_their_assigned_ids(sharded, policy, extra):
    seen = []
    for rank in range(2):
        for worker in range(2):
            reader = ShardedSamples(
                str(sharded),
                rank=rank,
                world_size=2,
                worker=worker,
                num_workers=2,
                policy=policy,
                batch_size=2,
                **extra,
            )
            got = [int(s.key[3:]) for s in reader]
            assert got == reader.ids()
            seen += got
    assert set(seen) == set(range(23))


def test_reader_takes_rank_and_world_from_the_environment(sharded, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    reader = ShardedSamples(str(sharded))
    assert reader.ids() == assigned_ids(reader.counts, rank=1, world_size=2)


def test_streaming_shuffle_reader_matches_the_shuffle(sharded):
    reader = ShardedSamples(
        str(sharded),
        rank=0,
        world_size=1,
        policy="streaming",
        shuffle="py1s",
        num_canonical_nodes=2,
        epoch=1,
    )
    got = [int(s.key[3:]) for s in reader]
    assert set(got) == set(range(23)) and len(got) == 24  # C=2: the short row repeats one
    assert got == reader.ids() and got != sorted(got)
