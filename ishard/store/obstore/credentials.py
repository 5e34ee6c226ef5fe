"""A bucket store's settings as users of the AWS CLI, gsutil and az expect them: environment,
profiles, ``--endpoint-url`` and ``--storage-option``, mapped onto obstore's configuration."""

from __future__ import annotations

import configparser
import os
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...version import __version__
from .settings import check_store_urls, service_endpoint

# s3fs-style storage options (what users of ishard's fsspec days wrote) → obstore's keys.
S3_ALIASES: dict[str, str | None] = {
    "key": "access_key_id",
    "secret": "secret_access_key",
    "token": "session_token",
    "region_name": "region",
    "endpoint_url": "endpoint",
    "anon": "skip_signature",
}
GCS_ALIASES: dict[str, str | None] = {
    "token": "service_account",
    "endpoint_url": "base_url",
    "anon": "skip_signature",
}
AZURE_ALIASES: dict[str, str | None] = {
    "connection_string": None,
    "endpoint_url": "endpoint",
    "anon": "skip_signature",
}
CLIENT_KEYS = (
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "timeout",
    "pool_idle_timeout",
    "proxy_url",
    "user_agent",
    "read_timeout",
)
# fsspec's own settings, which mean nothing to obstore: taken and left aside
NOT_OBSTORE = {
    "max_concurrency",
    "config_kwargs",
    "client_kwargs",
    "use_listings_cache",
    "listings_expiry_time",
    "default_block_size",
    "default_fill_cache",
    "skip_instance_cache",
    "asynchronous",
    "loop",
    "session",
    "use_ssl",
    "version_aware",
    "cache_regions",
    "s3",
    "retries",
    "addressing_style",
    "max_pool_connections",
    "signature_version",
}


def _flatten(options: dict) -> dict:
    """``client_kwargs.region_name`` and ``config_kwargs.…`` lifted to the top level."""
    out = {k: v for k, v in options.items() if k not in ("client_kwargs", "config_kwargs")}
    for nested in ("client_kwargs", "config_kwargs"):
        value = options.get(nested) or {}
        if isinstance(value, dict):
            out.update({k: v for k, v in value.items() if not isinstance(v, dict)})
    return out


def _profile(name: str | None) -> dict:
    """The static settings of an AWS profile from the shared credentials and config files."""
    profile = name or os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE")
    found: dict = {}
    home = Path.home()
    files = (
        (
            os.environ.get("AWS_CONFIG_FILE") or home / ".aws" / "config",
            f"profile {profile or 'default'}" if profile not in (None, "default") else "default",
        ),
        (
            os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials",
            profile or "default",
        ),
    )
    for path, section in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error):
            continue
        if parser.has_section(section):
            found.update(parser.items(section))
    if profile and not found:
        raise UsageError(
            f"AWS profile {profile!r} is not in the shared config or credentials "
            "files — fix AWS_PROFILE (or --storage-option profile=…)"
        )
    return found


def _boto3_provider(profile: str | None):
    """boto3's credential chain (SSO, assumed roles, …) when boto3 is installed."""
    try:
        import boto3  # type: ignore[import-not-found]
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        return None

    return Boto3CredentialProvider(boto3.session.Session(profile_name=profile))


def store_config(
    scheme: str, bucket: str, url: str, endpoint_url: str | None, options: dict
) -> dict:
    """``{"config": …, "client": …, "provider": …, "signing": …}`` for an obstore store.

    Raises:
        UsageError: an option obstore does not know, a profile that is not there.
    """
    flat = _flatten(options)
    profile = flat.pop("profile", None)
    client = _client(flat)
    for key in NOT_OBSTORE:
        flat.pop(key, None)
    config, origins = _named(scheme, flat)
    provider, signing = None, None
    if scheme == "s3":
        provider, signing = _s3(config, origins, endpoint_url, profile)
    elif endpoint_url and ("base_url" if scheme == "gs" else "endpoint") not in config:
        config["base_url" if scheme == "gs" else "endpoint"] = endpoint_url
        origins["base_url" if scheme == "gs" else "endpoint"] = "--endpoint-url"
    check_store_urls(scheme, config, origins)
    endpoint = str(config.get("endpoint") or config.get("base_url") or "")
    if endpoint.startswith("http://"):
        client.setdefault("allow_http", True)
    if scheme == "az" and str(config.get("use_emulator", "")).lower() == "true":
        client.setdefault("allow_http", True)
    return {
        "config": config,
        "client": client,
        "provider": provider,
        "signing": signing,
        "endpoint": service_endpoint(scheme, config),
        "token": origins.get("session_token") if config.get("session_token") else None,
    }


def _client(flat: dict) -> dict[str, Any]:
    """obstore's client options: ishard's defaults, and those of ``flat`` (taken out of it)."""
    client: dict[str, Any] = {
        "user_agent": f"ishard/{__version__}",
        "connect_timeout": "10s",
        "timeout": "300s",
        "pool_max_idle_per_host": "256",
    }
    for key in CLIENT_KEYS:
        if key in flat:
            value = flat.pop(key)
            # botocore's timeouts are numbers of seconds; obstore's are durations
            client[key] = (
                f"{value}s"
                if key.endswith("timeout")
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
                else value
            )
    return client


def _named(scheme: str, flat: dict) -> tuple[dict, dict[str, str]]:
    """The storage options ``flat`` under obstore's names for ``scheme``, and where each
    setting came from, as a message names it."""
    aliases: dict[str, str | None] = {"s3": S3_ALIASES, "gs": GCS_ALIASES, "az": AZURE_ALIASES}[
        scheme
    ]
    config: dict = {}
    origins: dict[str, str] = {}
    for key, value in flat.items():
        name = aliases.get(key, key)
        if name is None:
            raise UsageError(
                f"--storage-option {key} is not taken for {scheme}:// — give "
                "account_name=… and account_key=… (or sas_key=…) instead"
            )
        config[name] = value
        origins[name] = f"--storage-option {key}"
    return config, origins


# obstore's names of the S3 endpoint; ``aws_endpoint_url_s3`` wins over the others there, so
# ishard gives it too (else AWS_ENDPOINT_URL_S3 would override --endpoint-url)
S3_ENDPOINT_KEYS = ("aws_endpoint_url_s3", "endpoint", "aws_endpoint", "aws_endpoint_url")


def _s3_endpoint(
    config: dict, origins: dict, endpoint_url: str | None, stored: dict, profile: str
) -> None:
    """The S3 endpoint in the AWS CLI's order: ``--endpoint-url``, the storage option, the
    environment, the profile's ``endpoint_url``; then obstore's own ``AWS_ENDPOINT``."""
    env = os.environ
    given = [(config.pop(k), origins.pop(k, k)) for k in S3_ENDPOINT_KEYS if k in config]
    candidates = [
        (endpoint_url, "--endpoint-url"),
        *given,
        (env.get("AWS_ENDPOINT_URL_S3"), "AWS_ENDPOINT_URL_S3"),
        (env.get("AWS_ENDPOINT_URL"), "AWS_ENDPOINT_URL"),
        (stored.get("endpoint_url"), f"endpoint_url of the AWS profile {profile!r}"),
        (env.get("AWS_ENDPOINT"), "AWS_ENDPOINT"),
    ]
    for value, origin in candidates:
        if value:
            for key in ("endpoint", "aws_endpoint_url_s3"):
                config[key], origins[key] = value, origin
            return


def _s3(config: dict, origins: dict, endpoint_url: str | None, profile: str | None) -> tuple:
    """Endpoint, region and credentials for S3, in the AWS CLI's order of precedence."""
    env = os.environ
    keys = ("access_key_id", "secret_access_key")
    from_env = env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY")
    stored = _stored(config, keys, bool(from_env), profile)
    named = profile or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    _s3_endpoint(config, origins, endpoint_url, stored, named)
    if "region" not in config:
        config["region"] = (
            env.get("AWS_REGION")
            or env.get("AWS_DEFAULT_REGION")
            or stored.get("region")
            or "us-east-1"
        )
    provider = None
    if not all(k in config for k in keys) and not config.get("skip_signature"):
        own = bool(from_env and not profile)
        provider = _s3_credentials(config, origins, stored, own, profile, named)
    if config.get("endpoint"):
        config.setdefault("virtual_hosted_style_request", False)
    config.setdefault("conditional_put", "etag")
    signing = {
        "endpoint": config.get("endpoint"),
        "region": config["region"],
        "access_key": config.get("access_key_id"),
        "secret_key": config.get("secret_access_key"),
        "token": config.get("session_token"),
        "provider": provider,
    }
    return provider, signing


def _stored(config: dict, keys: tuple[str, str], from_env: bool, profile: str | None) -> dict:
    """The AWS profile's settings, read only where they may be wanted: no keys given in
    ``config`` nor by the environment (``from_env``, unless a ``profile`` is named), and a
    profile named or shared files there."""
    if all(k in config for k in keys) or (from_env and not profile):
        return {}
    if profile or os.environ.get("AWS_PROFILE") or _has_shared_files():
        return _profile(profile)
    return {}


def _s3_credentials(
    config: dict, origins: dict, stored: dict, from_env: bool, profile: str | None, named: str
) -> Any:
    """S3 credentials into ``config``: the environment's (``from_env``), the AWS profile's
    (``stored``, of the profile ``named``), else boto3's credential chain as the provider
    returned (None for none).

    Raises:
        NoCredentials: no source of credentials at all.
    """
    env = os.environ
    if from_env:
        config["access_key_id"] = env["AWS_ACCESS_KEY_ID"]
        config["secret_access_key"] = env["AWS_SECRET_ACCESS_KEY"]
        if env.get("AWS_SESSION_TOKEN"):
            config["session_token"] = env["AWS_SESSION_TOKEN"]
            origins["session_token"] = "AWS_SESSION_TOKEN"
    elif stored.get("aws_access_key_id") and stored.get("aws_secret_access_key"):
        config["access_key_id"] = stored["aws_access_key_id"]
        config["secret_access_key"] = stored["aws_secret_access_key"]
        if stored.get("aws_session_token"):
            config["session_token"] = stored["aws_session_token"]
            origins["session_token"] = f"aws_session_token of the AWS profile {named!r}"
    else:
        provider = _boto3_provider(profile)
        if provider is None and not _other_sources():
            raise NoCredentials  # obstore would ask the instance metadata service
        return provider
    return None


class NoCredentials(Exception):
    """No source of S3 credentials is configured and the instance metadata service is off."""


def _other_sources() -> bool:
    """Sources obstore finds by itself: web identity, container credentials, and the instance
    metadata service unless ``AWS_EC2_METADATA_DISABLED`` (the AWS SDKs' switch) is set."""
    env = os.environ
    return bool(
        env.get("AWS_WEB_IDENTITY_TOKEN_FILE")
        or env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        or env.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true"
    )


def _has_shared_files() -> bool:
    env, home = os.environ, Path.home()
    return any(
        Path(p).is_file()
        for p in (
            env.get("AWS_CONFIG_FILE") or home / ".aws" / "config",
            env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials",
        )
    )
