"""chord's remote layer: services used across a boundary as if they were local.

The pieces, from server to client:

* :class:`RemoteServiceProvider` holds implementations of a catalogue of remotable services,
  runs calls and streams snapshots and updates to subscriptions (with bounded, resetting queues).
* The grammar (:mod:`chord.remote.grammar`) defines the exact JSON of calls, catalogues,
  snapshots and updates, wire-compatible with @earendil-works/chord 0.87, with strict parsers.
* :func:`create_service_state_encoder`/:func:`create_service_state_decoder` compress the ops of
  one subscription's state members for the wire.
* A :class:`RemoteServiceTransport` carries calls and subscriptions; the loopback
  (:func:`create_loopback_transport`) does it in-process with no copying.
* :func:`create_remote_service_binding` turns a transport into stable facades (``use``), keyed
  observation tasks (``observe``), ``ready``, ``rebind`` and ``dispose``.
* :func:`create_remote_service_endpoint` is one remote peer's view of a provider: the
  ``$chord.service`` control calls and that peer's subscriptions (:mod:`chord.wire` serves it).
"""

from chord.remote.binding import RemoteServiceBinding, create_remote_service_binding
from chord.remote.codec import (
    ServiceStateDecoder,
    ServiceStateEncoder,
    create_service_state_decoder,
    create_service_state_encoder,
)
from chord.remote.endpoint import (
    EndpointPublish,
    RemoteServiceEndpoint,
    ServiceEndpointError,
    ServiceEndpointErrorCode,
    create_remote_service_endpoint,
)
from chord.remote.errors import (
    REMOTE_SERVICE_ERROR_CODES,
    CallRejected,
    RemoteServiceError,
    RemoteServiceErrorCode,
    ServiceGrammarError,
    is_remote_service_error_code,
)
from chord.remote.facade import RemoteMember, RemoteServiceFacade
from chord.remote.grammar import (
    SERVICE_CONTROL_ID,
    Address,
    CatalogueControlCall,
    ServiceCall,
    ServiceCatalogueEntry,
    ServiceClosedUpdate,
    ServiceControlCall,
    ServiceInstanceSnapshot,
    ServiceMemberSnapshot,
    ServiceMethodSnapshot,
    ServiceProviderUpdate,
    ServiceReplacedUpdate,
    ServiceResetUpdate,
    ServiceSpawnedUpdate,
    ServiceStateSnapshot,
    ServiceStateUpdate,
    ServiceSubscriptionSnapshot,
    ServiceUnavailableUpdate,
    SubscribeControlCall,
    UnsubscribeControlCall,
    decode_service_control_call,
    parse_service_call,
    parse_service_catalogue,
    parse_service_provider_update,
    parse_service_subscription_snapshot,
    parse_wire_service_provider_update,
    parse_wire_service_subscription_snapshot,
    service_catalogue_call,
    service_subscribe_call,
    service_unsubscribe_call,
)
from chord.remote.loopback import (
    LoopbackServiceSource,
    LoopbackTransport,
    create_loopback_transport,
)
from chord.remote.members import classify_implementation
from chord.remote.provider import (
    PROVIDER_QUEUE_LIMIT,
    ProviderSubscription,
    RemoteServiceProvider,
    validate_remote_service_implementation,
)
from chord.remote.source import (
    ObserveHandler,
    RemoteServices,
    RemoteServiceSource,
    RemoteServiceTransport,
    ServiceSubscription,
    ServiceUpdateListener,
)

__all__ = [
    "PROVIDER_QUEUE_LIMIT",
    "REMOTE_SERVICE_ERROR_CODES",
    "SERVICE_CONTROL_ID",
    "Address",
    "CallRejected",
    "CatalogueControlCall",
    "EndpointPublish",
    "LoopbackServiceSource",
    "LoopbackTransport",
    "ObserveHandler",
    "ProviderSubscription",
    "RemoteMember",
    "RemoteServiceBinding",
    "RemoteServiceEndpoint",
    "RemoteServiceError",
    "RemoteServiceErrorCode",
    "RemoteServiceFacade",
    "RemoteServiceProvider",
    "RemoteServiceSource",
    "RemoteServiceTransport",
    "RemoteServices",
    "ServiceCall",
    "ServiceCatalogueEntry",
    "ServiceClosedUpdate",
    "ServiceControlCall",
    "ServiceEndpointError",
    "ServiceEndpointErrorCode",
    "ServiceGrammarError",
    "ServiceInstanceSnapshot",
    "ServiceMemberSnapshot",
    "ServiceMethodSnapshot",
    "ServiceProviderUpdate",
    "ServiceReplacedUpdate",
    "ServiceResetUpdate",
    "ServiceSpawnedUpdate",
    "ServiceStateDecoder",
    "ServiceStateEncoder",
    "ServiceStateSnapshot",
    "ServiceStateUpdate",
    "ServiceSubscription",
    "ServiceSubscriptionSnapshot",
    "ServiceUnavailableUpdate",
    "ServiceUpdateListener",
    "SubscribeControlCall",
    "UnsubscribeControlCall",
    "classify_implementation",
    "create_loopback_transport",
    "create_remote_service_binding",
    "create_remote_service_endpoint",
    "create_service_state_decoder",
    "create_service_state_encoder",
    "decode_service_control_call",
    "is_remote_service_error_code",
    "parse_service_call",
    "parse_service_catalogue",
    "parse_service_provider_update",
    "parse_service_subscription_snapshot",
    "parse_wire_service_provider_update",
    "parse_wire_service_subscription_snapshot",
    "service_catalogue_call",
    "service_subscribe_call",
    "service_unsubscribe_call",
    "validate_remote_service_implementation",
]
