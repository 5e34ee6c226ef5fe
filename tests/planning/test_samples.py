"""Grouping files into samples, EKM routing, and the missing-extension actions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.errors import DataError
from ishard.model import FileEntry, Sample, Tally
from ishard.planning.ekm import NO_MATCH, SEVERAL, parse_ekm
from ishard.planning.keys import key_function
from ishard.planning.samples import (
    EXTRA,
    INCOMPLETE,
    REPEATED,
    WARNINGS_SHOWN,
    apply_sample_exts_table,
    group_table,
    route_table,
)
from ishard.planning.table import FileTable, SampleTable

BASE = key_function("base_file_name")
FULL = key_function("full_name")


def fe(name: str, size: int = 1) -> FileEntry:
    return FileEntry(name, size)


def sample(key: str, *names: str, size: int = 1) -> Sample:
    files = tuple(fe(n, size) for n in names)
    return Sample(key, files, size * len(files))


def _plain(table: SampleTable) -> list[Sample]:
    return [table.sample(i) for i in range(len(table))]


def group(entries, key) -> list[Sample]:
    """The planner's grouping (``group_table``), in plain values."""
    return _plain(group_table(FileTable.of(entries), key))


def route(samples, ekm, tally: Tally) -> list[list[Sample]]:
    """The planner's EKM routing (``route_table``), in plain values."""
    return [_plain(t) for t in route_table(SampleTable.of(samples), ekm, tally)]


def apply_sample_exts(samples, wanted, action, tally: Tally, warnings: list[str]) -> list[Sample]:
    """The planner's ``--sample-exts`` actions (``apply_sample_exts_table``), in plain values."""
    table = apply_sample_exts_table(SampleTable.of(samples), wanted, action, tally, warnings)
    return _plain(table)


def counts(tally: Tally) -> dict[str, int]:
    return {s.reason: s.count for s in tally.freeze()}


# --- group ---------------------------------------------------------------------------------


def test_group_first_appearance_order_and_listing_order_within():
    entries = [
        fe("a/2.jpg", 5),
        fe("a/1.jpg", 3),
        fe("b/2.cls", 7),
        fe("b/1.cls", 11),
        fe("c/3.txt", 1),
    ]
    got = group(entries, BASE)
    assert [s.key for s in got] == ["2", "1", "3"]
    assert [f.name for f in got[0].files] == ["a/2.jpg", "b/2.cls"]
    assert [f.name for f in got[1].files] == ["a/1.jpg", "b/1.cls"]
    assert [s.size for s in got] == [12, 14, 1]


def test_group_full_name_keeps_directories_apart():
    entries = [fe("a/1.jpg"), fe("a/1.xml"), fe("b/1.jpg")]
    got = group(entries, FULL)
    assert [(s.key, [f.name for f in s.files]) for s in got] == [
        ("a/1", ["a/1.jpg", "a/1.xml"]),
        ("b/1", ["b/1.jpg"]),
    ]


def test_group_dot_files_share_the_empty_key():
    got = group([fe("x/.DS_Store"), fe("y/.DS_Store")], BASE)
    assert [(s.key, len(s.files)) for s in got] == [("", 2)]


def test_group_empty():
    assert group([], BASE) == []


_names = st.lists(
    st.tuples(
        st.sampled_from(["", "d1/", "d2/", "d1/e/"]),
        st.sampled_from("abcde"),
        st.sampled_from([".jpg", ".cls", ".a.b", ""]),
        st.integers(0, 100),
    ),
    max_size=30,
    unique_by=lambda t: t[:3],
)


@settings(max_examples=200, deadline=None)
@given(_names)
def test_group_model(items):
    entries = [fe(d + s + e, n) for d, s, e, n in items]
    got = group(entries, BASE)
    # model: stem = basename up to its last dot (whole basename without a dot)
    want: dict[str, list[FileEntry]] = {}
    for e in entries:
        base = e.name.split("/")[-1]
        stem = base[: base.rfind(".")] if "." in base else base
        want.setdefault(stem, []).append(e)
    assert [(s.key, list(s.files), s.size) for s in got] == [
        (k, v, sum(f.size for f in v)) for k, v in want.items()
    ]


# --- route -----------------------------------------------------------------------------------

EKM = parse_ekm('{"cat-%d.tar": ["^cats/"], "dog-%d.tar": ["^dogs/", "puppy"]}')


def test_route_without_ekm_is_one_group():
    samples = [sample("a", "a.jpg"), sample("b", "b.jpg")]
    tally = Tally()
    assert route(samples, None, tally) == [samples]
    assert tally.freeze() == ()


def test_route_by_category_in_order():
    samples = [
        sample("cats/1", "cats/1.jpg", "cats/1.cls"),
        sample("dogs/2", "dogs/2.jpg"),
        sample("cats/3", "cats/3.jpg"),
    ]
    tally = Tally()
    got = route(samples, EKM, tally)
    assert [[s.key for s in g] for g in got] == [["cats/1", "cats/3"], ["dogs/2"]]
    assert got[0][0] == samples[0]
    assert tally.freeze() == ()


def test_route_unmatched_and_multiple_are_counted_and_left_out():
    samples = [
        sample("cats/1", "cats/1.jpg", "cats/1.txt"),
        sample("birds/2", "birds/2.jpg"),
        sample("dogs/puppy", "dogs/puppy.jpg"),  # matches two dog patterns
        sample("x/3", "x/3.jpg", "x/3.cls", size=4),
    ]
    tally = Tally()
    got = route(samples, EKM, tally)
    assert [[s.key for s in g] for g in got] == [["cats/1"], []]
    assert counts(tally) == {NO_MATCH: 3, SEVERAL: 1}
    examples = {s.reason: s.examples for s in tally.freeze()}
    assert examples[NO_MATCH] == ("birds/2.jpg", "x/3.jpg", "x/3.cls")
    assert examples[SEVERAL] == ("dogs/puppy.jpg",)


def test_route_partly_matching_sample_keeps_matching_files_with_their_size():
    s = Sample("k", (fe("cats/k.jpg", 10), fe("other/k.cls", 5)), 15)
    tally = Tally()
    got = route([s], EKM, tally)
    assert got[0] == [Sample("k", (fe("cats/k.jpg", 10),), 10)]
    assert counts(tally) == {NO_MATCH: 1}


def test_route_sample_split_across_categories_is_an_error():
    s = sample("1", "cats/1.jpg", "dogs/1.cls")
    with pytest.raises(DataError) as err:
        route([s], EKM, Tally())
    msg = str(err.value)
    assert "'1'" in msg and "cats/1.jpg" in msg and "dogs/1.cls" in msg
    assert "cat-%d.tar" in msg and "dog-%d.tar" in msg


# --- apply_sample_exts -------------------------------------------------------------------

WANTED = (".jpg", ".cls")
SAMPLES = [
    sample("ok", "a/ok.jpg", "a/ok.cls"),
    sample("extra", "a/extra.jpg", "a/extra.cls", "a/extra.txt"),
    sample("missing", "a/missing.jpg"),
    sample("twice", "a/twice.jpg", "b/twice.jpg", "a/twice.cls"),
]


def test_ignore_and_no_wanted_return_samples_unchanged():
    for wanted, action in (((), "abort"), (WANTED, "ignore")):
        tally, warnings = Tally(), []
        assert apply_sample_exts(list(SAMPLES), wanted, action, tally, warnings) == SAMPLES
        assert tally.freeze() == () and warnings == []


def test_warn_keeps_everything_and_describes_offenders():
    tally, warnings = Tally(), []
    assert apply_sample_exts(list(SAMPLES), WANTED, "warn", tally, warnings) == SAMPLES
    assert tally.freeze() == ()
    assert len(warnings) == 3
    assert "'extra'" in warnings[0] and "'.txt'" in warnings[0]
    assert "'missing'" in warnings[1] and "'.cls'" in warnings[1]
    assert "'twice'" in warnings[2] and "b/twice.jpg" in warnings[2] and "repeats" in warnings[2]


def test_warn_caps_at_ten_lines_plus_a_count():
    many = [sample(f"s{i}", f"s{i}.jpg") for i in range(WARNINGS_SHOWN + 7)]
    tally, warnings = Tally(), []
    kept = apply_sample_exts(many, WANTED, "warn", tally, warnings)
    assert kept == many
    assert WARNINGS_SHOWN == 10
    assert len(warnings) == 11
    assert all(f"'s{i}'" in warnings[i] for i in range(10))
    assert "7 more" in warnings[10]


def test_warn_exactly_ten_has_no_count_line():
    many = [sample(f"s{i}", f"s{i}.jpg") for i in range(10)]
    warnings: list[str] = []
    apply_sample_exts(many, WANTED, "warn", Tally(), warnings)
    assert len(warnings) == 10


@pytest.mark.parametrize(
    ("samples", "words"),
    [
        ([SAMPLES[0], SAMPLES[2]], ["'missing'", "'.cls'"]),
        ([SAMPLES[1]], ["'extra'", "'.txt'", "a/extra.txt"]),
        ([SAMPLES[3]], ["'twice'", "b/twice.jpg"]),
    ],
)
def test_abort_names_sample_and_extension(samples, words):
    with pytest.raises(DataError) as err:
        apply_sample_exts(samples, WANTED, "abort", Tally(), [])
    for word in words:
        assert word in str(err.value)


def test_abort_passes_complete_samples():
    assert apply_sample_exts([SAMPLES[0]], WANTED, "abort", Tally(), []) == [SAMPLES[0]]


def test_exclude_drops_unwanted_and_repeated_files_and_incomplete_samples():
    tally, warnings = Tally(), []
    kept = apply_sample_exts(list(SAMPLES), WANTED, "exclude", tally, warnings)
    assert [(s.key, [f.name for f in s.files], s.size) for s in kept] == [
        ("ok", ["a/ok.jpg", "a/ok.cls"], 2),
        ("extra", ["a/extra.jpg", "a/extra.cls"], 2),
        ("twice", ["a/twice.jpg", "a/twice.cls"], 2),  # the first .jpg stays
    ]
    assert counts(tally) == {EXTRA: 1, REPEATED: 1, INCOMPLETE: 1}
    examples = {s.reason: s.examples for s in tally.freeze()}
    assert examples[EXTRA] == ("a/extra.txt",)
    assert examples[REPEATED] == ("b/twice.jpg",)
    assert examples[INCOMPLETE] == ("a/missing.jpg",)
    assert warnings == []


_exts = st.sampled_from([".jpg", ".cls", ".txt", ""])


@settings(max_examples=200, deadline=None)
@given(
    raw=st.lists(
        st.lists(st.tuples(_exts, st.integers(0, 50)), min_size=1, max_size=5), max_size=12
    ),
    wanted=st.lists(st.sampled_from([".jpg", ".cls", ".xml"]), min_size=1, max_size=3, unique=True),
)
def test_exclude_model(raw, wanted):
    samples = []
    for i, files in enumerate(raw):
        entries = tuple(FileEntry(f"d{j}/s{i}{ext}", size) for j, (ext, size) in enumerate(files))
        samples.append(Sample(f"s{i}", entries, sum(f.size for f in entries)))
    want, extra, repeated, incomplete = [], 0, 0, 0
    for s in samples:
        first_of = {}
        for f in s.files:
            ext = f.name[f.name.rfind(".") :] if "." in f.name.split("/")[-1] else ""
            if ext in wanted and ext not in first_of:
                first_of[ext] = f
        if set(first_of) != set(wanted):
            incomplete += len(s.files)
            continue
        keep = [f for f in s.files if f in first_of.values()]
        dropped = [f for f in s.files if f not in keep]
        repeated += sum(
            1
            for f in dropped
            if f.name[f.name.rfind(".") :] in wanted and "." in f.name.split("/")[-1]
        )
        extra += len(dropped) - sum(
            1
            for f in dropped
            if f.name[f.name.rfind(".") :] in wanted and "." in f.name.split("/")[-1]
        )
        want.append((s.key, keep, sum(f.size for f in keep)))
    tally = Tally()
    kept = apply_sample_exts(samples, tuple(wanted), "exclude", tally, [])
    assert [(s.key, list(s.files), s.size) for s in kept] == want
    expected_counts = {
        r: n for r, n in ((EXTRA, extra), (REPEATED, repeated), (INCOMPLETE, incomplete)) if n
    }
    assert counts(tally) == expected_counts


# --- the fast paths against the plain ones ----------------------------------------------------

_any_names = st.lists(
    st.text(alphabet="ab./_\udcff", max_size=12).filter(lambda n: n != ""), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(_any_names)
def test_sample_keys_equal_sample_key_for_every_built_in_pattern(names):
    """The built-in patterns' keys computed in one generator are ``sample_key``'s, name by
    name (dots and slashes anywhere, dot files, no extension, undecodable bytes)."""
    from ishard.planning.keys import BUILT_IN, key_function, sample_key, sample_keys

    for pattern in (*BUILT_IN, r"^(.*)/[^/]*$"):
        key = key_function(pattern)
        assert list(sample_keys(names, key)) == [sample_key(n, key) for n in names], pattern


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 1 << 40)), max_size=60))
def test_numpy_gathering_equals_the_counting_sort(rows):
    """Files gathered by sample with numpy (big listings) and by the plain counting sort (small
    ones) give the same starts, members and sample sizes."""
    from array import array

    from ishard.planning.samples import _gather, _gather_numpy

    ids: dict[int, int] = {}
    sample_of = array("q", [ids.setdefault(s, len(ids)) for s, _ in rows])
    sizes = array("q", [size for _, size in rows])
    assert _gather_numpy(sample_of, len(ids), sizes) == _gather(sample_of, len(ids), sizes)


_member_names = st.lists(
    st.tuples(
        st.sampled_from(["", "a/", "b/", "a/c/"]),
        st.sampled_from(["x", "y", "", "x.y", "s"]),
        st.sampled_from([".jpg", ".JPG", ".jpg", ".a.b", "", ".", ".cls"]),
    ),
    max_size=12,
).map(
    lambda parts: sorted(
        {d + s + e for d, s, e in parts if d + s + e and not (d + s + e).endswith("/")}
    )
)


@settings(max_examples=400, deadline=None)
@given(_member_names, st.sampled_from(["base_file_name", "full_name", r"^(.*?)\..*$"]))
def test_sample_members_fails_on_the_sample_a_file_by_file_check_fails_on(names, pattern):
    """The check over whole columns raises exactly what checking the samples one by one, in
    order, raises first (or nothing when no sample is wrong)."""
    from ishard.model import FileEntry
    from ishard.planning.keys import key_function
    from ishard.planning.naming import check_sample_members, sample_members
    from ishard.planning.samples import group_table
    from ishard.planning.table import FileTable

    table = group_table(FileTable.of(FileEntry(n, 1) for n in names), key_function(pattern))

    def outcome(check) -> str:
        try:
            check()
        except DataError as err:
            return str(err)
        return "ok"

    def one_by_one() -> None:
        for s in range(len(table.keys)):
            check_sample_members(table, s)

    assert outcome(lambda: sample_members(table)) == outcome(one_by_one)


@settings(max_examples=200, deadline=None)
@given(_member_names)
def test_the_names_checked_for_extraction_are_the_names_written(names):
    """Under ``--member-names sample`` the extraction check looks at exactly the member names
    the shards get (``SampleTable.sample(i, rename=True)``, what the writers read)."""
    from itertools import chain

    from ishard.model import FileEntry
    from ishard.planning.keys import key_function
    from ishard.planning.naming import member_chunks
    from ishard.planning.samples import group_table
    from ishard.planning.table import FileTable

    names = [n for n in names if "." in n.rpartition("/")[2]]  # every member has an extension
    table = group_table(FileTable.of(FileEntry(n, 1) for n in names), key_function("full_name"))
    written = [f.arcname for s in range(len(table.keys)) for f in table.sample(s, True).files]
    assert list(chain.from_iterable(member_chunks(table, True))) == written
