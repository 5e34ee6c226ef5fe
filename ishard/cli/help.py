"""How the commands declare and show their options: headings in --help, choices shown and
completed, the options more than one command takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from click.shell_completion import CompletionItem

from ..options.table import OPTIONS_BY_NAME, OptionSpec
from .environment import EARLIER_VARIABLES

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


def click_option(spec: OptionSpec):
    """The click option of one record of an option table (``options.table``)."""
    earlier = EARLIER_VARIABLES.get(spec.env)
    settings: dict[str, Any] = {
        "help": spec.help,
        "show_default": spec.show_default,
        "envvar": [spec.env, earlier] if earlier else spec.env,
        "show_envvar": True,
    }
    if spec.kind == "flag":
        settings["is_flag"] = True
        if spec.default is not False:  # None: unset unless given
            settings["default"] = spec.default
    elif spec.kind == "repeated":
        settings["multiple"] = True
    else:
        settings["default"] = spec.default
    if spec.kind in _TYPES:
        settings["type"] = _TYPES[spec.kind]
    elif spec.kind == "choice":
        settings["type"] = Choices(spec.choices)
    if spec.flag_value is not None:
        settings.update(is_flag=False, flag_value=spec.flag_value, metavar=spec.metavar)
    return click.option(*spec.spellings, spec.name, **settings)


_TYPES: dict[str, Any] = {"int": int, "path": PATH}


def table_options(specs: Sequence[OptionSpec]):
    """A command's click options, one for each record of ``specs``, in their order."""

    def declare(command):
        for spec in reversed(specs):
            command = click_option(spec)(command)
        return command

    return declare


def table_sections(specs: Sequence[OptionSpec]) -> dict[str, tuple[str, ...]]:
    """The headings of a command's --help (``SectionedCommand``) from its option table: each
    record under its ``section``, in order; --help itself last."""
    sections: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        sections[spec.section] = (*sections.get(spec.section, ()), spec.name)
    last = next(reversed(sections))
    sections[last] += ("help",)
    return sections


# Options more than one command takes, defined once (in ``ishard shard``'s table)
ENDPOINT_URL = click_option(OPTIONS_BY_NAME["endpoint_url"])
STORAGE_OPTION = click_option(OPTIONS_BY_NAME["storage_options"])
PROGRESS = click_option(OPTIONS_BY_NAME["progress"])
DEBUG = click_option(OPTIONS_BY_NAME["debug"])
QUIET = click_option(OPTIONS_BY_NAME["quiet"])
VERBOSE = click_option(OPTIONS_BY_NAME["verbose"])


def reads_stored_shards(command):
    """The options of a command that only reads shards (``ls``, ``diff``): where the store
    is (``--endpoint-url``, ``--storage-option``) and ``--debug``."""
    return ENDPOINT_URL(STORAGE_OPTION(DEBUG(command)))


def sectioned(name: str, sections: dict[str, tuple[str, ...]], examples: str):
    """``click.command`` for a command whose help has headings, examples and defaults shown."""
    return click.command(
        name,
        cls=SectionedCommand,
        sections=sections,
        epilog=examples,
        context_settings={"show_default": True},
    )
