"""The compact name column (``namecolumn.Names``) against a plain list of the same names."""

from __future__ import annotations

from array import array

import pytest
from helpers import open_files_in
from hypothesis import given, settings
from hypothesis import strategies as st

from ishard.planning import namecolumn
from ishard.planning.namecolumn import Names
from ishard.planning.table import FileTable

# names as listings give them: any text but a newline, undecodable bytes as surrogate escapes
text = st.text(
    st.characters(blacklist_characters="\n", blacklist_categories=("Cs",))
    | st.sampled_from(["\udc80", "\udcff", "é", "😀", "/", "."]),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(text, max_size=300),
    picks=st.lists(st.integers(0, 10**6), max_size=400),
    chunk=st.sampled_from([1, 3, 64, 1 << 16]),
    data=st.data(),
)
def test_names_read_back_as_the_list_they_were_made_from(names, picks, chunk, data):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(namecolumn, "CHUNK", chunk)  # chunks of 1, 3, 64 names and the real size
        patch.setattr(namecolumn, "TAKE_SORTED_FROM", 2)  # short lists take the sorted way too
        # offsets widen from 4 to 8 bytes past 2 GiB of names: here from 1 byte past 127 too
        if data.draw(st.booleans()):
            patch.setattr(namecolumn, "NARROW", "b")
            patch.setattr(namecolumn, "NARROW_MAX", 127)
        if data.draw(st.booleans()):  # the bytes in a nameless file, read back a few at a time
            patch.setattr(namecolumn, "SPOOL_READ", data.draw(st.sampled_from([1, 7, 1 << 30])))
            cuts = sorted(data.draw(st.lists(st.integers(0, len(names)), max_size=4)))
            chunks = [names[a:b] for a, b in zip([0, *cuts], [*cuts, len(names)])]
            column = Names.spooled(chunks)  # empty chunks among them, sometimes
            assert isinstance(column._blob, namecolumn.SpooledBlob)
            assert isinstance(column._starts, namecolumn.SpooledStarts)
        else:
            column = Names()
            for n in names[: len(names) // 2]:
                column.append(n)  # some appended one by one, the rest at once
            column.extend(names[len(names) // 2 :])
        check(column, names, picks, data)


def check(column, names, picks, data):
    assert len(column) == len(names)
    assert list(column) == names and column == names and column == Names(names)
    if names:
        picked = [p % len(names) for p in picks]
        runs = sorted(picked)  # sorted runs and repeats: what take() decodes a run at a time
        half = len(names) // 2  # two runs interleaved: an image tree and an annotation tree
        woven = [i for pair in zip(range(half), range(half, len(names))) for i in pair]
        for indices in (picked, runs, woven, woven[::-1]):
            assert column.take(indices) == [names[i] for i in indices]
        i = data.draw(st.integers(-len(names), len(names) - 1))
        assert column[i] == names[i]
        a, b = sorted(data.draw(st.lists(st.integers(-2, len(names) + 2), min_size=2, max_size=2)))
        assert column[a:b] == names[a:b] and column[::3] == names[::3]
        joined = "\n".join(names[a:b]).encode("utf-8", "surrogateescape")
        assert column.joined(a, b) == joined  # what the listing record digests


def test_spooled_names_are_read_by_forked_writers_and_pickle_as_their_bytes(tmp_path):
    """Names spooled to a nameless file in the given folder, where each starts to another:
    nothing of them is left there by name, none of them is in memory, a forked process (a
    shard writer) reads them through the descriptors it inherits, and pickled (sent to a Dask
    worker) they are the names themselves."""
    import os
    import pickle

    names = [f"img/{i:05d}.jpg" for i in range(3000)] + ["é/\udcff.cls"]
    column = Names.spooled([names[:1000], [], names[1000:]], str(tmp_path))
    assert list(tmp_path.iterdir()) == []
    assert open_files_in(tmp_path) == ["(deleted)", "(deleted)"]  # the bytes, the starts
    assert not isinstance(column._starts, array)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's)
        os.close(read)
        os.write(write, "\n".join(column.take([2999, 0, 3000])).encode("utf-8", "surrogateescape"))
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        seen = pipe.read().decode("utf-8", "surrogateescape").split("\n")
    assert os.waitpid(child, 0)[1] == 0
    assert seen == [names[2999], names[0], names[3000]]
    copied = pickle.loads(pickle.dumps(column))
    assert isinstance(copied._blob, bytearray) and isinstance(copied._starts, array)
    assert copied == column and list(copied) == names


def test_a_name_with_a_newline_is_refused_not_split():
    with pytest.raises(ValueError, match="newline"):
        Names(["a", "b\nc"])


def test_a_sorted_table_keeps_the_first_of_repeated_names_with_its_columns():
    files = FileTable()
    for name, size in [("b", 1), ("a\udcff", 2), ("a", 3), ("b", 4), ("é", 5)]:
        files.add(name, size, 0)
    files.sort()
    assert files.names == ["a", "a\udcff", "b", "é"]  # bytewise: a, a+0xff, b, then é
    assert list(files.sizes) == [3, 2, 1, 5]


def test_later_names_are_loaded_once_on_first_read_and_pickle_as_names():
    """``LaterNames``: the length without loading; the first read loads (once), and what was
    loaded is what reads give; a loader that gives another count is refused; pickled, they are
    plain ``Names`` holding the same."""
    import pickle

    from ishard.planning.namecolumn import LaterNames

    calls = []

    def load() -> Names:
        calls.append(1)
        return Names(["b/c.jpg", "a.jpg", "é/x.cls"])

    later = LaterNames(3, load)
    assert len(later) == 3 and not later.loaded and calls == []
    assert later[1] == "a.jpg" and later.loaded and calls == [1]
    assert list(later) == ["b/c.jpg", "a.jpg", "é/x.cls"] and later.take([2, 0]) == [
        "é/x.cls",
        "b/c.jpg",
    ]
    assert calls == [1]
    copied = pickle.loads(pickle.dumps(LaterNames(3, load)))
    assert type(copied) is Names and list(copied) == list(later) and len(calls) == 2
    with pytest.raises(ValueError, match="3 names loaded where 2 were listed"):
        LaterNames(2, load)[0]


def test_reader_keys_left_in_the_engine_are_asked_for_no_file_when_none_is_wanted():
    """No file asked for: nothing is cut from the engine, nothing fetched (a whole listing's
    9 bytes a file for nothing), and the answer is empty."""
    import numpy as np

    from ishard.planning.handover import LaterReaderKeys

    asked: list[object] = []
    readers = LaterReaderKeys(lambda lo, hi: asked.append((lo, hi)), lambda: asked.append("all"))
    keys, flags = readers.rows(np.array([], dtype=np.int32))
    assert (len(keys), len(flags), asked) == (0, 0, [])
