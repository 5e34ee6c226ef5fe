"""How the commands declare and show their options: headings in --help, choices shown and
completed, the options more than one command takes."""

from __future__ import annotations

import click
from click.shell_completion import CompletionItem

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


def sectioned(name: str, sections: dict[str, tuple[str, ...]], examples: str):
    """``click.command`` for a command whose help has headings, examples and defaults shown."""
    return click.command(
        name,
        cls=SectionedCommand,
        sections=sections,
        epilog=examples,
        context_settings={"show_default": True},
    )
