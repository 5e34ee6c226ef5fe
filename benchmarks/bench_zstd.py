#!/usr/bin/env python3
"""Seekable ``.tar.zst`` shards: writing them against ``tar -cf - | zstd -3 -T0``, and reading
one sample back out of a 1 GiB shard.

Both parts use a copy of bench_local.py's ImageNet-like tree (the same generator, parameters
and default location under the temp dir: made once, reused after) whose files keep their
names, sizes and headers but draw their bodies' bytes on their own, as photos do: bench_local's
bodies are slices of one 16 MiB random pool, which one zstd stream finds again across files
(a compression no real dataset of images offers and per-sample frames cannot have);
``--pool-bodies`` runs on bench_local's tree as it is.

Part 1 shards the tree with ``ishard shard --ext .tar.zst
--compress-level 3`` and bench_local's other options (``--shard-size 512MiB --overwrite
--no-progress --member-names original``), against GNU tar piped into the zstd command at the
same level on every core (the reference: one frame stream, no per-sample frames, no seek
table, no checksum, no index). Page cache warmed; outputs removed and ``sync``ed before every
run; the two alternate, their order rotated each round; medians, the time ratio and the size
ratio (all shard bytes against zstd's output) are printed. One untimed run of each comes
first; ishard's shards are then read back (every member once, with its size; the seek table's
frame count).

Part 2 shards the tree with ``--shard-size 1GiB`` (so each shard is about 1 GiB), picks random
samples of the first shard from its sample index, finds them with ``ishard.find`` (untimed),
then times ``ishard.read_sample`` for each (rounds, order shuffled each round, page cache
warm) next to the floor it cannot beat: ``os.pread`` of the same frames and one
``zstd.decompress`` of them. Median and p95 in ms are printed; every member's bytes are
compared with its source file.

    python benchmarks/bench_zstd.py                    # both parts, full size (a few minutes)
    python benchmarks/bench_zstd.py --small            # smoke: 2,000 files / 50 MiB
    python benchmarks/bench_zstd.py --rounds 3 --reads 200 --read-rounds 5
    python benchmarks/bench_zstd.py --skip-write       # part 2 only
    python benchmarks/bench_zstd.py --profile          # also profile read_sample (part 2)
    python benchmarks/bench_zstd.py --pool-bodies --skip-read    # on bench_local's tree as it is
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from bench_local import (
    Params,
    Tool,
    clear,
    ensure_data,
    file_body,
    gnu_time,
    other_cpu_seconds,
    plan_tree,
    print_table,
    run_once,
    scan,
    startup_seconds,
    target,
    tell_other_cpu,
    tree_location,
)
from benchlib import GIB, MIB, machine_line

ISHARD = [sys.executable, "-m", "ishard"]


def seek_table_frames(tail: bytes) -> int | None:
    """The frame count of a Zstandard Seekable Format seek table at the end of ``tail``
    (None without one): its footer is the count, a descriptor byte and the magic number."""
    from ishard.formats.zstd import ENTRY, FOOTER, SEEKABLE_MAGIC

    if len(tail) < FOOTER.size:
        return None
    count, descriptor, magic = FOOTER.unpack_from(tail, len(tail) - FOOTER.size)
    width = ENTRY.size + (4 if descriptor & 0x80 else 0)
    if magic != SEEKABLE_MAGIC or len(tail) < 8 + count * width + FOOTER.size:
        return None
    return count


def check_zst_shards(shards: Path, sizes: dict[str, int]) -> str:
    """Every file exactly once across the .tar.zst shards, with its size; each shard ends in
    a seek table with one frame a sample (or more) and the manifest agrees."""
    from ishard.formats.zstd import open_zstd

    manifest = json.loads((shards / "manifest.json").read_text())
    found: dict[str, int] = {}
    members = frames = 0
    paths = sorted(shards.glob("*.tar.zst"))
    for path in paths:
        with open(path, "rb") as raw:
            raw.seek(max(0, path.stat().st_size - (4 << 20)))  # the seek table is in there
            count = seek_table_frames(raw.read())
        if count is None:
            raise SystemExit(f"bench_zstd: {path.name} has no seek table")
        frames += count
        with open(path, "rb") as raw, tarfile.open(fileobj=open_zstd(raw), mode="r|") as tf:
            for m in tf:
                if m.isfile():
                    found[m.name.removeprefix("./")] = m.size
                    members += 1
    samples = manifest["ishard"]["totals"]["samples"]
    if members != len(sizes) or found != sizes or frames < samples:
        raise SystemExit(
            f"bench_zstd: shards hold {members} members ({len(found)} names), the tree has "
            f"{len(sizes)} files; {frames} frames for {samples} samples"
        )
    return (
        f"{len(paths)} shards, {members:,} members, {sum(found.values()):,} payload bytes — every "
        f"file once, sizes match; {frames:,} zstd frames for {samples:,} samples"
    )


def shard_bytes(shards: Path) -> int:
    return sum(p.stat().st_size for p in shards.glob("*.tar.zst"))


def part_write(args, data: Path, sizes: dict[str, int], work: Path) -> None:
    total = sum(sizes.values())
    print(f"\n== part 1: writing .tar.zst, level {args.level} ==")
    log = work / "stderr.log"
    shards = work / "shards"
    ref_out = work / "ref.tar.zst"
    ref = Tool(
        f"tar -cf - | zstd -{args.level} -T0 (ref)",
        ["bash", "-c", f"tar -cf - -C '{data}' . | zstd -{args.level} -T0 -q -o '{ref_out}'"],
        ref_out,
    )
    jobs = min(8, os.cpu_count() or 1)
    ishard = Tool(
        f"ishard .tar.zst -{args.level} (jobs {jobs})",
        ISHARD
        + [
            "shard",
            str(data),
            str(shards),
            "--ext",
            ".tar.zst",
            "--compress-level",
            str(args.level),
            "--shard-size",
            args.shard_size,
            "--overwrite",
            "--no-progress",
            "--member-names",  # as bench_local.py: source paths, as tar -cf keeps them
            "original",
        ],
        shards,
        lambda: check_zst_shards(shards, sizes),
    )
    tools = [ref, ishard]
    timer = gnu_time()
    print("peak RSS: " + ("GNU time (%M)" if timer else "wait4 ru_maxrss (an upper bound)"))
    zstd_version = subprocess.run(
        ["zstd", "--version"], check=False, capture_output=True, text=True
    )
    from ishard.formats.zstd import zstd_library

    print(f"zstd command: {zstd_version.stdout.strip()}; ishard's: {zstd_library()}")
    tar_bytes = int(
        subprocess.run(
            ["bash", "-c", f"tar -cf - -C '{data}' . | wc -c"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    # Size-only references (untimed): the tree's file bodies are slices of one 16 MiB random
    # pool (bench_local.py's generator), so a stream compressor finds bytes of earlier files
    # again within its window, which frames of one sample each cannot; a 1 KiB window
    # (zstd's least) reaches no other file, a 128 MiB one (--long=27) reaches the whole pool.
    window = {}
    for label, option in (
        ("--zstd=wlog=10 (1 KiB window)", "--zstd=wlog=10"),
        ("--long=27 (128 MiB window)", "--long=27"),
    ):
        window[label] = int(
            subprocess.run(
                [
                    "bash",
                    "-c",
                    f"tar -cf - -C '{data}' . | zstd -{args.level} -T0 {option} -c | wc -c",
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
    for t in tools:
        run_once(t, log, timer)
        if t.check is not None:
            print(f"check: {t.label}: {t.check()}")
    sizes_seen = {"ref": ref_out.stat().st_size, "ishard": shard_bytes(shards)}
    print(f"timing: {args.rounds} rounds, order rotated each round, medians reported")
    other_before, wall_before = other_cpu_seconds(), time.perf_counter()
    for r in range(args.rounds):
        for t in tools[r % 2 :] + tools[: r % 2]:
            t.runs.append(run_once(t, log, timer))
            if t is ishard:
                got = shard_bytes(shards)
                if got != sizes_seen["ishard"]:
                    print(
                        f"note: ishard wrote {got:,} bytes this run, {sizes_seen['ishard']:,} before"
                    )
    extra = sorted(p.name for p in shards.iterdir() if not p.name.endswith(".tar.zst"))
    index_bytes = sum((shards / n).stat().st_size for n in extra)
    for t in tools:
        clear(t.out)
    tell_other_cpu(other_before, wall_before)
    print(f"\n{len(sizes):,} files, {total / MIB:,.0f} MiB, shard size {args.shard_size}\n")
    print_table(tools, len(sizes), total, ref, "tar|zstd")
    size_ratio = sizes_seen["ishard"] / sizes_seen["ref"]
    print(
        f"\nsizes: tar stream {tar_bytes:,} B; zstd -{args.level} of it {sizes_seen['ref']:,} B "
        f"({sizes_seen['ref'] / tar_bytes:.2%}); ishard's shards {sizes_seen['ishard']:,} B "
        f"({sizes_seen['ishard'] / tar_bytes:.2%}); beside them {', '.join(extra)} "
        f"{index_bytes:,} B (not counted)"
    )
    for label, size in window.items():
        print(
            f"size-only reference, tar | zstd -{args.level} {label}: {size:,} B "
            f"({size / tar_bytes:.2%} of the tar stream); ishard's shards / it: "
            f"{sizes_seen['ishard'] / size:.4f}"
        )
    print(target(f"{ishard.label} / {ref.label} time (medians)", ishard.median / ref.median, 1.0))
    print(target("ishard shard bytes / zstd output bytes", size_ratio, 1.02))


def part_read(args, data: Path, sizes: dict[str, int], work: Path) -> None:
    import duckdb

    import ishard
    from ishard.formats.zstd import decompress

    print(f"\n== part 2: read_sample from a {args.read_shard_size} seekable shard ==")
    dst = work / "one-gib"
    shutil.rmtree(dst, ignore_errors=True)
    began = time.perf_counter()
    subprocess.run(
        ISHARD
        + [
            "shard",
            str(data),
            str(dst),
            "--ext",
            ".tar.zst",
            "--compress-level",
            str(args.level),
            "--shard-size",
            args.read_shard_size,
            "--no-progress",
            "--member-names",
            "original",
            "-q",
        ],
        check=True,
    )
    print(
        f"sharded in {time.perf_counter() - began:.1f} s: "
        + ", ".join(
            f"{p.name} {p.stat().st_size / GIB:.3f} GiB" for p in sorted(dst.glob("*.tar.zst"))
        )
    )
    first = min(dst.glob("*.tar.zst"))
    keys = [
        k
        for (k,) in duckdb.execute(
            "SELECT DISTINCT key FROM read_parquet(?) WHERE shard = ? ORDER BY key",
            [str(dst / "samples.parquet"), first.name],
        ).fetchall()
    ]
    rng = random.Random(args.seed)
    picked = rng.sample(keys, min(args.reads, len(keys)))
    found, missing = ishard.find(str(dst), picked)  # untimed
    assert not missing and len(found) == len(picked), missing
    print(
        f"{len(picked)} random samples of {len(keys):,} in {first.name}; "
        f"{sum(len(f.members) for f in found)} members, "
        f"{sum(f.end - f.start for f in found) / len(found) / 1024:.0f} KiB of frames a sample "
        "on average"
    )
    with open(first, "rb") as f:  # the page cache: the shard was just written, read it once
        while f.read(16 * MIB):
            pass

    def floor(f) -> list[bytes]:
        """The least a read must do: read the frames, decompress them, slice the members."""
        fd = os.open(dst / f.shard, os.O_RDONLY)
        try:
            raw = os.pread(fd, f.end - f.start, f.start)
        finally:
            os.close(fd)
        base, last = f.members[0].header_offset, f.members[-1]
        plain = decompress(raw, last.data_offset + last.size + (-last.size % 512) - base)
        return [plain[m.data_offset - base : m.data_offset - base + m.size] for m in f.members]

    wrong = 0
    for f in found:  # untimed: checks every member against its source file
        for m, body in ishard.read_sample(str(dst), f):
            if body != (data / m.member).read_bytes():
                wrong += 1
        assert [b for _, b in ishard.read_sample(str(dst), f)] == floor(f)
    if wrong:
        raise SystemExit(f"bench_zstd: {wrong} members read back differ from their files")
    print(f"check: all {sum(len(f.members) for f in found)} members equal their source files")
    api: list[float] = []
    low: list[float] = []
    for r in range(args.read_rounds):
        order = found[:]
        random.Random(args.seed + r).shuffle(order)
        for f in order:  # alternate: the floor, then ishard, for each sample
            began = time.perf_counter()
            floor(f)
            low.append(time.perf_counter() - began)
            began = time.perf_counter()
            ishard.read_sample(str(dst), f)
            api.append(time.perf_counter() - began)

    def ms(values: list[float]) -> tuple[float, float]:
        return statistics.median(values) * 1e3, statistics.quantiles(values, n=20)[18] * 1e3

    (a_med, a_p95), (f_med, f_p95) = ms(api), ms(low)
    print(
        f"\n{len(found)} samples x {args.read_rounds} rounds = {len(api)} reads each\n"
        f"ishard.read_sample:          median {a_med:.3f} ms, p95 {a_p95:.3f} ms, "
        f"max {max(api) * 1e3:.3f} ms\n"
        f"pread + zstd.decompress:     median {f_med:.3f} ms, p95 {f_p95:.3f} ms (floor)\n"
        f"read_sample / floor: {a_med / f_med:.2f}x (medians), {a_p95 / f_p95:.2f}x (p95)"
    )
    print(target("read_sample median ms", a_med, 5))
    print(target("read_sample p95 ms", a_p95, 5))
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for f in found:
            ishard.read_sample(str(dst), f)
        profiler.disable()
        pstats.Stats(profiler).strip_dirs().sort_stats("cumulative").print_stats(20)
    shutil.rmtree(dst, ignore_errors=True)


def fresh_tree(data: Path, p: Params) -> Path:
    """A copy of the tree for ``p`` beside ``data`` (made once): the same names, sizes and file
    headers, but each body's bytes drawn on their own (seeded), so no file repeats another's
    bytes, as photos do not; bench_local's bodies are slices of one pool, which a single zstd
    stream finds again across files."""
    fresh = data.with_name(data.name + "-fresh")
    marker = fresh.with_name(fresh.name + ".bench.json")
    if marker.exists() and json.loads(marker.read_text()).get("params") == p.as_dict():
        return fresh
    shutil.rmtree(fresh, ignore_errors=True)
    files, pool = plan_tree(p)
    view = memoryview(pool)
    for i, (name, size, offset) in enumerate(files):
        head = bytes(file_body(name, size, offset, view)[0])
        path = fresh / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(head + random.Random(p.seed * 1_000_003 + i).randbytes(size - len(head)))
    marker.write_text(json.dumps({"params": p.as_dict()}))
    return fresh


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=None, help="the tree (bench_local.py's default)")
    ap.add_argument("--files", type=int, default=85_000)
    ap.add_argument("--total-gib", type=float, default=2.0)
    ap.add_argument("--wnids", type=int, default=100)
    ap.add_argument("--jpeg-kib", type=int, default=110)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--small", action="store_true", help="smoke run: 2,000 files / 50 MiB")
    ap.add_argument("--level", type=int, default=3, help="zstd level of both (default 3)")
    ap.add_argument("--shard-size", default="512MiB", help="part 1 (default 512MiB)")
    ap.add_argument("--rounds", type=int, default=5, help="part 1's timed rounds (default 5)")
    ap.add_argument("--read-shard-size", default="1GiB", help="part 2 (default 1GiB)")
    ap.add_argument("--reads", type=int, default=200, help="samples read (default 200)")
    ap.add_argument("--read-rounds", type=int, default=5, help="passes over them (default 5)")
    ap.add_argument("--skip-write", action="store_true", help="skip part 1")
    ap.add_argument("--skip-read", action="store_true", help="skip part 2")
    ap.add_argument("--profile", action="store_true", help="profile read_sample (part 2)")
    ap.add_argument(
        "--pool-bodies",
        action="store_true",
        help="use bench_local's tree as it is, its bodies slices of one 16 MiB random pool "
        "(default: a copy whose files share no bytes, as photos: each body its own bytes)",
    )
    args = ap.parse_args()
    for tool in ("tar", "zstd"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench_zstd: {tool} is not on PATH — install it")
    p, data = tree_location(args)
    print(machine_line())
    print(f"data: {data}")
    ensure_data(data, data.with_name(data.name + ".bench.json"), p)
    if not args.pool_bodies:
        data = fresh_tree(data, p)
        print(f"data: {data} (the same names and sizes, each body its own random bytes)")
    started = time.perf_counter()
    sizes = scan(data, read=True)
    total = sum(sizes.values())
    print(
        f"data: {len(sizes):,} files, {total:,} bytes ({total / GIB:.2f} GiB); page cache "
        f"warmed in {time.perf_counter() - started:.1f} s"
    )
    print(f"ishard start-up (ishard --version): {startup_seconds(ISHARD + ['--version']):.3f} s")
    work = data.with_name(data.name + "-bench-zstd")
    work.mkdir(parents=True, exist_ok=True)
    if not args.skip_write:
        part_write(args, data, sizes, work)
    if not args.skip_read:
        part_read(args, data, sizes, work)


if __name__ == "__main__":
    main()
