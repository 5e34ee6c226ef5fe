"""The options of ``ishard shard`` that say how stores are reached and written (the table's
"Object stores" heading, ``table.SHARD_OPTIONS`` takes them in its order)."""

from __future__ import annotations

from .checks import COMPOSE_MODES
from .spec import OptionSpec

STORES = "Object stores"

STORE_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "endpoint_url",
        "S3-compatible endpoint, e.g. http://127.0.0.1:8333 (ais:// uses $AIS_ENDPOINT/s3).",
        STORES,
        api='an S3-compatible endpoint, e.g. ``"http://127.0.0.1:8333"``.',
        go=("endpoint_url",),
        group="store",
    ),
    OptionSpec(
        "storage_options",
        "KEY=VALUE store setting, e.g. region=eu-west-1, key=…, backend=fsspec (repeatable; "
        "a.b=c nests).",
        STORES,
        "repeated",
        api='passed to the filesystem: a dict, or ``"KEY=VALUE"`` strings (``"a.b=c"`` nests).',
        flags=("--storage-option",),
        group="store",
    ),
    OptionSpec(
        "part_size",
        "Multipart upload part size for S3 destinations.",
        STORES,
        default="16MiB",
        api="the multipart upload part size for store destinations (at least 5MiB).",
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "compose",
        "Members of --compose-min-size and up copied inside the store (S3 UploadPartCopy, "
        "Azure Put Block From URL), not through this machine, where SRC and DST share an S3 "
        "service or Azure account and the shards are .tar: auto, or never.",
        STORES,
        "choice",
        COMPOSE_MODES,
        "auto",
        api='``"auto"``: large members of ``.tar`` shards are copied inside the store where '
        "SRC and DST share an S3 service or Azure account (byte for byte the shard written "
        "through the client); "
        '``"never"``: every byte passes through this machine.',
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "compose_min_size",
        "Smallest member copied inside the store by --compose auto (at least 10MiB).",
        STORES,
        default="16MiB",
        api="the smallest member ``compose`` copies inside the store (at least 10MiB).",
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "read_buffer",
        "Bytes fetched ahead from a store, across all writers.",
        STORES,
        default="256MiB",
        api="bytes fetched ahead from a store, across all writers.",
        group="run",
        writing_only=True,
    ),
    OptionSpec(
        "retries",
        "Retries of a failed store request after its first try (0: none).",
        STORES,
        "int",
        default=5,
        api="retries of a failed store request after its first try (0: none).",
        group="run",
        writing_only=True,
    ),
)
