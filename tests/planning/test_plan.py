"""Planner: greedy cutting, virtual directories, collapse, order; naming; options; api.plan."""

from __future__ import annotations

import dataclasses
import importlib
import os

import pytest
from helpers import make_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard import api
from ishard.errors import DataError, UsageError
from ishard.formats import ARCHIVE_EXTS
from ishard.model import FileEntry, Sample, ShardPlan
from ishard.names import HIDDEN
from ishard.options.record import DEFAULT_SHARD_SIZE, make_options
from ishard.options.settings import plan_settings
from ishard.planning.cut import Bounds, Order, check_unique, cut, shard_names
from ishard.planning.templates import parse_template
from ishard.store.local.walk import HIDDEN_DIR, SYMLINK


def mk(key: str, size: int) -> Sample:
    return Sample(key, (FileEntry(key + ".bin", size),), size)


def sizes(shards: list[list[Sample]]) -> list[list[int]]:
    return [[s.size for s in shard] for shard in shards]


def keys(shards: list[list[Sample]]) -> list[list[str]]:
    return [[s.key for s in shard] for shard in shards]


def dir_of(key: str) -> tuple[str, ...]:
    return tuple(key.split("/")[:-1])


def reached(shard: list[Sample], bounds: Bounds) -> bool:
    total = sum(s.size for s in shard)
    return total >= bounds.size or (bounds.count is not None and len(shard) >= bounds.count)


# --- worked examples -------------------------------------------------------------------------


def test_reference_flat_example():
    samples = [mk(f"s{i}", n) for i, n in enumerate([30, 30, 30, 30, 50, 120, 10])]
    got = cut(samples, Bounds(100), Order(), collapse=False)
    assert sizes(got) == [[30, 30, 30, 30], [50, 120], [10]]
    assert keys(got) == [["s0", "s1", "s2", "s3"], ["s4", "s5"], ["s6"]]


def test_oversized_sample_alone_when_nothing_pending():
    samples = [mk("a", 100), mk("b", 500), mk("c", 1)]
    assert sizes(cut(samples, Bounds(100), Order(), False)) == [[100], [500], [1]]


def test_count_bound_and_either_bound_cuts():
    samples = [mk(f"s{i}", n) for i, n in enumerate([1, 1, 1, 1, 1, 90, 1, 1])]
    got = cut(samples, Bounds(size=50, count=3), Order(), False)
    assert sizes(got) == [[1, 1, 1], [1, 1, 90], [1, 1]]


def _dirs_3x30(n_dirs: int = 6) -> list[Sample]:
    return [mk(f"d{d}/f{f}", 30) for d in range(n_dirs) for f in range(3)]


def test_tree_without_collapse_one_remainder_per_directory():
    got = cut(_dirs_3x30(), Bounds(200), Order(), collapse=False)
    assert keys(got) == [[f"d{d}/f0", f"d{d}/f1", f"d{d}/f2"] for d in range(6)]


def test_tree_collapse_moves_remainders_to_the_root():
    # intended semantics (§5, decision 1): nothing in a dir reaches 200, so the root packs all 18
    got = cut(_dirs_3x30(), Bounds(200), Order(), collapse=True)
    flat = [f"d{d}/f{f}" for d in range(6) for f in range(3)]
    assert keys(got) == [flat[0:7], flat[7:14], flat[14:]]
    assert sizes(got) == [[30] * 7, [30] * 7, [30] * 4]


def test_tree_collapse_cuts_inside_directories_first():
    got = cut(_dirs_3x30(), Bounds(60), Order(), collapse=True)
    # each dir: [f0, f1] reaches 60; f2 moves up. The root pairs up d0/f2+d1/f2, then d2+d3, ...
    # and emits each pair as soon as it is full, i.e. right after visiting the second dir.
    assert keys(got) == [
        ["d0/f0", "d0/f1"],
        ["d1/f0", "d1/f1"],
        ["d0/f2", "d1/f2"],
        ["d2/f0", "d2/f1"],
        ["d3/f0", "d3/f1"],
        ["d2/f2", "d3/f2"],
        ["d4/f0", "d4/f1"],
        ["d5/f0", "d5/f1"],
        ["d4/f2", "d5/f2"],
    ]


def test_nested_tree_collapse_and_not():
    samples = [mk("z", 10), mk("a/y", 50), mk("a/b/x2", 30), mk("a/b/x1", 30)]
    assert keys(cut(samples, Bounds(100), Order(), collapse=False)) == [
        ["a/b/x2", "a/b/x1"],
        ["a/y"],
        ["z"],
    ]
    assert keys(cut(samples, Bounds(100), Order(), collapse=True)) == [
        ["a/b/x2", "a/b/x1", "a/y"],
        ["z"],
    ]


def test_children_sorted_bytewise_and_visited_before_own_samples():
    samples = [mk("root1", 1), mk("b/x", 1), mk("B/x", 1), mk("a/x", 1), mk("a/A/x", 1)]
    got = cut(samples, Bounds(1000), Order(), collapse=False)
    assert keys(got) == [["B/x"], ["a/A/x"], ["a/x"], ["b/x"], ["root1"]]


def test_sample_key_equal_to_a_directory_name_is_kept():
    # Go drops the record silently [BUG]; here sample "a" and directory "a/" coexist.
    samples = [mk("a", 5), mk("a/b", 5)]
    got = cut(samples, Bounds(1000), Order(), collapse=False)
    assert keys(got) == [["a/b"], ["a"]]


def test_alpha_and_dec_order():
    samples = [mk(k, 1) for k in ["b", "a", "C", "c"]]
    assert keys(cut(samples, Bounds(2), Order("alpha"), False)) == [["C", "a"], ["b", "c"]]
    assert keys(cut(samples, Bounds(2), Order("alpha", descending=True), False)) == [
        ["c", "b"],
        ["a", "C"],
    ]


def test_empty_input_gives_no_shards():
    assert cut([], Bounds(10), Order(), False) == []
    assert cut([], Bounds(10), Order(), True) == []


# --- property tests ----------------------------------------------------------------------

_component = st.sampled_from(["a", "b", "B", "c", "ab", "", "x.y"])
_key = st.builds(
    lambda dirs, stem: "/".join([*dirs, stem]),
    st.lists(_component, max_size=3),
    st.text("abcdefgXYZ019_.-", min_size=1, max_size=5),
)
_samples = st.lists(
    st.builds(mk, _key, st.integers(0, 120)), max_size=40, unique_by=lambda s: s.key
)
_bounds = st.builds(Bounds, st.integers(1, 400), st.none() | st.integers(1, 6))
_order = st.one_of(
    st.just(Order()),
    st.builds(lambda d: Order("alpha", descending=d), st.booleans()),
    st.builds(lambda seed: Order("shuffle", seed=seed), st.integers(0, 2**63 - 1)),
)


def _check_invariants(samples, bounds, order, collapse, got):
    flat = [s for shard in got for s in shard]
    # every sample exactly once (hence every file exactly once); samples are never split
    assert sorted(s.key for s in flat) == sorted(s.key for s in samples)
    assert all(s in samples for s in flat)
    for shard in got:
        assert shard, "empty shard"
        if bounds.count is not None:
            assert len(shard) <= bounds.count
        # at most one sample of overshoot: without its last sample a shard is below both bounds
        assert sum(s.size for s in shard[:-1]) < bounds.size
        if bounds.count is not None:
            assert len(shard) - 1 < bounds.count
    if collapse:
        assert all(reached(shard, bounds) for shard in got[:-1])
    else:
        last_of_dir = {}
        seen_dirs: list[tuple[str, ...]] = []
        for i, shard in enumerate(got):
            dirs = {dir_of(s.key) for s in shard}
            assert len(dirs) == 1, f"shard mixes directories: {[s.key for s in shard]}"
            (d,) = dirs
            # a directory's shards are contiguous
            if seen_dirs and seen_dirs[-1] != d:
                assert d not in seen_dirs
            if not seen_dirs or seen_dirs[-1] != d:
                seen_dirs.append(d)
            last_of_dir[d] = i
        for i, shard in enumerate(got):
            if i != last_of_dir[dir_of(shard[0].key)]:
                assert reached(shard, bounds)


@settings(max_examples=200, deadline=None)
@given(samples=_samples, bounds=_bounds, order=_order, collapse=st.booleans())
def test_cut_invariants(samples, bounds, order, collapse):
    got = cut(samples, bounds, order, collapse)
    _check_invariants(samples, bounds, order, collapse, got)
    # determinism: same inputs (and seed) -> same output
    assert cut(list(samples), bounds, order, collapse) == got


def _greedy(seq, bounds, out):
    """The greedy rule, written plainly; returns the unflushed remainder."""
    cur = []
    for s in seq:
        cur.append(s)
        if sum(x.size for x in cur) >= bounds.size or (
            bounds.count is not None and len(cur) >= bounds.count
        ):
            out.append(cur)
            cur = []
    return cur


def _ordered_dir(seq, order):
    if order.kind == "alpha":
        seq = sorted(seq, key=lambda s: s.key.encode())
    return seq[::-1] if order.descending else list(seq)


def _model_no_collapse(samples, bounds, order):
    by_dir: dict[tuple[str, ...], list[Sample]] = {}
    for s in samples:
        by_dir.setdefault(dir_of(s.key), []).append(s)
    if order.descending:  # children descending, before parents = reversed pre-order
        dirs = sorted(by_dir, key=lambda d: tuple(c.encode() for c in d), reverse=True)
    else:  # post-order with sorted children
        dirs = sorted(by_dir, key=lambda d: (*((0, c.encode()) for c in d), (1,)))
    out: list[list[Sample]] = []
    for d in dirs:
        rest = _greedy(_ordered_dir(by_dir[d], order), bounds, out)
        if rest:
            out.append(rest)
    return out


def _model_collapse(samples, bounds, order):
    out: list[list[Sample]] = []
    by_dir: dict[tuple[str, ...], list[Sample]] = {(): []}
    for s in samples:
        d = dir_of(s.key)
        by_dir.setdefault(d, []).append(s)
        for i in range(len(d)):  # every ancestor is a directory too
            by_dir.setdefault(d[:i], [])

    def step(pending, s):
        pending = [*pending, s]
        if sum(x.size for x in pending) >= bounds.size or (
            bounds.count is not None and len(pending) >= bounds.count
        ):
            out.append(pending)
            return []
        return pending

    def visit(d):
        """Children's remainders (children in name order) then own samples, packed greedily."""
        kids = sorted(
            (k for k in by_dir if len(k) == len(d) + 1 and k[: len(d)] == d),
            key=lambda k: k[-1].encode(),
            reverse=order.descending,
        )
        pending: list[Sample] = []
        for kid in kids:
            for s in visit(kid):
                pending = step(pending, s)
        for s in _ordered_dir(by_dir[d], order):
            pending = step(pending, s)
        return pending

    rest = visit(())
    if rest:
        out.append(rest)
    return out


@settings(max_examples=200, deadline=None)
@given(
    samples=_samples,
    bounds=_bounds,
    order=st.sampled_from([Order(), Order("alpha"), Order("alpha", descending=True)]),
    collapse=st.booleans(),
)
def test_cut_matches_plain_model(samples, bounds, order, collapse):
    model = _model_collapse if collapse else _model_no_collapse
    assert cut(samples, bounds, order, collapse) == model(samples, bounds, order)


@settings(max_examples=200, deadline=None)
@given(sizes_=st.lists(st.integers(0, 120), max_size=40), bounds=_bounds)
def test_flat_listing_order_is_plain_greedy(sizes_, bounds):
    samples = [mk(f"s{i:03d}", n) for i, n in enumerate(sizes_)]
    out: list[list[Sample]] = []
    rest = _greedy(samples, bounds, out)
    want = out + ([rest] if rest else [])
    for collapse in (False, True):
        assert cut(samples, bounds, Order(), collapse) == want


def test_shuffle_seed_changes_order_and_is_repeatable():
    samples = [mk(f"s{i:02d}", 1) for i in range(20)]
    orders = set()
    for seed in range(10):
        got = cut(samples, Bounds(1000), Order("shuffle", seed=seed), False)
        assert len(got) == 1
        assert cut(samples, Bounds(1000), Order("shuffle", seed=seed), False) == got
        orders.add(tuple(s.key for s in got[0]))
    assert len(orders) >= 9  # 20! orders: seeds essentially never collide


def test_shuffle_stays_within_directories_without_collapse():
    samples = [mk(f"{d}/s{i}", 1) for d in "ab" for i in range(10)]
    got = cut(samples, Bounds(1000), Order("shuffle", seed=7), False)
    assert [{dir_of(s.key) for s in shard} for shard in got] == [{("a",)}, {("b",)}]
    assert sorted(s.key for s in got[0]) == sorted(f"a/s{i}" for i in range(10))


# --- naming ------------------------------------------------------------------------------------


def test_shard_names_in_template_order_with_ext():
    names = shard_names(2, parse_template("shard-%06d"), ".tar")
    assert names == ["shard-000000.tar", "shard-000001.tar"]
    shard = ShardPlan(names[1], (mk("b", 4), mk("c", 5)), 9)
    assert shard.file_count == 2
    assert [f.name for f in shard.members()] == ["b.bin", "c.bin"]


def test_shard_names_bash_and_at():
    assert shard_names(3, parse_template("p{0000..50..8}"), ".zip") == [
        "p0000.zip",
        "p0008.zip",
        "p0016.zip",
    ]
    assert shard_names(3, parse_template("x@02"), ".tgz") == [
        "x00.tgz",
        "x01.tgz",
        "x02.tgz",
    ]


def test_shard_names_too_few_names_says_how_many_needed():
    with pytest.raises(UsageError) as err:
        shard_names(5, parse_template("s{0..3}"), ".tar")
    assert "5 shards" in str(err.value)
    assert "yields 4" in str(err.value)
    with pytest.raises(UsageError, match="needs 2 shards"):
        shard_names(2, parse_template("single"), ".tar")
    assert shard_names(4, parse_template("s{0..3}"), ".tar") == [
        "s0.tar",
        "s1.tar",
        "s2.tar",
        "s3.tar",
    ]


def test_shard_names_no_shards():
    assert shard_names(0, parse_template("single"), ".tar") == []


OWN_EXT = [
    ("fish-%d.tar", ".tar", "fish-0.tar"),
    ("fish-%d.tar", ".zip", "fish-0.tar"),  # the format's own extension wins
    ("fish-%d.tar.gz", ".tar", "fish-0.tar.gz"),
    ("fish-%d.tar.lz4", ".tar", "fish-0.tar.lz4"),
    ("fish-%d.tar.zst", ".tar", "fish-0.tar.zst"),
    ("fish-%d.zip", ".tar", "fish-0.zip"),
    ("fish-%d.tgz", ".tar", "fish-0.tgz"),
    ("fish-%d", ".tar", "fish-0.tar"),
    ("fish-%d.rar", ".tar", "fish-0.rar.tar"),
]


@pytest.mark.parametrize(("fmt", "ext", "first"), OWN_EXT)
def test_shard_names_own_ext(fmt, ext, first):
    got = shard_names(1, parse_template(fmt), ext, own_ext=True)
    assert got[0] == first


def test_every_archive_extension_has_an_own_ext_case():
    assert set(ARCHIVE_EXTS) <= {fmt.removeprefix("fish-%d") for fmt, _, _ in OWN_EXT}


def test_without_own_ext_ext_is_always_appended():
    got = shard_names(1, parse_template("fish-%d.tar"), ".tar")
    assert got[0] == "fish-0.tar.tar"


def test_check_unique():
    a = ShardPlan("fish-0.tar", (mk("a", 1),), 1)
    b = ShardPlan("fish-1.tar", (mk("b", 1),), 1)
    check_unique([a, b])
    check_unique([])
    with pytest.raises(UsageError, match="fish-0.tar"):
        check_unique([a, b, ShardPlan("fish-0.tar", (mk("c", 1),), 1)])


# --- options -------------------------------------------------------------------------------


def test_make_options_defaults():
    opts = make_options()
    assert opts.shard_size == DEFAULT_SHARD_SIZE == 256 << 20
    assert opts.sample_key_pattern == "base_file_name"
    assert opts.sort is None and opts.order == Order()
    assert opts.bounds == Bounds(256 << 20, None)


def test_make_options_normalises():
    opts = make_options(
        shard_size="4KB",
        samples_per_shard=3,
        sample_exts=".jpg,.xml",
        sample_key_pattern="base_filename",
        compress_level=5,
    )
    assert opts.bounds == Bounds(4000, 3)
    assert opts.sample_exts == (".jpg", ".xml")
    assert opts.sample_key_pattern == "base_file_name"
    assert opts.compress_level == 5
    assert make_options(sample_exts=[".a", ".b"]).sample_exts == (".a", ".b")


def test_the_planner_s_settings_are_one_frozen_value_built_from_the_options():
    """The planner reads planning's own ``PlanSettings``, built from the checked options: their
    values, parsed forms (the EKM parsed once), the plan's record and the warnings it tells."""
    opts = make_options(
        shard_size="3", sort="alpha:dec", ekm='{"a-%d.tar": ["^a/"]}', compress_level=5
    )
    settings = plan_settings(opts)
    assert settings.bounds == Bounds(None, 3) and settings.order == Order("alpha", True)
    assert settings.parsed_ekm is opts.parsed_ekm and settings.recorded == opts.to_dict()
    assert settings.count_warning(3) == [] and "write 3B" in settings.count_warning(2)[0]
    assert settings.idle_warnings(["a-0.tgz"]) == []
    told = settings.idle_warnings(["a-0.tar"])
    assert len(told) == 1 and told[0].startswith("--compress-level 5 has no effect")
    assert plan_settings(make_options()).idle_warnings(["a-0.tar"]) == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.strict = True  # type: ignore[misc]


def test_unknown_option():
    with pytest.raises(UsageError, match="'shardsize'"):
        make_options(shardsize="1MiB")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"missing_extension_action": "skip"}, "'skip'"),
        ({"ext": "tar"}, "'tar'"),
        ({"ext": ".rar"}, "'.rar'"),
        ({"ext": ".TAR"}, "'.TAR'"),
        ({"sample_exts": ".jpg,"}, "empty item"),
        ({"sample_exts": ",.jpg"}, "empty item"),
        ({"sample_exts": ".jpg,xml"}, "'xml'"),
        ({"sample_exts": "jpg"}, "'jpg'"),
        ({"sort": "shuffle:"}, "'shuffle:'"),
        ({"sort": "alpha:up"}, "'alpha:up'"),
        ({"sort": "shuffle:-1"}, "'shuffle:-1'"),
        ({"sort": "shuffle:x"}, "'shuffle:x'"),
        ({"sort": "random"}, "'random'"),
        ({"compress_level": 23}, "23"),
        ({"compress_level": -1}, "-1"),
        ({"compress_level": "high"}, "'high'"),
        ({"shard_size": "abc"}, "'abc'"),
        ({"shard_size": 0}, "0"),
        ({"samples_per_shard": 0}, "0"),
        ({"samples_per_shard": "two"}, "'two'"),
        ({"shard_template": "shard-%x"}, "'shard-%x'"),
        ({"sample_key_pattern": "(.*"}, "'(.*'"),
        ({"zip_compression": "lzma"}, "'lzma'"),
        ({"ekm": "{}"}, "JSON object"),
    ],
)
def test_make_options_errors(kwargs, words):
    with pytest.raises(UsageError) as err:
        make_options(**kwargs)
    assert words in str(err.value)


@pytest.mark.parametrize("ext", ARCHIVE_EXTS)
def test_supported_exts(ext):
    assert make_options(ext=ext).ext == ext


@pytest.mark.parametrize("level", [0, 9])
def test_compress_level_range(level):
    assert make_options(compress_level=level).compress_level == int(level)


@pytest.mark.parametrize(
    ("sort", "normal", "order"),
    [
        ("alpha", "alpha:inc", Order("alpha")),
        ("alpha:inc", "alpha:inc", Order("alpha")),
        ("alphanumeric:dec", "alpha:dec", Order("alpha", descending=True)),
        ("shuffle:42", "shuffle:42", Order("shuffle", seed=42)),
        ("shuffle:0", "shuffle:0", Order("shuffle", seed=0)),
    ],
)
def test_sort_normalised(sort, normal, order):
    opts = make_options(sort=sort)
    assert opts.sort == normal
    assert opts.order == order


def test_unseeded_shuffle_records_its_seed():
    opts = make_options(sort="shuffle")
    kind, _, seed = opts.sort.partition(":")
    assert kind == "shuffle" and seed.isdigit()
    assert opts.order == Order("shuffle", seed=int(seed))
    assert make_options(sort=opts.sort).order == opts.order  # repeatable from the record


# --- api.plan on real trees ----------------------------------------------------------------


def test_plan_prefix_keeps_names_relative_to_src(tmp_path):
    src = make_tree(
        tmp_path / "src",
        {"train/a/1.jpg": 10, "train/b/2.jpg": 10, "trainx/3.jpg": 10, "val/4.jpg": 10},
    )
    got = api.plan(src, prefix="train/", shard_size="1KiB")
    assert [f.name for s in got.shards for f in s.members()] == ["train/a/1.jpg", "train/b/2.jpg"]
    got = api.plan(src, prefix="train", shard_size="1KiB")
    assert [f.name for s in got.shards for f in s.members()] == [
        "train/a/1.jpg",
        "train/b/2.jpg",
        "trainx/3.jpg",
    ]
    got = api.plan(src, prefix="train/a/1", shard_size="1KiB")
    assert [f.name for s in got.shards for f in s.members()] == ["train/a/1.jpg"]


def test_plan_cuts_real_sizes(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 60, "a/1.cls": 10, "a/2.jpg": 40, "a/3.jpg": 5})
    got = api.plan(src, shard_size=100)
    assert [(s.name, s.size, [f.name for f in s.members()]) for s in got.shards] == [
        ("shard-000000.tar", 110, ["a/1.cls", "a/1.jpg", "a/2.jpg"]),
        ("shard-000001.tar", 5, ["a/3.jpg"]),
    ]
    assert got.file_count == 4 and got.sample_count == 3 and got.size == 115


def test_plan_skips_hidden_and_counts_them(tmp_path):
    src = make_tree(
        tmp_path / "src",
        {"a/1.jpg": 5, ".DS_Store": 3, "a/.x.jpg": 4, ".git/config": 2, ".git/objects/o": 2},
    )
    got = api.plan(src)
    assert [f.name for s in got.shards for f in s.members()] == ["a/1.jpg"]
    skipped = {s.reason: (s.count, set(s.examples)) for s in got.skipped}
    assert skipped[HIDDEN] == (2, {".DS_Store", "a/.x.jpg"})
    assert skipped[HIDDEN_DIR] == (1, {".git/"})

    got = api.plan(src, include_hidden=True, member_names="original")  # '.DS_Store': no key
    assert sorted(f.name for s in got.shards for f in s.members()) == [
        ".DS_Store",
        ".git/config",
        ".git/objects/o",
        "a/.x.jpg",
        "a/1.jpg",
    ]
    assert got.skipped == ()


def test_plan_does_not_follow_symlinks(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 5})
    outside = make_tree(tmp_path / "outside", {"o/2.jpg": 5})
    os.symlink(src / "a" / "1.jpg", src / "link.jpg")
    os.symlink(outside / "o", src / "linkdir")
    got = api.plan(src)
    assert [f.name for s in got.shards for f in s.members()] == ["a/1.jpg"]
    skipped = {s.reason: (s.count, set(s.examples)) for s in got.skipped}
    assert skipped[SYMLINK] == (2, {"link.jpg", "linkdir"})


def test_plan_nothing_to_shard(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="nothing to shard"):
        api.plan(empty)
    src = make_tree(tmp_path / "src", {"a/1.jpg": 5, ".hidden": 1})
    with pytest.raises(DataError) as err:
        api.plan(src, prefix="b/")
    assert "'b/'" in str(err.value)
    hidden_only = make_tree(tmp_path / "h", {".a": 1, ".b": 1})
    with pytest.raises(DataError, match="2 hidden"):
        api.plan(hidden_only)


def test_plan_exclude_everything_is_nothing_to_shard(tmp_path):
    src = make_tree(tmp_path / "src", {"a/1.jpg": 5, "a/2.jpg": 5})
    with pytest.raises(DataError, match="nothing to shard"):
        api.plan(src, sample_exts=".jpg,.cls", missing_extension_action="exclude")


def test_plan_bad_option_before_listing(tmp_path):
    with pytest.raises(UsageError):
        api.plan(tmp_path / "does-not-exist", shard_size="abc")


@pytest.mark.parametrize("by_search", [True, False])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_flat_cut_follows_the_greedy_rule(by_search, data):
    """A flat run of samples, cut by size and/or count, as a searched run of running sums (many
    samples a shard; the sums held a window at a time) or sample by sample (few): the shards
    hold the samples in order, each ends at the first sample where it reaches a bound, and
    only the last may reach none."""
    planning = importlib.import_module("ishard.planning.cut")
    sizes = data.draw(st.lists(st.integers(0, 40), min_size=0, max_size=1500))
    size = data.draw(st.none() | st.integers(1, 3000))
    count = (
        data.draw(st.none() | st.integers(1, 400))
        if size is not None
        else data.draw(st.integers(1, 400))
    )
    order = data.draw(
        st.sampled_from([Order(), Order("listing", True), Order("shuffle", False, 3)])
    )
    saved = planning.GREEDY_IN_PYTHON_BELOW, planning.CUT_WINDOW
    planning.GREEDY_IN_PYTHON_BELOW = 0 if by_search else 1 << 62
    planning.CUT_WINDOW = data.draw(st.sampled_from([1, 2, 7, 64, 1 << 20]))  # running sums held
    try:
        shards = [
            list(map(int, s))
            for s in planning.cut_indices(
                [f"k{i}" for i in range(len(sizes))], sizes, Bounds(size, count), order, False
            )
        ]
    finally:
        planning.GREEDY_IN_PYTHON_BELOW, planning.CUT_WINDOW = saved
    run = [i for shard in shards for i in shard]
    assert sorted(run) == list(range(len(sizes)))
    if order.kind == "listing":
        assert run == sorted(run, reverse=order.descending)

    def reached(samples):
        return (size is not None and sum(sizes[i] for i in samples) >= size) or (
            count is not None and len(samples) >= count
        )

    for at, shard in enumerate(shards):
        assert shard and not any(reached(shard[:end]) for end in range(1, len(shard)))
        assert reached(shard) or at == len(shards) - 1
