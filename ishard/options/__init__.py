"""The options: checked once, for the command line and the Python API alike (the `Options` record, each option's own check, the fixed choices as types)."""
