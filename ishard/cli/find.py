"""``ishard find``: where samples are, from DST's sample index; ``ishard cat``: read them out
of their shards (one ranged read a sample where the format allows)."""

from __future__ import annotations

import shlex
import sys

import click

from .. import inspection
from ..errors import DataError, UsageError
from ..names import printed, quoted
from ..readback.lookup import Found, Lookup
from .environment import environment_named
from .help import PATH, reads_stored_shards
from .output import emit_json

KEYS_SHOWN = 5  # missing keys named in the error line
NEAR_SHOWN = 3  # keys the index holds named for each of the first missing keys
# what shows the keys an index holds, with what ishard installed (duckdb, a dependency)
SHOW_KEYS = (
    """python -c 'import duckdb, sys; duckdb.read_parquet(sys.argv[1]).project("key").show()'"""
)


def _keys(keys: tuple[str, ...], keys_from) -> list[str]:
    every = list(keys)
    if keys_from is not None:
        every += [line.rstrip("\r\n") for line in keys_from if line.strip()]
    if not every:
        raise UsageError("no sample key given — name KEYs, or --keys-from FILE (- for stdin)")
    return every


def _missing(looked: Lookup, wanted: list[str]) -> None:
    """One error line naming the keys the index does not hold (the first few, each with the
    nearest keys it holds), and how to see the keys it holds."""
    missing = looked.missing
    if not missing:
        return
    asked = len(set(wanted))  # a key given twice is looked up once
    keys = "sample keys" if len(wanted) == asked else "distinct sample keys"
    named = ", ".join(_named(k, looked.near.get(k, ())) for k in missing[:KEYS_SHOWN])
    named += f" and {len(missing) - KEYS_SHOWN} more" if len(missing) > KEYS_SHOWN else ""
    if asked == 1:
        what = f"sample key {quoted(missing[0])} is not in the sample index" + "".join(
            f"; the nearest it holds: {', '.join(map(quoted, near))}"
            for near in looked.near.values()
        )
    elif len(missing) == asked:
        what = f"none of the {asked} {keys} is in the sample index: {named}"
    else:
        verb = "is" if len(missing) == 1 else "are"
        what = f"{len(missing)} of {asked} {keys} {verb} not in the sample index: {named}"
    raise DataError(f"{what} — see the keys it holds with {SHOW_KEYS} {shlex.quote(looked.index)}")


def _named(key: str, near: tuple[str, ...]) -> str:
    if not near:
        return quoted(key)
    return f"{quoted(key)} (nearest: {', '.join(map(quoted, near))})"


def _line(found: Found) -> str:
    """A found sample: its key, shard, the bytes of the shard holding it as an HTTP range
    (``bytes=first-last``, the last byte included), and its members."""
    where = (
        f"bytes={found.start}-{found.end - 1}" + (" (zstd frames)" if found.frames else "")
        if found.start is not None and found.end is not None
        else "no byte range (read forward)"
    )
    members = ", ".join(printed(m.member) for m in found.members)
    return f"{printed(found.key)}  {printed(found.shard)}  {where}  {members}"


KEYS_FROM = click.option(
    "--keys-from",
    type=click.File("r"),
    help="Read sample keys from this file, one a line (- for stdin).",
)


@click.command(
    "find",
    epilog="""\b
Examples:
  ishard find out ILSVRC2012_val_00001509
  ishard find s3://shards/imagenet/ --keys-from keys.txt --json""",
)
@click.argument("dst", type=PATH)
@click.argument("keys", nargs=-1)
@KEYS_FROM
@click.option("--json", "as_json", is_flag=True, help="Print the samples as JSON.")
@click.option(
    "--verify",
    is_flag=True,
    help="Also read each found sample out of its shard and check its members' bytes against "
    "the checksums the index holds (exit 1 naming the first that differs).",
)
@reads_stored_shards
@environment_named
def find_command(dst, keys, keys_from, as_json, verify, debug, **options) -> int:
    """Which shard, members and byte range hold each sample KEY, from DST/samples.parquet;
    exit 1 when a key is not there. Only the index is read, unless --verify."""
    wanted = _keys(keys, keys_from)
    looked = inspection.search(dst, wanted, near=0 if as_json else NEAR_SHOWN, **options)
    found, missing = looked.found, looked.missing
    if verify:
        for f in found:
            inspection.read_sample(dst, f, **options)
    if as_json:
        emit_json({"samples": [f.as_json() for f in found], "missing": missing})
    else:
        for f in found:
            click.echo(_line(f))
    if not as_json:
        _missing(looked, wanted)
    return 1 if missing else 0


@click.command(
    "cat",
    epilog="""\b
Examples:
  ishard cat out ILSVRC2012_val_00001509 | tar -tvf -
  ishard cat s3://shards/imagenet/ ILSVRC2012_val_00001509 -o sample/""",
)
@click.argument("dst", type=PATH)
@click.argument("keys", nargs=-1)
@KEYS_FROM
@click.option(
    "-o",
    "--output",
    "folder",
    type=click.Path(file_okay=False),
    help="Write the members into this folder (by their names in the archive) instead of a "
    "tar stream on stdout.",
)
@reads_stored_shards
@environment_named
def cat_command(dst, keys, keys_from, folder, debug, **options) -> int:
    """Read samples KEY out of their shards in DST: a tar stream of their members on stdout,
    or their files in a folder (-o)."""
    wanted = _keys(keys, keys_from)
    if folder is None and sys.stdout.isatty():
        raise UsageError("stdout is a terminal — pipe the tar stream on, or give -o FOLDER")
    looked = inspection.search(dst, wanted, near=NEAR_SHOWN, **options)
    _missing(looked, wanted)
    samples = [inspection.read_sample(dst, f, **options) for f in looked.found]
    if folder is not None:
        inspection.extract(folder, samples)
    else:
        inspection.write_tar(sys.stdout.buffer, samples)
    return 0
