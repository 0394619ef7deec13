"""Errors that cross the service boundary with a stable, machine-readable code.

A remote call can fail for reasons the caller may want to handle: the service is unknown, the
instance was closed, the member is the wrong kind. Those failures are :class:`RemoteServiceError`
with one of the codes in :data:`REMOTE_SERVICE_ERROR_CODES`. The codes travel on the wire as
``{code, message}`` and a client rebuilds the same error from them, so Python and TypeScript peers
agree on what went wrong.

Programming and lifecycle errors (a disposed provider, a malformed snapshot) are ordinary
exceptions; malformed wire messages raise :class:`ServiceGrammarError`.
"""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

__all__ = [
    "REMOTE_SERVICE_ERROR_CODES",
    "RemoteServiceError",
    "RemoteServiceErrorCode",
    "ServiceGrammarError",
    "is_remote_service_error_code",
]

RemoteServiceErrorCode = Literal[
    "service_not_allowed",
    "service_not_found",
    "service_mode_mismatch",
    "service_member_not_found",
    "service_member_mismatch",
    "service_instance_not_found",
    "service_stale_instance",
    "service_invalid_value",
]

REMOTE_SERVICE_ERROR_CODES: tuple[RemoteServiceErrorCode, ...] = get_args(RemoteServiceErrorCode)
"""Every code a :class:`RemoteServiceError` may carry, in a stable order."""


def is_remote_service_error_code(value: object) -> TypeGuard[RemoteServiceErrorCode]:
    """True when ``value`` is one of :data:`REMOTE_SERVICE_ERROR_CODES` (an exact ``str``)."""
    return type(value) is str and value in REMOTE_SERVICE_ERROR_CODES


class RemoteServiceError(Exception):
    """A service-level failure with a stable ``code`` and a human-readable ``message``."""

    code: RemoteServiceErrorCode
    message: str

    def __init__(self, code: RemoteServiceErrorCode, message: str) -> None:
        if not is_remote_service_error_code(code):
            raise TypeError(f"Unknown remote service error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __reduce__(self) -> tuple[type[RemoteServiceError], tuple[str, str]]:
        return (type(self), (self.code, self.message))


class CallRejected(RemoteServiceError):
    """A call that names something the provider does not offer: a service outside its catalogue
    (``service_not_allowed``), an unknown member (``service_member_not_found``) or a wrong
    argument count (``service_invalid_value``).

    It is an ordinary :class:`RemoteServiceError` to in-process callers. A wire server treats it
    as a broken contract with that peer: the peer gets the error, then its connection is closed.
    """


class ServiceGrammarError(TypeError):
    """A service call, catalogue, snapshot or update does not have the exact wire shape.

    The message starts with what was being parsed (``"Invalid service call"``) and names the
    offending field in ``$.path`` notation.
    """
