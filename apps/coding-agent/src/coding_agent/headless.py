"""Headless modes: one prompt, no TUI — ``-p`` prints the answer, ``--json`` streams events.

Both run the session worker's facets **in this process** (:func:`~coding_agent.worker.main.
open_session_host`, no socket) plus a small presentation facet that does what a TUI would:

* it observes ``pi.conversation``, follows the root conversation's ``view`` and passes every
  event of every revision (``view["commit"]["events"]``) on, in order;
* it answers the features' dialogs, since nobody is there to click: an approval gets the
  ``approve`` policy (``"deny"`` by default: a headless run never runs ``bash`` or edits files
  unless told to), a question is cancelled. The dialog services are named by id only
  (``pi.approval-dialog``, ``pi.question-dialog``); the app imports no feature package.

The prompt is sent with ``send``; the run ends with the ``turn.ended`` event whose ``inputs``
hold it. In ``print`` mode the text of the final answer is written; in ``json`` mode each event
is one line of JSON, followed by ``{"type": "result", "ok", "status", "text"}``. The exit code is
0 when the turn ended ``done``, 1 otherwise.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from chord.context import BACKGROUND, Context
from chord.facets import Facet, FacetEnvironment, define_facet
from chord.services import define_service
from chord.state import Delivery
from coding_agent.sessions import Session
from coding_agent.worker.main import WorkerConfig, load_features, open_session_host
from pico3.chord import ConversationService, ConversationServiceApi

__all__ = [
    "APPROVAL_DIALOGS",
    "QUESTION_DIALOGS",
    "HeadlessMode",
    "answer_text",
    "run_headless",
    "run_json",
    "run_print",
]

HeadlessMode = Literal["print", "json"]

APPROVAL_DIALOGS = define_service("pi.approval-dialog")
"""The approval feature's dialogs, by id (``decide({"decision", "by"?})``)."""

QUESTION_DIALOGS = define_service("pi.question-dialog")
"""The question feature's dialogs, by id (``submit({"outcome", "answer"?, "by"?})``)."""

_FEATURE_SERVICES = {"facets-approval": APPROVAL_DIALOGS, "facets-question": QUESTION_DIALOGS}

Event = dict[str, Any]


def answer_text(entry: dict[str, Any] | None) -> str:
    """The text blocks of an assistant entry, joined (empty for ``None``)."""
    if entry is None:
        return ""
    parts: list[str] = []
    for message in entry.get("model") or []:
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
    return "".join(parts)


def _is_root(view: dict[str, Any]) -> bool:
    return "parent" not in view["conversation"]


def _presentation(
    events: MemoryObjectSendStream[Event],
    root: Callable[[ConversationServiceApi], None],
) -> Facet:
    """Follow the root conversation; every update's events go to ``events``."""

    def setup(env: FacetEnvironment) -> None:
        async def on_instance(instance: ConversationServiceApi, ctx: Context) -> None:
            chosen = False

            def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                nonlocal chosen
                if delivery.kind == "hydrate":
                    if not chosen and _is_root(value):
                        chosen = True
                        root(instance)
                    return
                if chosen:
                    for event in value["commit"]["events"]:
                        try:
                            events.send_nowait(event)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return  # the run is over; later revisions are not reported

            stop = instance.view.subscribe(deliver)
            try:
                await ctx.wait_cancelled()
            finally:
                stop()

        env.observe(ConversationService, on_instance)

    return define_facet("coding-agent/headless", setup)


def _responder(service: Any, answer: Callable[[Any, Context], Any]) -> Facet:
    def setup(env: FacetEnvironment) -> None:
        async def on_dialog(dialog: Any, ctx: Context) -> None:
            await answer(dialog, ctx)

        env.observe(service, on_dialog)

    return define_facet(f"coding-agent/headless-{service.id}", setup)


def _responders(features: set[str], approve: Literal["allow", "deny"]) -> list[Facet]:
    async def decide(dialog: Any, ctx: Context) -> None:
        await dialog.decide({"decision": approve, "by": "headless"}, ctx)

    async def cancel(dialog: Any, ctx: Context) -> None:
        await dialog.submit({"outcome": "cancelled", "by": "headless"}, ctx)

    facets: list[Facet] = []
    if "facets-approval" in features:
        facets.append(_responder(APPROVAL_DIALOGS, decide))
    if "facets-question" in features:
        facets.append(_responder(QUESTION_DIALOGS, cancel))
    return facets


async def run_headless(
    prompt: str,
    config: WorkerConfig,
    *,
    mode: HeadlessMode = "print",
    out: TextIO,
    approve: Literal["allow", "deny"] = "deny",
) -> int:
    """Send ``prompt`` to the session's root conversation and report as ``mode`` says.

    Returns the exit code: 0 when the turn ended ``done``, 1 otherwise. Raises
    :class:`~coding_agent.worker.providers.RegistryError` / ``ValueError`` for a bad model or
    faux script (nothing is opened then)."""
    if mode not in ("print", "json"):
        raise ValueError(f"mode must be 'print' or 'json', got {mode!r}")
    if approve not in ("allow", "deny"):
        raise ValueError(f"approve must be 'allow' or 'deny', got {approve!r}")
    send_events, receive_events = anyio.create_memory_object_stream[Event](math.inf)
    found: list[ConversationServiceApi] = []
    chosen = anyio.Event()

    def on_root(instance: ConversationServiceApi) -> None:
        found.append(instance)
        chosen.set()

    generations = load_features(config)
    features = {generation.package.name for generation in generations}
    extra = [_presentation(send_events, on_root), *_responders(features, approve)]
    entries: dict[int, dict[str, Any]] = {}
    status = "failed"
    text = ""
    async with (
        send_events,
        receive_events,
        open_session_host(config, extra_facets=extra, generations=generations),
    ):
        await chosen.wait()
        input_id = await found[0].send({"content": prompt}, BACKGROUND)
        async for event in receive_events:
            if mode == "json":
                out.write(json.dumps(event, separators=(",", ":")) + "\n")
                out.flush()
            if event.get("type") == "entry.added":
                entry = event["entry"]
                entries[entry["id"]] = entry
            if event.get("type") == "turn.ended" and input_id in event.get("inputs", []):
                status = str(event.get("status"))
                text = answer_text(entries.get(event.get("answer", -1)))
                break
    ok = status == "done"
    if mode == "json":
        result = {"type": "result", "ok": ok, "status": status, "text": text}
        out.write(json.dumps(result, separators=(",", ":")) + "\n")
    else:
        out.write(text if text.endswith("\n") else text + "\n")
    out.flush()
    return 0 if ok else 1


def _config(
    session: Session,
    model: str | None,
    faux_script: str | os.PathLike[str] | None,
    facets_dirs: Sequence[str | os.PathLike[str]],
    permission_mode: str | None = None,
) -> WorkerConfig:
    return WorkerConfig(
        permission_mode=permission_mode,
        session=session,
        model=model,
        faux_script=Path(faux_script) if faux_script is not None else None,
        facets_dirs=tuple(Path(folder) for folder in facets_dirs),
    )


async def run_print(
    prompt: str,
    session: Session,
    *,
    out: TextIO,
    model: str | None = None,
    approve: Literal["allow", "deny"] = "deny",
    faux_script: str | os.PathLike[str] | None = None,
    facets_dirs: Sequence[str | os.PathLike[str]] = (),
    permission_mode: str | None = None,
) -> int:
    """``coding-agent -p PROMPT``: run one turn in ``session`` and print the final answer."""
    config = _config(session, model, faux_script, facets_dirs, permission_mode)
    return await run_headless(prompt, config, mode="print", out=out, approve=approve)


async def run_json(
    prompt: str,
    session: Session,
    *,
    out: TextIO,
    model: str | None = None,
    approve: Literal["allow", "deny"] = "deny",
    faux_script: str | os.PathLike[str] | None = None,
    facets_dirs: Sequence[str | os.PathLike[str]] = (),
    permission_mode: str | None = None,
) -> int:
    """``coding-agent --json PROMPT``: run one turn and stream its view events as JSON lines."""
    config = _config(session, model, faux_script, facets_dirs, permission_mode)
    return await run_headless(prompt, config, mode="json", out=out, approve=approve)
