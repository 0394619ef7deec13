"""Regenerate the SVG screenshots of the coding agent's main screens.

Run from the repository root::

    uv run python docs/screenshots/make_screenshots.py            # all screens, into this folder
    uv run python docs/screenshots/make_screenshots.py approval   # just one

Every screen is the real :class:`coding_agent.tui.CodingAgentApp`, run headless by Textual's
``App.run_test`` at a fixed terminal size and saved with ``App.save_screenshot``. The app is
driven the way it is in production: it follows a :class:`~coding_agent.tui.conversation.ViewRelay`
pointed at a chord ``replicated_state`` holding a ``ConversationView`` document
(docs/design/view.md#shape). Only the worker is missing: :class:`ScreenshotConversation` is a read-only client whose
document is written here instead of by a harness. The dialogs are put up by the real approval
and question TUI facets, in a facet host beside the app, through the app's
:attr:`~coding_agent.tui.CodingAgentApp.tui` (see :func:`_open_dialog`).

Everything on screen is fixed (timestamps 0, no random ids, no spinner, no blinking cursor), so
regenerating the screenshots without a UI change gives byte-identical files.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from textual.pilot import Pilot

from chord.context import Context
from chord.facets import Facet, FacetEnvironment, create_facet_host, define_facet
from chord.facets.environment import ServiceSpawner
from chord.services import Service
from chord.state import MutableReplicatedState, replicated_state
from chord.textual import DialogScreen, tui_facet
from coding_agent.tui import CodingAgentApp
from coding_agent.tui.conversation import InputAbortResult, SendMode, SessionInfo, ViewRelay
from facets_approval.contract import ApprovalDialogs
from facets_approval.tui import tui_facet as approval_tui_facet
from facets_question.contract import QuestionDialogs
from facets_question.tui import tui_facet as question_tui_facet

__all__ = [
    "HERE",
    "SCREENS",
    "SIZE",
    "ScreenshotConversation",
    "asking_view",
    "conversation_view",
    "empty_view",
    "main",
    "questioning_view",
    "take_screenshot",
]

HERE = Path(__file__).resolve().parent
"""Where the screenshots live (next to this script)."""

SIZE = (120, 36)
"""Terminal columns and rows of every screenshot."""

PROMPT = "Make greet() say hello instead of hi, and run the tests."
"""The user prompt on the conversation screens."""

_EDIT_ARGS: dict[str, Any] = {
    "path": "src/greeter.py",
    "edits": [{"oldText": 'return "hi, " + name', "newText": 'return "hello, " + name'}],
}
_DIFF = (
    "  4 def greet(name: str) -> str:\n"
    '- 5     return "hi, " + name\n'
    '+ 5     return "hello, " + name\n'
    "  6 \n"
)
_QUESTION_ARGS: dict[str, Any] = {
    "question": "Which greeting should greet() use?",
    "options": ["Hello, <name>!", "Hi there, <name>!", "Good morning, <name>!"],
    "allowText": True,
}
_BASH_ARGS: dict[str, Any] = {"command": "uv run pytest tests/test_greeter.py -q"}
_BASH_OUTPUT = (
    "...                                                          [100%]\n3 passed in 0.04s"
)
_ANSWER = """\
Done. `greet()` now says **hello**:

- `src/greeter.py`: the greeting string changed from `"hi, "` to `"hello, "`
- the three tests in `tests/test_greeter.py` pass

```python
def greet(name: str) -> str:
    return "hello, " + name
```
"""


class ScreenshotConversation:
    """A read-only :class:`~coding_agent.tui.conversation.ConversationClient` over a local document.

    ``state`` is a real chord ``replicated_state`` (the app reaches it through a
    :class:`ViewRelay`, as it reaches a worker's replica). Sending, aborting and cancelling
    raise: a screenshot has no worker to carry them out.
    """

    def __init__(self, document: dict[str, Any]) -> None:
        self.state: MutableReplicatedState = replicated_state(document)
        self._relay = ViewRelay()
        self._relay.follow(self.state)
        self._session = SessionInfo(
            session_id="3f9c2a7d5e1b4c08",
            cwd="/home/dev/greeter",
            model="anthropic/claude-sonnet-4-5",
            context_window=200_000,
        )

    @property
    def view(self) -> ViewRelay:
        return self._relay

    @property
    def session(self) -> SessionInfo:
        return self._session

    async def send(self, text: str, mode: SendMode, ctx: Context) -> int:
        raise RuntimeError("the screenshot conversation is read-only (no worker to send to)")

    async def abort(self, ctx: Context) -> None:
        raise RuntimeError("the screenshot conversation is read-only (nothing to abort)")

    async def input_abort(self, input_id: int, ctx: Context) -> InputAbortResult:
        raise RuntimeError("the screenshot conversation is read-only (no queued input)")


# -- view documents (docs/design/view.md#shape) ------------------------------------------------------------
def _view(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "conversation": {"id": 1},
        "entries": entries,
        "config": {
            "model": {"provider": "anthropic", "modelId": "claude-sonnet-4-5"},
            "thinkingLevel": "off",
        },
        "inbox": [],
        "tasks": {},
        "plugins": {},
    }


def _entry(entry_id: int, kind: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": entry_id, "conversationId": 1, "kind": kind, "model": [message], **extra}


def _user(entry_id: int, text: str) -> dict[str, Any]:
    return _entry(entry_id, "pi.user", {"role": "user", "content": text, "timestamp": 0})


def _assistant(
    entry_id: int, blocks: list[dict[str, Any]], *, stop: str, usage: dict[str, Any]
) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": blocks,
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "stopReason": stop,
        "usage": usage,
        "timestamp": 0,
    }
    return _entry(entry_id, "pi.assistant", message, data={"attempt": 1})


def _tool_result(
    entry_id: int, call_id: str, name: str, text: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 0,
    }
    extra = {"data": {"details": details}} if details is not None else {}
    return _entry(entry_id, "pi.tool_result", message, **extra)


def _usage(inputs: int, output: int, cache_read: int, cost: float) -> dict[str, Any]:
    return {
        "input": inputs,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": 0,
        "totalTokens": inputs + output + cache_read,
        "cost": {"total": cost},
    }


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def empty_view() -> dict[str, Any]:
    """A fresh session: no entries yet."""
    return _view([])


def asking_view() -> dict[str, Any]:
    """The prompt and the assistant's edit call, which waits for approval (no result yet)."""
    return _view(
        [
            _user(1, PROMPT),
            _assistant(
                2,
                [
                    _text("I'll change the greeting in `src/greeter.py`."),
                    _call("toolu_01", "edit", _EDIT_ARGS),
                ],
                stop="toolUse",
                usage=_usage(2_950, 96, 0, 0.0103),
            ),
        ]
    )


def questioning_view() -> dict[str, Any]:
    """A prompt the model answers with a ``question`` call (waiting for the user's answer)."""
    return _view(
        [
            _user(1, "Make greet() friendlier."),
            _assistant(
                2,
                [
                    _text("There are a few ways to say it; let me ask."),
                    _call("toolu_01", "question", _QUESTION_ARGS),
                ],
                stop="toolUse",
                usage=_usage(2_870, 88, 0, 0.0099),
            ),
        ]
    )


def conversation_view() -> dict[str, Any]:
    """A finished turn: prompt, an edit with its diff, a bash run, and a Markdown answer."""
    entries = asking_view()["entries"]
    entries.extend(
        [
            _tool_result(
                3,
                "toolu_01",
                "edit",
                "Successfully replaced 1 block in src/greeter.py.",
                details={"diff": _DIFF, "path": "src/greeter.py"},
            ),
            _assistant(
                4,
                [_text("Now the tests."), _call("toolu_02", "bash", _BASH_ARGS)],
                stop="toolUse",
                usage=_usage(180, 52, 3_046, 0.0021),
            ),
            _tool_result(5, "toolu_02", "bash", _BASH_OUTPUT),
            _assistant(
                6,
                [_text(_ANSWER)],
                stop="stop",
                usage=_usage(95, 141, 3_278, 0.0034),
            ),
        ]
    )
    return _view(entries)


# -- screens -------------------------------------------------------------------------------------
Scene = Callable[[CodingAgentApp, Pilot[None]], AbstractAsyncContextManager[None]]
"""What is on screen, beyond the view document, while the shot is taken."""


@asynccontextmanager
async def _nothing(app: CodingAgentApp, pilot: Pilot[None]) -> AsyncIterator[None]:
    del app, pilot
    yield


def _open_dialog(
    service: Service[Any], answer_member: str, presenter: Facet, request: dict[str, Any]
) -> Scene:
    """A scene with one open dialog, shown by the real presentation facet ``presenter``.

    A facet host beside the app provides the app's :attr:`~CodingAgentApp.tui` as chord's
    ``Tui`` service, ``presenter`` (the approval or question TUI facet), and a stand-in for the
    session side: it ``provide_many``-s ``service`` and opens one instance for ``request``, so
    the facet observes it and takes the modal slot exactly as it does beside a session worker.
    Nobody answers: the dialog stays up for the shot and is dismissed when the host closes.
    """

    @asynccontextmanager
    async def scene(app: CodingAgentApp, pilot: Pilot[None]) -> AsyncIterator[None]:
        spawners: list[ServiceSpawner[Any]] = []
        environments: list[FacetEnvironment] = []

        def provide(env: FacetEnvironment) -> None:
            environments.append(env)
            spawners.append(env.provide_many(service))

        async def unanswered(response: Any, ctx: Context) -> None:
            raise RuntimeError("screenshot dialogs are never answered")

        facets = [
            tui_facet(app.tui),
            define_facet("docs/screenshot-session", provide),
            presenter,
        ]
        async with create_facet_host(facets):
            instance = {
                "request": environments[0].replicated_state(request),
                answer_member: unanswered,
            }
            spawners[0].spawn(f"{request['conversationId']}:{request['callId']}", instance)
            try:  # the dialog as the user answers it: armed (its key line final)
                with anyio.fail_after(30):
                    while not (isinstance(app.screen, DialogScreen) and app.screen.armed):
                        await pilot.pause(0.02)
            except TimeoutError:
                raise RuntimeError("the dialog never appeared") from None
            yield

    return scene


_APPROVAL_REQUEST: dict[str, Any] = {
    "conversationId": 1,
    "callId": "toolu_01",
    "taskId": 3,
    "name": "edit",
    "args": _EDIT_ARGS,
    "rule": "Edit(./src/greeter.py)",  # the narrow standing rule the session offers (suggest_rules)
    "scopes": ["session", "project", "user"],
}
_QUESTION_REQUEST: dict[str, Any] = {
    "conversationId": 1,
    "callId": "toolu_01",
    "taskId": 3,
    **_QUESTION_ARGS,
}

SCREENS: dict[str, tuple[Callable[[], dict[str, Any]], Scene]] = {
    "empty-session": (empty_view, _nothing),
    "conversation": (conversation_view, _nothing),
    "approval": (
        asking_view,
        _open_dialog(ApprovalDialogs, "decide", approval_tui_facet, _APPROVAL_REQUEST),
    ),
    "question": (
        questioning_view,
        _open_dialog(QuestionDialogs, "submit", question_tui_facet, _QUESTION_REQUEST),
    ),
}
"""Screenshot name → (the view document, what else is on screen for the shot)."""


async def take_screenshot(name: str, folder: Path) -> Path:
    """Render screen ``name`` (a key of :data:`SCREENS`) and save ``folder/<name>.svg``."""
    if name not in SCREENS:
        raise KeyError(f"unknown screenshot {name!r} (known: {', '.join(SCREENS)})")
    document, scene = SCREENS[name]
    await anyio.Path(folder).mkdir(parents=True, exist_ok=True)
    app = CodingAgentApp(ScreenshotConversation(document()))
    async with app.run_test(size=SIZE) as pilot:
        await app.wait_rendered()
        app.editor.cursor_blink = False  # a blinking cursor would make the shot time-dependent
        async with scene(app, pilot):
            await pilot.pause()
            await app.wait_rendered()
            saved = app.save_screenshot(f"{name}.svg", str(folder))
    return Path(saved)


def main(argv: list[str]) -> int:
    """Regenerate the named screenshots (all when none is named) into :data:`HERE`."""
    names = argv or list(SCREENS)
    unknown = [name for name in names if name not in SCREENS]
    if unknown:
        print(f"unknown screenshot(s): {', '.join(unknown)}; known: {', '.join(SCREENS)}")
        return 2
    for name in names:
        path = anyio.run(take_screenshot, name, HERE)
        print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
