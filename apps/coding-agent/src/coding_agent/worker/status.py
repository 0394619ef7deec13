"""``coding-agent.worker``: what the worker process says about itself to every client.

A TUI shows facts that live in the worker, not in a conversation: which session and project the
worker serves, its process id, whether ``--dev`` reloading is on, and how the last reloads of
facet packages went (so a syntax error in a feature under development shows up on screen, not
only in ``worker.log``). The worker provides them as one remotable singleton service whose
``state`` is a replicated JSON document::

    {"sessionId": "20261129-213855-db8d28", "cwd": "/home/me/repo", "pid": 4242, "dev": true,
     "models": [{"provider": "faux", "id": "faux-1", "contextWindow": 128000,
                 "reasoning": true}],
     "reloads": [{"package": "greeter", "outcome": "failed", "ok": false,
                  "message": "SyntaxError: ...", "stage": "load", "number": 1}],
     "textToolCalling": ["openai/llama3.2"], "branch": 3}

``branch`` is the conversation id of the branch the session is on (the one the user last
prompted in, made, or switched to: :class:`~coding_agent.worker.activity.ActivityWriter` owns it
and records it in the session's storage and its folder, and publishes a change once it is
stored; ``null`` when none is recorded): a client that opens the
session (``--continue``, ``--resume``, ``attach``, the web page) follows that branch
(:mod:`coding_agent.following`). ``models`` are the models the worker's providers serve (what a ``/model`` picker offers, with
the context window a footer needs for its context %, and whether the model can reason, which a
thinking-level switch mentions). ``reloads`` keeps the newest
:data:`MAX_REPORTS` reports, oldest first; ``number`` counts every report since the worker
started, so a client tells a new report from one it has seen even once old ones drop off.
``anyModel`` names the providers that take model ids their catalog does not list (an
OpenAI-compatible server); ``/model`` refuses any other id it does not list. ``unconfigured`` maps each provider the session has no credentials for to why
(``{"anthropic": "anthropic needs an API key: set ANTHROPIC_API_KEY or ..."}``): ``/model``
names the key a model of it needs. ``textToolCalling`` names the models that refused native tool calling during this worker's life
and now call tools through fenced text blocks (a TUI says so once). ``storageFailure`` is
``null``, or why the session's storage failed (``"the session's storage failed: [Errno 28] No
space left on device"``): the worker stops right after, and a TUI says so. ``stopping`` is
``null``, or ``"signal"`` once the worker stops on SIGTERM/SIGINT (``/stop`` in another TUI):
a TUI then leaves with one line instead of starting a new worker. ``sandbox`` is the
OS sandbox of the session's commands: ``{"available", "reason", "enforced", "policy": [lines]}``
(a TUI says once when it is unavailable, and ``/sandbox`` shows it). ``notifications`` are the
newest :data:`MAX_NOTICES` notifications the worker delivered (:mod:`coding_agent.worker.notifications`:
Claude Code's ``Notification`` JSON with ``event`` and ``key``), oldest first; a TUI writes
each key it has not seen to its terminal (:mod:`coding_agent.tui.notify`). A client reaches it with
``env.use(define_service("coding-agent.worker"))`` and subscribes to ``handle.state``.

Beside ``state``, the service answers ``tools(ctx)``: the size of each registered tool's
definition (name, description and JSON Schema, as a provider receives it) in estimated tokens,
``{"read": 312, ...}``, which ``/context`` shows beside the system prompt; it is a call, not part
of the document, because tools come and go (MCP servers, reloads) and only ``/context`` asks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from chord import (
    BACKGROUND,
    Context,
    Facet,
    FacetEnvironment,
    MutableReplicatedState,
    ReloadReport,
    define_facet,
)
from coding_agent.context.system_prompt import estimate_tokens
from coding_agent.contracts import WorkerStatusService
from coding_agent.settings.model_config import EXAMPLE_MODEL
from pico3.models import ModelInfo

__all__ = ["MAX_NOTICES", "MAX_REPORTS", "STATUS_FACET_ID", "WorkerStatus", "model_choice"]

STATUS_FACET_ID = "coding-agent/worker-status"
MAX_REPORTS = 20
MAX_NOTICES = 20


def model_choice(ref: str, status: Any) -> dict[str, str]:
    """The conversation's ``config.model`` (``{"provider", "modelId"}``) for ``ref``
    (``provider/id``), checked against the worker's ``status`` value: a model its ``models``
    do not list is refused unless its provider is in ``anyModel``. Raises ``ValueError`` naming
    the problem (and the models there are)."""
    provider, _, model_id = ref.partition("/")
    if not provider or not model_id:
        raise ValueError(f"a model is provider/id ({EXAMPLE_MODEL}), got {ref!r}")
    status = status if isinstance(status, dict) else {}
    known = [
        f"{item['provider']}/{item['id']}"
        for item in status.get("models") or ()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(item, dict) and item.get("provider") and item.get("id")  # pyright: ignore[reportUnknownMemberType]
    ]
    if known and ref not in known and provider not in (status.get("anyModel") or ()):  # pyright: ignore[reportUnknownMemberType]
        raise ValueError(f"unknown model {ref} (available: {', '.join(known)})")
    return {"provider": provider, "modelId": model_id}


def _report_json(report: ReloadReport, number: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "package": report.package,
        "outcome": report.outcome,
        "ok": report.ok,
        "message": report.message,
        "number": number,
    }
    if report.stage is not None:
        entry["stage"] = report.stage
    return entry


class WorkerStatus:
    """Collects the worker's facts and publishes them through :meth:`facet`'s service."""

    def __init__(
        self,
        *,
        session_id: str,
        cwd: str,
        dev: bool,
        models: Sequence[ModelInfo] = (),
        sandbox: dict[str, Any] | None = None,
        unconfigured: Mapping[str, str] | None = None,
        any_model: Sequence[str] = (),
    ) -> None:
        self._document: dict[str, Any] = {
            "sessionId": session_id,
            "cwd": cwd,
            "pid": os.getpid(),
            "dev": dev,
            "models": [
                {
                    "provider": m.provider,
                    "id": m.id,
                    "contextWindow": m.context_window,
                    "reasoning": m.supports_thinking,
                    "images": m.supports_images,
                }
                for m in models
            ],
            "unconfigured": dict(unconfigured or {}),
            "anyModel": list(any_model),
            "reloads": [],
            "textToolCalling": [],
            "storageFailure": None,
            "stopping": None,
            "sandbox": dict(sandbox) if sandbox is not None else None,
            "notifications": [],
            "branch": None,
        }
        self._reports = 0
        self._state: MutableReplicatedState | None = None
        self.tool_source: Callable[[], Iterable[Any]] = lambda: ()
        """The registered tool declarations (``name``, ``description``, ``parameters``): the
        worker points it at the harness's tool registry once the harness is up."""

    def tool_tokens(self) -> dict[str, int]:
        """Each registered tool's definition in estimated tokens (module docstring)."""
        sizes: dict[str, int] = {}
        for tool in self.tool_source():
            definition = {
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters,
            }
            sizes[str(tool.name)] = estimate_tokens(json.dumps(definition, ensure_ascii=False))
        return sizes

    @property
    def document(self) -> dict[str, Any]:
        """The current status (a copy)."""
        return {
            **self._document,
            "models": [dict(model) for model in self._document["models"]],
            "reloads": list(self._document["reloads"]),
            "textToolCalling": list(self._document["textToolCalling"]),
            "notifications": list(self._document["notifications"]),
        }

    @property
    def branch(self) -> int | None:
        """The branch the session is on, as published (see the module docstring)."""
        return self._document["branch"]

    def set_branch(self, branch: int | None) -> None:
        """Publish the branch the session is on (the activity writer calls it on every change)."""
        if branch == self._document["branch"]:
            return
        self._document["branch"] = branch
        if self._state is not None:

            def mutate(draft: Any) -> None:
                draft["branch"] = branch

            self._state.change(BACKGROUND, mutate)

    def add_notice(self, notice: Mapping[str, Any]) -> None:
        """Publish a delivered notification (the newest :data:`MAX_NOTICES` are kept)."""
        notices = [*self._document["notifications"], dict(notice)][-MAX_NOTICES:]
        self._document["notifications"] = notices
        if self._state is not None:

            def mutate(draft: Any) -> None:
                draft["notifications"] = notices

            self._state.change(BACKGROUND, mutate)

    def add_text_tool_calling(self, model: str) -> None:
        """Say that ``model`` (``provider/id``) now calls tools through text blocks."""
        models = self._document["textToolCalling"]
        if model in models:
            return
        models = self._document["textToolCalling"] = [*models, model]
        if self._state is not None:

            def mutate(draft: Any) -> None:
                draft["textToolCalling"] = list(models)

            self._state.change(BACKGROUND, mutate)

    def set_stopping(self, reason: str) -> None:
        """Say that the worker stops now, and why (``"signal"``: SIGTERM or SIGINT, which is how
        ``/stop`` in one TUI ends it): the other clients leave instead of starting a new one."""
        self._document["stopping"] = reason
        if self._state is not None:

            def mutate(draft: Any) -> None:
                draft["stopping"] = reason

            self._state.change(BACKGROUND, mutate)

    def set_storage_failure(self, message: str) -> None:
        """Say that the session's storage failed (the worker stops next; see
        :class:`coding_agent.worker.main.StorageWatch`)."""
        self._document["storageFailure"] = message
        if self._state is not None:

            def mutate(draft: Any) -> None:
                draft["storageFailure"] = message

            self._state.change(BACKGROUND, mutate)

    def add_report(self, report: ReloadReport) -> None:
        """Record one reload outcome (the newest :data:`MAX_REPORTS` are kept)."""
        self._reports += 1
        entry = _report_json(report, self._reports)
        reloads = [*self._document["reloads"], entry][-MAX_REPORTS:]
        self._document["reloads"] = reloads
        if self._state is not None:

            def mutate(draft: Any) -> None:
                draft["reloads"] = reloads

            self._state.change(BACKGROUND, mutate)

    def facet(self) -> Facet:
        """The facet providing :data:`WorkerStatusService`."""

        async def tools(ctx: Context) -> dict[str, int]:
            del ctx
            return self.tool_tokens()

        def setup(env: FacetEnvironment) -> None:
            self._state = env.replicated_state(self.document)
            env.provide(WorkerStatusService, {"state": self._state, "tools": tools})

        return define_facet(STATUS_FACET_ID, setup)
