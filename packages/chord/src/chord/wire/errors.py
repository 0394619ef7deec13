"""How failures cross the wire: ``{code, message}`` in both directions (``docs/wire.md``).

The server turns an exception into an :class:`~chord.transport.frames.ErrorInfo` with
:func:`error_info`: chord's :class:`~chord.remote.RemoteServiceError` codes, the endpoint's
subscription codes and any :class:`RemoteCallError` an application raises pass through unchanged;
a cancelled call is ``cancelled``; anything else is ``internal_error`` with a fixed message (no
stack trace or exception text leaves the process; the server reports the original to its
``on_error``).

The client rebuilds an exception with :func:`error_from_info`: a chord code becomes a
:class:`~chord.remote.RemoteServiceError`, every other code a :class:`RemoteCallError`. A lost
connection fails calls with :class:`RemoteCallError` ``unavailable``.
"""

from __future__ import annotations

from typing import Final

from chord.context import ContextCancelled
from chord.remote.endpoint import ServiceEndpointError
from chord.remote.errors import RemoteServiceError, is_remote_service_error_code
from chord.transport.frames import ErrorInfo

__all__ = [
    "CANCELLED",
    "INTERNAL_ERROR",
    "INVALID_REQUEST",
    "TOO_MANY_REQUESTS",
    "UNAVAILABLE",
    "RemoteCallError",
    "error_from_info",
    "error_info",
]

UNAVAILABLE: Final = "unavailable"
"""The connection to the provider is lost or not established; nothing was (re)sent."""
CANCELLED: Final = "cancelled"
"""The call's context was cancelled (by the caller's cancel frame or a disconnect)."""
INTERNAL_ERROR: Final = "internal_error"
"""The method raised something that is not a stable, coded error."""
INVALID_REQUEST: Final = "invalid_request"
"""A request frame whose ``call`` is not a valid service call; the connection is closed."""
TOO_MANY_REQUESTS: Final = "too_many_requests"
"""The connection already has the server's maximum of requests in flight."""


class RemoteCallError(Exception):
    """A remote failure with a stable ``code`` that is not one of chord's service codes.

    Raise it from a provider method to send an application code (``not_authorized``); the
    client raises it for ``unavailable``, ``cancelled``, ``internal_error`` and application codes.
    """

    code: str
    message: str

    def __init__(self, code: str, message: str) -> None:
        if type(code) is not str or not code:
            raise TypeError("RemoteCallError code must be a non-empty string")
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __reduce__(self) -> tuple[type[RemoteCallError], tuple[str, str]]:
        return (type(self), (self.code, self.message))


def error_info(error: BaseException) -> ErrorInfo:
    """The ``{code, message}`` sent for ``error`` (see the module docstring)."""
    if isinstance(error, (RemoteServiceError, ServiceEndpointError, RemoteCallError)):
        return ErrorInfo(code=error.code, message=error.message)
    if isinstance(error, ContextCancelled):
        return ErrorInfo(code=CANCELLED, message="The call was cancelled")
    return ErrorInfo(
        code=INTERNAL_ERROR,
        message=f"The remote service method failed unexpectedly ({type(error).__name__})",
    )


def error_from_info(info: ErrorInfo) -> Exception:
    """The exception a client raises for an error result."""
    if is_remote_service_error_code(info.code):
        return RemoteServiceError(info.code, info.message)
    return RemoteCallError(info.code or INTERNAL_ERROR, info.message)
