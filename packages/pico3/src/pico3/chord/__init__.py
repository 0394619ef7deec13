"""pico3 as Chord facets: the built-in session plumbing of docs/design/chord.md#built-in-services (docs/design/decisions.md#d6).

* :mod:`pico3.chord.contract`: the service tokens :data:`HarnessService` (``pi.harness``, local) and
  :data:`ConversationService` (``pi.conversation``, keyed by conversation id, remotable) and the
  JSON shape of :class:`ConversationView` (the pico3 view plus ``commit.events``).
* :mod:`pico3.chord.session`: :func:`harness_session_facet`, which provides both and spawns one
  conversation instance per conversation.
* :mod:`pico3.chord.bridge`: :class:`ViewBridge`, the bounded ordered adapter that turns each
  harness envelope into exactly one replicated-state revision.
* :mod:`pico3.chord.endpoint`: :class:`ConversationEndpoint`, the instance's JSON methods.

This package is internal: feature packages and the app import these names from :mod:`pico3`.
"""

from pico3.chord.bridge import BRIDGE_QUEUE_LIMIT, BridgeFailure, ViewBridge
from pico3.chord.contract import (
    CommitInfo,
    ConversationInfo,
    ConversationService,
    ConversationServiceApi,
    ConversationView,
    EntryJson,
    EntryScanJson,
    ForkSpecJson,
    HarnessService,
    HarnessServiceApi,
    InputAbortResult,
    NewEntryJson,
    ParentRef,
    SendInputJson,
    ViewEvent,
)
from pico3.chord.endpoint import ConversationEndpoint
from pico3.chord.session import HARNESS_FACET_ID, SessionHarness, harness_session_facet

__all__ = [
    "BRIDGE_QUEUE_LIMIT",
    "HARNESS_FACET_ID",
    "BridgeFailure",
    "CommitInfo",
    "ConversationEndpoint",
    "ConversationInfo",
    "ConversationService",
    "ConversationServiceApi",
    "ConversationView",
    "EntryJson",
    "EntryScanJson",
    "ForkSpecJson",
    "HarnessService",
    "HarnessServiceApi",
    "InputAbortResult",
    "NewEntryJson",
    "ParentRef",
    "SendInputJson",
    "SessionHarness",
    "ViewBridge",
    "ViewEvent",
    "harness_session_facet",
]
