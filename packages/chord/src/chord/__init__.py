"""chord: compose an application from facets that provide and use services by id.

The public API is re-exported here; everything else is private.
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
from chord.json import JsonError, JsonValue, copy_json, equal_json, is_json_value, validate_json

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
    "JsonError",
    "JsonValue",
    "await_with_context",
    "cancel_scope",
    "copy_json",
    "create_context_key",
    "equal_json",
    "is_json_value",
    "run_with_context",
    "validate_json",
    "with_abort_signal",
    "with_cancel",
    "with_deadline",
    "with_timeout",
    "with_value",
    "without_abort_signal",
]
