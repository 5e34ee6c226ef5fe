"""The URLs a user gives for stores, checked before any store is built: endpoints (which
object_store cannot refuse, it stops the process on a malformed one) and credentials in a URL
(never taken, never shown)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ..errors import UsageError

# What an endpoint may hold: RFC 3986's characters (anything else percent-encoded).
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:/?#\[\]@%]*")
_HOST = re.compile(r"[A-Za-z0-9\-._~]+|\[[0-9A-Fa-f:.]+\]")


def redacted(url: str) -> str:
    """``url`` with whatever precedes an ``@`` in its authority (a user, a password, keys)
    shown as ``***``: ``s3://KEY:SECRET@bucket/x`` → ``s3://***@bucket/x``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return url
    return f"{scheme}://***@{authority.rpartition('@')[2]}{slash}{path}"


def check_endpoint(value: object, origin: str) -> str:
    """``value`` if it is an endpoint object_store can send requests to: ``http`` or
    ``https``, a host, a port from 1 to 65535 if any, a path if any; no credentials, query or
    fragment.

    Raises:
        UsageError: naming the value (credentials hidden), where it came from, and the fix.
    """
    text = str(value)
    problem, fix = _endpoint_problem(text)
    if problem:
        raise UsageError(f"endpoint URL {redacted(text)!r} ({origin}) {problem} — {fix}")
    return text


def _endpoint_problem(text: str) -> tuple[str, str]:
    """What is wrong with the endpoint ``text`` and how to write it ("" if nothing)."""
    example = "write it as http://HOST:PORT or https://HOST[:PORT][/PATH]"
    if not text or not _URL_CHARS.fullmatch(text):
        return "holds a space, a control or a non-ASCII character", (
            "percent-encode it (a host in its ASCII form), or " + example
        )
    if "://" not in text:
        return "has no scheme", f"write http://{text} or https://{text}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return "has a port that is not a number from 1 to 65535 (or a broken [IPv6] host)", example
    if parts.scheme.lower() not in ("http", "https"):
        return f"has the scheme {parts.scheme!r}, not http or https", example
    if "@" in parts.netloc:
        return "holds credentials", (
            "give them as the store's credentials (environment, profile or --storage-option), "
            "never in a URL"
        )
    if not parts.hostname or not _HOST.fullmatch(_host(parts.netloc)):
        return "names no host (or one with characters a host cannot have)", example
    if port == 0:
        return "has the port 0", example
    if parts.query or parts.fragment or "?" in text or "#" in text:
        return "has a query or a fragment", example
    return "", ""


def _host(netloc: str) -> str:
    """The host of an authority without credentials: ``[::1]:80`` → ``[::1]``."""
    if netloc.endswith("]") or ":" not in netloc:
        return netloc
    return netloc.rpartition(":")[0]
