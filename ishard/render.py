"""Everything a person reads: dry-run plans, summaries, warnings and progress (the only rich user)."""

from __future__ import annotations

import sys
import threading
import time
from abc import ABC, abstractmethod
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.progress import (
    Progress as RichBar,
)
from rich.text import Text

from .model import Plan, ShardResult
from .names import quoted, shown
from .progress import Progress
from .sizes import counted, describe_size, format_size

PLAIN_EVERY = 2.0  # seconds between plain progress lines
NARROW_TERMINAL = 72  # columns below which the progress display drops its bar


def plan_text(plan: Plan, show_keys: bool, out: TextIO) -> None:
    """Per shard ``<name>  <size>``, then its members (and ``[key]`` lines) indented, aligned."""
    for shard in plan.shards:
        rows: list[tuple[str, str]] = []
        for sample in shard.samples:
            if show_keys:
                rows.append((f"  [{shown(sample.key)}]", ""))
            rows += [(f"    {shown(f.arcname)}", format_size(f.size)) for f in sample.files]
        width = max(len(shard.name), *(len(r[0]) for r in rows))
        out.write(f"{shard.name.ljust(width)}  {format_size(shard.size)}\n")
        out.writelines(f"{left.ljust(width)}  {right}".rstrip() + "\n" for left, right in rows)


def samples_text(grouped, out: TextIO) -> None:
    """``[key]`` per sample, its members indented (``ishard ls --samples``)."""
    for key, files in grouped.samples:
        out.write(f"[{shown(key)}]\n")
        out.writelines(
            f"  {m.size:>12}  {format_size(m.size):>10}  {shown(m.name)}\n" for m in files
        )
    out.write(
        f"{counted(len(grouped.samples), 'sample')}, {counted(len(grouped.skipped), 'skipped member')}\n"
    )


def _shard_rows(plan: Plan) -> list[tuple[str, str, int, int]]:
    """Per shard: its name, payload (as text), samples and files."""
    return list(
        zip(
            plan.shard_names,
            map(format_size, plan.shard_sizes),
            plan.shard_sample_counts,
            plan.shard_file_counts,
        )
    )


def shard_table(plan: Plan, out: TextIO) -> None:
    """The bare dry run's table: one row per shard (name, samples, files, payload)."""
    rows = [(name, str(n), str(f), size) for name, size, n, f in _shard_rows(plan)]
    head = ("shard", "samples", "files", "payload")
    widths = [max(len(row[i]) for row in (head, *rows)) for i in range(4)]
    out.writelines(
        f"{row[0].ljust(widths[0])}  {row[1].rjust(widths[1])}  {row[2].rjust(widths[2])}  "
        f"{row[3].rjust(widths[3])}\n"
        for row in (head, *rows)
    )


HISTOGRAM_BAR = 40  # characters of the longest bar


def histogram_text(bins: list[tuple[int, int, int]], out: TextIO) -> None:
    """Shards per payload range, a bar of ``#`` each (the longest ``HISTOGRAM_BAR`` long)."""
    if len(bins) < 2:
        return
    most = max(count for _, _, count in bins)
    lows = [format_size(low) for low, _, _ in bins]
    highs = [format_size(high) for _, high, _ in bins]
    left, right, digits = max(map(len, lows)), max(map(len, highs)), len(str(most))
    ranges = [f"{low.rjust(left)} - {high.ljust(right)}" for low, high in zip(lows, highs)]
    out.write("shards by payload:\n")
    for text, (_, _, count) in zip(ranges, bins):
        bar = "#" * max(1, round(count * HISTOGRAM_BAR / most)) if count else ""
        out.write(f"  {text}  {str(count).rjust(digits)}  {bar}".rstrip() + "\n")


def growth_text(growth: dict, dry_run: bool) -> str:
    """What growing a dataset finds and does: one line, and the shards it replaces."""
    line = (
        f"{growth['mode']}: the dataset held {counted(growth['held_samples'], 'sample')}; "
        f"{growth['new_samples']} new, {growth['changed_samples']} changed, "
        f"{growth['removed_samples']} removed in the source"
    )
    replaced = growth["replaced_shards"]
    if replaced:
        shown_names = ", ".join(map(quoted, replaced[:5])) + (" …" if len(replaced) > 5 else "")
        line += (
            f"\n{'would replace' if dry_run else 'replaced'} "
            f"{counted(len(replaced), 'shard')} holding them ({shown_names}): "
            f"{counted(growth['moved_samples'], 'sample')} of theirs unchanged, written again "
            "into the new shards"
        )
    return line


def summary_text(summary: dict, out: TextIO, *, dry_run: bool) -> None:
    """A short human summary of a plan or a run."""
    done = f"{'would write' if dry_run else 'wrote'} {counted(summary['shards'], 'shard')}"
    if not dry_run and summary.get("kept_shards"):  # a resume: what was kept, what written
        done = (
            f"kept {counted(summary['kept_shards'], 'shard')} from the earlier run (checked), "
            f"wrote {summary['written_shards']}; {counted(summary['shards'], 'shard')}"
        )
    out.write(
        f"{done}: {counted(summary['samples'], 'sample')}, {counted(summary['files'], 'file')}, "
        f"{format_size(summary['bytes'])} payload\n"
    )
    if summary.get("growth"):
        out.write(growth_text(summary["growth"], dry_run) + "\n")
    if summary.get("cut"):
        out.write(cut_text(summary["cut"]) + "\n")
    out.write(
        f"shard payload: smallest {format_size(summary['smallest_shard'])}, "
        f"median {format_size(summary['median_shard'])}, "
        f"largest {format_size(summary['largest_shard'])}\n"
    )
    if summary.get("spilled"):
        out.write(
            f"planning spilled up to {format_size(summary['spilled'])} to its temporary folder "
            "(--tmp-dir; it spills past --memory-limit)\n"
        )
    for skip in summary["skipped"]:
        examples = ", ".join(map(quoted, skip["examples"]))
        out.write(f"left out {skip['count']}: {skip['reason']} (e.g. {examples})\n")
    if summary.get("duplicates"):
        out.write(duplicates_text(summary["duplicates"]) + "\n")
    if summary.get("seed") is not None:
        out.write(
            f"shuffle seed: {summary['seed']} (pass --sort shuffle:{summary['seed']} to repeat)\n"
        )
    if not dry_run:
        _written_text(summary, out)
    if summary["warnings"]:
        told = "the plan" if dry_run else "writing"
        out.write(
            f"{counted(len(summary['warnings']), 'warning')} (on stderr too, before {told}):\n"
        )
        out.writelines(f"  {line}\n" for line in summary["warnings"])


def _written_text(summary: dict, out: TextIO) -> None:
    """What a run that wrote says of its archives, retries and the archives it removed."""
    seconds = summary["seconds"]
    rate = format_size(summary["bytes_per_second"] or 0)
    out.write(
        f"archives: {format_size(summary['archive_bytes'])} in "
        f"{shown(summary['destination'])} "
        f"({seconds:.2f}s, {rate}/s); manifest {shown(summary['manifest'])}\n"
    )
    if summary.get("retries"):
        out.write(f"store requests retried after transient errors: {summary['retries']}\n")
    if summary.get("removed_archives") and summary.get("growth"):
        out.write(
            f"removed {counted(summary['removed_archives'], 'replaced archive')}, which "
            "the new manifest no longer lists\n"
        )
    elif summary.get("removed_archives"):
        out.write(
            f"removed {counted(summary['removed_archives'], 'archive')} of the earlier "
            "run that this run did not rewrite\n"
        )


def duplicates_text(found: dict) -> str:
    """The line of the files whose bytes repeat an earlier file's (``--duplicates``)."""
    if not found["copies"]:
        return f"duplicates: none (by {found['by']})"
    pair = found["examples"][0]
    done = (
        "left out (--duplicates drop; each listed in the manifest)"
        if found["dropped"]
        else "kept (--duplicates drop leaves them out)"
    )
    return (
        f"duplicates: {counted(found['copies'], 'file')} ({format_size(found['bytes'])}) "
        f"{'repeats' if found['copies'] == 1 else 'repeat'} the bytes of an earlier one, in {counted(found['groups'], 'group')}, by "
        f"{found['by']} — e.g. {quoted(pair['name'])} = {quoted(pair['same_as'])}; {done}"
    )


def cut_text(cut: dict) -> str:
    """``cut by count: 10 samples per shard`` / ``cut by size: 256KiB per shard`` …"""
    if cut["by"] == "num_shards":
        return f"cut into {cut['num_shards']} shards of balanced sample counts (--num-shards)"
    size: int = cut.get("shard_size") or 0
    count = cut.get("samples_per_shard")
    samples = f"{count} sample{'s' * (count != 1)}" if count else ""
    if cut["by"] == "count":
        text = f"cut by count: {samples} per shard"
    elif cut["by"] == "size":
        text = f"cut by size: {describe_size(size)} per shard"
    else:
        text = (
            f"cut by size or count: {describe_size(size)} or {samples} per shard, "
            "whichever comes first"
        )
    if cut.get("shards_multiple_of"):
        text += (
            f", then re-balanced to a multiple of {cut['shards_multiple_of']} shards "
            "(--shards-multiple-of)"
        )
    return text


def verify_text(result: dict, out: TextIO) -> None:
    """``ishard verify``: one line per problem, then a summary line (``result`` as ``to_dict``)."""
    out.writelines(f"{shown(p['name'])}: {shown(p['detail'])}\n" for p in result["problems"])
    shards, bad = result["shards"], result["shards"] - result["shards_ok"]
    checks = (
        "size, checksum, members"
        if result["checksums_checked"]
        else "size, members (no checksum recorded)"
    )
    if result["deep"]:
        checks += ", member data, samples"
    verdict = (
        "all ok"
        if result["ok"]
        else (
            f"{counted(len(result['problems']), 'problem')} ({bad} of {shards} listed shards "
            "affected)"
        )
    )
    out.write(
        f"verified {counted(shards, 'shard')} ({format_size(result['bytes_read'])} read; "
        f"{checks}): {verdict}\n"
    )


def warnings_text(warnings: list[str], out: TextIO | None = None) -> None:
    """Each warning on its own ``ishard: warning:`` line (on stderr unless ``out``)."""
    (out or sys.stderr).writelines(f"ishard: warning: {line}\n" for line in warnings)


def error_line(message: str, out: TextIO | None = None) -> None:
    """The one line a failure prints (on stderr unless ``out``)."""
    (out or sys.stderr).write(f"ishard: error: {message}\n")


class _Speed(ProgressColumn):
    """Throughput in the same binary units as the sizes beside it."""

    def render(self, task) -> Text:
        return Text(f"{format_size(int(task.speed))}/s" if task.speed else "")


class _Adapter(Progress, ABC):
    """What both progress displays share: verify's hooks map onto the writing ones."""

    @abstractmethod
    def _one_done(self) -> None:
        """One more shard is finished (written or verified)."""

    def verified(self, nbytes: int) -> None:
        self.wrote(nbytes)

    def shard_verified(self, name: str) -> None:
        self._one_done()

    def shard_done(self, result: ShardResult) -> None:
        self._one_done()


class BarProgress(_Adapter):
    """A rich live display on a terminal: files listed, then bytes and shards written."""

    def __init__(self, console: Console | None = None) -> None:
        console = console or Console(stderr=True)
        # a narrow terminal keeps bytes, speed and ETA on one line: no bar, a shorter count
        self._narrow = console.width < NARROW_TERMINAL
        self._bar = RichBar(
            TextColumn("{task.description}"),
            *([] if self._narrow else [BarColumn()]),
            DownloadColumn(binary_units=True),
            _Speed(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[detail]}"),
            console=console,
            transient=False,
        )
        self._bar.start()
        self._listing: TaskID | None = None
        self._writing: TaskID | None = None
        self._shards = self._done = 0
        self._lock = threading.Lock()

    def listing(self, files: int, nbytes: int) -> None:
        if self._listing is None:
            self._listing = self._bar.add_task("listing", total=None, detail="")
        self._bar.update(self._listing, completed=nbytes, detail=f"{files} files")

    def planned(self, shards: int, nbytes: int) -> None:
        if self._listing is not None:
            self._bar.update(self._listing, total=self._bar.tasks[self._listing].completed)
        self._start_bytes("writing", shards, nbytes)

    def verifying(self, shards: int, nbytes: int) -> None:
        self._start_bytes("verifying", shards, nbytes)

    def indexing(self, shards: int, nbytes: int) -> None:
        self._start_bytes("indexing", shards, nbytes)

    def _start_bytes(self, what: str, shards: int, nbytes: int) -> None:
        self._shards = shards
        self._writing = self._bar.add_task(what, total=nbytes, detail=self._count(0))

    def _count(self, done: int) -> str:
        return f"{done}/{self._shards}" + ("" if self._narrow else " shards")

    def wrote(self, nbytes: int) -> None:
        if self._writing is not None:
            self._bar.advance(self._writing, nbytes)

    def _one_done(self) -> None:
        with self._lock:
            self._done += 1
            detail = self._count(self._done)
        if self._writing is not None:
            self._bar.update(self._writing, detail=detail)

    def notice(self, text: str) -> None:
        self._bar.console.print(f"ishard: {text}", markup=False, highlight=False)

    def warning(self, text: str) -> None:
        self.notice(f"warning: {text}")

    def close(self) -> None:
        self._bar.stop()


class LineProgress(_Adapter):
    """Plain progress lines for logs (``--progress`` without a terminal), at most every 2 s."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stderr
        self._lock = threading.Lock()
        self._last = 0.0
        self._start = time.monotonic()
        self._total = self._bytes = self._shards = self._done = 0
        self._verb = "wrote"
        self._pending: str | None = None

    def _say(self, text: str, force: bool = False, *, news: bool = False) -> None:
        """Print ``text`` unless a line went out under PLAIN_EVERY ago (``force``: anyway); a
        held-back line is printed when its stage ends. A ``news`` line leaves it held."""
        now = time.monotonic()
        if force or now - self._last >= PLAIN_EVERY:
            self._last = now
            if not news:
                self._pending = None
            self._out.write(f"ishard: {text}\n")
            self._out.flush()
        else:
            self._pending = text

    def _flush(self) -> None:
        """Print the line last held back by the throttle (a stage's final totals)."""
        if self._pending is not None:
            self._say(self._pending, force=True)

    def listing(self, files: int, nbytes: int) -> None:
        self._say(f"listed {files} files, {format_size(nbytes)}")

    def notice(self, text: str) -> None:
        self._say(text, force=True, news=True)

    def warning(self, text: str) -> None:
        self._say(f"warning: {text}", force=True)

    def planned(self, shards: int, nbytes: int) -> None:
        self._flush()
        self._total, self._shards, self._start = nbytes, shards, time.monotonic()
        self._say(f"planned {shards} shards, {format_size(nbytes)}", force=True)

    def verifying(self, shards: int, nbytes: int) -> None:
        self._reading("verifying", shards, nbytes)

    def indexing(self, shards: int, nbytes: int) -> None:
        self._reading("indexing", shards, nbytes)

    def _reading(self, what: str, shards: int, nbytes: int) -> None:
        self._flush()
        self._total, self._shards, self._start = nbytes, shards, time.monotonic()
        self._verb = "read"
        self._say(f"{what} {shards} shards, {format_size(nbytes)}", force=True)

    def wrote(self, nbytes: int) -> None:
        with self._lock:
            self._bytes += nbytes
            self._report()

    def _one_done(self) -> None:
        with self._lock:
            self._done += 1
            self._report(force=self._done == self._shards)

    def _report(self, force: bool = False) -> None:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        rate = self._bytes / elapsed
        eta = max(self._total - self._bytes, 0) / rate if rate else 0.0
        pct = 100.0 * self._bytes / self._total if self._total else 100.0
        self._say(
            f"{self._verb} {format_size(self._bytes)} of {format_size(self._total)} ({pct:.0f}%), "
            f"{self._done}/{self._shards} shards, {format_size(int(rate))}/s, ETA {eta:.0f}s",
            force,
        )

    def close(self) -> None:
        with self._lock:
            self._flush()


def make_progress(enabled: bool | None) -> Progress:
    """Bars on a terminal, plain lines when asked for without one, else nothing."""
    tty = sys.stderr.isatty()
    if enabled is None:
        enabled = tty
    if not enabled:
        return NoticesOnly()
    return BarProgress() if tty else LineProgress()


class NoticesOnly(Progress):
    """No progress, but notices and warnings still reach stderr."""

    def notice(self, text: str) -> None:
        sys.stderr.write(f"ishard: {text}\n")
        sys.stderr.flush()

    def warning(self, text: str) -> None:
        self.notice(f"warning: {text}")


def _ranges_text(ranges: list[list[int]], limit: int = 6) -> str:
    parts = [f"{a}" if b == a + 1 else f"{a}-{b - 1}" for a, b in ranges[:limit]]
    return ",".join(parts) + (f",… ({len(ranges) - limit} more)" if len(ranges) > limit else "")


def _batches(n: int) -> str:
    return f"{n} batch{'es' * (n != 1)}"


def split_text(doc: dict, out: TextIO) -> None:
    """Per epoch and rank (and worker): shards or sample ranges, counts, and any hang risk."""
    w = doc["world"]
    out.write(
        f"policy {doc['policy']}: {counted(doc['shards'], 'shard')}, "
        f"{counted(doc['samples'], 'sample')}; {w['nodes']} node(s) x {w['ranks_per_node']} "
        f"rank(s), {w['workers']} worker(s), batch {w['batch_size']}\n"
    )
    for epoch in doc["epochs"]:
        out.write(f"epoch {epoch['epoch']}\n")
        for rank in epoch["ranks"]:
            out.write(
                f"  rank {rank['rank']}: {counted(rank['samples'], 'sample')}, "
                f"{_batches(rank['batches'])}, {rank['duplicates']} duplicate(s)\n"
            )
            parts = rank["workers"]
            if len(parts) == 1 and parts[0]["shards"] is None:
                out.write(f"    samples {_ranges_text(rank['ranges'])}\n")
                continue
            for part in parts:
                where = f"samples {_ranges_text(part['ranges'])}"
                if part["shards"] is not None:
                    where = f"shards {','.join(map(str, part['shards'])) or 'none'}"
                out.write(
                    f"    worker {part['worker']}: {where}; "
                    f"{counted(part['samples'], 'sample')}, {_batches(part['batches'])}\n"
                )
        out.write(f"  dropped {epoch['dropped']}\n")
        if epoch["hang_risk"]:
            out.write(
                f"  WARNING: ranks get different batch counts "
                f"(spread {epoch['batch_spread']}): DDP hangs at the epoch end — {epoch['fix']}\n"
            )
