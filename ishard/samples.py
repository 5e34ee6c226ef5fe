"""Group listed files into samples by key, route them by EKM, apply the missing-extension policy."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .ekm import Ekm
from .errors import DataError
from .keys import KeyFunction, extension, sample_key
from .model import FileEntry, Sample, Tally

ACTIONS = ("ignore", "warn", "abort", "exclude")
WARNINGS_SHOWN = 10
EXTRA = "extension not in --sample-exts (--missing-extension-action exclude)"
REPEATED = "second file of a sample with the same extension (--missing-extension-action exclude)"
INCOMPLETE = (
    "file of a sample that lacks an extension of --sample-exts (--missing-extension-action exclude)"
)


def group(entries: Iterable[FileEntry], key: KeyFunction) -> list[Sample]:
    """Samples in order of first appearance; each sample's files in listing order."""
    files: dict[str, list[FileEntry]] = {}
    for entry in entries:
        k = sample_key(entry.name, key)
        bucket = files.get(k)
        if bucket is None:
            files[k] = [entry]
        else:
            bucket.append(entry)
    return [Sample(k, tuple(fs), sum(f.size for f in fs)) for k, fs in files.items()]


def route(samples: list[Sample], ekm: Ekm | None, tally: Tally) -> list[list[Sample]]:
    """Split samples into EKM categories (one group when there is no EKM).

    Files matching no pattern, or several, are left out and counted; a sample whose files fall
    into different categories is an error.
    """
    if ekm is None:
        return [samples]
    groups: list[list[Sample]] = [[] for _ in ekm.categories]
    for sample in samples:
        kept, where = [], {}
        for f in sample.files:
            cat = ekm.category(f.name)
            if isinstance(cat, str):
                tally.add(cat, f.name)
            else:
                kept.append(f)
                where.setdefault(cat, f.name)
        if len(where) > 1:
            (a, fa), (b, fb) = list(where.items())[:2]
            raise DataError(
                f"sample {sample.key!r} is split by --ekm: {fa!r} goes to "
                f"{ekm.categories[a].template.text!r} but {fb!r} to "
                f"{ekm.categories[b].template.text!r} — make the patterns keep a sample together"
            )
        if kept:
            groups[next(iter(where))].append(_with(sample, kept))
    return groups


def _with(sample: Sample, files: Sequence[FileEntry]) -> Sample:
    if len(files) == len(sample.files):
        return sample
    return Sample(sample.key, tuple(files), sum(f.size for f in files))


def _problems(sample: Sample, wanted: Sequence[str]) -> tuple[list[FileEntry], list[str]]:
    """Files whose extension is unwanted or repeated, and wanted extensions the sample lacks."""
    seen: set[str] = set()
    extra = []
    for f in sample.files:
        ext = extension(f.name)
        if ext in wanted and ext not in seen:
            seen.add(ext)
        else:
            extra.append(f)
    return extra, [e for e in wanted if e not in seen]


def apply_sample_exts(
    samples: list[Sample],
    wanted: Sequence[str],
    action: str,
    tally: Tally,
    warnings: list[str],
) -> list[Sample]:
    """Check every sample against ``wanted`` extensions and act as ``action`` says.

    ``warn`` lists offenders (at most ``WARNINGS_SHOWN`` lines, then a count); ``abort`` raises
    on the first one; ``exclude`` drops unwanted or repeated files and incomplete samples.
    """
    if not wanted or action == "ignore":
        return samples
    kept, offenders = [], 0
    for sample in samples:
        extra, missing = _problems(sample, wanted)
        if not extra and not missing:
            kept.append(sample)
            continue
        what = [f"file {f.name!r} has extension {extension(f.name)!r}, not in --sample-exts"
                if extension(f.name) not in wanted else
                f"file {f.name!r} repeats extension {extension(f.name)!r}" for f in extra]
        what += [f"no {e!r} file" for e in missing]
        if action == "abort":
            raise DataError(
                f"sample {sample.key!r}: {what[0]} (--missing-extension-action abort) — "
                "fix the dataset, or use --missing-extension-action exclude to leave such samples out"
            )
        if action == "warn":
            offenders += 1
            if offenders <= WARNINGS_SHOWN:
                warnings.append(f"sample {sample.key!r}: " + "; ".join(what))
            kept.append(sample)
            continue
        if missing:
            for f in sample.files:
                tally.add(INCOMPLETE, f.name)
            continue
        for f in extra:
            tally.add(EXTRA if extension(f.name) not in wanted else REPEATED, f.name)
        kept.append(_with(sample, [f for f in sample.files if f not in extra]))
    if offenders > WARNINGS_SHOWN:
        warnings.append(
            f"... and {offenders - WARNINGS_SHOWN} more samples that do not match --sample-exts"
        )
    return kept
