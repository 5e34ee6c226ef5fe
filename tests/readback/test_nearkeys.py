"""The keys a sample index holds nearest to a missing one (``readback/nearkeys.py``): searched
within the row groups' key ranges where the index is in key order, over every row where it is
not, and the same keys either way — an index written in key order in small row groups, the
same rows shuffled, and all of them in one row group give one answer for every missing key."""

from __future__ import annotations

import random

import duckdb
import pyarrow
import pyarrow.parquet
import pytest

from ishard.readback.nearkeys import near_keys

# keys of three shapes, two rows (members) each: 'n0144_00017', 'ILSVRC_val_00017', 'a/b/017'
KEYS = sorted(
    [f"n{w:04d}_{i:05d}" for w in (1440, 1443, 1484) for i in range(0, 1500, 7)]
    + [f"ILSVRC_val_{i:05d}" for i in range(400)]
    + [f"{d}/b/{i:03d}" for d in ("a", "c") for i in range(150)]
)


def index(path, keys: list[str], row_group_size: int) -> str:
    rows = [k for k in keys for _ in range(2)]
    table = pyarrow.table({"key": rows, "member": [f"{k}.{n}" for n, k in enumerate(rows)]})
    pyarrow.parquet.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def probes(rng: random.Random) -> list[str]:
    """Keys the index does not hold: typos at the end and inside, keys cut short or given
    with an extension, a folder left out, and keys before, between and after all of them."""
    picked = rng.sample(KEYS, 40)
    made = [k + "x" for k in picked[:10]]
    made += [k[:-1] for k in picked[10:20]]
    made += [k + ".jpg" for k in picked[20:30]]
    made += [k[:5] + "9" + k[6:] for k in picked[30:40]]
    made += ["b/017", "c/b/0", "0", "Z", "m", "n1441", "zzzz", "ILSVRC_val_99999"]
    held = set(KEYS)
    return [k for k in made if k not in held]


@pytest.mark.parametrize("row_group_size", [50, 300])
def test_near_keys_agree_in_key_order_shuffled_and_in_one_row_group(tmp_path, row_group_size):
    rng = random.Random(row_group_size)
    shuffled = list(KEYS)
    rng.shuffle(shuffled)
    files = {
        "in key order": index(tmp_path / "sorted.parquet", KEYS, row_group_size),
        "shuffled": index(tmp_path / "shuffled.parquet", shuffled, row_group_size),
        "one row group": index(tmp_path / "one.parquet", KEYS, len(KEYS) * 2),
    }
    asked = probes(rng)
    con = duckdb.connect()
    answers = {}
    for name, path in files.items():
        answers[name] = {}
        for at in range(0, len(asked), 3):  # three missing keys at a time, as find asks
            answers[name].update(near_keys(con, path, asked[at : at + 3], 10))
    assert answers["in key order"] == answers["one row group"] == answers["shuffled"]
    found = answers["in key order"]
    for key in asked:
        if key.endswith(("x", ".jpg")):
            assert found[key][0] == key.removesuffix("x").removesuffix(".jpg"), found.get(key)
    assert found["b/017"][0] == "a/b/017"  # the folder left out
    assert "0" not in found and "zzzz" not in found  # like none of them
    assert all(k in set(KEYS) for near in found.values() for k in near)
