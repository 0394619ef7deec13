"""``"type": "prompt"`` hooks: the session's model decides instead of a command.

Claude Code's prompt hooks send the hook's ``prompt`` (``$ARGUMENTS`` replaced by the event's
JSON, or the JSON appended when the prompt does not name it) to a small model, which answers
``{"ok": true}`` (go on) or ``{"ok": false, "reason": "..."}`` (stop, with the reason). Here a model of
the session answers (the root conversation's provider's fast model, else its model: below), with
no tools and no conversation context, once per hook run.

**The hook's ``model``.** Claude Code asks a fast model unless the hook names one; so does this
agent when the session's provider has one: a hook without ``model`` is answered by the model the
``haiku`` alias names (``ANTHROPIC_DEFAULT_HAIKU_MODEL`` when set, else Anthropic's haiku on an
``anthropic`` session: :func:`fast_model`), and by the session's own model on a provider
without a known fast model (no warning: nobody asked for one). A hook may name its model:
``haiku``, ``sonnet``, ``opus``,
``inherit``, ``provider/id`` or a bare id, mapped exactly as a subagent definition's ``model:``
(:func:`pico3.models.resolve_model_spec`: an alias is a model of the session's provider, or what
``ANTHROPIC_DEFAULT_HAIKU_MODEL`` & co. name). A name that maps to no model this session has
(an alias on a provider without one, an unknown provider) is one warning on the worker's log
when the hooks load (:func:`check_models`; an alias in a new session as soon as the session has
its model: :mod:`.observer`), and the session's model answers (:func:`hook_model`). Agent
hooks (:mod:`.hook_agents`) take their ``model`` the same way.

:func:`ask_model` answers as a command hook would, so each event reads it as it reads a
command's run (:mod:`.verdicts`, :mod:`.permission`):

* ``ok: true`` — exit 0 without output: nothing changes (for ``PermissionRequest``: no answer,
  the dialog asks: a model's judgement of a call the model made does not skip the dialog);
* ``ok: false`` — exit 2 with ``reason`` on stderr: the event's blocking error (``PreToolUse``
  blocks the call, ``Stop`` makes the model go on with the reason, ``UserPromptSubmit`` blocks
  the prompt, ``PermissionRequest`` refuses the call, ``PostToolUse`` adds it to the result);
* no model, a model error, a timeout (``timeout``, default 30 s), an answer that is not a JSON
  object with a boolean ``ok`` — a non-blocking error named on the worker's log, never a pass
  that was not given: the run has no exit code (as a command that timed out), so
  ``PermissionRequest`` leaves the dialog to ask and ``PreToolUse`` leaves the call to the
  session's approval.

Prompt hooks run for :data:`PROMPT_EVENTS` (Claude Code's; any other event's is a problem line
and not loaded: :mod:`.settings`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio

from chord import BACKGROUND, Context, cancel_scope
from pico3 import HarnessServiceApi, Models
from pico3.models import (
    DoneEvent,
    ErrorEvent,
    Request,
    TextContent,
    UserMessage,
    resolve_model_spec,
)

from .protocol import HookRun
from .settings import HookSpec

__all__ = [
    "PROMPT_SYSTEM",
    "ask_model",
    "check_models",
    "fast_model",
    "hook_model",
    "prompt_for",
    "read_answer",
]

_log = logging.getLogger("facets_hooks")

PROMPT_SYSTEM = (
    "You evaluate one event of a coding agent for a hook its user configured. Read the user's "
    "instructions and the event's JSON, decide, and answer with only a JSON object, nothing "
    'else: {"ok": true} when the agent may go on, or {"ok": false, "reason": "<why, for the '
    'agent to read>"} when it must not.'
)
"""The system prompt of a prompt hook's request."""

MAX_TOKENS = 1024
"""Output tokens a prompt hook's answer may use."""

_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def prompt_for(template: str, payload: dict[str, Any]) -> str:
    """The hook's prompt with ``$ARGUMENTS`` replaced by the event's JSON (appended when the
    prompt does not name it), as Claude Code does."""
    arguments = json.dumps(payload, ensure_ascii=False)
    if "$ARGUMENTS" in template:
        return template.replace("$ARGUMENTS", arguments)
    return f"{template}\n\n{arguments}"


def read_answer(text: str) -> tuple[bool, str] | str:
    """``(ok, reason)`` from the model's answer, or why it is not one (a string). A JSON object
    in a Markdown code fence is read as one; ``ok`` must be a boolean."""
    stripped = _FENCE.sub("", text.strip())
    try:
        value: Any = json.loads(stripped)
    except json.JSONDecodeError:
        return f"its answer is not JSON: {text.strip()[:200]!r}"
    if not isinstance(value, dict) or not isinstance(value.get("ok"), bool):  # pyright: ignore[reportUnknownMemberType]
        return f'its answer has no boolean "ok": {text.strip()[:200]!r}'
    reason: Any = value.get("reason")  # pyright: ignore[reportUnknownMemberType]
    return bool(value["ok"]), reason.strip() if isinstance(reason, str) else ""


async def hook_model(
    harness: HarnessServiceApi, hook: HookSpec, warn: Callable[[str], None] = _log.warning
) -> tuple[Any, Any]:
    """The model that answers ``hook`` (module docstring): its config value (``{"provider",
    "modelId"}``) and the resolved model, ``None`` when the session has none either. A
    ``model`` that maps to no model of the session is told to ``warn`` (the session's model
    answers)."""
    services = harness.handle.services
    models = services.get("models")
    root = await harness.harness.root(BACKGROUND)
    session = (await root.config(BACKGROUND)).get("model")
    if not isinstance(models, Models):
        return session, None
    env = services.get("mcp_env")
    if hook.model is None:
        return fast_model(models, session, os.environ if env is None else env)
    value, note = resolve_model_spec(
        hook.model, session, os.environ if env is None else env, who="the hook"
    )
    resolved = models.resolve(value) if value is not session else None
    if resolved is None and value is not session:
        named: Any = value
        if isinstance(value, dict):
            named = f"{value.get('provider')}/{value.get('modelId')}"  # pyright: ignore[reportUnknownMemberType]
        note = (
            f"model {hook.model!r} ({named}) is not a model of this session: the session's "
            "model answers"
        )
    if note is not None:
        warn(f"{hook.source}: {hook.event} hook `{hook.label}`: {note}")
    if resolved is None:
        return session, models.resolve(session)
    return value, resolved


FAST_ALIAS = "haiku"
"""The alias a prompt or agent hook without ``model`` is answered by when the session's provider
has a model for it (Claude Code asks a fast model by default)."""


def fast_model(models: Models, session: Any, env: Mapping[str, str]) -> tuple[Any, Any]:
    """The default model of a prompt or agent hook: the session provider's fast model, the one
    the ``haiku`` alias names (``ANTHROPIC_DEFAULT_HAIKU_MODEL``, else Anthropic's haiku), when
    the session has it; else the session's model. Silent: nobody asked for a model."""
    value, note = resolve_model_spec(FAST_ALIAS, session, env, who="the hook")
    resolved = models.resolve(value) if note is None and value is not session else None
    if resolved is None:
        return session, models.resolve(session)
    return value, resolved


async def check_models(
    harness: HarnessServiceApi, hooks: Iterable[HookSpec], warn: Callable[[str], None]
) -> list[HookSpec]:
    """Warn about each prompt or agent hook whose ``model`` the session cannot answer with
    (:func:`hook_model`), when the hooks load; returns those left unchecked. A new session has
    no model yet (the app gives it one after the features load): an alias or a bare id, which
    names a model of the session's provider, waits until it has one (:mod:`.observer` checks
    it then)."""
    root = await harness.harness.root(BACKGROUND)
    known = (await root.config(BACKGROUND)).get("model") is not None
    waiting: list[HookSpec] = []
    for hook in hooks:
        if hook.model is not None and (known or "/" in hook.model):
            await hook_model(harness, hook, warn)
        elif hook.model is not None:
            waiting.append(hook)
    return waiting


async def _answer(
    harness: HarnessServiceApi, hook: HookSpec, prompt: str, warn: Callable[[str], None]
) -> str:
    """The hook model's text answer to ``prompt``; raises ``RuntimeError`` naming why not."""
    _value, resolved = await hook_model(harness, hook, warn)
    if resolved is None:
        raise RuntimeError("the session has no model to ask")
    request = Request(
        model=resolved.info.id,
        messages=[UserMessage(content=prompt)],
        system=[PROMPT_SYSTEM],
        max_tokens=MAX_TOKENS,
    )
    async for event in resolved.provider.stream(request, BACKGROUND):
        if isinstance(event, ErrorEvent):
            raise RuntimeError(f"the model failed: {event.error.error_message or event.reason}")
        if isinstance(event, DoneEvent):
            return "".join(b.text for b in event.message.content if isinstance(b, TextContent))
    raise RuntimeError("the model's answer ended without a result")


async def ask_model(
    harness: HarnessServiceApi,
    hook: HookSpec,
    payload: dict[str, Any],
    ctx: Context,
    warn: Callable[[str], None] = _log.warning,
) -> HookRun:
    """Run the prompt hook ``hook`` on the event ``payload``: a :class:`HookRun` as a command's
    (see the module docstring); what goes wrong is logged here."""
    prompt = prompt_for(hook.command, payload)
    return await verdict_run(hook, ctx, lambda: _answer(harness, hook, prompt, warn))


async def verdict_run(
    hook: HookSpec, ctx: Context, answer_text: Callable[[], Awaitable[str]]
) -> HookRun:
    """The :class:`HookRun` of a hook that answers ``{"ok", "reason"}`` (a prompt or agent
    hook) with the text ``answer_text`` gives, within the hook's timeout; what goes wrong (an
    exception, a timeout, an answer that is not that JSON) gives no verdict and is logged."""
    where = f"{hook.event} hook `{hook.label}` ({hook.source})"
    answer: tuple[bool, str] | str = f"it timed out after {hook.timeout:g} s"
    timed_out = True
    with cancel_scope(ctx), anyio.move_on_after(hook.timeout):
        try:
            answer = read_answer(await answer_text())
        except Exception as exc:  # a provider that raises: a non-blocking error, named
            answer = str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
        timed_out = False
    if isinstance(answer, str):
        _log.warning("%s gave no verdict: %s", where, answer)
        return HookRun(None, "", answer, timed_out=timed_out)
    ok, reason = answer
    if ok:
        if hook.event == "PermissionRequest":
            _log.warning("%s said ok; a %s hook does not skip the dialog here", where, hook.kind)
        return HookRun(0, "", "")
    return HookRun(2, "", reason or f"the {hook.kind} hook gave no reason")
