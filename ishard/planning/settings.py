"""What planning reads of a run's options, as one frozen value of its own stage, built by
``options/`` from the checked options (``options.settings.plan_settings``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .cut import Bounds, Order
from .ekm import Ekm
from .templates import NameTemplate


@dataclass(frozen=True)
class PlanSettings:
    """How a source is listed, grouped into samples, checked, cut and named, and what the plan
    records and warns about. A field named as an option holds that option's checked value."""

    # listing
    prefix: str
    src_list: str | None
    include_hidden: bool
    follow_symlinks: bool
    retries: int
    endpoint_url: str | None
    storage_options: tuple[str, ...] | dict  # as checked: parsed where a store is opened
    tmp_dir: str | None
    memory_limit: int
    # samples and their names
    sample_key_pattern: str
    parsed_ekm: Ekm | None  # parsed once
    sample_exts: tuple[str, ...]
    missing_extension_action: str
    member_names: str
    index: str
    lookalike_names: str
    duplicates: str
    # cutting and naming
    bounds: Bounds
    order: Order
    collapse: bool
    num_shards: int | None
    shards_multiple_of: int | None
    template: NameTemplate
    ext: str
    # what the plan records and tells
    recorded: dict  # the options as the plan records them (``Plan.options``)
    # per option that only some formats read, given: its warning and those formats' extensions
    idle: tuple[tuple[str, tuple[str, ...]], ...]
    strict: bool

    @property
    def renamed(self) -> bool:
        """Whether members are named ``<sample key>.<extension>`` (``--member-names sample``)."""
        return self.member_names == "sample"

    def idle_warnings(self, names: Sequence[str]) -> list[str]:
        """Options given that change nothing for the formats of these shard names."""
        return [text for text, exts in self.idle if not any(n.endswith(exts) for n in names)]

    def count_warning(self, fullest: int) -> list[str]:
        """A sample count from ``--shard-size`` that no shard reached (``fullest``: the most
        samples in one): perhaps bytes were meant."""
        count = self.bounds.count
        if self.bounds.size is not None or count is None or fullest >= count or self.num_shards:
            return []
        return [
            (
                f"--shard-size {count} counts samples (a number without a unit), and no shard "
                f"reached {count} samples — if you meant bytes, write {count}B"
            )
        ]
