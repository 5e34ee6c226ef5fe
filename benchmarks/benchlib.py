"""Small helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``, so
this folder is on ``sys.path``)."""

from __future__ import annotations

import os
import platform

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
