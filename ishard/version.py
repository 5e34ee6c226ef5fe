"""The version of ishard (recorded in manifests, run records and plan records; sent as the user agent)."""

__version__ = "0.1.0"
