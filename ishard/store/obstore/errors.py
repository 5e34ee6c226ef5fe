"""obstore's errors read: what each means, its HTTP status, the store's own answer, no secret shown."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from typing import TypeVar

from ...errors import IshardError
from ...names import has_control, quoted
from ..registry import backend
from ..retry import http_status, refused_request

T = TypeVar("T")
# obstore's exceptions that another try cannot change
PERMANENT = (
    "NotFoundError",
    "PermissionDeniedError",
    "UnauthenticatedError",
    "PreconditionError",
    "AlreadyExistsError",
    "NotSupportedError",
    "InvalidPathError",
    "UnknownConfigurationKeyError",
    "NotModifiedError",
)
_STATUS = re.compile(r"status code: (\d{3})")


def status_of(err: BaseException) -> int | None:
    """The HTTP status an obstore error tells (in its message only)."""
    if type(err).__module__.startswith("obstore"):
        found = _STATUS.search(str(err))
        return int(found.group(1)) if found else None
    return None


def classify(err: BaseException) -> str:
    """What ``err`` of obstore's means (see ``Store.classify``)."""
    from obstore import exceptions as ex

    status, text = http_status(err), str(err)
    code = answer(text)[0]
    if (
        isinstance(err, (FileNotFoundError, ex.NotFoundError))
        or status == 404
        or code in ("NoSuchBucket", "ContainerNotFound")
    ):
        return "missing"
    if "/latest/api/token" in text or "Error performing token request" in text:
        return "credentials"  # no keys given, and no metadata service to ask
    if (
        isinstance(err, ex.UnauthenticatedError)
        or status == 401
        or code in REJECTED
        or "failed to authenticate" in text
    ):
        return "rejected"
    if isinstance(err, (PermissionError, ex.PermissionDeniedError)) or status == 403:
        return "denied"
    if isinstance(err, (ex.AlreadyExistsError, ex.PreconditionError)) or status == 412:
        return "refused"
    if isinstance(err, ex.NotSupportedError) or status == 501:
        return "unsupported"
    return "invalid" if refused_request(status) else "unreachable"


# the store's answers that say the credentials themselves were refused
REJECTED = (
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "TokenRefreshRequired",
    "InvalidClientTokenId",
    "AuthenticationFailed",
    "InvalidAuthenticationInfo",
)
# settings whose values are secret: never in a message
SECRETS = ("secret_access_key", "session_token", "account_key", "sas_key", "client_secret",
           "bearer_token", "token", "service_account_key", "password")  # fmt: skip
_CODE = re.compile(r"<Code>([^<]{1,100})</Code>")
_MESSAGE = re.compile(r"<Message>([^<\n]{1,300})")


def answer(text: str) -> tuple[str | None, str | None]:
    """The error code and message of a store's XML answer quoted in obstore's report."""
    code, message = _CODE.search(text), _MESSAGE.search(text)
    return (
        code.group(1).strip() if code else None,
        message.group(1).strip() if code and message else None,
    )


def scrubbed(err: IshardError, config: dict) -> IshardError:
    """``err`` with every secret of ``config`` that its text holds shown as ``***``."""
    text = str(err)
    secrets = [str(config[k]) for k in SECRETS if config.get(k) and len(str(config[k])) > 3]
    if not any(secret in text for secret in secrets):
        return err
    for secret in secrets:
        text = text.replace(secret, "***")
    return type(err)(text)


_UNPARSED = re.compile(r'Error parsing Path "(.*?)": Encountered', re.DOTALL)


class Unlistable(ValueError):
    """A listing answer with a key obstore cannot parse (a control character, an empty, '.'
    or '..' part): every try fails alike (a ValueError: not retried)."""

    def __init__(self, key: str | None) -> None:
        super().__init__(key)
        self.key = key

    def message(self, where: str, scheme: str) -> str:
        if self.key is None:
            what = "a key its S3 client cannot parse"
        else:
            why = "a control character" if has_control(self.key) else "an empty, '.' or '..' part"
            what = f"the key {quoted(self.key)} ({why}), which its S3 client cannot parse"
        extra = backend("fsspec").extras[scheme]
        return (
            f"the listing of source {where!r} holds {what} — rename or delete that object, or "
            f"pip install 'ishard[{extra}]': ishard then lists the rest of it "
            "through fsspec, whose client reads such keys, and leaves them out and reports them"
        )


def parsed(call: Callable[..., T]) -> Callable[..., T]:
    """``call``, its failure on an unparsable listed key an ``Unlistable``."""

    @wraps(call)
    def run(*args, **kwargs) -> T:
        try:
            return call(*args, **kwargs)
        except Exception as err:
            if "Encountered object with invalid path" not in str(err):
                raise
            found = _UNPARSED.search(str(err))
            raise Unlistable(found.group(1) if found else None) from None

    return run


class Reason(Exception):
    """obstore's error text cut to its reason (``HTTP error: error sending request``,
    ``… status code: 503 Service Unavailable``): no request dump, no XML."""

    def __init__(self, err: BaseException) -> None:
        line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        reason = (line.rpartition(" - ")[2] or line).partition(": <")[0].rstrip(": ")
        super().__init__(reason.removeprefix("Server returned non-2xx status code: "))
