"""The ``ishard`` command (the only click user): parse, call the library, render, exit — one
module per command, failures mapped to one line and an exit code here."""

from __future__ import annotations

import sys
import traceback

import click

from .. import signals
from ..errors import Interrupted, IshardError, OutOfMemory, UsageError
from ..render import error_line
from ..version import __version__
from .braces import brace_hint, expanded_option
from .diff import diff_command
from .environment import environment_options, from_environment
from .find import cat_command, find_command
from .gospelling import help_asked
from .gospelling import translate as go_translate
from .index import index_command
from .ls import ls_command
from .shard import shard_command
from .split import split_command
from .verify import verify_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ishard")
def cli() -> None:
    """Shard raw datasets into size-bounded archives whose samples never cross a shard."""


for _command in (
    shard_command,
    split_command,
    ls_command,
    verify_command,
    diff_command,
    find_command,
    cat_command,
    index_command,
):
    cli.add_command(_command)
environment_options(cli)


def translate(argv: list[str]) -> list[str]:
    """Go ishard's command line rewritten into ours (``gospelling.translate``), told our
    options; or, when a word of it asks for help, the command line that shows it."""
    return help_asked(argv, _value_options(), cli.commands) or go_translate(
        argv, _long_options(), _value_options()
    )


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


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the command, turn every failure into one line and an exit code."""
    raw = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in raw or "-debug" in raw
    signals.install()  # SIGINT, SIGTERM, SIGHUP: clean up, one line, 130 / 143 / 129
    args: list[str] = []
    code = 0
    try:
        args = translate(raw)
        expanded = expanded_option(args)
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
        from_environment(err)
        message = brace_hint(args, err) or err.format_message().rstrip(".")
        if " — " not in message:  # ours already say how to fix it
            ctx = getattr(err, "ctx", None)
            message += f" — see '{ctx.command_path if ctx else 'ishard'} --help'"
        error_line(message)
        sys.exit(err.exit_code)
    except MemoryError:
        if debug:
            traceback.print_exc()
        error_line(str(OutOfMemory()))
        sys.exit(OutOfMemory.exit_code)
    except Exception as err:  # an unexpected failure: still one line unless --debug
        if debug:
            raise
        error_line(f"unexpected {type(err).__name__}: {err} — rerun with --debug for the traceback")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
