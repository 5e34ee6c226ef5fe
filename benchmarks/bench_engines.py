#!/usr/bin/env python3
"""Which column engine for planning: DuckDB, pyarrow or polars, on planning's core work.

The same inventory as ``bench_plan.py`` (CSV with a header, names not sorted, two files per
sample in two directories). Each engine, in its own process (peak RSS by GNU time), does what
planning does with ``base_file_name`` keys: read name/size/mtime, drop hidden names, sort the
listing bytewise, compute each file's sample key (base name less its extension), group files
into samples in order of first appearance with their file counts and byte sums, and hand the
sample sizes to NumPy (where cutting runs). Rounds alternate between engines.

    python benchmarks/bench_engines.py --objects 10000000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_plan import generate

DUCKDB = r"""
import sys, duckdb, numpy as np
con = duckdb.connect(config={"threads": 2, "memory_limit": "1GB",
                             "temp_directory": sys.argv[2], "preserve_insertion_order": True})
con.execute("SET enable_progress_bar = false")
con.execute(f'''
CREATE TABLE files AS
SELECT name, size, mtime FROM read_csv('{sys.argv[1]}', header=true,
    columns={{'name': 'VARCHAR', 'size': 'BIGINT', 'mtime': 'BIGINT'}})
WHERE NOT regexp_matches(name, '(^|/)\.')
ORDER BY name''')
sizes = con.execute(r'''
WITH keyed AS (
  SELECT row_number() OVER () AS i, size,
         regexp_replace(regexp_extract(name, '[^/]*$'), '\.[^.]*$', '') AS key
  FROM files)
SELECT count(*) AS files, sum(size) AS bytes FROM keyed GROUP BY key ORDER BY min(i)
''').fetchnumpy()["bytes"]
print(len(sizes), int(np.sum(sizes)))
"""

PYARROW = r"""
import sys, numpy as np, pyarrow as pa, pyarrow.compute as pc, pyarrow.csv as csv
t = csv.read_csv(sys.argv[1], convert_options=csv.ConvertOptions(
    column_types={"name": pa.string(), "size": pa.int64(), "mtime": pa.int64()}))
t = t.filter(pc.invert(pc.match_substring_regex(t["name"], r"(^|/)\.")))
t = t.take(pc.sort_indices(t, [("name", "ascending")]))
base = pc.struct_field(pc.extract_regex(t["name"], r"(?P<b>[^/]*)$"), "b")
key = pc.replace_substring_regex(base, r"\.[^.]*$", "")
t = pa.table({"key": key, "size": t["size"], "i": pa.array(np.arange(len(t)))})
g = t.group_by("key", use_threads=False).aggregate([("size", "sum"), ("size", "count"),
                                                     ("i", "min")])
g = g.take(pc.sort_indices(g["i_min"]))
sizes = g["size_sum"].to_numpy()
print(len(sizes), int(np.sum(sizes)))
"""

POLARS = r"""
import sys, numpy as np, polars as pl
t = (pl.scan_csv(sys.argv[1], schema={"name": pl.String, "size": pl.Int64, "mtime": pl.Int64})
     .filter(~pl.col("name").str.contains(r"(^|/)\."))
     .sort("name")
     .with_row_index("i")
     .with_columns(pl.col("name").str.extract(r"([^/]*)$").str.replace(r"\.[^.]*$", "")
                   .alias("key"))
     .group_by("key", maintain_order=True)
     .agg(pl.len().alias("files"), pl.col("size").sum().alias("bytes"))
     .collect())
sizes = t["bytes"].to_numpy()
print(len(sizes), int(np.sum(sizes)))
"""

ENGINES = {"duckdb": DUCKDB, "pyarrow": PYARROW, "polars": POLARS}


def run(code: str, inventory: Path, tmp: Path) -> tuple[float, float, str]:
    gnu_time = shutil.which("time") or "/usr/bin/time"
    with tempfile.NamedTemporaryFile(delete=False) as out:
        pass
    started = time.perf_counter()
    proc = subprocess.run(
        [
            gnu_time,
            "-f",
            "%M",
            "-o",
            out.name,
            sys.executable,
            "-c",
            code,
            str(inventory),
            str(tmp),
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    rss = int(Path(out.name).read_text().split()[-1]) / 1024
    os.unlink(out.name)
    return seconds, rss, proc.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "ishard-bench-plan"
    )
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    inventory = generate(args.data, "imagenet", args.objects, [])["csv"]
    tmp = Path(tempfile.mkdtemp(prefix="engines-"))
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in ENGINES}
    answers = set()
    for _ in range(args.rounds):
        for name, code in ENGINES.items():
            seconds, rss, answer = run(code, inventory, tmp)
            results[name].append((seconds, rss))
            answers.add(answer)
    if len(answers) != 1:
        sys.exit(f"the engines disagree: {answers}")
    print(f"{args.objects:,} objects → {answers.pop()} (samples, bytes)")
    for name, runs in results.items():
        best = min(runs)
        print(
            f"  {name:8s} {best[0]:6.2f} s  peak RSS {max(r for _, r in runs):7.0f} MiB  "
            f"(rounds: {', '.join(f'{s:.2f}' for s, _ in runs)})"
        )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
