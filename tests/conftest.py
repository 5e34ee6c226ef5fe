"""The tests' shared fixtures and hooks: the servers (as plugins), the S3 test server's
environments and client, fault-trial counts, the quick loop's marks; the helpers are in
helpers.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import WAIT, run_ishard, s3_env

pytest_plugins = ["s3server", "azurite", "gcs_emulator"]


# The object-store tests' view of the S3 test server (``s3_server``, s3server.py).
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(scope="session")
def clean_env(tmp_path_factory) -> dict[str, str]:
    """This environment without AWS settings or proxies, with empty AWS config files, a bare
    HOME and no instance-metadata lookups (nothing may leave 127.0.0.1)."""
    home = tmp_path_factory.mktemp("home")
    (home / "aws-config").write_text("")
    (home / "aws-credentials").write_text("")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "AIS_")) and k.lower() not in PROXY_VARS
    }
    env.update(
        HOME=str(home),
        AWS_CONFIG_FILE=str(home / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "aws-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


@pytest.fixture
def cli(s3_server, clean_env):
    """``cli(*args, env={...}, creds=True, endpoint=True)``: run ishard against the test server.

    Credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (unless ``creds=False``);
    ``--endpoint-url`` is appended (unless ``endpoint=False``); ``env`` values of None unset.
    A ``shard`` keeps the source's names (``--member-names original``) unless told otherwise:
    the tests check members by their object names.
    """

    def run(*args, env: dict | None = None, creds: bool = True, endpoint: bool = True):
        full = dict(clean_env)
        if creds:
            full.update(
                AWS_ACCESS_KEY_ID=s3_server.access_key,
                AWS_SECRET_ACCESS_KEY=s3_server.secret_key,
            )
        for key, value in (env or {}).items():
            if value is None:
                full.pop(key, None)
            else:
                full[key] = value
        extra = ("--endpoint-url", s3_server.endpoint_url) if endpoint else ()
        if args and args[0] == "shard" and "--member-names" not in args:
            extra += ("--member-names", "original")
        return run_ishard(*args, *extra, env=full)

    return run


@pytest.fixture
def s3env(s3_server, tmp_path_factory) -> dict[str, str]:
    """An environment with the test server's credentials and nothing that could lead past
    127.0.0.1 (no AWS, AIStore or ishard settings from the user, no proxies, no instance
    metadata), and a bare HOME."""
    return {**s3_env(s3_server), "HOME": str(tmp_path_factory.mktemp("home"))}


@pytest.fixture
def client(s3_server):
    """A boto3 S3 client of the test server."""
    return s3_server.client()


@pytest.fixture
def processes():
    """Starts processes in sessions of their own; kills those still running after the test."""
    started: list[subprocess.Popen] = []

    def start(*argv: str, env: dict | None = None) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, *argv], env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=WAIT)


# Fault trials counted by the tests that run them (e.g. the kill -9 loop), so the closing lines
# of a plain ``python -m pytest -q`` say how many ran and how many resumed byte-identical.
_FAULT_TRIALS: dict[str, list[int]] = {}


@pytest.fixture
def fault_trials():
    """``record(kind, trials, identical, whole=0)``: count fault trials (and the shards found
    whole under final names right after the fault) for the end-of-run summary."""

    def record(kind: str, trials: int, identical: int, whole: int = 0) -> None:
        _add_fault_trials({kind: [trials, identical, whole]})

    return record


def _add_fault_trials(counts: dict[str, list[int]]) -> None:
    for kind, numbers in counts.items():
        done = _FAULT_TRIALS.setdefault(kind, [0, 0, 0])
        for i, n in enumerate(numbers):
            done[i] += n


def pytest_sessionfinish(session):
    # a pytest-xdist worker hands its counts to the controller, which prints the summary
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["fault_trials"] = dict(_FAULT_TRIALS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    # on the pytest-xdist controller: a worker is done; add its fault-trial counts
    _add_fault_trials(getattr(node, "workeroutput", {}).get("fault_trials", {}))


def pytest_terminal_summary(terminalreporter):
    for kind, (trials, identical, whole) in _FAULT_TRIALS.items():
        terminalreporter.write_line(
            f"{kind} trials: {trials}, resumed outputs identical: {identical} (shards already "
            f"under a final name after the {kind}, each byte-identical: {whole})"
        )


def pytest_configure(config):
    # no test may ask a cloud's instance metadata service (an address off 127.0.0.1)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    config.addinivalue_line(
        "markers",
        "damaged_destination: the test leaves a destination broken on purpose, so "
        "every_destination_verifies does not check it",
    )
    config.addinivalue_line(
        "markers",
        "slow: starts a server or a cluster, kills runs or draws many examples; "
        "`pytest -m 'not slow'` is the quick loop (README)",
    )


# The quick loop leaves out what needs a real server (S3, GCS, Azure), a Dask cluster, runs
# killed and resumed, or thousands of drawn examples: those files, and any test that asks
# for a server's fixture.
SLOW_FILES = {
    "test_claim.py", "test_columns.py", "test_dask.py", "test_dask_stops.py", "test_faults.py",
    "test_inventory_sources.py",
    "test_gcs.py", "test_lease.py", "test_overwrite.py", "test_plan_engine.py", "test_resume.py",
    "test_runstate.py", "test_s3.py", "test_s3_faults.py", "test_s3server.py",
    "test_split_streaming_reference.py", "test_store_contract.py", "test_store_messages.py",
    "test_store_settings.py",
}  # fmt: skip
SLOW_TESTS = {  # a few seconds to half a minute each
    "test_member_of_8gib_or_more_round_trips_through_the_cli",
    "test_every_example_prints_what_the_page_shows",
    "test_heavy_patterns_split_into_smaller_sets_quietly",
    "test_patterns_too_heavy_to_search_together_are_refused",
}
SERVER_FIXTURES = {"s3_server", "s3_bucket", "fake_gcs", "gcs_bucket", "azurite", "azure_container"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        slow = item.path.name in SLOW_FILES or item.originalname in SLOW_TESTS
        if slow or SERVER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def engine_reads():
    """How a property test's examples ended (``test_columns.agree_or_hand_back``: "same",
    "handed back", "both refuse"). A hand-back always agrees, so after the test at least a
    tenth of the examples must have been listed by the column engine itself: a source it
    always hands back fails."""
    from collections import Counter

    seen: Counter[str] = Counter()
    yield seen
    assert seen["same"] >= 0.1 * sum(seen.values()) > 0, seen


@pytest.fixture
def every_destination_verifies(request, tmp_path):
    """After the test, every finished destination it left under ``tmp_path`` (a folder with a
    ``manifest.json`` and no run in progress) passes ``ishard verify --deep``."""
    yield
    if request.node.get_closest_marker("damaged_destination"):
        return
    from ishard.readback.verify import verify

    for manifest in sorted(tmp_path.rglob("manifest.json")):
        dst = manifest.parent
        if (dst / ".ishard-run").exists() or manifest.is_symlink():
            continue  # a run still to be resumed, or a planted link: not a finished run
        result = verify(dst, deep=True)
        assert result.ok, (str(dst.relative_to(tmp_path)), result.problems)
