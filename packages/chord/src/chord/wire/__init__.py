"""chord over a real wire: a provider served to other processes, and facades that reconnect.

This package joins the service layer (:mod:`chord.remote`) to the framing (:mod:`chord.transport`);
neither of those imports it. The protocol is documented in ``docs/wire.md``.

* Server: :func:`serve_provider` runs one peer of a :class:`~chord.remote.RemoteServiceProvider`
  over a :class:`~chord.transport.FrameConnection` (concurrent cancellable requests, per-peer
  subscriptions with their own state encoders, bounded per-subscription update queues that
  collapse into ``replaced`` / ``closed`` + ``spawned`` updates Chord 0.87.1 understands, per-client
  back-pressure and a slow-consumer disconnect). :func:`provider_handler` adapts it to ``serve_unix``/``serve_tcp``.
* Client: :class:`RemoteConnection` is a :class:`~chord.remote.RemoteServiceTransport` over one
  connection; :func:`connect_service_source` is a reconnecting
  :class:`~chord.remote.RemoteServiceSource` a facet host accepts.
* Errors: :class:`RemoteCallError` carries codes that are not chord's own (``unavailable``,
  ``cancelled``, ``internal_error``, application codes).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from chord.lazy import lazy_exports as _lazy_exports
from chord.wire.errors import (
    CANCELLED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    TOO_MANY_REQUESTS,
    UNAVAILABLE,
    RemoteCallError,
    error_from_info,
    error_info,
)

if _TYPE_CHECKING:  # bound at first use (_LAZY below)
    from chord.wire.client import RemoteConnection, RemoteSubscription, open_remote_connection
    from chord.wire.server import (
        DEFAULT_MAX_CONCURRENT_REQUESTS,
        DEFAULT_PEER_QUEUE_LIMIT,
        provider_handler,
        serve_provider,
    )
    from chord.wire.source import Backoff, WireServiceSource, connect_service_source

__all__ = [
    "CANCELLED",
    "DEFAULT_MAX_CONCURRENT_REQUESTS",
    "DEFAULT_PEER_QUEUE_LIMIT",
    "INTERNAL_ERROR",
    "INVALID_REQUEST",
    "TOO_MANY_REQUESTS",
    "UNAVAILABLE",
    "Backoff",
    "RemoteCallError",
    "RemoteConnection",
    "RemoteSubscription",
    "WireServiceSource",
    "connect_service_source",
    "error_from_info",
    "error_info",
    "open_remote_connection",
    "provider_handler",
    "serve_provider",
]

_LAZY: dict[str, str] = {
    "RemoteConnection": "chord.wire.client",
    "RemoteSubscription": "chord.wire.client",
    "open_remote_connection": "chord.wire.client",
    "DEFAULT_MAX_CONCURRENT_REQUESTS": "chord.wire.server",
    "DEFAULT_PEER_QUEUE_LIMIT": "chord.wire.server",
    "provider_handler": "chord.wire.server",
    "serve_provider": "chord.wire.server",
    "Backoff": "chord.wire.source",
    "WireServiceSource": "chord.wire.source",
    "connect_service_source": "chord.wire.source",
}
"""Public name -> the module that defines it, imported when the name is first used (PEP 562)."""


__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
