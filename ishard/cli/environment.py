"""``ISHARD_<OPTION>`` environment variables: one for every option of every command, and the
variable named in a refusal of a value that came from one."""

from __future__ import annotations

import functools
import os

import click

from ..errors import UsageError
from ..options.spelling import respelt

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
    one (the library names the option's flag: ``--shard-size 'x' …``)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UsageError as err:
            named = by_variable(str(err), click.get_current_context())
            if named == str(err):
                raise
            raise UsageError(named) from None

    return run


def by_variable(message: str, ctx: click.Context) -> str:
    """``message`` with each flag whose value came from the environment named by its variable
    where the message says what is wrong (``ISHARD_SHARD_SIZE='x' is …``), not in its fix
    (after `` — ``), which speaks of the option (``options.spelling``)."""
    variables = {
        flag: variable
        for param in ctx.command.params
        if (variable := variable_of(ctx, param))
        for flag in param.opts
        if flag.startswith("--")
    }
    what, dash, fix = message.partition(" — ")
    return respelt(what, variables) + dash + fix


def from_environment(err: click.ClickException) -> None:
    """Name the variable in click's refusal of a value that came from the environment
    (``Invalid value for ISHARD_JOBS: …``), where click names the flag."""
    param, ctx = getattr(err, "param", None), getattr(err, "ctx", None)
    if isinstance(err, click.BadParameter) and param is not None and ctx is not None:
        err.param_hint = variable_of(ctx, param) or err.param_hint


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
