#!/usr/bin/env python3
"""Custom key regexes and EKM maps: ishard's RE2 code next to the `regex`-module code it replaced.

The reference is the previous implementation, reproduced here: Python's `regex` module, Go's
``ReplaceAllString`` through ``finditer`` with a one-second timeout per name, and an EKM
matched one compiled regex after another.

    python benchmarks/bench_patterns.py                  # 1M names, EKM of 100,000 patterns
    python benchmarks/bench_patterns.py --names 200000   # a quick run

On a machine shared with other work, the best of several rounds (printed first) is the
figure to compare; the medians are printed beside it.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

import regex

from ishard.errors import UsageError
from ishard.planning.ekm import MAX_EKM_PATTERNS, parse_ekm
from ishard.planning.keys import key_function, sample_key

PATTERNS = (r"^(.*)_\d+\.\w+$", r".*/([^/]+)/[^/]+$")
HOSTILE = "(a+?)+$"


def regex_key(text: str):
    """The previous key function (regex module, timeout per name)."""
    pattern = regex.compile(text)

    def key(name: str) -> str:
        out, pos, last_end = [], 0, -1
        for m in pattern.finditer(name, timeout=1.0):
            start, end = m.span()
            if start == end == last_end:
                continue
            out.append(name[pos:start])
            out.append(m.group(1) or "")
            pos = last_end = end
        out.append(name[pos:])
        return "".join(out)

    return key


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def keys(names: list[str], rounds: int) -> None:
    for text in PATTERNS:
        new, old = key_function(text), regex_key(text)
        sample = names[:: max(1, len(names) // 1000)]
        assert [sample_key(n, new) for n in sample] == [sample_key(n, old) for n in sample]
        runs: dict[str, list[float]] = {"regex": [], "re2": []}
        for r in range(rounds):
            order = [("regex", old), ("re2", new)][:: 1 if r % 2 == 0 else -1]
            for label, fn in order:
                runs[label].append(timed(lambda fn=fn: [sample_key(n, fn) for n in names]))
        a, b = min(runs["regex"]), min(runs["re2"])
        ma, mb = statistics.median(runs["regex"]), statistics.median(runs["re2"])
        print(
            f"keys {text!r} over {len(names):,} names, best of {rounds}: regex {a:.2f} s, "
            f"re2 {b:.2f} s (re2/regex {b / a:.2f}x); medians {ma:.2f} s, {mb:.2f} s"
        )
    hostile = ["h/" + "a" * 200 + "b.jpg"] * 100
    new = key_function(HOSTILE)
    t = timed(lambda: [new(n) for n in hostile])
    old = regex_key(HOSTILE)
    started = time.perf_counter()
    try:
        old(hostile[0])
    except TimeoutError:
        pass
    print(
        f"hostile {HOSTILE!r}, 100 names of 200 a's: re2 {t * 1000:.1f} ms in all; regex gives "
        f"up after {time.perf_counter() - started:.2f} s on the first name"
    )


def ekm(folder: Path, names_count: int, reference_names: int) -> None:
    per = 100
    cats = MAX_EKM_PATTERNS // per
    doc = {
        f"c{c:04d}-%d.tar": [f"^train/n{c:08d}/n{c:08d}_{j}\\." for j in range(per)]
        for c in range(cats)
    }
    path = folder / "ekm.json"
    path.write_text(json.dumps(doc, indent=1))
    size = path.stat().st_size
    started = time.perf_counter()
    parsed = parse_ekm(str(path))
    parse_s = time.perf_counter() - started
    names = [
        f"train/n{(i % cats):08d}/n{(i % cats):08d}_{i % 137}.JPEG" for i in range(names_count)
    ]
    match_s = timed(lambda: [parsed.category(n) for n in names])
    print(
        f"ekm {MAX_EKM_PATTERNS:,} patterns ({size / 2**20:.1f} MiB): re2 parse {parse_s:.2f} s, "
        f"{match_s / names_count * 1e6:.1f} us per name over {names_count:,} names"
    )
    compiled = [regex.compile(p) for c in doc.values() for p in c]
    few = names[:reference_names]
    ref_s = timed(lambda: [[p.search(n, timeout=1.0) for p in compiled] for n in few])
    print(
        f"  reference (one regex after another): {ref_s / len(few) * 1e3:.1f} ms per name "
        f"over {len(few)} names ({ref_s / len(few) / (match_s / names_count):.0f}x re2)"
    )
    big = folder / "big.json"
    cats = 1500
    big.write_text(
        json.dumps(
            {
                f"c{c:05d}-%d.tar": [f"^train/n{c:08d}/n{c:08d}_{j}\\." for j in range(500)]
                for c in range(cats)
            },
            indent=1,
        )
    )
    started = time.perf_counter()
    try:
        parse_ekm(str(big))
    except UsageError as err:
        print(
            f"ekm {big.stat().st_size / 2**20:.1f} MiB map refused in "
            f"{(time.perf_counter() - started) * 1000:.1f} ms: {err}"
        )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-ekm", action="store_true")
    parser.add_argument("--ekm-names", type=int, default=200_000)
    parser.add_argument("--reference-names", type=int, default=20)
    args = parser.parse_args()
    names = [f"train/n{(i // 1300):08d}/n{(i // 1300):08d}_{i}.JPEG" for i in range(args.names)]
    keys(names, args.rounds)
    if args.skip_ekm:
        return
    with tempfile.TemporaryDirectory() as folder:
        ekm(Path(folder), args.ekm_names, args.reference_names)


if __name__ == "__main__":
    main()
