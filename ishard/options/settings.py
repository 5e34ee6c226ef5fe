"""What the stages below take of the checked options, built here so none of them reads
``Options``: the planner's ``PlanSettings``, and a path or URL located under the store
options."""

from __future__ import annotations

from dataclasses import fields

from ..formats import exts_reading, level_targets, registered, spelt
from ..planning.settings import PlanSettings
from ..store import Location, parse_storage_options, resolve
from .record import Options


def plan_settings(opts: Options) -> PlanSettings:
    """What planning reads of ``opts``: each field named as an option takes its value; the
    parsed forms, the record and the warnings of options with no effect are made here."""
    named = {f.name for f in fields(opts)}
    given = {f.name: getattr(opts, f.name) for f in fields(PlanSettings) if f.name in named}
    return PlanSettings(
        **given,
        parsed_ekm=opts.parsed_ekm,
        bounds=opts.bounds,
        order=opts.order,
        template=opts.template,
        recorded=opts.to_dict(),
        idle=_idle(opts),
    )


def _idle(opts: Options) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each option given that only some formats read (``--compress-level``, ``--gzip-library``):
    the warning that it has no effect, and the extensions of the formats that read it."""
    out = []
    if opts.compress_level is not None:
        levelled = tuple(e for f in registered() if f.takes_level(opts) for e in f.exts)
        text = f"--compress-level {opts.compress_level} has no effect: no shard is "
        out.append((text + level_targets(), levelled))
    for option in fields(opts):  # the options one format reads (--gzip-library), in order
        exts, value = exts_reading(option.name), getattr(opts, option.name)
        if exts and value != option.default:
            flag = "--" + option.name.replace("_", "-")
            out.append((f"{flag} {value} has no effect: no shard is {spelt([*exts])}", exts))
    return tuple(out)


def located(url: str, opts: Options, role: str) -> Location:
    """``url`` (a path or a store URL) under the options that say how stores are reached."""
    return resolve(
        url,
        endpoint_url=opts.endpoint_url,
        storage_options=parse_storage_options(opts.storage_options),
        role=role,
    )
