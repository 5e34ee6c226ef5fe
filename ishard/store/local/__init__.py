"""A directory of this machine: descriptor reads, forked writers, no link followed, ``flock``."""

from .backend import LocalStore

__all__ = ["LocalStore"]
