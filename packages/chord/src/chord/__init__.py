"""chord: compose an application from facets that provide and use services by id.

**The public API** is this module, plus :mod:`chord.textual` (the ``Tui`` contract for
presentation facets, which needs the extra ``[textual]``). A facet package or an application
imports only from these two; the sub-packages below are chord's internal organisation and may
change without notice (the workspace's import-linter contract, run by ``uv run lint-imports`` in
CI, fails on a deep import from a feature package or the app; ``tests/test_exports.py`` pins the
names).

* Cancellation and deadlines: :class:`Context`, :data:`BACKGROUND`, :func:`with_cancel`,
  :func:`with_timeout`, :func:`cancel_scope`, typed values (:func:`create_context_key`).
* Text safe to show: :func:`inert` (terminal controls, bidi and invisible characters made
  visible; every presentation applies it to text from the model, tools, files and servers).
* Strict JSON: :data:`JsonValue`, :func:`validate_json`, :func:`copy_json`, :func:`equal_json`.
* Replicated state: :class:`ReplicatedState` (read-only), :class:`MutableReplicatedState` (the
  one writer), :class:`Delivery` (ordered ``hydrate`` / ``update`` deliveries).
* Services and facets: :func:`define_service`, :class:`Service`, :func:`define_facet`,
  :class:`Facet`, :class:`FacetEnvironment` (``provide`` / ``use`` / ``observe`` / ``own``),
  :func:`create_facet_host`.
* Keyed dialogs (ask the user, get a checked answer): :func:`provide_dialogs` and
  :class:`Dialogs` on the asking side, :func:`dialog_key` for the key;
  :func:`chord.textual.show_dialogs` shows them.
* Remote services: :class:`RemoteServiceError`, bindings, the wire client and server
  (:func:`connect_service_source`, :func:`provider_handler`) and the transports
  (:func:`serve_unix`, :func:`connect_unix`, :class:`FrameConnection`).
* Facet packages: :data:`hookimpl` (the ``chord_facets`` entry point marker), discovery
  (:func:`installed_facet_packages`, :func:`facet_package_from_folder`), generations and hot
  reload (:class:`ReloadCoordinator`, :class:`ReloadReport`).

**What ``import chord`` costs.** Only the light core is imported with the package (contexts,
JSON, :func:`inert`, service tokens); every other public name is bound from its sub-package at
its first use (a module ``__getattr__``, PEP 562), so a process pays only for the parts it uses:
``from chord import Context`` does not import pluggy, the facet host, the replicated state, the
wire or the transports (and with them :mod:`asyncio`). The names, ``__all__`` and what each name
is are unchanged. ``import chord`` alone imports 81 modules (it was 277, pluggy and asyncio
among them); a worker or a TUI imports the rest as it reaches it.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

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
from chord.json import JsonError, JsonValue, copy_json, equal_json, is_json_value, validate_json
from chord.lazy import lazy_exports as _lazy_exports
from chord.neutralize import inert
from chord.services import InstanceAddress, Service, ServiceMode, define_service

if _TYPE_CHECKING:  # bound at first use (see the module docstring and _LAZY below)
    from chord.backoff import Backoff
    from chord.facet_packages import (
        ENTRY_POINT_GROUP,
        FacetDiscoveryError,
        FacetGeneration,
        FacetLoadError,
        FacetPackage,
        ReloadCoordinator,
        ReloadOutcome,
        ReloadReport,
        discover_facet_packages,
        facet_package_from_folder,
        hookimpl,
        installed_facet_packages,
        load_facet_packages,
        load_generation,
        package_facet_loader,
    )
    from chord.facets import (
        Dialogs,
        DialogSpawner,
        Facet,
        FacetEnvironment,
        FacetHost,
        FacetLoader,
        LoadedFacets,
        ServiceSpawner,
        combine_facet_loaders,
        create_facet_host,
        define_facet,
        dialog_key,
        provide_dialogs,
        static_facet_loader,
    )
    from chord.remote import (
        RemoteServiceBinding,
        RemoteServiceError,
        RemoteServiceProvider,
        RemoteServiceSource,
        ServiceCall,
        create_loopback_transport,
        create_remote_service_binding,
    )
    from chord.state import (
        Delivery,
        Listener,
        MutableReplicatedState,
        ReplicaState,
        ReplicatedState,
        is_replicated_state,
        replicated_state,
        replicated_state_from_source,
    )
    from chord.transport import FrameConnection, connect_tcp, connect_unix, serve_tcp, serve_unix
    from chord.wire import (
        RemoteConnection,
        WireServiceSource,
        connect_service_source,
        open_remote_connection,
        provider_handler,
        serve_provider,
    )

__all__ = [
    "BACKGROUND",
    "BACKGROUND_CONTEXT",
    "ENTRY_POINT_GROUP",
    "TODO",
    "TODO_CONTEXT",
    "AbortController",
    "AbortSignal",
    "Backoff",
    "Context",
    "ContextCancelled",
    "ContextKey",
    "DeadlineExceeded",
    "Delivery",
    "DialogSpawner",
    "Dialogs",
    "Facet",
    "FacetDiscoveryError",
    "FacetEnvironment",
    "FacetGeneration",
    "FacetHost",
    "FacetLoadError",
    "FacetLoader",
    "FacetPackage",
    "FrameConnection",
    "InstanceAddress",
    "JsonError",
    "JsonValue",
    "Listener",
    "LoadedFacets",
    "MutableReplicatedState",
    "ReloadCoordinator",
    "ReloadOutcome",
    "ReloadReport",
    "RemoteConnection",
    "RemoteServiceBinding",
    "RemoteServiceError",
    "RemoteServiceProvider",
    "RemoteServiceSource",
    "ReplicaState",
    "ReplicatedState",
    "Service",
    "ServiceCall",
    "ServiceMode",
    "ServiceSpawner",
    "WireServiceSource",
    "await_with_context",
    "cancel_scope",
    "combine_facet_loaders",
    "connect_service_source",
    "connect_tcp",
    "connect_unix",
    "copy_json",
    "create_context_key",
    "create_facet_host",
    "create_loopback_transport",
    "create_remote_service_binding",
    "define_facet",
    "define_service",
    "dialog_key",
    "discover_facet_packages",
    "equal_json",
    "facet_package_from_folder",
    "hookimpl",
    "inert",
    "installed_facet_packages",
    "is_json_value",
    "is_replicated_state",
    "load_facet_packages",
    "load_generation",
    "open_remote_connection",
    "package_facet_loader",
    "provide_dialogs",
    "provider_handler",
    "replicated_state",
    "replicated_state_from_source",
    "run_with_context",
    "serve_provider",
    "serve_tcp",
    "serve_unix",
    "static_facet_loader",
    "validate_json",
    "with_abort_signal",
    "with_cancel",
    "with_deadline",
    "with_timeout",
    "with_value",
    "without_abort_signal",
]

_LAZY: dict[str, str] = {
    "Backoff": "chord.backoff",
    "ENTRY_POINT_GROUP": "chord.facet_packages",
    "FacetDiscoveryError": "chord.facet_packages",
    "FacetGeneration": "chord.facet_packages",
    "FacetLoadError": "chord.facet_packages",
    "FacetPackage": "chord.facet_packages",
    "ReloadCoordinator": "chord.facet_packages",
    "ReloadOutcome": "chord.facet_packages",
    "ReloadReport": "chord.facet_packages",
    "discover_facet_packages": "chord.facet_packages",
    "facet_package_from_folder": "chord.facet_packages",
    "hookimpl": "chord.facet_packages",
    "installed_facet_packages": "chord.facet_packages",
    "load_facet_packages": "chord.facet_packages",
    "load_generation": "chord.facet_packages",
    "package_facet_loader": "chord.facet_packages",
    "Dialogs": "chord.facets",
    "DialogSpawner": "chord.facets",
    "Facet": "chord.facets",
    "FacetEnvironment": "chord.facets",
    "FacetHost": "chord.facets",
    "FacetLoader": "chord.facets",
    "LoadedFacets": "chord.facets",
    "ServiceSpawner": "chord.facets",
    "combine_facet_loaders": "chord.facets",
    "create_facet_host": "chord.facets",
    "define_facet": "chord.facets",
    "dialog_key": "chord.facets",
    "provide_dialogs": "chord.facets",
    "static_facet_loader": "chord.facets",
    "RemoteServiceBinding": "chord.remote",
    "RemoteServiceError": "chord.remote",
    "RemoteServiceProvider": "chord.remote",
    "RemoteServiceSource": "chord.remote",
    "ServiceCall": "chord.remote",
    "create_loopback_transport": "chord.remote",
    "create_remote_service_binding": "chord.remote",
    "Delivery": "chord.state",
    "Listener": "chord.state",
    "MutableReplicatedState": "chord.state",
    "ReplicaState": "chord.state",
    "ReplicatedState": "chord.state",
    "is_replicated_state": "chord.state",
    "replicated_state": "chord.state",
    "replicated_state_from_source": "chord.state",
    "FrameConnection": "chord.transport",
    "connect_tcp": "chord.transport",
    "connect_unix": "chord.transport",
    "serve_tcp": "chord.transport",
    "serve_unix": "chord.transport",
    "RemoteConnection": "chord.wire",
    "WireServiceSource": "chord.wire",
    "connect_service_source": "chord.wire",
    "open_remote_connection": "chord.wire",
    "provider_handler": "chord.wire",
    "serve_provider": "chord.wire",
}
"""Public name -> the sub-module that defines it, imported when the name is first used."""


__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
