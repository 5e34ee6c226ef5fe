"""The backends that reach stores, each registered by its own module: schemes, opening, errors, advice, install hint."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: a store's URL-valued settings: the backend's names of one setting, then the environment
#: variables it is read from when it is not given
UrlSettings = tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]


@dataclass(frozen=True)
class Kind:
    """A kind of store a backend reaches (``s3``, ``gs``, ``az``), as messages and checks
    need it: what its user sets for credentials (``credentials``, the advice of a message
    about them), what it calls a bucket (``container``) and its URL-valued settings, each
    checked before a store is made."""

    credentials: str
    container: str = "bucket"
    url_settings: UrlSettings = ()


@dataclass(frozen=True)
class Backend:
    """One way of reaching stores. Its module registers it (``register``) when imported, and
    imports its client library only when a store is made."""

    name: str
    #: the URL schemes it serves unless ``--storage-option backend=…`` names another, each with
    #: the kind of store it means (``s3a`` → ``s3``)
    schemes: Mapping[str, str] = field(default_factory=dict)
    #: schemes it serves only until another backend claims them (``ais`` through AIStore's S3
    #: gateway, until a backend of AIStore's own API is registered)
    fallbacks: Mapping[str, str] = field(default_factory=dict)
    #: a local path's store: ``(path) → Store``
    path: Callable[[str], Any] | None = None
    #: a bucket's store: ``(url, kind, bucket, endpoint_url, options, role) → Store``
    bucket: Callable[..., Any] | None = None
    #: the store of a URL no backend claims the scheme of:
    #: ``(url, scheme, endpoint_url, options, role) → Store``
    other: Callable[..., Any] | None = None
    #: the endpoint a scheme's URLs reach, by scheme: ``(url, endpoint_url, role) → endpoint``
    #: (``ais`` → ``$AIS_ENDPOINT/s3``)
    endpoints: Mapping[str, Callable[[str, str | None, str], str]] = field(default_factory=dict)
    #: the kinds of store it knows (credentials advice, URL settings)
    kinds: Mapping[str, Kind] = field(default_factory=dict)
    #: its client's exception class names that another try cannot change
    permanent: tuple[str, ...] = ()
    #: the HTTP status of a store's answer behind an error of its client, where only the
    #: backend can read it (its error's text); None if it says none
    status: Callable[[BaseException], int | None] = lambda err: None
    #: the pip extra that installs it for a kind of store (``gs`` → ``gcs``)
    extras: Mapping[str, str] = field(default_factory=dict)

    def kind_of(self, scheme: str) -> str:
        """The kind of store ``scheme`` means here (``KeyError``: it serves no such scheme)."""
        return {**self.fallbacks, **self.schemes}[scheme]


_BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    """Make ``backend`` known by its name.

    Raises:
        ValueError: another backend claims one of its schemes (a scheme another serves as a
            fallback may be claimed), or serves one of its fallbacks.
    """
    for other in _BACKENDS.values():
        if other.name == backend.name:
            continue
        taken = [s for s in backend.schemes if s in other.schemes]
        taken += [s for s in backend.fallbacks if s in other.schemes or s in other.fallbacks]
        if taken:
            raise ValueError(
                f"backend {backend.name!r} claims the scheme {taken[0]!r}, which backend "
                f"{other.name!r} serves — claim another scheme, or name {taken[0]!r} among "
                f"{other.name!r}'s fallbacks"
            )
    _BACKENDS[backend.name] = backend


def backend(name: str) -> Backend:
    """The backend registered as ``name`` (``KeyError`` if none)."""
    return _BACKENDS[name]


def backends() -> tuple[Backend, ...]:
    """Every registered backend."""
    return tuple(_BACKENDS.values())


def serving(scheme: str) -> Backend | None:
    """The backend that claims ``scheme``, else the one that serves it as a fallback (None: no
    backend serves it)."""
    claims = (b for b in _BACKENDS.values() if scheme in b.schemes)
    fallbacks = (b for b in _BACKENDS.values() if scheme in b.fallbacks)
    return next(claims, None) or next(fallbacks, None)


def kind(name: str) -> Kind | None:
    """What a backend knows of the kind of store ``name`` (None: no backend knows it)."""
    return next((b.kinds[name] for b in _BACKENDS.values() if name in b.kinds), None)


def opening(what: str) -> Backend:
    """The backend that opens stores of one way of addressing them: ``path`` (a local path)
    or ``other`` (a URL of a scheme no backend claims)."""
    return next(b for b in _BACKENDS.values() if getattr(b, what) is not None)
