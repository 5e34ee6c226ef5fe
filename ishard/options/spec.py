"""One option of ``ishard shard`` as a plain record: its flags, the kind of value it takes, the
command line's default, its help, the heading of ``--help`` it is listed under, its text in the
API's docstrings, its Go spellings, its one-letter flag, its environment variable and what it
decides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# text, int or path: a value of that type; choice: one of ``choices``; flag: on when given
# (``--overwrite``); switch: a pair (``--collapse/--no-collapse``); repeated: given any number
# of times (``--storage-option``)
Kind = Literal["text", "int", "path", "choice", "flag", "switch", "repeated"]
Default = str | int | bool | None
# What an option of a run decides. "plan" (which files, grouped how, cut where, named how) and
# "archive" (how each shard's bytes are written) decide what is written: a run records them
# and a --resume must repeat them; "run" (how the run goes) and "store" (where the stores are,
# how they are reached) may change between a run and its --resume.
Group = Literal["plan", "archive", "run", "store"]


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option: ``name`` is its parameter's (and, for an option of a run, ``Options``'
    field's and the API's keyword's) name, ``flags`` its spellings on the command line (by
    default ``--`` and the name with dashes, a switch's with its ``--no-`` form).

    ``short`` is its one-letter flag (``-j``), declared here only: the command's option and
    its ``--help``, and the Go spelling's reading of ``-j4``, take it from the record.

    ``default`` is the command line's spelling of the default (``"512MiB"``); a flag's
    ``False`` is left unsaid, ``None`` leaves it unset (the reader's own default then).
    ``show_default`` overrides the command's (defaults shown); ``flag_value`` is what a bare
    flag of an option that also takes ``=VALUE`` means, ``metavar`` how its value is shown.
    ``group`` is what an option of a run decides (None: the command's own, its output or the
    dry run); ``writing_only``: only a run takes it (``ishard.shard``, not ``ishard.plan``)."""

    name: str
    help: str
    section: str  # its heading in the command's --help
    kind: Kind = "text"
    choices: tuple[str, ...] = ()
    default: Default = None
    flags: tuple[str, ...] = ()
    show_default: bool | None = None
    flag_value: str | None = None
    metavar: str | None = None
    api: str = ""  # its text in the API's docstrings (an option of a run's)
    go: tuple[str, ...] = ()  # its Go ishard spellings (-shard_size), if Go has it
    group: Group | None = None
    writing_only: bool = False
    short: str | None = None  # its one-letter flag (-j), if it has one

    def __post_init__(self) -> None:
        if not self.flags:
            long = "--" + self.name.replace("_", "-")
            flag = f"{long}/--no-{long[2:]}" if self.kind == "switch" else long
            object.__setattr__(self, "flags", (flag,))

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every flag it is given by on the command line: the one-letter flag first."""
        return (self.short, *self.flags) if self.short else self.flags

    @property
    def env(self) -> str:
        """Its environment variable: ``ISHARD_`` and its long name (``ISHARD_SHARD_SIZE``)."""
        long = next((f for f in self.flags if f.startswith("--")), f"--{self.name}")
        return "ISHARD_" + long[2:].split("/")[0].replace("-", "_").upper()

    @property
    def execution_only(self) -> bool:
        """Whether it only says how a run goes (group run or store): a ``--resume`` may change
        it, and the manifest leaves it out."""
        return self.group in ("run", "store")
