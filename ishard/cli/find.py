"""``ishard find``: where samples are, from DST's sample index; ``ishard cat``: read them out
of their shards (one ranged read a sample where the format allows)."""

from __future__ import annotations

import sys

import click

from .. import inspection
from ..errors import DataError, UsageError
from ..names import printed
from ..readback.lookup import Found
from .environment import environment_named
from .help import PATH, reads_stored_shards
from .output import emit_json

KEYS_SHOWN = 5  # missing keys named in the error line


def _keys(keys: tuple[str, ...], keys_from) -> list[str]:
    every = list(keys)
    if keys_from is not None:
        every += [line.rstrip("\r\n") for line in keys_from if line.strip()]
    if not every:
        raise UsageError("no sample key given — name KEYs, or --keys-from FILE (- for stdin)")
    return every


def _missing(missing: list[str], asked: int) -> None:
    if missing:
        named = ", ".join(map(repr, missing[:KEYS_SHOWN]))
        more = f" and {len(missing) - KEYS_SHOWN} more" if len(missing) > KEYS_SHOWN else ""
        raise DataError(
            f"{len(missing)} of {asked} sample keys are not in the sample index: {named}{more} "
            "— check the keys with a DuckDB query of DST/samples.parquet"
        )


def _line(found: Found) -> str:
    where = (
        f"bytes {found.start}-{found.end}" + (" (zstd frames)" if found.frames else "")
        if found.start is not None
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
    found, missing = inspection.find(dst, wanted, **options)
    if verify:
        for f in found:
            inspection.read_sample(dst, f, **options)
    if as_json:
        emit_json({"samples": [f.as_json() for f in found], "missing": missing})
    else:
        for f in found:
            click.echo(_line(f))
    if missing and not as_json:
        _missing(missing, len(set(wanted)))
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
    found, missing = inspection.find(dst, wanted, **options)
    _missing(missing, len(set(wanted)))
    samples = [inspection.read_sample(dst, f, **options) for f in found]
    if folder is not None:
        inspection.extract(folder, samples)
    else:
        inspection.write_tar(sys.stdout.buffer, samples)
    return 0
