"""The options a run that continues a dataset (``--append``, ``--update``, ``--resume``) takes
from what the dataset or the stopped run records: every option that shapes shards (the option
table's groups ``plan`` and ``archive``) is taken from the record where it is not given, and a
value given otherwise is refused — each value shown as one would type it."""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping
from dataclasses import fields

import orjson

from ..errors import UsageError
from ..sizes import describe_size
from .record import Options, make_options, parse_sort
from .table import OPTIONS_BY_NAME, SHARD_OPTIONS

# what shapes the shards: what a dataset is made of (which files, grouped, cut and named how)
# and how each shard's bytes are written; the rest (groups run and store) says how a run goes
SHAPING = tuple(o.name for o in SHARD_OPTIONS if o.group in ("plan", "archive"))
CUT = ("shard_size", "samples_per_shard")  # one bound as typed: --shard-size 10 is a count
# --src-list names this run's input, as SRC does (a daily inventory is a new file each day)
NEVER_TAKEN = frozenset({"src_list"})
# what growth keeps to its own rules: it writes new shards only (no promise about the whole
# dataset's shard count) and always keeps the sample index it compares with
NOT_GROWN = frozenset({"num_shards", "shards_multiple_of", "sample_index"})
LONGEST = 60  # characters of a value shown (an inline --ekm may be long)


def units(growing: bool) -> list[tuple[str, ...]]:
    """The shaping options a continuing run compares and takes, one unit at a time (the cut's
    two bounds are one unit, as ``--shard-size`` spells them together)."""
    skip = NEVER_TAKEN | (NOT_GROWN if growing else frozenset())
    out: list[tuple[str, ...]] = [CUT]
    out += [(name,) for name in SHAPING if name not in CUT and name not in skip]
    return out


def spelt(unit: tuple[str, ...], options: Mapping) -> str:
    """``options``' values of ``unit`` as one would type them: ``--shard-size 256KiB``,
    ``--shard-size 10`` (samples), ``--no-collapse``, ``--ext .tgz``, ``no --compress-level``."""
    if unit == CUT:
        size, count = options.get("shard_size"), options.get("samples_per_shard")
        if size is None:
            return f"--shard-size {count}"
        text = f"--shard-size {describe_size(size) if isinstance(size, int) else size}"
        return text if count is None else f"{text} --samples-per-shard {count}"
    (name,) = unit
    spec = OPTIONS_BY_NAME[name]
    flag, _, negative = spec.flags[0].partition("/")
    value = options.get(name)
    if spec.kind == "switch":
        return flag if value else negative
    if spec.kind == "flag":
        return flag if value else f"no {flag}"
    if value is None or value == [] or value == ():
        return f"no {flag}"
    if isinstance(value, (list, tuple)):
        value = ",".join(map(str, value))
    text = str(value)
    text = text if len(text) <= LONGEST else text[: LONGEST - 3] + "..."
    return f"{flag} {shlex.quote(text)}"


def _values(unit: tuple[str, ...], options: Mapping) -> bytes:
    return orjson.dumps([options.get(n) for n in unit])


def unseeded(sort: object) -> bool:
    """Is ``sort`` (the order as given) a shuffle without a seed?"""
    order = parse_sort(sort) if isinstance(sort, str) else None
    return order is not None and order.kind == "shuffle" and order.seed is None


def _same_shuffle(recorded: object) -> bool:
    """A recorded order that an unseeded ``--sort shuffle`` given again means: any shuffle."""
    return isinstance(recorded, str) and recorded.startswith("shuffle:")


def refusal(
    unit: tuple[str, ...], now: Mapping, recorded: Mapping, flag: str, where: str
) -> UsageError:
    """The line growth (``flag``) refuses a given option with: the value given, the one the
    dataset in ``where`` was made with (in the fix, which a value from the environment does
    not rename), and the fix."""
    option = "--" + unit[0].replace("_", "-")
    return UsageError(
        f"{flag}: {spelt(unit, now)} is not the dataset's — the dataset in {where!r} was made "
        f"with {spelt(unit, recorded)}: leave {option} out to take it, or re-shard it with "
        "--overwrite"
    )


def kept_out(unit: tuple[str, ...], recorded: Mapping, flag: str, where: str) -> UsageError:
    """The line growth refuses a dataset with whose recorded option it cannot keep."""
    return UsageError(
        f"{flag}: the dataset in {where!r} was made with {spelt(unit, recorded)}, which {flag} "
        "cannot keep (it writes new shards only) — re-shard it with --overwrite"
    )


def compared(
    opts: Options,
    recorded: Mapping,
    given: Collection[str] | None,
    flag: str,
    where: str,
    sort: str | None = None,
) -> dict:
    """Growth (``flag``) into the dataset in ``where``: each shaping option of ``opts`` that
    was given (``given``; None: every one) must be the dataset's (``recorded``), and those
    growth cannot keep (``--num-shards``, ``--shards-multiple-of``) must be unset in both;
    an unseeded ``--sort shuffle`` (``sort``, the order as given) means the dataset's shuffle.

    Returns:
        The recorded values of the options not given, by name, to take.

    Raises:
        UsageError: naming the option with both values as one would type them, and the fix.
    """
    now = opts.to_dict()
    for name in ("num_shards", "shards_multiple_of"):
        if recorded.get(name) is not None:
            raise kept_out((name,), recorded, flag, where)
    taken: dict = {}
    for unit in units(growing=True):
        if not all(n in recorded for n in unit):
            continue  # a record made before the option existed
        if given is not None and not any(n in given for n in unit):
            taken.update({n: recorded[n] for n in unit})
        elif unit == ("sort",) and unseeded(sort):
            if not _same_shuffle(recorded["sort"]):
                raise refusal(unit, {"sort": "shuffle"}, recorded, flag, where)
            taken["sort"] = recorded["sort"]  # the dataset's seed, not one drawn now
        elif _values(unit, now) != _values(unit, recorded):
            raise refusal(unit, now, recorded, flag, where)
    return taken


def taken_back(recorded: Mapping, given: Collection[str] | None) -> dict:
    """A ``--resume``: the recorded values of the shaping options not given, by name (a given
    one that differs changes the plan, which the resume then refuses, naming it)."""
    if given is None:
        return {}
    return {
        n: recorded[n]
        for unit in units(growing=False)
        if all(n in recorded for n in unit) and not any(n in given for n in unit)
        for n in unit
    }


def with_taken(opts: Options, taken: Mapping) -> Options:
    """``opts`` with the recorded values ``taken`` in place, checked again as a whole (a
    count alone as ``--shard-size N`` gives it)."""
    if not taken:
        return opts
    values = {f.name: getattr(opts, f.name) for f in fields(opts)}
    values.update(taken)
    if values["shard_size"] is None:  # a count alone, given as --shard-size N gives it
        values["shard_size"], values["samples_per_shard"] = str(values["samples_per_shard"]), None
    return make_options(**values)
