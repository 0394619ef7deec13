"""chord: compose an application from facets that provide and use services by id.

The most used names are re-exported here; the sub-packages are public too:

* :mod:`chord.context` — :class:`Context`, cancellation with reasons, deadlines, typed values.
* :mod:`chord.json` — strict JSON: :func:`validate_json`, :func:`copy_json`, :func:`equal_json`.
* :mod:`chord.delta` — the op engine (apply, diff, track, the wire path codec).
* :mod:`chord.state` — replicated state: one writer, read-only replicas, ordered deliveries.
* :mod:`chord.services` — service tokens (:func:`define_service`) and instance addresses.
* :mod:`chord.facets` — facets, their environment and the host (:func:`create_facet_host`).
* :mod:`chord.remote` — the service grammar, provider, binding and loopback.
* :mod:`chord.transport` — NDJSON frames over Unix sockets, TCP, stdio and memory.
* :mod:`chord.packages` — facet packages: entry-point discovery, generations, hot reload.
* :mod:`chord.textual` — the ``Tui`` contract for presentation facets (extra ``[textual]``).
"""

from chord.context import (
    BACKGROUND,
    BACKGROUND_CONTEXT,
    TODO,
    TODO_CONTEXT,
    AbortController,
    AbortSignal,
    Context,
    ContextCancelled,
    ContextKey,
    DeadlineExceeded,
    await_with_context,
    cancel_scope,
    create_context_key,
    run_with_context,
    with_abort_signal,
    with_cancel,
    with_deadline,
    with_timeout,
    with_value,
    without_abort_signal,
)
from chord.facets import (
    Facet,
    FacetEnvironment,
    FacetHost,
    FacetLoader,
    LoadedFacets,
    ServiceSpawner,
    combine_facet_loaders,
    create_facet_host,
    define_facet,
    static_facet_loader,
)
from chord.json import JsonError, JsonValue, copy_json, equal_json, is_json_value, validate_json
from chord.packages import hookimpl
from chord.remote import (
    RemoteServiceBinding,
    RemoteServiceError,
    RemoteServiceProvider,
    RemoteServiceSource,
    create_loopback_transport,
    create_remote_service_binding,
)
from chord.services import InstanceAddress, Service, ServiceMode, define_service
from chord.state import (
    Delivery,
    MutableReplicatedState,
    ReplicaState,
    ReplicatedState,
    is_replicated_state,
    replicated_state,
    replicated_state_from_source,
)

__all__ = [
    "BACKGROUND",
    "BACKGROUND_CONTEXT",
    "TODO",
    "TODO_CONTEXT",
    "AbortController",
    "AbortSignal",
    "Context",
    "ContextCancelled",
    "ContextKey",
    "DeadlineExceeded",
    "Delivery",
    "Facet",
    "FacetEnvironment",
    "FacetHost",
    "FacetLoader",
    "InstanceAddress",
    "JsonError",
    "JsonValue",
    "LoadedFacets",
    "MutableReplicatedState",
    "RemoteServiceBinding",
    "RemoteServiceError",
    "RemoteServiceProvider",
    "RemoteServiceSource",
    "ReplicaState",
    "ReplicatedState",
    "Service",
    "ServiceMode",
    "ServiceSpawner",
    "await_with_context",
    "cancel_scope",
    "combine_facet_loaders",
    "copy_json",
    "create_context_key",
    "create_facet_host",
    "create_loopback_transport",
    "create_remote_service_binding",
    "define_facet",
    "define_service",
    "equal_json",
    "hookimpl",
    "is_json_value",
    "is_replicated_state",
    "replicated_state",
    "replicated_state_from_source",
    "run_with_context",
    "static_facet_loader",
    "validate_json",
    "with_abort_signal",
    "with_cancel",
    "with_deadline",
    "with_timeout",
    "with_value",
    "without_abort_signal",
]
