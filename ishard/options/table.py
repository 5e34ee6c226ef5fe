"""The options of ``ishard shard`` as one table: a plain record per option (its flags, the kind
of value it takes, the command line's default, its help and the heading of ``--help`` it is
listed under, its API text and Go spellings, what it decides and whether only a run takes it).
``cli/`` builds the command's click options from it (this module imports no click); what a
resume may change (``EXECUTION_ONLY``) and what ``ishard.plan`` does not take
(``WRITING_ONLY``) are read from it."""

from __future__ import annotations

from ..checksums import ALGORITHMS
from ..formats import ARCHIVE_EXTS, level_help, spelt
from ..formats.compress import GZIP_LIBRARIES
from ..formats.indexes import CHOICES as INDEX_CHOICES
from ..planning.duplicates import MODES as DUPLICATE_MODES
from ..planning.extraction import LOOKALIKES
from ..planning.keys import BUILT_IN
from ..planning.naming import MEMBER_NAMES
from ..planning.samples import ACTIONS
from .checks import EXECUTORS
from .record import DEFAULT_SHARD_SIZE, GO_SHARD_SIZE, ZIP_METHODS
from .spec import OptionSpec
from .storetable import STORE_OPTIONS

WHAT = "What to shard"
SAMPLES = "Grouping files into samples"
CUTTING = "Cutting and naming shards"
ARCHIVES = "Archives"
READERS = "Reader compatibility"
RUNNING = "Running"

# ``ishard shard``'s options in the order of its --help
SHARD_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "prefix",
        "Only files whose relative name starts with this.",
        WHAT,
        default="",
        show_default=False,
        api="only files whose name relative to ``src`` starts with this text.",
        go=("prefix",),
        group="plan",
    ),
    OptionSpec(
        "src_list",
        "Take the listing from an inventory file (CSV with header, JSON Lines, Parquet, an S3 "
        "Inventory report's manifest.json: CSV, Parquet, or ORC with ishard[orc]).",
        WHAT,
        api="take the listing from an inventory file (CSV with a header, JSON Lines, Parquet, or "
        "an S3 Inventory report's ``manifest.json``), a path or a URL.",
        go=("src_list",),
        group="plan",
    ),
    OptionSpec(
        "include_hidden",
        "Keep files and directories whose name starts with '.'.",
        WHAT,
        "flag",
        default=False,
        api='keep files and directories whose name starts with ``"."``.',
        go=("include_hidden",),
        group="plan",
    ),
    OptionSpec(
        "follow_symlinks",
        "List what symbolic links point to (inside SRC only; each directory once).",
        WHAT,
        "flag",
        default=False,
        api="list what symbolic links point to (inside ``src`` only).",
        go=("follow_symlinks",),
        group="plan",
    ),
    OptionSpec(
        "sample_key_pattern",
        f"{', '.join(BUILT_IN)} or a regex (group 1 = key).",
        SAMPLES,
        default="base_file_name",
        api="how file names become sample keys: "
        + ", ".join(f'``"{name}"``' for name in BUILT_IN)
        + " or a regex whose group 1 is the key.",
        go=("sample_key_pattern",),
        group="plan",
    ),
    OptionSpec(
        "sample_exts",
        "Extensions every sample should have: .jpg,.xml",
        SAMPLES,
        api='the extensions every sample should have: ``[".jpg", ".xml"]`` (or ``".jpg,.xml"``).',
        go=("sample_exts",),
        group="plan",
    ),
    OptionSpec(
        "missing_extension_action",
        "What to do with a sample that lacks one of --sample-exts (exclude: leave it out).",
        SAMPLES,
        "choice",
        ACTIONS,
        "ignore",
        api='a sample without one of ``sample_exts``: ``"ignore"``, ``"warn"``, ``"abort"`` or '
        '``"exclude"``.',
        go=("missing_extension_action",),
        group="plan",
    ),
    OptionSpec(
        "ekm",
        "External key map: a JSON file or inline JSON.",
        SAMPLES,
        api="an external key map routing samples to shard-name formats: a dict such as "
        '``{"fish-%d.tar": ["^n01440764/"]}``, its JSON text, or the path of a JSON file.',
        go=("ekm",),
        group="plan",
    ),
    OptionSpec(
        "collapse",
        "Let a directory's remainder move up into its parent's shards.",
        SAMPLES,
        "switch",
        default=False,
        api="let a directory's remainder move up into its parent's shards.",
        go=("collapse",),
        group="plan",
    ),
    OptionSpec(
        "shard_size",
        "Target payload per shard (512MiB, 100KB, 1048576B); a number without a unit is "
        f"samples per shard (10), as in Go ishard (whose spelling's default is {GO_SHARD_SIZE}).",
        CUTTING,
        default=f"{DEFAULT_SHARD_SIZE >> 20}MiB",
        api="where shards are cut: bytes as an int (or a whole float, ``3e9``), or a string read "
        'as on the command line: ``"512MiB"``, ``"100KB"`` are sizes, ``"10"`` is 10 samples '
        "per shard.",
        go=("shard_size", "max_shard_size"),
        group="plan",
    ),
    OptionSpec(
        "samples_per_shard",
        "Also cut a shard at this many samples (with a size as --shard-size).",
        CUTTING,
        "int",
        api="also cut a shard at this many samples.",
        go=("samples_per_shard",),
        group="plan",
    ),
    OptionSpec(
        "num_shards",
        "Exactly N shards whose sample counts differ by at most one (flat keys or --collapse).",
        CUTTING,
        "int",
        api="exactly this many shards, their sample counts differing by at most one.",
        go=("num_shards",),
        group="plan",
    ),
    OptionSpec(
        "shards_multiple_of",
        "Round the shard count up to a multiple of K, samples spread evenly (flat keys or "
        "--collapse).",
        CUTTING,
        "int",
        api="round the shard count up to a multiple of this.",
        go=("shards_multiple_of",),
        group="plan",
    ),
    OptionSpec(
        "sort",
        "Sample order (default: as listed, which is name order).",
        CUTTING,
        "choice",
        ("alpha:inc", "alpha:dec", "shuffle", "shuffle:SEED"),
        api='``"alpha:inc"``, ``"alpha:dec"``, ``"shuffle"`` or ``"shuffle:SEED"``; None keeps the '
        "listing order.",
        go=("sort",),
        group="plan",
    ),
    OptionSpec(
        "shard_template",
        "Shard names: %06d, {0000..9999} or @0999.",
        CUTTING,
        default="shard-%06d",
        api='shard names: ``"shard-%06d"``, ``"shard-{0000..9999}"`` or ``"shard-@0999"``.',
        go=("shard_template",),
        group="plan",
    ),
    OptionSpec(
        "ext",
        "Archive format.",
        ARCHIVES,
        "choice",
        ARCHIVE_EXTS,
        ".tar",
        api=spelt([f'``"{e}"``' for e in ARCHIVE_EXTS]) + ".",
        go=("ext",),
        group="archive",
    ),
    OptionSpec(
        "compress_level",
        level_help(),
        ARCHIVES,
        "int",
        api=f"{level_help()[:-1]}; None: each format's default.",
        group="archive",
    ),
    OptionSpec(
        "gzip_library",
        "gzip compressor for .tgz (auto: the fastest installed); pin one for the same bytes on "
        "every machine.",
        ARCHIVES,
        "choice",
        ("auto", *GZIP_LIBRARIES),
        "auto",
        api='the gzip compressor for ``.tgz``: ``"auto"`` (the fastest installed), ``"isal"``, '
        '``"zlib-ng"`` or ``"zlib"``.',
        group="archive",
    ),
    OptionSpec(
        "zip_compression",
        "Method of .zip members.",
        ARCHIVES,
        "choice",
        ZIP_METHODS,
        "stored",
        api='``"stored"`` or ``"deflated"``.',
        group="archive",
    ),
    OptionSpec(
        "member_names",
        "sample: <sample key>.<extension>, read by WebDataset, wids and DALI as one sample per "
        "ishard sample; or original (paths as listed; the Go spelling's default).",
        READERS,
        "choice",
        MEMBER_NAMES,
        "sample",
        api='``"original"`` (paths as listed) or ``"sample"`` (``<key>.<ext>``, one WebDataset '
        "sample per ishard sample).",
        group="plan",
    ),
    OptionSpec(
        "index",
        "dali: <shard>.idx (DALI v1.2) beside each .tar shard; energon: <shard>.tar.idx and "
        ".nv-meta/ (Megatron-Energon, no energon prepare); both: dali,energon.",
        READERS,
        "choice",
        INDEX_CHOICES,
        "none",
        api='``"none"``, ``"dali"`` (a DALI index beside each ``.tar`` shard), ``"energon"`` '
        '(Megatron-Energon\'s ``<shard>.tar.idx`` and ``.nv-meta/``), or ``"dali,energon"``.',
        group="archive",
    ),
    OptionSpec(
        "energon_split",
        "Energon's split parts: train (every shard), folders (each shard's first folder: "
        "train/, val/, test/) or TRAIN,VAL,TEST ratios of the shards in order (8,1,1).",
        READERS,
        default="train",
        api='Megatron-Energon\'s split parts (``--index energon``): ``"train"`` (every shard), '
        '``"folders"`` (each shard\'s first folder) or ratios such as ``"8,1,1"``.',
        group="archive",
    ),
    OptionSpec(
        "sample_index",
        "Write samples.parquet: each member's sample, shard and source file.",
        READERS,
        "switch",
        default=True,
        api="write ``dst/samples.parquet``: one row per member (sample key, shard, member name, "
        "source name, size, mtime); ``append`` and ``update`` need it.",
        group="archive",
        writing_only=True,
    ),
    OptionSpec(
        "checksum",
        "Checksum of every shard for the manifest (md5: wids' md5sum, the Go spelling's default).",
        READERS,
        "choice",
        (*ALGORITHMS, "none"),
        "xxh128",
        api='the algorithm of every shard\'s checksum in the manifest (``"xxh128"``, '
        '``"blake3"``, ``"sha256"``, ``"md5"``), or ``"none"``.',
        go=("checksum",),
        group="archive",
        writing_only=True,
    ),
    OptionSpec(
        "lookalike_names",
        "Member names that differ only in case or Unicode form (A.jpg, a.jpg): distinct files "
        "on Linux, one on macOS and Windows; refuse, or warn (the Go spelling's default).",
        READERS,
        "choice",
        LOOKALIKES,
        "refuse",
        api="member names that differ only in case or Unicode form (``A.jpg``, ``a.jpg``; "
        'distinct files on Linux, one on macOS and Windows): ``"refuse"`` (a ``DataError``) '
        'or ``"warn"`` (a warning of the plan, as Go ishard\'s spelling).',
        group="run",
    ),
    OptionSpec(
        "duplicates",
        "Files of equal bytes: auto reports those an inventory's checksums or ETags show, "
        "report also hashes files whose sizes collide, drop leaves out all but the first by "
        "name (recorded in the manifest), off (the Go spelling's default).",
        READERS,
        "choice",
        DUPLICATE_MODES,
        "auto",
        api='files whose bytes are the same: ``"auto"`` reports those an inventory\'s '
        'checksum or ETag column shows (``Plan.duplicates``), ``"report"`` also hashes the '
        'files whose sizes collide where it has none, ``"drop"`` leaves out each file past '
        'the first of its group by name (recorded in the manifest), ``"off"``.',
        group="run",
    ),
    OptionSpec(
        "strict",
        "Any warning is an error (exit 1), before anything is written; in a dry run too (for CI).",
        READERS,
        "flag",
        default=False,
        api="any warning of the plan (readers would misread it, an option has no effect) raises "
        ":class:`ishard.StrictError` before anything is written.",
        go=("strict",),
        group="run",
    ),
    *STORE_OPTIONS,
    OptionSpec(
        "dry_run",
        "Print the plan, write nothing (a DST given is checked as the run checks it): a line "
        "per shard and a histogram; =files adds every member, =show_keys their sample keys, "
        "=json all as JSON, =summary the totals alone.",
        RUNNING,
        flag_value="shards",
        metavar="[=files|show_keys|json|summary]",
        short="-n",
    ),
    OptionSpec(
        "overwrite",
        "Allow a non-empty DST; same-named files are replaced.",
        RUNNING,
        "flag",
        default=False,
        api="allow a non-empty ``dst``; same-named files are replaced.",
        go=("overwrite",),
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "resume",
        "Finish an interrupted run into DST: keep its complete shards (checked), write the rest.",
        RUNNING,
        "flag",
        default=False,
        api="finish an interrupted run into ``dst``: keep its complete shards (checked), write "
        "the rest.",
        go=("resume",),
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "append",
        "Add SRC's samples that DST's dataset does not hold, in new shards; refuse changed "
        "or removed ones.",
        RUNNING,
        "flag",
        default=False,
        api="add the samples of ``src`` that the dataset in ``dst`` does not hold, in new shards "
        "numbered on from its last; a sample it holds that changed or went is refused.",
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "update",
        "As --append, and rewrite only the shards whose samples changed or went.",
        RUNNING,
        "flag",
        default=False,
        api="as ``append``, and rewrite only the shards holding samples that changed or went (in "
        "new shards; the replaced ones are removed once the manifest is published).",
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "max_remove",
        "With --update: refuse to remove more than this share of the dataset's samples "
        "(a percent, or all), as when the source is an empty mount.",
        RUNNING,
        default="50",
        metavar="PERCENT|all",
        api="the most an ``update`` may remove, in percent of the dataset's samples (changed "
        'samples do not count), or ``"all"``; past it, a ``DataError`` before anything is '
        "written.",
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "jobs",
        "Shards written at once (default, or 0: CPUs, at most 8; 8 with an object store).",
        RUNNING,
        "int",
        default=0,
        show_default=False,
        api="shards written at once; 0: the CPUs (at most 8), or 8 with a store.",
        go=("jobs",),
        group="run",
        writing_only=True,
        short="-j",
    ),
    OptionSpec(
        "executor",
        "Where shards are written: here, or as Dask tasks on a cluster's workers.",
        RUNNING,
        "choice",
        EXECUTORS,
        "local",
        api='``"local"``, or ``"dask"``: shards are Dask tasks.',
        go=("executor",),
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "scheduler",
        "With --executor dask: tcp://HOST:PORT of a running Dask scheduler (default: a local "
        "cluster of --jobs processes).",
        RUNNING,
        api='with ``executor="dask"``, a running scheduler\'s ``"tcp://HOST:PORT"`` (None: a '
        "local cluster of ``jobs`` processes).",
        go=("scheduler",),
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "tmp_dir",
        "Folder for the temporary files of sorting a big --src-list inventory (default: the "
        "system's, $TMPDIR).",
        RUNNING,
        "path",
        api="the folder where the column engine spills while it sorts a big inventory "
        "(``src_list``); None: the system's temporary folder.",
        group="run",
    ),
    OptionSpec(
        "memory_limit",
        "Memory the column engine may hold while it sorts and groups a big --src-list "
        "inventory; past it, it spills to --tmp-dir (128MiB at least).",
        RUNNING,
        default="512MiB",
        api='bytes (or ``"1GiB"``) the column engine may hold while it sorts and groups a big '
        "inventory, past which it spills to ``tmp_dir``; 128 MiB at least.",
        group="run",
    ),
    OptionSpec(
        "progress",
        "Show progress (default: when stderr is a terminal).",
        RUNNING,
        "switch",
        go=("progress",),
    ),
    OptionSpec(
        "as_json",
        "Print the summary as one JSON object on stdout (a dry run's: the plan's).",
        RUNNING,
        "flag",
        default=False,
        go=("json",),
        flags=("--json",),
    ),
    OptionSpec(
        "quiet",
        "Print nothing on stdout (but --json) and no progress; warnings and errors still go "
        "to stderr, and the exit code tells.",
        RUNNING,
        "flag",
        default=False,
        short="-q",
    ),
    OptionSpec(
        "verbose",
        "Also log each step to stderr (shard: listed, planned, each shard written, the "
        "manifest; verify: each shard checked).",
        RUNNING,
        "flag",
        default=False,
        short="-v",
    ),
    OptionSpec("debug", "Show tracebacks.", RUNNING, "flag", default=False, go=("debug",)),
)
OPTIONS_BY_NAME = {o.name: o for o in SHARD_OPTIONS}
# what a --resume may change (and the manifest leaves out); what ishard.plan() does not take
EXECUTION_ONLY = frozenset(o.name for o in SHARD_OPTIONS if o.execution_only)
WRITING_ONLY = tuple(o.name for o in SHARD_OPTIONS if o.writing_only)


def keyword_docs() -> dict[str, str]:
    """The API's text of each option of a run, by keyword, from the table."""
    return {o.name: o.api for o in SHARD_OPTIONS if o.api}


def go_spellings() -> dict[str, OptionSpec]:
    """Each Go ishard spelling of an option (``max_shard_size``) and its record."""
    return {go: o for o in SHARD_OPTIONS for go in o.go}
