"""The ``ishard`` command: the only package that imports click."""
