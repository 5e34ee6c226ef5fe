"""The backends that reach stores, each registered by its own module: schemes, opening, errors, install hint."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Backend:
    """One way of reaching stores. Its module registers it (``register``) when imported, and
    imports its client library only when a store is made."""

    name: str
    #: the URL schemes it serves unless ``--storage-option backend=…`` names another, each with
    #: the kind of store it means (``ais`` → ``s3``)
    schemes: Mapping[str, str] = field(default_factory=dict)
    #: a local path's store: ``(path) → Store``
    path: Callable[[str], Any] | None = None
    #: a bucket's store: ``(url, kind, bucket, endpoint_url, options, role) → Store``
    bucket: Callable[..., Any] | None = None
    #: the store of a URL no backend claims the scheme of:
    #: ``(url, scheme, endpoint_url, options, role) → Store``
    other: Callable[..., Any] | None = None
    #: its client's exception class names that another try cannot change
    permanent: tuple[str, ...] = ()
    #: the HTTP status of a store's answer behind an error of its client, where only the
    #: backend can read it (its error's text); None if it says none
    status: Callable[[BaseException], int | None] = lambda err: None
    #: the pip extra that installs it for a kind of store (``gs`` → ``gcs``)
    extras: Mapping[str, str] = field(default_factory=dict)


_BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    """Make ``backend`` known by its name."""
    _BACKENDS[backend.name] = backend


def backend(name: str) -> Backend:
    """The backend registered as ``name`` (``KeyError`` if none)."""
    return _BACKENDS[name]


def backends() -> tuple[Backend, ...]:
    """Every registered backend."""
    return tuple(_BACKENDS.values())


def serving(scheme: str) -> Backend | None:
    """The backend that claims ``scheme`` (None: no backend claims it)."""
    return next((b for b in _BACKENDS.values() if scheme in b.schemes), None)


def opening(what: str) -> Backend:
    """The backend that opens stores of one way of addressing them: ``path`` (a local path)
    or ``other`` (a URL of a scheme no backend claims)."""
    return next(b for b in _BACKENDS.values() if getattr(b, what) is not None)
