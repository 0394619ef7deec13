"""Tools: declarations, the registry, argument validation, and the API a running tool gets.

A tool is a :class:`ToolDeclaration`: a model-facing ``name`` and ``description``, ``parameters``
as a JSON Schema dict (docs/design/decisions.md#d8-g16, checked with :mod:`jsonschema` when the declaration is built), a
``replay`` policy and output bounds, and ``execute(args, api, ctx) -> ToolResult``. Tools are
registered on the harness (:class:`ToolRegistry`, a :class:`~pico3.registry.NamedRegistry`):
names are unique while live, unregistering is exact and idempotent, and every change bumps the
registry revision (docs/design/reload.md#registrations). An invocation keeps the declaration it captured.

Durability (docs/design/harness.md#tools). A tool has no checkpoint of its own; it runs inside ``pi.tool``, whose
``started`` checkpoint is the effect evidence. What it keeps is in its **slot**
(``turn.tools[i]``): streamed ``output``, ``progress``/``details``/``continuedBy``, and
**memos**. :meth:`ToolApi.memo` is ``memo_once`` on that slot, one commit per call, with
presence semantics: ``None`` is a stored value, and a read of an absent memo returns the
:data:`MISSING` sentinel (never ``None``), so "answered ``null``" and "not answered" differ::

    answer = await api.memo("answer", ctx)              # recorded before a crash?
    if answer is MISSING:
        answer = await api.memo("answer", await ask(args, ctx), ctx)   # first writer wins

Memos are keyed ``tool:<name>`` (hooks use ``hook:<namespace>:<name>``, see
:mod:`pico3.hooks`), live in the tool task's slot and are deleted in the tool's terminal commit
(docs/design/decisions.md#d8-g10), so they never leak into a later call. They never appear in the view.

Where the slot lives is ``pi.tool``'s business: a :class:`ToolApi` reaches it only through a
:data:`SlotCommit` — "run this function on the tool's slot inside one commit with the tool task's
authority" — which the turn loop provides. Streaming goes through :class:`OutputBuffer`, a
kernel-owned bounded buffer; :meth:`ToolApi.streaming` flushes it to the slot at most every
``flush_interval`` seconds and once at the end, and never swallows a flush failure.

Where each part lives: :mod:`~pico3.tools.declaration` (:class:`ToolDeclaration`,
:class:`ToolResult`, :class:`ToolRegistry`, :func:`validate_arguments`),
:mod:`~pico3.tools.schema` (:class:`ArgumentSchema`, the one argument validator, and
:class:`InvalidArguments`),
:mod:`~pico3.tools.output` (:class:`OutputBounds`, :class:`OutputBuffer`),
:mod:`~pico3.tools.memo` (:data:`MISSING`, slot memos, :class:`SlotCommit`),
:mod:`~pico3.tools.api` (:class:`ToolApi`) and :mod:`~pico3.tools.runtime` (the adapters the
turn loop builds a :class:`ToolApi` from).
"""

from __future__ import annotations

from pico3.tools.api import FREE_SLOT_FIELDS, ToolApi, ToolRuntime
from pico3.tools.declaration import (
    ToolDeclaration,
    ToolRegistry,
    ToolResult,
    validate_arguments,
)
from pico3.tools.memo import (
    MISSING,
    Missing,
    SlotCommit,
    SlotRejected,
    memo_key,
    slot_memo,
    split_memo_args,
)
from pico3.tools.output import OutputBounds, OutputBuffer
from pico3.tools.runtime import RuntimeTools, runtime_slot
from pico3.tools.schema import ArgumentSchema, InvalidArguments

__all__ = [
    "FREE_SLOT_FIELDS",
    "MISSING",
    "ArgumentSchema",
    "InvalidArguments",
    "Missing",
    "OutputBounds",
    "OutputBuffer",
    "RuntimeTools",
    "SlotCommit",
    "SlotRejected",
    "ToolApi",
    "ToolDeclaration",
    "ToolRegistry",
    "ToolResult",
    "ToolRuntime",
    "memo_key",
    "runtime_slot",
    "slot_memo",
    "split_memo_args",
    "validate_arguments",
]
