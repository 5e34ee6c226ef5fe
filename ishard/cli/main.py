"""The ``ishard`` command (the only click user): parse, call the library, render, exit."""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
import traceback
import warnings
from itertools import pairwise

import click
import orjson
from click.shell_completion import CompletionItem

from .. import api, archive, inspection, signals
from ..checksums import ALGORITHMS
from ..errors import Interrupted, IshardError, IshardWarning, UsageError
from ..formats import ARCHIVE_EXTS, level_help
from ..formats.compress import GZIP_LIBRARIES
from ..options import (
    DEFAULT_SHARD_SIZE,
    EXECUTORS,
    GO_SHARD_SIZE,
    INDEXES,
    ZIP_METHODS,
    make_options,
)
from ..planning.extraction import LOOKALIKES
from ..planning.keys import BUILT_IN
from ..planning.listing import printable, shown
from ..planning.naming import MEMBER_NAMES
from ..planning.samples import ACTIONS
from ..render import (
    NoticesOnly,
    error_line,
    histogram_text,
    make_progress,
    plan_headers,
    plan_text,
    samples_text,
    shard_table,
    split_text,
    summary_text,
    verify_text,
    warnings_text,
)
from ..run.report import plan_document, plan_summary, run_summary, samples_document, size_histogram
from ..sizes import format_size
from ..split import POLICIES
from ..split.dali import POLICIES as DALI_LAST_BATCH
from ..split.streaming import ALGOS as STREAMING_SHUFFLES
from ..version import __version__
from .gospelling import DRY_RUN_MODES
from .gospelling import translate as go_translate


def translate(argv: list[str]) -> list[str]:
    """Go ishard's command line rewritten into ours (``gospelling.translate``), told our
    options."""
    return go_translate(argv, _long_options(), _value_options())


def _long_options() -> list[str]:
    """Every long option name of every command, without its dashes."""
    return sorted(
        {
            o[2:]
            for command in cli.commands.values()
            for p in command.params
            for o in (*p.opts, *p.secondary_opts)
            if o.startswith("--")
        }
    )


def _value_options() -> set[str]:
    """Our options that take the next word as their value."""
    return {
        o
        for command in cli.commands.values()
        for p in command.params
        if isinstance(p, click.Option) and not p.is_flag and p.name != "dry_run"
        for o in p.opts
    }


# A path or URL argument: any text, completed as a file name by the shell
PATH = click.Path(path_type=str)


class Choices(click.ParamType):
    """One of ``choices``, shown in --help and completed by the shell. It is checked where the
    API's input is checked too (``options.make_options``, ``split.world``), so the dry run, the
    real run and the library refuse the same values with the same line."""

    name = "choice"

    def __init__(self, choices: tuple[str, ...]) -> None:
        self.choices = choices

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        # (click before 8.2 passes no ctx)
        return "[" + "|".join(self.choices) + "]"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        return [CompletionItem(c) for c in self.choices if c.startswith(incomplete)]


class SectionedCommand(click.Command):
    """A command whose --help lists its options under headings: ``sections`` maps each heading
    to the parameter names under it, in order; a parameter in none is under "Other options"."""

    def __init__(self, *args, sections: dict[str, tuple[str, ...]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sections = sections

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        help_option = self.get_help_option(ctx)
        records = {
            "help" if p is help_option else p.name: record
            for p in self.get_params(ctx)
            if isinstance(p, click.Option) and (record := p.get_help_record(ctx))
        }
        placed: set[str | None] = set()
        for heading, names in self.sections.items():
            rows = [records[n] for n in names if records.get(n)]
            placed.update(names)
            if rows:
                with formatter.section(heading):
                    formatter.write_dl([r for r in rows if r is not None])
        rest = [r for n, r in records.items() if n not in placed and r is not None]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)


# Options more than one command takes, defined once
ENDPOINT_URL = click.option(
    "--endpoint-url",
    default=None,
    help="S3-compatible endpoint, e.g. http://127.0.0.1:8333 (ais:// uses $AIS_ENDPOINT/s3).",
)
STORAGE_OPTION = click.option(
    "--storage-option",
    "storage_options",
    multiple=True,
    help="KEY=VALUE store setting, e.g. region=eu-west-1, key=…, backend=fsspec (repeatable; a.b=c nests).",
)
PROGRESS = click.option(
    "--progress/--no-progress",
    default=None,
    help="Show progress (default: when stderr is a terminal).",
)
DEBUG = click.option("--debug", is_flag=True, help="Show tracebacks.")
QUIET = click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="Print nothing on stdout (but --json) and no progress; warnings and errors still go "
    "to stderr, and the exit code tells.",
)
VERBOSE = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also log each step to stderr (shard: listed, planned, each shard written, the "
    "manifest; verify: each shard checked).",
)


def _talk(quiet: bool, verbose: bool) -> None:
    """Check -q/-v; with -v, the library's log (logger "ishard") goes to stderr."""
    if quiet and verbose:
        raise UsageError("-q/--quiet and -v/--verbose cannot be used together — choose one")
    log = logging.getLogger("ishard")
    for old in [h for h in log.handlers if getattr(h, "ishard_verbose", False)]:
        log.removeHandler(old)  # a second command in one process (tests, scripts) logs once
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.ishard_verbose = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter("ishard: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def _variable(ctx: click.Context, param: click.Parameter) -> str | None:
    """The environment variable ``param``'s value came from, if it came from one."""
    if not param.name or ctx.get_parameter_source(param.name) is not ENVIRONMENT:
        return None
    names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
    return next((n for n in names if os.environ.get(n)), None)


ENVIRONMENT = click.core.ParameterSource.ENVIRONMENT
# Variables read before each option's own name was (the parameter's name): still read
EARLIER_VARIABLES = {"ISHARD_STORAGE_OPTION": "ISHARD_STORAGE_OPTIONS"}


def _environment_named(command):
    """Run ``command`` naming the environment variable in a refusal of a value that came from
    one (the library names the option: ``--shard-size 'x' …``)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UsageError as err:
            ctx = click.get_current_context()
            for param in ctx.command.params:
                variable = _variable(ctx, param)
                if variable and any(f"{o} " in f"{err} " for o in param.opts):
                    what, dash, fix = str(err).partition(" — ")
                    raise UsageError(f"{what} (from {variable}){dash}{fix}") from None
            raise

    return run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ishard")
def cli() -> None:
    """Shard raw datasets into size-bounded archives whose samples never cross a shard."""


def _emit_json(doc: dict) -> None:
    try:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    except TypeError:  # a name that is not UTF-8 (a local file's): shown with \xNN escapes
        data = orjson.dumps(printable(doc), option=orjson.OPT_INDENT_2)
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def _sectioned(name: str, sections: dict[str, tuple[str, ...]], examples: str):
    """``cli.command`` for a command whose help has headings, examples and defaults shown."""
    return cli.command(
        name,
        cls=SectionedCommand,
        sections=sections,
        epilog=examples,
        context_settings={"show_default": True},
    )


SHARD_SECTIONS = {
    "What to shard": ("prefix", "src_list", "include_hidden", "follow_symlinks"),
    "Grouping files into samples": (
        "sample_key_pattern",
        "sample_exts",
        "missing_extension_action",
        "ekm",
        "collapse",
    ),
    "Cutting and naming shards": (
        "shard_size",
        "samples_per_shard",
        "num_shards",
        "shards_multiple_of",
        "sort",
        "shard_template",
    ),
    "Archives": ("ext", "compress_level", "gzip_library", "zip_compression"),
    "Reader compatibility": ("member_names", "index", "checksum", "lookalike_names", "strict"),
    "Object stores": ("endpoint_url", "storage_options", "part_size", "read_buffer", "retries"),
    "Running": (
        "dry_run",
        "overwrite",
        "resume",
        "jobs",
        "executor",
        "scheduler",
        "tmp_dir",
        "memory_limit",
        "progress",
        "as_json",
        "quiet",
        "verbose",
        "debug",
        "help",
    ),
}
SHARD_EXAMPLES = """\b
Examples:
  ishard shard data/ --dry-run                          # the plan, a line per shard
  ishard shard data/ out/ --shard-size 512MiB --sample-exts .jpg,.json
  ishard shard s3://raw/imagenet/ s3://shards/imagenet/ --ext .tar.lz4
  ishard shard data/ out/ --resume                      # finish an interrupted run
  ishard -src_bck=data -dst_bck=out -shard_size=512MiB  # Go ishard's spelling

The user guide (docs/user-guide.md) explains every option."""


@_sectioned("shard", SHARD_SECTIONS, SHARD_EXAMPLES)
@click.argument("src", type=PATH)
@click.argument("dst", required=False, type=PATH)
@click.option(
    "--prefix",
    default="",
    show_default=False,
    help="Only files whose relative name starts with this.",
)
@click.option(
    "--shard-size",
    default=f"{DEFAULT_SHARD_SIZE >> 20}MiB",
    show_default=True,
    help="Target payload per shard (512MiB, 100KB, 1048576B); a number without a unit is "
    f"samples per shard (10), as in Go ishard (whose spelling's default is {GO_SHARD_SIZE}).",
)
@click.option(
    "--samples-per-shard",
    type=int,
    default=None,
    help="Also cut a shard at this many samples (with a size as --shard-size).",
)
@click.option(
    "--sample-key-pattern",
    default="base_file_name",
    show_default=True,
    help=f"{', '.join(BUILT_IN)} or a regex (group 1 = key).",
)
@click.option("--sample-exts", default=None, help="Extensions every sample should have: .jpg,.xml")
@click.option(
    "--missing-extension-action",
    type=Choices(ACTIONS),
    default="ignore",
    help="What to do with a sample that lacks one of --sample-exts (exclude: leave it out).",
)
@click.option(
    "--collapse/--no-collapse",
    default=False,
    help="Let a directory's remainder move up into its parent's shards.",
)
@click.option("--ekm", default=None, help="External key map: a JSON file or inline JSON.")
@click.option("--ext", type=Choices(ARCHIVE_EXTS), default=".tar", help="Archive format.")
@click.option(
    "--shard-template",
    default="shard-%06d",
    show_default=True,
    help="Shard names: %06d, {0000..9999} or @0999.",
)
@click.option(
    "--sort",
    type=Choices(("alpha:inc", "alpha:dec", "shuffle", "shuffle:SEED")),
    default=None,
    help="Sample order (default: as listed, which is name order).",
)
@click.option(
    "--dry-run",
    "dry_run",
    is_flag=False,
    flag_value="shards",
    default=None,
    metavar="[=files|show_keys|json|summary]",
    help="Print the plan, write nothing: a line per shard and a histogram; =files adds every "
    "member, =show_keys their sample keys, =json all as JSON, =summary the totals.",
)
@PROGRESS
@click.option(
    "--jobs",
    type=int,
    default=0,
    show_default=False,
    help="Shards written at once (default, or 0: CPUs, at most 8; 8 with an object store).",
)
@click.option(
    "--follow-symlinks",
    is_flag=True,
    help="List what symbolic links point to (inside SRC only; each directory once).",
)
@click.option(
    "--include-hidden", is_flag=True, help="Keep files and directories whose name starts with '.'."
)
@click.option(
    "--overwrite", is_flag=True, help="Allow a non-empty DST; same-named files are replaced."
)
@click.option(
    "--resume",
    is_flag=True,
    help="Finish an interrupted run into DST: keep its complete shards (checked), write the rest.",
)
@click.option(
    "--compress-level",
    type=int,
    default=None,
    help=level_help(),
)
@click.option(
    "--gzip-library",
    type=Choices(("auto", *GZIP_LIBRARIES)),
    default="auto",
    help="gzip compressor for .tgz (auto: the fastest installed); pin one for the same bytes on every machine.",
)
@click.option(
    "--zip-compression", type=Choices(ZIP_METHODS), default="stored", help="Method of .zip members."
)
@click.option(
    "--src-list",
    default=None,
    help="Take the listing from an inventory file (CSV with header, JSON Lines, Parquet, an S3 "
    "Inventory report's manifest.json: CSV, Parquet, or ORC with ishard[orc]).",
)
@ENDPOINT_URL
@STORAGE_OPTION
@click.option(
    "--part-size",
    default="16MiB",
    show_default=True,
    help="Multipart upload part size for S3 destinations.",
)
@click.option(
    "--read-buffer",
    default="256MiB",
    show_default=True,
    help="Bytes fetched ahead from a store, across all writers.",
)
@click.option(
    "--retries",
    type=int,
    default=5,
    show_default=True,
    help="Retries of a failed store request after its first try (0: none).",
)
@click.option(
    "--checksum",
    type=Choices((*ALGORITHMS, "none")),
    default="xxh128",
    help="Checksum of every shard for the manifest (md5: wids' md5sum, the Go spelling's default).",
)
@click.option(
    "--executor",
    type=Choices(EXECUTORS),
    default="local",
    help="Where shards are written: here, or as Dask tasks on a cluster's workers.",
)
@click.option(
    "--scheduler",
    default=None,
    help="With --executor dask: tcp://HOST:PORT of a running Dask scheduler (default: a local cluster of --jobs processes).",
)
@click.option(
    "--num-shards",
    type=int,
    default=None,
    help="Exactly N shards whose sample counts differ by at most one (flat keys or --collapse).",
)
@click.option(
    "--shards-multiple-of",
    type=int,
    default=None,
    help="Round the shard count up to a multiple of K, samples spread evenly (flat keys or --collapse).",
)
@click.option(
    "--member-names",
    type=Choices(MEMBER_NAMES),
    default="sample",
    help="sample: <sample key>.<extension>, read by WebDataset, wids and DALI as one sample per ishard sample; or original (paths as listed; the Go spelling's default).",
)
@click.option(
    "--index",
    type=Choices(INDEXES),
    default="none",
    help="dali: write <shard>.idx (DALI v1.2) beside each .tar shard.",
)
@click.option(
    "--tmp-dir",
    type=PATH,
    default=None,
    help="Folder for the temporary files of sorting a big --src-list inventory (default: the "
    "system's, $TMPDIR).",
)
@click.option(
    "--memory-limit",
    default="512MiB",
    show_default=True,
    help="Memory the column engine may hold while it sorts and groups a big --src-list "
    "inventory; past it, it spills to --tmp-dir (128MiB at least).",
)
@click.option(
    "--lookalike-names",
    type=Choices(LOOKALIKES),
    default="refuse",
    help="Member names that differ only in case or Unicode form (A.jpg, a.jpg): distinct files "
    "on Linux, one on macOS and Windows; refuse, or warn (the Go spelling's default).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Any warning is an error (exit 1), before anything is written; in a dry run too (for CI).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the summary as one JSON object on stdout."
)
@QUIET
@VERBOSE
@DEBUG
@_environment_named
def shard_command(src, dst, dry_run, progress, as_json, quiet, verbose, debug, **options) -> None:
    """Shard the files under SRC into archives in DST."""
    _talk(quiet, verbose)
    with warnings.catch_warnings():  # the progress hooks print them, as 'ishard: warning:'
        warnings.simplefilter("ignore", IshardWarning)
        _shard(src, dst, dry_run, False if quiet else progress, as_json, quiet, options)


def _shard(src, dst, dry_run, progress, as_json, quiet, options) -> None:
    ctx = click.get_current_context()
    if (
        dry_run is not None
        and dry_run not in DRY_RUN_MODES
        and (variable := next(_variable(ctx, p) for p in ctx.command.params if p.name == "dry_run"))
    ):
        raise UsageError(
            f"{variable}={dry_run!r} is not a dry-run mode — set it to shards, files, show_keys, "
            "json or summary, or unset it"
        )
    if dry_run is not None and dry_run not in DRY_RUN_MODES:
        raise click.UsageError(
            f"--dry-run={dry_run!r} is not a dry-run mode — use --dry-run, --dry-run=files, "
            "--dry-run=show_keys, --dry-run=json or --dry-run=summary"
        )
    if dry_run is None and dst is None:
        raise click.UsageError("missing DST — say where the shards go: ishard shard SRC DST")
    opts = make_options(**options)  # every option checked, a dry run's too
    if dry_run is not None:
        the_plan = api.plan_with(src, opts, NoticesOnly())
        if dry_run == "json":
            _emit_json(plan_document(the_plan))
            return
        if quiet:
            return
        if dry_run == "shards":
            shard_table(the_plan, sys.stdout)
        elif dry_run == "summary":
            plan_headers(the_plan, sys.stdout)
        else:
            plan_text(the_plan, dry_run == "show_keys", sys.stdout)
        summary_text(plan_summary(the_plan), sys.stdout, dry_run=True)
        if dry_run == "shards":
            histogram_text(size_histogram(the_plan.shard_sizes), sys.stdout)
        return
    bar = make_progress(progress)
    try:
        report = api.shard_with(src, dst, opts, progress=bar, sort=options["sort"])
    finally:
        bar.close()
    summary = run_summary(report)
    if as_json:
        _emit_json(summary)
    elif not quiet:
        summary_text(summary, sys.stdout, dry_run=False)


SPLIT_SECTIONS = {
    "What to divide": ("manifest", "shard_sizes"),
    "The training job": ("nodes", "ranks_per_node", "workers", "batch_size", "epochs"),
    "The reader": (
        "policy",
        "last_batch_policy",
        "pad_last_batch",
        "stick_to_shard",
        "drop_last",
        "drop_last_batch",
        "unbalanced",
        "shuffle",
        "seed",
        "canonical_nodes",
    ),
    "Output": ("as_json", "debug", "help"),
}
SPLIT_EXAMPLES = """\b
Examples:
  ishard split out/manifest.json --policy dali --nodes 2 --ranks-per-node 8
  ishard split --shard-sizes 100,100,80 --nodes 2 --batch-size 10
  ishard split out/manifest.json --policy streaming --workers 4 --epochs 2 --json"""


@_sectioned("split", SPLIT_SECTIONS, SPLIT_EXAMPLES)
@click.argument("manifest", required=False, type=PATH)
@click.option(
    "--shard-sizes", default=None, help="Samples per shard instead of a manifest: 100,100,80"
)
@click.option(
    "--policy",
    type=Choices(POLICIES),
    default="webdataset",
    help="Whose way of dividing shards to show.",
)
@click.option(
    "--nodes", type=int, default=1, show_default=True, help="Physical nodes (Whale: worker tasks)."
)
@click.option(
    "--ranks-per-node", type=int, default=1, show_default=True, help="Ranks (GPUs) per node."
)
@click.option(
    "--workers", type=int, default=1, show_default=True, help="DataLoader workers per rank."
)
@click.option("--batch-size", type=int, default=1, show_default=True, help="Per-rank batch size.")
@click.option("--epochs", type=int, default=1, show_default=True, help="Epochs to show.")
@click.option(
    "--last-batch-policy",
    type=Choices(DALI_LAST_BATCH),
    default=None,
    help="dali: what a shard's last, short batch becomes (default: fill).",
)
@click.option(
    "--pad-last-batch", is_flag=True, default=None, help="dali: pad each shard to a full batch."
)
@click.option(
    "--stick-to-shard", is_flag=True, default=None, help="dali: read the same shard every epoch."
)
@click.option(
    "--drop-last",
    is_flag=True,
    default=None,
    help="torch sampler, webdataset loader, whale io.drop_last_files.",
)
@click.option(
    "--drop-last-batch", is_flag=True, default=None, help="torch: the DataLoader's drop_last."
)
@click.option("--unbalanced", is_flag=True, default=None, help="whale: io.unbalanced_io_slicing.")
@click.option(
    "--shuffle",
    type=Choices(STREAMING_SHUFFLES),
    default=None,
    help="streaming: the shuffle algorithm (default: none).",
)
@click.option(
    "--seed", type=int, default=None, help="streaming shuffle seed (9176), whale replication seed."
)
@click.option("--canonical-nodes", type=int, default=None, help="streaming: num_canonical_nodes.")
@click.option("--json", "as_json", is_flag=True, help="Print the division as JSON.")
@DEBUG
@_environment_named
def split_command(manifest, shard_sizes, policy, as_json, debug, **options) -> None:
    """Show how MANIFEST's shards divide over ranks, workers and epochs under a policy
    (MANIFEST: a manifest.json, or the DST folder that holds one)."""
    doc = inspection.split(manifest, shard_sizes=shard_sizes, policy=policy, **options)
    if as_json:
        _emit_json(doc)
    else:
        split_text(doc, sys.stdout)


@cli.command(
    "ls",
    epilog="""\b
Examples:
  ishard ls out/shard-000000.tar
  ishard ls out/shard-000000.tar --samples   # as WebDataset readers group the members
  ishard ls s3://shards/imagenet/shard-000000.tar.lz4 --json""",
)
@click.argument("archive_path", metavar="ARCHIVE", type=PATH)
@click.option(
    "--samples", is_flag=True, help="Group members into samples as WebDataset readers do."
)
@click.option("--json", "as_json", is_flag=True, help="Print the members as JSON.")
@ENDPOINT_URL
@STORAGE_OPTION
@DEBUG
@_environment_named
def ls_command(archive_path, samples, as_json, debug, endpoint_url, storage_options) -> None:
    """List an archive's members with their sizes (a file, or a store URL)."""
    found = list(
        archive.members(archive_path, endpoint_url=endpoint_url, storage_options=storage_options)
    )
    if samples:
        grouped = archive.reader_samples(found)
        if as_json:
            _emit_json(samples_document(grouped))
        else:
            samples_text(grouped, sys.stdout)
        warnings_text(grouped.problems())
        return
    if as_json:
        _emit_json({"members": [{"name": m.name, "size": m.size} for m in found]})
        return
    for m in found:
        click.echo(f"{m.size:>12}  {format_size(m.size):>10}  {shown(m.name)}")


@cli.command(
    "verify",
    epilog="""\b
Examples:
  ishard verify out
  ishard verify out --deep        # read every member back too
  ishard verify s3://shards/imagenet/ --json""",
)
@click.argument("dst", type=PATH)
@click.option(
    "--deep",
    is_flag=True,
    help="Also read every member back and check samples: counts, payload, grouping.",
)
@click.option(
    "--jobs",
    type=int,
    default=0,
    help="Shards checked at once (default, or 0: CPUs, at most 8; 8 for a store).",
)
@ENDPOINT_URL
@STORAGE_OPTION
@PROGRESS
@click.option(
    "--json", "as_json", is_flag=True, help="Print the result as one JSON object on stdout."
)
@QUIET
@VERBOSE
@DEBUG
@_environment_named
def verify_command(dst, progress, as_json, quiet, verbose, debug, **options) -> int:
    """Check the shards in DST against DST/manifest.json; exit 1 if anything is wrong."""
    _talk(quiet, verbose)
    bar = make_progress(False if quiet else progress)
    try:
        result = inspection.verify(dst, progress=bar, **options)
    finally:
        bar.close()
    warnings_text(list(result.warnings))
    if as_json:
        _emit_json(result.to_dict())
    elif not quiet:
        verify_text(result.to_dict(), sys.stdout)
    return 0 if result.ok else 1


_EXTRA = re.compile(r"Got unexpected extra arguments? \((.*)\)")
_NUMBERED = re.compile(r"(.*?)([0-9]+)([^0-9]*)")


def _from_environment(err: click.ClickException) -> str:
    """`` (from ISHARD_X)`` when the bad value came from the environment, not the command line."""
    param, ctx = getattr(err, "param", None), getattr(err, "ctx", None)
    if param is None or ctx is None:
        return ""
    variable = _variable(ctx, param)
    return f" (from {variable})" if variable else ""


def _environment_options() -> None:
    """Every option of every command can also be set as ``ISHARD_<OPTION>``, the option's long
    name (``--shard-size`` is ``ISHARD_SHARD_SIZE``, ``--overwrite`` is ``ISHARD_OVERWRITE=1``,
    ``--storage-option`` is ``ISHARD_STORAGE_OPTION``, a repeated option's values separated
    by whitespace); the command line wins. ``--help`` shows each option's variable."""
    for command in cli.commands.values():
        for param in command.params:
            if isinstance(param, click.Option) and param.envvar is None and param.name:
                long = next((o for o in param.opts if o.startswith("--")), f"--{param.name}")
                variable = "ISHARD_" + long[2:].replace("-", "_").upper()
                earlier = EARLIER_VARIABLES.get(variable)
                param.envvar = [variable, earlier] if earlier else variable
                param.show_envvar = True


_environment_options()


def _brace_hint(args: list[str], err: click.ClickException) -> str | None:
    """When click found extra arguments and an option's value is followed by words counting on
    from it (the shell expanded an unquoted ``{0..3}``): the line that says to quote it."""
    if not _EXTRA.fullmatch(err.format_message()):
        return None
    for at, arg in enumerate(args):
        option, eq, first = arg.partition("=")
        if not option.startswith("--") or option == "--":
            continue
        rest = at + 1
        if not eq:
            if rest >= len(args):
                break
            first, rest = args[rest], rest + 1
        template = _counted(first, args[rest:])
        if template is not None:
            extras = args[rest : rest + template[1]]
            return (
                f"got unexpected extra arguments {' '.join(extras)!r} — they look like a "
                f"brace template the shell expanded: quote it, e.g. {option} '{template[0]}'"
            )
    return None


def _expanded_option(args: list[str]) -> str | None:
    """The hint for ``--opt=s-{0..3}`` left unquoted: the shell made it ``--opt=s-0 --opt=s-1
    …`` and the last would silently win; None when no option repeats that way."""
    for at, arg in enumerate(args):
        option, eq, first = arg.partition("=")
        if not (eq and option.startswith("--")):
            continue
        values = []
        for word in args[at + 1 :]:
            same, eq2, value = word.partition("=")
            if same != option or not eq2:
                break
            values.append(value)
        template = _counted(first, values) if values else None
        if template is not None:
            return (
                f"{option} is given {template[1] + 1} times ({arg} … {option}="
                f"{values[template[1] - 1]}) — it looks like a brace template the shell "
                f"expanded: quote it, e.g. {option}='{template[0]}'"
            )
    return None


def _counted(first: str, after: list[str]) -> tuple[str, int] | None:
    """(the brace template, how many words of ``after`` it explains) when ``first`` and the
    words after it count up by one step with the same text around the number; else None."""
    head = _NUMBERED.fullmatch(first)
    if head is None:
        return None
    parts = []
    for word in after:
        m = _NUMBERED.fullmatch(word)
        if m is None or (m.group(1), m.group(3)) != (head.group(1), head.group(3)):
            break
        parts.append(m)
    numbers = [int(head.group(2))] + [int(m.group(2)) for m in parts]
    step = numbers[1] - numbers[0] if len(numbers) > 1 else 0
    count = 0
    for a, b in pairwise(numbers):
        if step <= 0 or b - a != step:
            break
        count += 1
    if not count:
        return None
    lo, hi = head.group(2), parts[count - 1].group(2)
    braces = f"{{{lo}..{hi}}}" if step == 1 else f"{{{lo}..{hi}..{step}}}"
    return f"{head.group(1)}{braces}{head.group(3)}", count


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the command, turn every failure into one line and an exit code."""
    raw = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in raw or "-debug" in raw
    signals.install()  # SIGINT, SIGTERM, SIGHUP: clean up, one line, 130 / 143 / 129
    args: list[str] = []
    code = 0
    try:
        args = translate(raw)
        expanded = _expanded_option(args)
        if expanded is not None:
            raise UsageError(expanded)
        code = cli.main(args, prog_name="ishard", standalone_mode=False)
    except IshardError as err:
        if debug:
            traceback.print_exc()  # then the usual line and exit code, so scripts see no change
        error_line(str(err))
        sys.exit(err.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt, signals.Stopped):
        stopped = Interrupted(signals.received(), signals.name())
        error_line(str(stopped))
        sys.exit(stopped.exit_code)
    except click.exceptions.NoArgsIsHelpError:
        error_line(
            "no command given — run 'ishard shard SRC DST', 'ishard ls ARCHIVE' or "
            "'ishard verify DST'; "
            "see 'ishard --help'"
        )
        sys.exit(2)
    except click.ClickException as err:
        message = _brace_hint(args, err) or err.format_message().rstrip(".")
        message += _from_environment(err)
        if " — " not in message:  # ours already say how to fix it
            ctx = getattr(err, "ctx", None)
            message += f" — see '{ctx.command_path if ctx else 'ishard'} --help'"
        error_line(message)
        sys.exit(err.exit_code)
    except Exception as err:  # an unexpected failure: still one line unless --debug
        if debug:
            raise
        error_line(f"unexpected {type(err).__name__}: {err} — rerun with --debug for the traceback")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
