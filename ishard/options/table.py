"""The options of ``ishard shard`` as one table: a plain record per option (its flags, the kind
of value it takes, the command line's default, its help and the heading of ``--help`` it is
listed under). ``cli/`` builds the command's click options from it (this module imports no
click); the group an option belongs to (``model.OPTION_GROUPS``: what a resume must repeat,
what it may change) and whether only a run takes it (``model.WRITING_ONLY``) are read from
``model``, below every stage that needs them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..checksums import ALGORITHMS
from ..formats import ARCHIVE_EXTS, level_help
from ..formats.compress import GZIP_LIBRARIES
from ..model import OPTION_GROUPS, WRITING_ONLY
from ..planning.extraction import LOOKALIKES
from ..planning.keys import BUILT_IN
from ..planning.naming import MEMBER_NAMES
from ..planning.samples import ACTIONS
from .checks import EXECUTORS, INDEXES
from .record import DEFAULT_SHARD_SIZE, GO_SHARD_SIZE, ZIP_METHODS

# text, int or path: a value of that type; choice: one of ``choices``; flag: on when given
# (``--overwrite``); switch: a pair (``--collapse/--no-collapse``); repeated: given any number
# of times (``--storage-option``)
Kind = Literal["text", "int", "path", "choice", "flag", "switch", "repeated"]
Default = str | int | bool | None


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option: ``name`` is its parameter's (and, for an option of a run, ``Options``'
    field's and the API's keyword's) name, ``flags`` its spellings on the command line.

    ``default`` is the command line's spelling of the default (``"512MiB"``); a flag's
    ``False`` is left unsaid, ``None`` leaves it unset (the reader's own default then).
    ``show_default`` overrides the command's (defaults shown); ``flag_value`` is what a bare
    flag of an option that also takes ``=VALUE`` means, ``metavar`` how its value is shown."""

    name: str
    flags: tuple[str, ...]
    help: str
    section: str  # its heading in the command's --help
    kind: Kind = "text"
    choices: tuple[str, ...] = ()
    default: Default = None
    show_default: bool | None = None
    flag_value: str | None = None
    metavar: str | None = None

    @property
    def group(self) -> str | None:
        """What the option decides (``model.OPTION_GROUPS``); None: the command's own (its
        output, the dry run), no option of a run."""
        return next((g for g, names in OPTION_GROUPS.items() if self.name in names), None)

    @property
    def writing_only(self) -> bool:
        """Whether only a run takes it (``ishard.shard``, not ``ishard.plan``)."""
        return self.name in WRITING_ONLY


WHAT = "What to shard"
SAMPLES = "Grouping files into samples"
CUTTING = "Cutting and naming shards"
ARCHIVES = "Archives"
READERS = "Reader compatibility"
STORES = "Object stores"
RUNNING = "Running"

# ``ishard shard``'s options in the order of its --help
SHARD_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "prefix",
        ("--prefix",),
        "Only files whose relative name starts with this.",
        WHAT,
        default="",
        show_default=False,
    ),
    OptionSpec(
        "src_list",
        ("--src-list",),
        "Take the listing from an inventory file (CSV with header, JSON Lines, Parquet, an S3 "
        "Inventory report's manifest.json: CSV, Parquet, or ORC with ishard[orc]).",
        WHAT,
    ),
    OptionSpec(
        "include_hidden",
        ("--include-hidden",),
        "Keep files and directories whose name starts with '.'.",
        WHAT,
        "flag",
        default=False,
    ),
    OptionSpec(
        "follow_symlinks",
        ("--follow-symlinks",),
        "List what symbolic links point to (inside SRC only; each directory once).",
        WHAT,
        "flag",
        default=False,
    ),
    OptionSpec(
        "sample_key_pattern",
        ("--sample-key-pattern",),
        f"{', '.join(BUILT_IN)} or a regex (group 1 = key).",
        SAMPLES,
        default="base_file_name",
        show_default=True,
    ),
    OptionSpec(
        "sample_exts",
        ("--sample-exts",),
        "Extensions every sample should have: .jpg,.xml",
        SAMPLES,
    ),
    OptionSpec(
        "missing_extension_action",
        ("--missing-extension-action",),
        "What to do with a sample that lacks one of --sample-exts (exclude: leave it out).",
        SAMPLES,
        "choice",
        ACTIONS,
        "ignore",
    ),
    OptionSpec("ekm", ("--ekm",), "External key map: a JSON file or inline JSON.", SAMPLES),
    OptionSpec(
        "collapse",
        ("--collapse/--no-collapse",),
        "Let a directory's remainder move up into its parent's shards.",
        SAMPLES,
        "switch",
        default=False,
    ),
    OptionSpec(
        "shard_size",
        ("--shard-size",),
        "Target payload per shard (512MiB, 100KB, 1048576B); a number without a unit is "
        f"samples per shard (10), as in Go ishard (whose spelling's default is {GO_SHARD_SIZE}).",
        CUTTING,
        default=f"{DEFAULT_SHARD_SIZE >> 20}MiB",
        show_default=True,
    ),
    OptionSpec(
        "samples_per_shard",
        ("--samples-per-shard",),
        "Also cut a shard at this many samples (with a size as --shard-size).",
        CUTTING,
        "int",
    ),
    OptionSpec(
        "num_shards",
        ("--num-shards",),
        "Exactly N shards whose sample counts differ by at most one (flat keys or --collapse).",
        CUTTING,
        "int",
    ),
    OptionSpec(
        "shards_multiple_of",
        ("--shards-multiple-of",),
        "Round the shard count up to a multiple of K, samples spread evenly (flat keys or "
        "--collapse).",
        CUTTING,
        "int",
    ),
    OptionSpec(
        "sort",
        ("--sort",),
        "Sample order (default: as listed, which is name order).",
        CUTTING,
        "choice",
        ("alpha:inc", "alpha:dec", "shuffle", "shuffle:SEED"),
    ),
    OptionSpec(
        "shard_template",
        ("--shard-template",),
        "Shard names: %06d, {0000..9999} or @0999.",
        CUTTING,
        default="shard-%06d",
        show_default=True,
    ),
    OptionSpec("ext", ("--ext",), "Archive format.", ARCHIVES, "choice", ARCHIVE_EXTS, ".tar"),
    OptionSpec("compress_level", ("--compress-level",), level_help(), ARCHIVES, "int"),
    OptionSpec(
        "gzip_library",
        ("--gzip-library",),
        "gzip compressor for .tgz (auto: the fastest installed); pin one for the same bytes on "
        "every machine.",
        ARCHIVES,
        "choice",
        ("auto", *GZIP_LIBRARIES),
        "auto",
    ),
    OptionSpec(
        "zip_compression",
        ("--zip-compression",),
        "Method of .zip members.",
        ARCHIVES,
        "choice",
        ZIP_METHODS,
        "stored",
    ),
    OptionSpec(
        "member_names",
        ("--member-names",),
        "sample: <sample key>.<extension>, read by WebDataset, wids and DALI as one sample per "
        "ishard sample; or original (paths as listed; the Go spelling's default).",
        READERS,
        "choice",
        MEMBER_NAMES,
        "sample",
    ),
    OptionSpec(
        "index",
        ("--index",),
        "dali: write <shard>.idx (DALI v1.2) beside each .tar shard.",
        READERS,
        "choice",
        INDEXES,
        "none",
    ),
    OptionSpec(
        "sample_index",
        ("--sample-index/--no-sample-index",),
        "Write samples.parquet: each member's sample, shard and source file.",
        READERS,
        "switch",
        default=True,
    ),
    OptionSpec(
        "checksum",
        ("--checksum",),
        "Checksum of every shard for the manifest (md5: wids' md5sum, the Go spelling's default).",
        READERS,
        "choice",
        (*ALGORITHMS, "none"),
        "xxh128",
    ),
    OptionSpec(
        "lookalike_names",
        ("--lookalike-names",),
        "Member names that differ only in case or Unicode form (A.jpg, a.jpg): distinct files "
        "on Linux, one on macOS and Windows; refuse, or warn (the Go spelling's default).",
        READERS,
        "choice",
        LOOKALIKES,
        "refuse",
    ),
    OptionSpec(
        "strict",
        ("--strict",),
        "Any warning is an error (exit 1), before anything is written; in a dry run too (for CI).",
        READERS,
        "flag",
        default=False,
    ),
    OptionSpec(
        "endpoint_url",
        ("--endpoint-url",),
        "S3-compatible endpoint, e.g. http://127.0.0.1:8333 (ais:// uses $AIS_ENDPOINT/s3).",
        STORES,
    ),
    OptionSpec(
        "storage_options",
        ("--storage-option",),
        "KEY=VALUE store setting, e.g. region=eu-west-1, key=…, backend=fsspec (repeatable; "
        "a.b=c nests).",
        STORES,
        "repeated",
    ),
    OptionSpec(
        "part_size",
        ("--part-size",),
        "Multipart upload part size for S3 destinations.",
        STORES,
        default="16MiB",
        show_default=True,
    ),
    OptionSpec(
        "read_buffer",
        ("--read-buffer",),
        "Bytes fetched ahead from a store, across all writers.",
        STORES,
        default="256MiB",
        show_default=True,
    ),
    OptionSpec(
        "retries",
        ("--retries",),
        "Retries of a failed store request after its first try (0: none).",
        STORES,
        "int",
        default=5,
        show_default=True,
    ),
    OptionSpec(
        "dry_run",
        ("--dry-run",),
        "Print the plan, write nothing (a DST given is checked as the run checks it): a line "
        "per shard and a histogram; =files adds every member, =show_keys their sample keys, "
        "=json all as JSON, =summary the totals alone.",
        RUNNING,
        flag_value="shards",
        metavar="[=files|show_keys|json|summary]",
    ),
    OptionSpec(
        "overwrite",
        ("--overwrite",),
        "Allow a non-empty DST; same-named files are replaced.",
        RUNNING,
        "flag",
        default=False,
    ),
    OptionSpec(
        "resume",
        ("--resume",),
        "Finish an interrupted run into DST: keep its complete shards (checked), write the rest.",
        RUNNING,
        "flag",
        default=False,
    ),
    OptionSpec(
        "append",
        ("--append",),
        "Add SRC's samples that DST's dataset does not hold, in new shards; refuse changed "
        "or removed ones.",
        RUNNING,
        "flag",
        default=False,
    ),
    OptionSpec(
        "update",
        ("--update",),
        "As --append, and rewrite only the shards whose samples changed or went.",
        RUNNING,
        "flag",
        default=False,
    ),
    OptionSpec(
        "max_remove",
        ("--max-remove",),
        "With --update: refuse to remove more than this share of the dataset's samples "
        "(a percent, or all), as when the source is an empty mount.",
        RUNNING,
        default="50",
        show_default=True,
        metavar="PERCENT|all",
    ),
    OptionSpec(
        "jobs",
        ("--jobs",),
        "Shards written at once (default, or 0: CPUs, at most 8; 8 with an object store).",
        RUNNING,
        "int",
        default=0,
        show_default=False,
    ),
    OptionSpec(
        "executor",
        ("--executor",),
        "Where shards are written: here, or as Dask tasks on a cluster's workers.",
        RUNNING,
        "choice",
        EXECUTORS,
        "local",
    ),
    OptionSpec(
        "scheduler",
        ("--scheduler",),
        "With --executor dask: tcp://HOST:PORT of a running Dask scheduler (default: a local "
        "cluster of --jobs processes).",
        RUNNING,
    ),
    OptionSpec(
        "tmp_dir",
        ("--tmp-dir",),
        "Folder for the temporary files of sorting a big --src-list inventory (default: the "
        "system's, $TMPDIR).",
        RUNNING,
        "path",
    ),
    OptionSpec(
        "memory_limit",
        ("--memory-limit",),
        "Memory the column engine may hold while it sorts and groups a big --src-list "
        "inventory; past it, it spills to --tmp-dir (128MiB at least).",
        RUNNING,
        default="512MiB",
        show_default=True,
    ),
    OptionSpec(
        "progress",
        ("--progress/--no-progress",),
        "Show progress (default: when stderr is a terminal).",
        RUNNING,
        "switch",
    ),
    OptionSpec(
        "as_json",
        ("--json",),
        "Print the summary as one JSON object on stdout (a dry run's: the plan's).",
        RUNNING,
        "flag",
        default=False,
    ),
    OptionSpec(
        "quiet",
        ("-q", "--quiet"),
        "Print nothing on stdout (but --json) and no progress; warnings and errors still go "
        "to stderr, and the exit code tells.",
        RUNNING,
        "flag",
        default=False,
    ),
    OptionSpec(
        "verbose",
        ("-v", "--verbose"),
        "Also log each step to stderr (shard: listed, planned, each shard written, the "
        "manifest; verify: each shard checked).",
        RUNNING,
        "flag",
        default=False,
    ),
    OptionSpec("debug", ("--debug",), "Show tracebacks.", RUNNING, "flag", default=False),
)
OPTIONS_BY_NAME = {o.name: o for o in SHARD_OPTIONS}
