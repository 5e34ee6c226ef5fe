"""One option of ``ishard shard`` as a plain record: its flags, the kind of value it takes, the
command line's default, its help, the heading of ``--help`` it is listed under, its text in the
API's docstrings, its Go spellings and its environment variable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..model import OPTION_GROUPS, WRITING_ONLY

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
    api: str = ""  # its text in the API's docstrings (an option of a run's)
    go: tuple[str, ...] = ()  # its Go ishard spellings (-shard_size), if Go has it

    @property
    def env(self) -> str:
        """Its environment variable: ``ISHARD_`` and its long name (``ISHARD_SHARD_SIZE``)."""
        long = next((f for f in self.flags if f.startswith("--")), f"--{self.name}")
        return "ISHARD_" + long[2:].split("/")[0].replace("-", "_").upper()

    @property
    def group(self) -> str | None:
        """What the option decides (``model.OPTION_GROUPS``); None: the command's own (its
        output, the dry run), no option of a run."""
        return next((g for g, names in OPTION_GROUPS.items() if self.name in names), None)

    @property
    def writing_only(self) -> bool:
        """Whether only a run takes it (``ishard.shard``, not ``ishard.plan``)."""
        return self.name in WRITING_ONLY
