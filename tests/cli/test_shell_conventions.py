"""What a shell user expects of a command: -n for a dry run (as rclone), -j for jobs (as make),
-h anywhere for help (Go's flag package's spellings too), and a refused value from the
environment named by its variable."""

from __future__ import annotations

import click
import pytest
from helpers import FIXTURES, assert_error, invoke_ishard

from ishard.cli import cli

SOURCE = FIXTURES / "imagenet"


# ---------------------------------------------------------------- -n and -j


@pytest.mark.parametrize(
    ("short", "long"),
    [
        (["-n"], ["--dry-run"]),
        (["-n", "summary"], ["--dry-run=summary"]),
        (["-n", "show_keys"], ["--dry-run", "show_keys"]),
        (["-vn", "summary"], ["-v", "--dry-run=summary"]),
        (["-j", "2", "-n"], ["--jobs", "2", "--dry-run"]),
        (["-j2", "-n", "summary"], ["--jobs=2", "--dry-run=summary"]),
    ],
)
def test_short_flags_mean_their_long_ones(tmp_path, short, long):
    """-n is --dry-run (a mode may follow it as it may follow --dry-run), -j is --jobs (its
    value glued on or the next word), and one-letter flags may be written together."""
    by_short = invoke_ishard("shard", SOURCE, tmp_path / "out", *short)
    by_long = invoke_ishard("shard", SOURCE, tmp_path / "out", *long)
    assert by_short.returncode == 0, by_short.stderr
    assert (by_short.stdout, by_short.stderr) == (by_long.stdout, by_long.stderr)
    assert "would write" in by_short.stdout and not (tmp_path / "out").exists()


def test_n_before_dst_takes_nothing_from_it(tmp_path):
    """-n takes no value from the next word: DST stays DST (a dry run checks it)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("x")
    done = invoke_ishard("shard", SOURCE, "-n", tmp_path / "out")
    assert_error(done, 2, f"destination '{tmp_path / 'out'}'", "--overwrite")
    quiet = invoke_ishard("shard", SOURCE, "-qn")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_words_made_of_flag_letters_are_not_flags(tmp_path):
    """Only a word that starts with one dash is read as one-letter flags: a sample key, a
    path or a mode spelt with the letters of -n, -j, -q or -v (``nnn``, ``qv``) is itself."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "nnn.jpg").write_bytes(b"x")
    (src / "qv.jpg").write_bytes(b"y")
    done = invoke_ishard("shard", src, tmp_path / "nq", "-q")
    assert done.returncode == 0, done.stderr
    for key in ("nnn", "qv"):
        found = invoke_ishard("find", tmp_path / "nq", key)
        assert found.returncode == 0, found.stderr
        assert f"{key}.jpg" in found.stdout


def test_n_in_go_spelling_is_go_s_dry_run(tmp_path):
    go = ["-src_bck", SOURCE, f"-dst_bck={tmp_path / 'out'}", "-shard_size=256KiB"]
    by_short = invoke_ishard(*go, "-n")
    by_go = invoke_ishard(*go, "-dry_run")
    assert by_short.returncode == 0, by_short.stderr
    assert by_short.stdout == by_go.stdout and "n01440764_1650.JPEG" in by_short.stdout
    assert not (tmp_path / "out").exists()


def test_j_sets_the_jobs_of_shard_and_verify(tmp_path):
    written = invoke_ishard("shard", SOURCE, tmp_path / "out", "-j", "2", "-q")
    assert written.returncode == 0, written.stderr
    assert len(list((tmp_path / "out").glob("shard-*.tar"))) == 1
    checked = invoke_ishard("verify", tmp_path / "out", "-j2")
    assert checked.returncode == 0 and "ok" in checked.stdout, checked.stderr
    for command in (["shard", SOURCE, "-n"], ["verify", tmp_path / "out"]):
        refused = invoke_ishard(*command, "-j", "-1")
        assert_error(refused, 2, "--jobs '-1' must be a whole number")


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("shard", ["-n, --dry-run [=files|show_keys|json|summary]", "-j, --jobs INTEGER"]),
        ("verify", ["-j, --jobs INTEGER"]),
    ],
)
def test_help_shows_the_short_flags(command, shown):
    text = invoke_ishard(command, "--help").stdout
    for flag in shown:
        assert f"  {flag}" in text, flag


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_no_two_options_of_a_command_share_a_flag(name):
    """A new short flag cannot take one an option (or help) has already: click would let the
    last one win without a word."""
    command = cli.commands[name]
    ctx = click.Context(command)
    flags = [
        flag
        for param in command.get_params(ctx)
        if isinstance(param, click.Option)
        for flag in (*param.opts, *param.secondary_opts)
    ]
    assert sorted(flags) == sorted(set(flags)), name


# ---------------------------------------------------------------- help anywhere


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["-h"], "Usage: ishard [OPTIONS] COMMAND"),
        (["--h"], "Usage: ishard [OPTIONS] COMMAND"),
        (["-help"], "Usage: ishard [OPTIONS] COMMAND"),
        (["-h=true"], "Usage: ishard [OPTIONS] COMMAND"),
        (["-src_bck=data", "-h"], "Usage: ishard shard [OPTIONS] SRC [DST]"),
        (["-h", "-src_bck=data"], "Usage: ishard shard [OPTIONS] SRC [DST]"),
        (["-src_bck=a", "-dst_bck=b", "--h"], "Usage: ishard shard [OPTIONS] SRC [DST]"),
        (["-shard_size=1MiB", "-help"], "Usage: ishard shard [OPTIONS] SRC [DST]"),
        (["-shard_sise=1", "-h"], "Usage: ishard shard [OPTIONS] SRC [DST]"),
        (["shard", "--no-such-option", "-h"], "Usage: ishard shard [OPTIONS] SRC [DST]"),
        (["shard", "data", "-qh"], "Usage: ishard shard [OPTIONS] SRC [DST]"),
        (["verify", "out", "-h"], "Usage: ishard verify [OPTIONS] DST"),
        (["split", "--nodes", "x", "--help"], "Usage: ishard split [OPTIONS] [MANIFEST]"),
    ],
)
def test_help_anywhere_shows_help_on_stdout_and_exits_0(argv, usage):
    """Go's flag package prints its usage for -h, -help, --h and --help wherever they are among
    the flags, and exits 0; so does ishard, whatever else the command line holds (a missing
    -dst_bck, an unknown option, a bad value)."""
    done = invoke_ishard(*argv)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith(usage)


def test_h_as_a_value_or_after_double_dash_is_no_help(tmp_path):
    """The value of an option (--prefix -h) and a word after -- are not asks for help."""
    prefix = invoke_ishard("shard", SOURCE, "-n", "--prefix", "-h")
    assert_error(prefix, 1, "nothing to shard", "prefix '-h'")
    dst = invoke_ishard("shard", SOURCE, "-n", "summary", "--", tmp_path / "-h")
    assert dst.returncode == 0 and dst.stdout.startswith("would write"), dst.stderr


# ---------------------------------------------------------------- the environment named


@pytest.mark.parametrize(
    "command",
    [
        ["shard", "s3://bucket/data", "-n"],
        ["-src_bck=s3://bucket/data", "-dst_bck=s3://bucket/out"],
        ["ls", "s3://bucket/shard-000000.tar"],
        ["verify", "s3://bucket/out"],
        ["split", "s3://bucket/out"],
        ["diff", "s3://bucket/a", "s3://bucket/b"],
        ["find", "s3://bucket/out", "key"],
    ],
)
def test_a_bad_endpoint_from_the_environment_names_its_variable(command):
    """Finding: ISHARD_ENDPOINT_URL's bad value was reported as --endpoint-url's, an option
    the command line never gave; given on the command line, the option is named."""
    from_env = invoke_ishard(*command, env={"ISHARD_ENDPOINT_URL": "notaurl"})
    line = assert_error(from_env, 2, "endpoint URL 'notaurl' (ISHARD_ENDPOINT_URL) has no scheme")
    assert "--endpoint-url" not in line
    given = invoke_ishard(*command, "--endpoint-url", "notaurl")
    assert_error(given, 2, "endpoint URL 'notaurl' (--endpoint-url) has no scheme")


@pytest.mark.parametrize(
    ("command", "variable", "value", "line"),
    [
        (["verify", "out"], "ISHARD_JOBS", "x", "Invalid value for ISHARD_JOBS: 'x' is not"),
        (["shard", SOURCE, "-n"], "ISHARD_JOBS", "-1", "ISHARD_JOBS='-1' must be a whole"),
        (["shard", SOURCE, "-n"], "ISHARD_SORT", "beta", "ISHARD_SORT='beta' is not a sort"),
        (
            ["shard", SOURCE, "out", "--overwrite"],
            "ISHARD_RESUME",
            "1",
            "--overwrite and ISHARD_RESUME cannot be used together — --resume finishes",
        ),
    ],
)
def test_a_refused_value_from_the_environment_is_named_by_its_variable(
    command, variable, value, line
):
    """Where the line says what is wrong, the variable stands for the option's flag (its fix
    still speaks of the option); an option given on the command line keeps its flag."""
    assert_error(invoke_ishard(*command, env={variable: value}), 2, line)
