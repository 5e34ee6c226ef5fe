"""ishard.split.streaming against MosaicML Streaming 0.13.0's own functions on random inputs.

Streaming's package __init__ pulls in torch and the cloud SDKs, but its shuffle modules and
``partition/orig.py`` import only numpy. So the installed package is located without importing
it, empty stand-ins take the place of its parent packages, and just those modules are loaded.
py1b is not compared: Streaming removed it in 0.11 (tests/split/test_split_facts.py checks it).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import random
import sys
import types
import warnings
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from ishard.errors import UsageError
from ishard.split import streaming as ours

INSTALL = (
    "install it as README.md's test command does: "
    "pip install --no-deps 'mosaicml-streaming==0.13.0'"
)
VERSION = "0.13.0"
ALGOS = ("naive", "py1s", "py2s", "py1br", "py1e")  # all Streaming 0.13 has
PARENTS = ("streaming", "streaming.base", "streaming.base.shuffle", "streaming.base.partition")
MODULES = tuple(f"streaming.base.shuffle.{a}" for a in ALGOS) + ("streaming.base.partition.orig",)


def _installed() -> str | None:
    """Why the comparison cannot run, or None."""
    if importlib.util.find_spec("streaming") is None:
        return f"mosaicml-streaming is not installed — {INSTALL}"
    try:
        found = importlib.metadata.version("mosaicml-streaming")
    except importlib.metadata.PackageNotFoundError:
        return f"'streaming' is not mosaicml-streaming — {INSTALL}"
    if found != VERSION:
        return (
            f"mosaicml-streaming {found} is installed, the comparison is for {VERSION} — {INSTALL}"
        )
    return None


pytestmark = pytest.mark.skipif(_installed() is not None, reason=str(_installed()))


@pytest.fixture(scope="module")
def ms():
    """Streaming's functions by name, loaded under stand-in parents; sys.modules restored."""
    root = Path(importlib.util.find_spec("streaming").submodule_search_locations[0])
    saved = {name: sys.modules.get(name) for name in PARENTS + MODULES}
    try:
        for name in PARENTS:
            stand_in = types.ModuleType(name)
            stand_in.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
            sys.modules[name] = stand_in
        loaded = {name: importlib.import_module(name) for name in MODULES}
        shuffles = {
            a: getattr(loaded[f"streaming.base.shuffle.{a}"], f"get_shuffle_{a}") for a in ALGOS
        }
        yield {
            "shuffle": shuffles,
            "orig": loaded["streaming.base.partition.orig"].get_partitions_orig,
            "divide_spans": loaded["streaming.base.shuffle.py1s"].divide_spans,
        }
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _outcome(function, *args):
    """``function(*args)`` as a list, or the type of what it raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(function(*args)).tolist()
        except Exception as error:  # noqa: BLE001 — compared below: ours must be a UsageError
            return type(error)


def test_only_the_numpy_modules_were_loaded(ms):
    assert getattr(sys.modules["streaming"], "__file__", None) is None  # the stand-in, not __init__
    assert sys.modules["streaming.base.shuffle.py1s"].__file__.endswith("py1s.py")
    assert "streaming.base.dataset" not in sys.modules


@pytest.mark.parametrize("algo", ALGOS)
def test_get_shuffle_matches_streaming(ms, algo):
    rnd = random.Random(f"shuffle-{algo}")
    theirs = ms["shuffle"][algo]
    compared = 0
    for _ in range(300):
        sizes = [
            rnd.choice([rnd.randint(1, 40), rnd.randint(1, 5)]) for _ in range(rnd.randint(1, 12))
        ]
        nodes = rnd.randint(1, 8)
        seed, epoch = rnd.randint(0, 2**31), rnd.randint(0, 5)
        block = rnd.choice([2, 3, 7, 16, 64, 1 << 18])
        args = (nodes, seed, epoch, block)
        want = _outcome(theirs, np.array(sizes, np.int64), *args)
        got = _outcome(ours.get_shuffle, algo, sizes, *args)
        if isinstance(want, type):  # Streaming fails (a canonical node without samples)
            assert got is UsageError, (want, sizes, args)
            continue
        assert got == want, (sizes, args)
        compared += 1
    assert compared >= 250  # most cases are real comparisons, not shared failures


def test_get_partitions_orig_matches_streaming(ms):
    rnd = random.Random("orig")
    compared = 0
    for _ in range(600):
        physical = rnd.randint(1, 4)
        nodes = rnd.choice(
            [physical * rnd.randint(1, 4), max(1, physical // rnd.choice([1, 2, 4]))]
        )
        n = rnd.choice([rnd.randint(1, 12), rnd.randint(1, 150)])
        ranks, workers, batch = rnd.randint(1, 4), rnd.randint(1, 3), rnd.randint(1, 5)
        drop = rnd.choice([0, 0, rnd.randint(0, n)])
        args = (n, nodes, physical, ranks, workers, batch, drop)
        want = _outcome(ms["orig"], *args)
        got = _outcome(ours.get_partitions_orig, *args)
        if isinstance(want, type):  # C and P do not divide one another
            assert got is UsageError, (want, args)
            continue
        assert got == want, args  # same shape and entries, -1 padding included
        compared += 1
    assert compared >= 500


def test_divide_spans_matches_streaming(ms):
    rnd = random.Random("spans")
    for _ in range(400):
        sizes = [rnd.randint(0, 20) for _ in range(rnd.randint(1, 10))]
        starts = np.cumsum([0] + sizes).tolist()
        order = list(range(len(sizes)))
        rnd.shuffle(order)
        spans = [(starts[i], starts[i + 1]) for i in order]
        parts = rnd.randint(1, 9)
        want = ms["divide_spans"](list(spans), sum(sizes), parts)  # it edits its input
        got = ours.divide_spans(spans, sum(sizes), parts)
        assert (list(got[0]), list(got[1])) == (list(want[0]), list(want[1])), (spans, parts)
