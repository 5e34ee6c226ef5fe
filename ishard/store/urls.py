"""The URLs a user gives for stores, checked before any store is built: endpoints (which
object_store cannot refuse, it stops the process on a malformed one), credentials in a URL
(never taken, never shown), and the endpoint a store's requests go to, as a message names it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import UsageError

# What an endpoint may hold: RFC 3986's characters (anything else percent-encoded).
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:/?#\[\]@%]*")
_HOST = re.compile(r"[A-Za-z0-9\-._~]+|\[[0-9A-Fa-f:.]+\]")

# Each store's URL-valued settings: obstore's names of one setting, then the environment
# variables obstore reads it from when it is not given. The S3 endpoint is resolved by
# ishard itself (``credentials._s3_endpoint``), so it is always given.
URL_SETTINGS: dict[str, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = {
    "s3": (
        (("endpoint", "aws_endpoint_url_s3"), ()),
        (("metadata_endpoint", "aws_metadata_endpoint"), ("AWS_METADATA_ENDPOINT",)),
        (("endpoint_url_sts", "aws_endpoint_url_sts"), ("AWS_ENDPOINT_URL_STS",)),
    ),
    "gs": ((("base_url", "google_base_url"), ("GOOGLE_BASE_URL",)),),
    "az": (
        (("endpoint", "azure_storage_endpoint", "azure_endpoint"),
         ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")),
        (("authority_host", "azure_storage_authority_host", "azure_authority_host"),
         ("AZURE_STORAGE_AUTHORITY_HOST", "AZURE_AUTHORITY_HOST")),
        (("msi_endpoint", "azure_msi_endpoint", "identity_endpoint", "azure_identity_endpoint"),
         ("AZURE_MSI_ENDPOINT", "AZURE_IDENTITY_ENDPOINT")),
        (("fabric_token_service_url", "azure_fabric_token_service_url"),
         ("AZURE_FABRIC_TOKEN_SERVICE_URL",)),
    ),
}  # fmt: skip
_GCS_KEY_FILES = ("service_account", "google_service_account", "service_account_path",
                  "google_service_account_path")  # fmt: skip
_GCS_KEY_FILE_ENV = ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH")


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


def check_store_urls(scheme: str, config: dict, origins: dict[str, str]) -> None:
    """Every URL-valued setting of a store, as obstore will take it: given (``config``, each
    key's origin in ``origins``, else ``--storage-option KEY``) or else from the environment.

    Raises:
        UsageError: the first one that cannot be used (``check_endpoint``).
    """
    for names, env_names in URL_SETTINGS.get(scheme, ()):
        given = [name for name in names if config.get(name)]
        for name in given:
            check_endpoint(config[name], origins.get(name, f"--storage-option {name}"))
        if not given:
            for env in env_names:
                if os.environ.get(env):
                    check_endpoint(os.environ[env], env)
    if scheme == "gs":
        _check_gcs_key(config)


def _check_gcs_key(config: dict) -> None:
    """The ``gcs_base_url`` of a GCS service-account key (an emulator's address)."""
    for origin, text in _gcs_keys(config):
        try:
            base = json.loads(text).get("gcs_base_url")
        except (ValueError, AttributeError):
            continue  # not a key obstore can use either: it says so itself
        if base:
            check_endpoint(base, f"gcs_base_url in {origin}")


def _gcs_keys(config: dict) -> list[tuple[str, str]]:
    found = [("--storage-option service_account_key", str(config[k]))
             for k in ("service_account_key", "google_service_account_key") if config.get(k)]  # fmt: skip
    paths = [(f"--storage-option {k}", config[k]) for k in _GCS_KEY_FILES if config.get(k)]
    if not paths and not found:
        paths = [(env, os.environ[env]) for env in _GCS_KEY_FILE_ENV if os.environ.get(env)]
    for origin, path in paths:
        try:
            found.append((f"the key file {str(path)!r} ({origin})", Path(path).read_text()))
        except (OSError, UnicodeDecodeError):
            continue
    return found


def service_endpoint(scheme: str, config: dict) -> str:
    """Where a store's requests go, as a message names it: the endpoint given, else the
    store's own service host (for S3 in the region, for Azure of the account)."""
    for names, env_names in URL_SETTINGS.get(scheme, ())[:1]:
        for value in [*(config.get(n) for n in names), *(os.environ.get(e) for e in env_names)]:
            if value:
                return redacted(str(value))
    if scheme == "s3":
        return f"https://s3.{config.get('region') or 'us-east-1'}.amazonaws.com"
    if scheme == "gs":
        return _gcs_base(config) or "https://storage.googleapis.com"
    account = config.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
    if (
        str(config.get("use_emulator", os.environ.get("AZURE_STORAGE_USE_EMULATOR"))).lower()
        == "true"
    ):
        base = os.environ.get("AZURITE_BLOB_STORAGE_URL") or "http://127.0.0.1:10000"
        return redacted(f"{base.rstrip('/')}/{account or 'devstoreaccount1'}")
    return f"https://{account or 'ACCOUNT'}.blob.core.windows.net"


def _gcs_base(config: dict) -> str | None:
    for _, text in _gcs_keys(config):
        try:
            base = json.loads(text).get("gcs_base_url")
        except (ValueError, AttributeError):
            continue
        if base:
            return redacted(str(base))
    return None
