"""A new option is one record in the option table (its flag, group, API help, Go spelling and
environment variable), its field in ``Options`` and its keyword type: everything else reads them."""

from __future__ import annotations

import dataclasses

import click
import pytest
from click.testing import CliRunner

import ishard
from ishard import api
from ishard.cli import gospelling
from ishard.cli.environment import environment_options
from ishard.cli.help import table_options
from ishard.errors import UsageError
from ishard.options import record, table

FROBNICATE = table.OptionSpec(
    "frobnicate",
    ("--frobnicate",),
    "Frobnicate every shard.",
    table.ARCHIVES,
    "flag",
    default=False,
    api="frobnicate every shard.",
    go=("frobnicate",),
)


@pytest.fixture
def frobnicate(monkeypatch):
    """The made-up option declared at test time: its record, its field, its keyword type."""
    monkeypatch.setattr(table, "SHARD_OPTIONS", (*table.SHARD_OPTIONS, FROBNICATE))
    wider = dataclasses.make_dataclass(
        "Options",
        [("frobnicate", "bool", dataclasses.field(default=False))],
        bases=(record.Options,),
        frozen=True,
    )
    monkeypatch.setattr(record, "Options", wider)
    monkeypatch.setitem(api.PlanKeywords.__annotations__, "frobnicate", "bool")


def test_a_new_record_reaches_the_command_its_variable_and_go(frobnicate):
    @click.group()
    def group():
        pass

    @group.command()
    @table_options(table.SHARD_OPTIONS)
    def shard(**options):
        click.echo(f"frobnicate={options['frobnicate']}")

    environment_options(group)
    runner = CliRunner()
    shown = runner.invoke(group, ["shard", "--help"])
    assert shown.exit_code == 0
    assert "--frobnicate" in shown.output and "Frobnicate every shard." in shown.output
    assert "ISHARD_FROBNICATE" in shown.output
    told = runner.invoke(group, ["shard"], env={"ISHARD_FROBNICATE": "1"})
    assert told.exit_code == 0 and "frobnicate=True" in told.output
    assert "--frobnicate" in gospelling.translate(["-src_bck=a", "-dst_bck=b", "-frobnicate"])
    assert "--frobnicate" not in gospelling.translate(
        ["-src_bck=a", "-dst_bck=b", "-frobnicate=false"]
    )


def test_a_new_record_reaches_the_api_and_options(frobnicate, tmp_path):
    assert table.keyword_docs()["frobnicate"] == "frobnicate every shard."
    (tmp_path / "a.jpg").write_bytes(b"x")
    assert ishard.plan(tmp_path, frobnicate=True).options["frobnicate"] is True
    assert record.make_options(frobnicate=True).frobnicate is True
    with pytest.raises(UsageError, match="frobnicate must be True or False"):
        ishard.plan(tmp_path, frobnicate="yes")


def test_every_option_of_a_run_has_its_api_help():
    """The API's docs come from the table: every option of a run says what it means there."""
    docs = table.keyword_docs()
    assert sorted(docs) == sorted(f.name for f in dataclasses.fields(record.Options))
    assert all(text.endswith(".") for text in docs.values())
