"""Plain-data views of a plan and a run: the dry-run JSON document and the summary."""

from __future__ import annotations

from statistics import median_low

from ..model import FileEntry, Growth, Plan, Report
from ..options.record import cut_description
from ..sizes import counted

# the readers of a typical training job (2 ranks × 4 DataLoader workers, or 8 ranks): with
# fewer shards than readers, a reader without a shard reads nothing
READERS = 8


def plan_document(plan: Plan) -> dict:
    """The dry-run JSON: every shard with its samples and files, then the summary."""
    return {
        "shards": [
            {
                "name": shard.name,
                "size": shard.size,
                "samples": [
                    {"key": s.key, "files": [_file(f) for f in s.files]} for s in shard.samples
                ],
            }
            for shard in plan.shards
        ],
        "summary": plan_summary(plan),
    }


def _file(f: FileEntry) -> dict:
    """A planned file; ``member`` is its name inside the archive when that differs."""
    return {"name": f.name, "size": f.size, **({"member": f.member} if f.member else {})}


def plan_summary(plan: Plan) -> dict:
    """Totals, shard size spread, what was left out and why, and warnings."""
    sizes = sorted(plan.shard_sizes)
    return {
        "source": plan.source,
        "shards": len(plan.shards),
        "samples": plan.sample_count,
        "files": plan.file_count,
        "bytes": plan.size,
        **({"cut": cut_description(plan.options)} if plan.options else {}),
        "smallest_shard": sizes[0] if sizes else 0,
        "median_shard": median_low(sizes) if sizes else 0,
        "largest_shard": sizes[-1] if sizes else 0,
        "skipped": [
            {"reason": s.reason, "count": s.count, "examples": list(s.examples)}
            for s in plan.skipped
        ],
        "warnings": list(plan.warnings),
        "seed": plan.seed,
        **({"spilled": plan.spilled} if plan.spilled else {}),
        **({"growth": _growth(plan.growth)} if plan.growth is not None else {}),
        **({"duplicates": plan.duplicates.record()} if plan.duplicates is not None else {}),
    }


def _growth(growth: Growth) -> dict:
    """A growing dataset's comparison: samples held, new, changed, removed; the shards
    rewritten and the held samples moved out of them into new shards."""
    return {
        "mode": growth.mode,
        "held_samples": growth.held,
        "new_samples": growth.added,
        "changed_samples": growth.changed,
        "removed_samples": growth.removed,
        "moved_samples": growth.moved,
        "replaced_shards": list(growth.replaced),
    }


def few_shards(plan: Plan, where: str | None = None) -> str | None:
    """The one line a plan whose dataset has fewer shards than ``READERS`` is told with (how
    many, and how to get more); None when it has enough, when nothing is written, when the
    count was the user's own (``--num-shards``, ``--shards-multiple-of``) or when every shard
    holds one sample already. ``where``: the destination, named for a growing dataset."""
    options, growth = plan.options, plan.growth
    if options.get("num_shards") or options.get("shards_multiple_of"):
        return None
    shards, samples = len(plan.shards), plan.sample_count
    if growth is not None:
        if growth.unchanged:
            return None
        shards += growth.listed - len(growth.replaced)
        samples = growth.held + growth.added - growth.removed
    if shards == 0 or shards >= READERS or samples <= shards:
        return None
    more = min(READERS, samples)
    held = counted(shards, "shard")
    fix = f"--num-shards {more} makes {more}" + (
        ", a smaller --shard-size more" if samples > READERS else ""
    )
    if growth is not None:
        held = f"the dataset in {where!r} holds {held}" if where else f"the dataset holds {held}"
        fix = f"re-shard it with --overwrite: {fix}"
    return (
        f"note: {held}, fewer than the {READERS} readers (ranks × DataLoader workers) a "
        f"training job often has; a reader without a shard reads nothing — {fix}"
    )


def nothing_written(report: Report) -> bool:
    """Did a growing dataset's run find nothing to do (its source holds what it holds)?"""
    growth = report.plan.growth
    return growth is not None and growth.unchanged


def size_histogram(sizes: list[int], bins: int = 8) -> list[tuple[int, int, int]]:
    """Shards per payload range: ``(low, high, count)`` for up to ``bins`` ranges of equal
    width from the smallest payload to the largest (one range when all are equal)."""
    if not sizes:
        return []
    low, high = min(sizes), max(sizes)
    bins = max(1, min(bins, len(set(sizes))))
    width = max(1, -(-(high - low + 1) // bins))  # ceiling: every size falls in a range
    counts = [0] * bins
    for size in sizes:
        counts[min((size - low) // width, bins - 1)] += 1
    return [
        (low + i * width, min(high, low + (i + 1) * width - 1), count)
        for i, count in enumerate(counts)
    ]


def run_summary(report: Report) -> dict:
    """The plan summary plus what the run wrote and how fast."""
    written = sum(r.filesize for r in report.results)
    speed = report.bytes_per_second  # of what this run wrote, not what a resume kept
    return {
        **plan_summary(report.plan),
        "destination": report.destination,
        "manifest": report.manifest,
        "archive_bytes": written,
        "seconds": round(report.seconds, 3),
        "bytes_per_second": None if speed is None else round(speed),
        "retries": report.retries,
        "kept_shards": report.kept,
        "written_shards": len(report.results) - report.kept,
        "removed_archives": report.removed,
    }


def samples_document(grouped) -> dict:
    """``ishard ls --samples --json``: members grouped as WebDataset readers group them."""
    return {
        "samples": [
            {"key": key, "files": [{"name": m.name, "size": m.size} for m in files]}
            for key, files in grouped.samples
        ],
        "skipped": [{"name": m.name, "size": m.size} for m in grouped.skipped],
    }
