"""``ISHARD_<OPTION>`` environment variables: one for every option of every command, and the
variable named in a refusal of a value that came from one."""

from __future__ import annotations

import functools
import os

import click

from ..errors import UsageError

ENVIRONMENT = click.core.ParameterSource.ENVIRONMENT
COMMAND_LINE = click.core.ParameterSource.COMMANDLINE
# Variables read before each option's own name was (the parameter's name): still read
EARLIER_VARIABLES = {"ISHARD_STORAGE_OPTION": "ISHARD_STORAGE_OPTIONS"}


def variable_of(ctx: click.Context, param: click.Parameter) -> str | None:
    """The environment variable ``param``'s value came from, if it came from one."""
    if not param.name or ctx.get_parameter_source(param.name) is not ENVIRONMENT:
        return None
    names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
    return next((n for n in names if os.environ.get(n)), None)


def given_options(ctx: click.Context) -> set[str]:
    """The options the user gave, on the command line or in the environment (not left at
    their defaults): a run that continues a dataset takes the others from its record."""
    return {
        p.name
        for p in ctx.command.params
        if p.name and ctx.get_parameter_source(p.name) in (COMMAND_LINE, ENVIRONMENT)
    }


def environment_named(command):
    """Run ``command`` naming the environment variable in a refusal of a value that came from
    one (the library names the option: ``--shard-size 'x' …``)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UsageError as err:
            ctx = click.get_current_context()
            for param in ctx.command.params:
                variable = variable_of(ctx, param)
                if variable and any(f"{o} " in f"{err} " for o in param.opts):
                    what, dash, fix = str(err).partition(" — ")
                    raise UsageError(f"{what} (from {variable}){dash}{fix}") from None
            raise

    return run


def from_environment(err: click.ClickException) -> str:
    """`` (from ISHARD_X)`` when the bad value came from the environment, not the command line."""
    param, ctx = getattr(err, "param", None), getattr(err, "ctx", None)
    if param is None or ctx is None:
        return ""
    variable = variable_of(ctx, param)
    return f" (from {variable})" if variable else ""


def environment_options(group: click.Group) -> None:
    """Every option of every command can also be set as ``ISHARD_<OPTION>``, the option's long
    name (``--shard-size`` is ``ISHARD_SHARD_SIZE``, ``--overwrite`` is ``ISHARD_OVERWRITE=1``,
    ``--storage-option`` is ``ISHARD_STORAGE_OPTION``, a repeated option's values separated
    by whitespace); the command line wins. ``--help`` shows each option's variable."""
    for command in group.commands.values():
        for param in command.params:
            if isinstance(param, click.Option) and param.envvar is None and param.name:
                long = next((o for o in param.opts if o.startswith("--")), f"--{param.name}")
                variable = "ISHARD_" + long[2:].replace("-", "_").upper()
                earlier = EARLIER_VARIABLES.get(variable)
                param.envvar = [variable, earlier] if earlier else variable
                param.show_envvar = True
