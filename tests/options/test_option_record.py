"""A new option is one record in the option table (its flag, group, API help, Go spelling and
environment variable), its field in ``Options`` and its keyword type beside it: everything else
reads them, and a test fails when one of the three is forgotten."""

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
    "Frobnicate every shard.",
    table.ARCHIVES,
    "flag",
    default=False,
    api="frobnicate every shard.",
    go=("frobnicate",),
    group="archive",
)
PLACES = ("record", "field", "keyword")


def declare(monkeypatch, places=PLACES) -> None:
    """Declare the made-up option at test time, in ``places``: its record in the option table,
    its field of ``Options``, its keyword type (in ``PlanKeywords``, and so ``ShardKeywords``,
    which holds every key of the class it extends)."""
    if "record" in places:
        monkeypatch.setattr(table, "SHARD_OPTIONS", (*table.SHARD_OPTIONS, FROBNICATE))
    if "field" in places:
        wider = dataclasses.make_dataclass(
            "Options",
            [("frobnicate", "bool", dataclasses.field(default=False))],
            bases=(record.Options,),
            frozen=True,
        )
        monkeypatch.setattr(record, "Options", wider)
    if "keyword" in places:
        for keywords in (record.PlanKeywords, record.ShardKeywords):
            monkeypatch.setitem(keywords.__annotations__, "frobnicate", "bool")


@pytest.fixture
def frobnicate(monkeypatch):
    """The made-up option, declared in all three places."""
    declare(monkeypatch)


def apart() -> list[str]:
    """Where the three declarations of the options of a run disagree: an option with a group
    in the table but no field of ``Options`` or the other way, a field with no keyword type
    (``ShardKeywords`` takes every option), or ``PlanKeywords`` not holding exactly the records
    that a plan takes (those not ``writing_only``)."""
    grouped = [o.name for o in table.SHARD_OPTIONS if o.group]
    fields = [f.name for f in dataclasses.fields(record.Options)]
    planned = {o.name for o in table.SHARD_OPTIONS if o.group and not o.writing_only}
    found = [
        f"{n}: twice in the table" for n in sorted({n for n in grouped if grouped.count(n) > 1})
    ]
    found += [f"{n}: a record but no field" for n in sorted(set(grouped) - set(fields))]
    found += [f"{n}: a field but no record" for n in sorted(set(fields) - set(grouped))]
    shard_keywords = set(record.ShardKeywords.__annotations__)
    found += [f"{n}: a field but no keyword type" for n in sorted(set(fields) - shard_keywords)]
    found += [f"{n}: a keyword type but no field" for n in sorted(shard_keywords - set(fields))]
    plan_keywords = set(record.PlanKeywords.__annotations__)
    found += [f"{n}: plan() takes it, not in PlanKeywords" for n in sorted(planned - plan_keywords)]
    found += [f"{n}: in PlanKeywords, writing only" for n in sorted(plan_keywords - planned)]
    return found


def test_the_table_the_fields_and_the_keyword_types_name_the_same_options():
    """Each option of a run has its record (with its group) in the option table, its field of
    ``Options`` and its keyword type, in ``PlanKeywords`` unless only a run takes it; the API
    takes the types beside ``Options``."""
    assert apart() == []
    assert (api.PlanKeywords, api.ShardKeywords) == (record.PlanKeywords, record.ShardKeywords)


def test_a_new_option_declared_in_its_three_places_agrees(frobnicate):
    assert apart() == []


@pytest.mark.parametrize("forgotten", PLACES)
def test_a_new_option_with_a_place_forgotten_is_told(monkeypatch, forgotten):
    declare(monkeypatch, [p for p in PLACES if p != forgotten])
    told = apart()
    assert told and all(line.startswith("frobnicate: ") for line in told), told


def test_a_writing_only_option_is_no_keyword_of_plan(monkeypatch):
    """A record saying only a run takes the option, while ``PlanKeywords`` has it, is told."""
    only_run = dataclasses.replace(FROBNICATE, writing_only=True)
    monkeypatch.setattr(table, "SHARD_OPTIONS", (*table.SHARD_OPTIONS, only_run))
    declare(monkeypatch, ["field", "keyword"])
    assert apart() == ["frobnicate: in PlanKeywords, writing only"]


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
