"""What obstore's kinds of store are (credentials advice, what a bucket is called, URL-valued
settings, each checked before a store is built), and AIStore reached through its S3 gateway."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...errors import UsageError
from ..registry import Kind, UrlSettings
from ..urls import check_endpoint, redacted

# Each kind's URL-valued settings: obstore's names of one setting, then the environment
# variables obstore reads it from when it is not given. The S3 endpoint is resolved by
# ishard itself (``credentials._s3_endpoint``), so it is always given.
KINDS = {
    "s3": Kind(
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or --storage-option "
        "key=… secret=…",
        url_settings=(
            (("endpoint", "aws_endpoint_url_s3"), ()),
            (("metadata_endpoint", "aws_metadata_endpoint"), ("AWS_METADATA_ENDPOINT",)),
            (("endpoint_url_sts", "aws_endpoint_url_sts"), ("AWS_ENDPOINT_URL_STS",)),
        ),
    ),
    "gs": Kind(
        "GOOGLE_APPLICATION_CREDENTIALS (a service-account key file), --storage-option "
        "service_account=…, or `gcloud auth application-default login`",
        url_settings=((("base_url", "google_base_url"), ("GOOGLE_BASE_URL",)),),
    ),
    "az": Kind(
        "AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY or a SAS token "
        "(AZURE_STORAGE_SAS_KEY), --storage-option account_key=… or sas_key=…, or `az login` "
        "with --storage-option use_azure_cli=true",
        container="container",
        url_settings=(
            (("endpoint", "azure_storage_endpoint", "azure_endpoint"),
             ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")),
            (("authority_host", "azure_storage_authority_host", "azure_authority_host"),
             ("AZURE_STORAGE_AUTHORITY_HOST", "AZURE_AUTHORITY_HOST")),
            (("msi_endpoint", "azure_msi_endpoint", "identity_endpoint",
              "azure_identity_endpoint"),
             ("AZURE_MSI_ENDPOINT", "AZURE_IDENTITY_ENDPOINT")),
            (("fabric_token_service_url", "azure_fabric_token_service_url"),
             ("AZURE_FABRIC_TOKEN_SERVICE_URL",)),
        ),
    ),
}  # fmt: skip
_GCS_KEY_FILES = ("service_account", "google_service_account", "service_account_path",
                  "google_service_account_path")  # fmt: skip
_GCS_KEY_FILE_ENV = ("GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH")


def check_store_urls(scheme: str, config: dict, origins: dict[str, str]) -> None:
    """Every URL-valued setting of a store, as obstore will take it: given (``config``, each
    key's origin in ``origins``, else ``--storage-option KEY``) or else from the environment.

    Raises:
        UsageError: the first one that cannot be used (``check_endpoint``).
    """
    for names, env_names in _url_settings(scheme):
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
    for names, env_names in _url_settings(scheme)[:1]:
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


def _url_settings(scheme: str) -> UrlSettings:
    known = KINDS.get(scheme)
    return known.url_settings if known is not None else ()


def ais_endpoint(url: str, endpoint_url: str | None, role: str) -> str:
    """Where an ``ais://`` URL's requests go: ``--endpoint-url`` as given, else AIStore's S3
    gateway at ``$AIS_ENDPOINT/s3``.

    Raises:
        UsageError: neither is set, or ``$AIS_ENDPOINT`` is no endpoint.
    """
    if endpoint_url:
        return endpoint_url
    endpoint = os.environ.get("AIS_ENDPOINT")
    if not endpoint:
        raise UsageError(
            f"{role} {url!r} is an AIStore bucket but no endpoint is known — set "
            "AIS_ENDPOINT=http://HOST:PORT or pass --endpoint-url http://HOST:PORT/s3"
        )
    return check_endpoint(endpoint, "AIS_ENDPOINT").rstrip("/") + "/s3"
