"""Models: the model provider protocol, the scripted ``faux`` provider and a uniform retry policy.

"Model" here, and everywhere in pico3, is the language model; a *model provider*
(:class:`ModelProvider`) is a backend that answers model calls, while a bare "provider" is chord's
facet that provides a service. The names these had before still resolve, with a
DeprecationWarning, for one release (:mod:`pico3._renamed` lists them).

This module is public (an application implementing a model backend imports from it); its
submodules are internal.

* The model provider contract — requests, messages, stream events, :class:`ModelInfo`,
  :class:`ModelProviderError`, the :class:`ModelProvider` protocol and
  :class:`DeferringModelProvider` for backends that may answer later through a :class:`Deferred`
  handle (docs/design/turn.md#models).
* Streams — :class:`MessageBuilder` (how adapters emit events), :func:`reduce_events` (raises
  :class:`StreamProtocolError`) and :func:`abortable`.
* Retries — :class:`RetryPolicy`, :func:`parse_retry_after`, :func:`retry_call`.
* The scripted provider — :class:`FauxProvider` and its script helpers.
* Model names as Claude Code's files write them (``sonnet``, ``inherit``, ``provider/id``):
  :func:`resolve_model_spec`, shared by subagent definitions and commands.

Real backends (Anthropic, OpenAI and OpenAI-compatible servers) live with the app, which owns
their SDK dependencies; pico3 itself needs no network.
"""

from __future__ import annotations

import typing as _typing

from pico3._renamed import renamed_attribute as _renamed_attribute
from pico3.models.aliases import ANTHROPIC_ALIASES, MODEL_ALIASES, resolve_model_spec
from pico3.models.faux import (
    FAUX_MODEL,
    FauxDeferred,
    FauxProvider,
    FauxResponse,
    FauxState,
    FauxStep,
    FauxToolCall,
    faux_deferred,
    faux_demo_script,
    faux_echo,
    faux_error,
    faux_fetch_error,
    faux_not_ready,
    faux_pause,
    faux_response,
    faux_text,
    faux_thinking,
    faux_tool_call,
)
from pico3.models.provider import (
    AssistantMessage,
    Citation,
    Cost,
    Deferred,
    DeferringModelProvider,
    DoneEvent,
    ErrorEvent,
    FetchResult,
    ImageContent,
    Message,
    ModelCost,
    ModelInfo,
    ModelProvider,
    ModelProviderError,
    Request,
    ServerToolContent,
    ServerToolEvent,
    StartEvent,
    StopReason,
    StreamEvent,
    SystemMessage,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingLevel,
    ThinkingStartEvent,
    Tool,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultMessage,
    Usage,
    UserMessage,
    compute_cost,
    copy_message,
    estimate_tokens,
    extend_prefix,
    message_to_json,
    messages_from_json,
    retryable_status,
)
from pico3.models.retry import RetryPolicy, Sleep, parse_retry_after, retry_call
from pico3.models.stream import (
    ABORTED,
    MessageBuilder,
    StreamProtocolError,
    abortable,
    reduce_events,
)

__all__ = [
    "ABORTED",
    "ANTHROPIC_ALIASES",
    "FAUX_MODEL",
    "MODEL_ALIASES",
    "AssistantMessage",
    "Citation",
    "Cost",
    "Deferred",
    "DeferringModelProvider",
    "DoneEvent",
    "ErrorEvent",
    "FauxDeferred",
    "FauxProvider",
    "FauxResponse",
    "FauxState",
    "FauxStep",
    "FauxToolCall",
    "FetchResult",
    "ImageContent",
    "Message",
    "MessageBuilder",
    "ModelCost",
    "ModelInfo",
    "ModelProvider",
    "ModelProviderError",
    "Request",
    "RetryPolicy",
    "ServerToolContent",
    "ServerToolEvent",
    "Sleep",
    "StartEvent",
    "StopReason",
    "StreamEvent",
    "StreamProtocolError",
    "SystemMessage",
    "TextContent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ThinkingContent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ThinkingLevel",
    "ThinkingStartEvent",
    "Tool",
    "ToolCall",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "abortable",
    "compute_cost",
    "copy_message",
    "estimate_tokens",
    "extend_prefix",
    "faux_deferred",
    "faux_demo_script",
    "faux_echo",
    "faux_error",
    "faux_fetch_error",
    "faux_not_ready",
    "faux_pause",
    "faux_response",
    "faux_text",
    "faux_thinking",
    "faux_tool_call",
    "message_to_json",
    "messages_from_json",
    "parse_retry_after",
    "reduce_events",
    "resolve_model_spec",
    "retry_call",
    "retryable_status",
]


def __getattr__(name: str) -> _typing.Any:
    """A deprecated old name (:mod:`pico3._renamed`): its value, with a DeprecationWarning."""
    return _renamed_attribute("pico3.models", name)
