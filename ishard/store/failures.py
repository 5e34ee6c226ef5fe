"""The one-line errors a user sees for a store's failures: what kind of failure it was
(``Store.classify``), where the store was reached, and what to do."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import IshardError, OutOfMemory, SourceError, UsageError, WriteError
from ..names import abridged
from . import registry


@dataclass(frozen=True)
class Reached:
    """How a store was reached, for a message: ``scheme`` (``s3``, ``gs``, ``az``, … which
    credentials to advise), ``endpoint`` (where requests went, no credentials), ``token``
    (where a session token came from, if one was sent) and ``answer`` (the store's error
    code and message, if it gave them)."""

    scheme: str = ""
    endpoint: str | None = None
    token: str | None = None
    answer: str | None = None


def out_of_memory(where: str, role: str) -> OutOfMemory:
    """A ``MemoryError`` met while using ``where`` as ``role``: no store's failure."""
    verb = "writing" if role == "destination" else "reading"
    return OutOfMemory(f"while {verb} {role} {where!r}")


def storage_error(
    kind: str, err: BaseException, where: str, role: str, reached: Reached = Reached()
) -> IshardError:
    """The message for a failure of ``kind`` (see :meth:`Store.classify`)."""
    failure = WriteError if role == "destination" else SourceError
    known = registry.kind(reached.scheme)
    which = known.credentials if known else "the credentials (--storage-option)"
    token = (
        f"; a session token is set ({reached.token}): check it, or unset it if the keys need none"
        if reached.token
        else ""
    )
    answer = f" ({reached.answer})" if reached.answer else ""
    where = abridged(where)
    if kind == "missing":
        fix = (
            "create it first or fix the URL" if role in ("source", "destination") else "fix the URL"
        )
        return UsageError(f"{role} {where!r} does not exist (no such bucket or path) — {fix}")
    if kind == "denied":
        return failure(
            f"access to {role} {where!r} was denied{answer} — check the credentials ({which}) "
            f"and the {known.container if known else 'store'}'s permissions{token}"
        )
    if kind == "rejected":
        return failure(
            f"the credentials for {role} {where!r} were refused{answer} — check {which}{token}"
        )
    if kind == "credentials":
        return failure(f"no credentials found for {role} {where!r} — set {which}")
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if kind in REFUSALS:  # the store answered: no network failure
        said = "; ".join(filter(None, (text, reached.answer)))
        action = "the write of" if role == "destination" else f"a read of {role}"
        return failure(f"the store refused {action} {where!r} ({said}) — {REFUSALS[kind]}")
    at = f" at {reached.endpoint}" if reached.endpoint else ""
    return failure(
        f"cannot reach {role} {where!r}{at}: {text} — check the endpoint and the "
        "network, then run again"
    )


# What to do when the store answered a request with a refusal (a 4xx or 501 answer), by kind
# (see :meth:`Store.classify`)
REFUSALS = {
    "invalid": "check the object's name (its length and characters: a store may take less "
    "than S3's 1,024 bytes a key, or 255 bytes a part between slashes) and the store options "
    "(--storage-option), then run again",
    "refused": "a condition of the request did not hold (another writer changed the object "
    "meanwhile): check that no other run writes there, then run again",
    "unsupported": "the store does not implement this request — use a store that does, or "
    "check the endpoint (--endpoint-url)",
}
