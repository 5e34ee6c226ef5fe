"""One directory read in native code (``_scan.c``)."""

import os

def scan(path: str | os.PathLike[str]) -> tuple[bytes, bytes, bytes]: ...
