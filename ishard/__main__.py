"""``python -m ishard``."""

from .cli import main

main()
