"""The client tests run the real thing: a session worker subprocess and the TUI over its socket.

Each test gets its own ``XDG_STATE_HOME`` (so sessions never leak into the user's), a small
project folder, and an environment without provider keys, so the worker runs the offline
``faux`` model. :func:`script` writes a faux script file (the worker's ``--faux-script``) when a
test needs the model to do something specific.

Waiting is always on state: :func:`wait_for` polls a predicate over the app, the client or the
file system between Textual frames, bounded by a deadline. Nothing sleeps to synchronise.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from textual.notifications import Notification, Notifications
from textual.widgets import OptionList

from chord.textual import ChoiceScreen, DialogScreen
from coding_agent.session_files.folders import Session, create_session
from coding_agent.supervisor import WorkerSupervisor
from coding_agent.tui import ClientRun, CodingAgentApp, run_client

TIMEOUT = 60.0
"""Seconds any single wait may take (a worker start on a busy machine is the slow part)."""

SIZE = (110, 45)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("# Sample project\n\nA project for the client tests.\n")
    (folder / "main.py").write_text("print('hello')\n")
    return folder


@pytest.fixture
def session(project: Path, agent_env: dict[str, str]) -> Session:
    return create_session(project, env=agent_env)


def script(
    folder: Path, steps: list[dict[str, Any]], *, models: list[dict[str, Any]] | None = None
) -> Path:
    """Write a faux script (a list of ``{text?, thinking?, toolCalls?, error?}``) and return it.
    ``models`` (``{"id", "reasoning"?, "images"?}`` each) adds faux models beside ``faux-1``: an
    unknown ``--model faux/ID`` is refused, so a test's made-up model is declared here."""
    path = folder / "faux-script.json"
    path.write_text(json.dumps(steps if models is None else {"steps": steps, "models": models}))
    return path


FAUX_BIG = [{"id": "faux-big"}]
"""A faux model that cannot reason and takes no images (what faux-1 can), for ``models=``."""


def supervisor(
    session: Session, agent_env: dict[str, str], *, faux_script: Path | None = None
) -> WorkerSupervisor:
    """A supervisor whose workers die with the test process (their stdin is ours)."""
    return WorkerSupervisor(
        session,
        exit_with_parent=True,
        env=agent_env,
        faux_script=faux_script,
        on_event=lambda line: print(f"supervisor: {line}"),  # shown when a test fails
    )


async def drive(
    session: Session,
    keeper: WorkerSupervisor | None,
    test: Callable[[Any], Awaitable[None]],
) -> ClientRun:
    """Run the TUI of ``session`` headless and drive it with ``test(pilot)``; the app exits after.

    ``keeper`` is the supervisor (``None``: attach to a worker someone else keeps). A failing
    ``test`` fails the call with its own exception.
    """

    async def pilot_then_exit(pilot: Any) -> None:
        await test(pilot)
        pilot.app.exit()

    with anyio.fail_after(TIMEOUT * 4):
        return await run_client(
            session, supervisor=keeper, headless=True, size=SIZE, auto_pilot=pilot_then_exit
        )


async def wait_for(pilot: Any, predicate: Callable[[], object], what: str) -> None:
    """Let the app run until ``predicate()`` is true; fail naming ``what`` after the deadline."""
    try:
        with anyio.fail_after(TIMEOUT):
            while not predicate():
                await pilot.pause(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for: {what}") from None


def app_of(pilot: Any) -> CodingAgentApp:
    app = pilot.app
    assert isinstance(app, CodingAgentApp)
    return app


def entries(app: CodingAgentApp) -> list[dict[str, Any]]:
    """The transcript entries of the newest view (empty while unavailable)."""
    view = app.view
    return list(view["entries"]) if isinstance(view, dict) else []


def kinds(app: CodingAgentApp) -> list[str]:
    return [entry["kind"] for entry in entries(app)]


def idle(app: CodingAgentApp) -> bool:
    """True when a view is there and no turn runs."""
    view = app.view
    return isinstance(view, dict) and "turn" not in view


def assistant_texts(app: CodingAgentApp) -> list[str]:
    """The text blocks of every finished assistant entry, in order."""
    texts: list[str] = []
    for entry in entries(app):
        if entry["kind"] != "pi.assistant":
            continue
        for message in entry.get("model", []):
            for block in message.get("content", []):
                if block.get("type") == "text":
                    texts.append(block["text"])
    return texts


def tool_results(app: CodingAgentApp) -> list[dict[str, Any]]:
    """Tool result entries (``pi.toolResult`` or whatever kind carries ``toolCallId``)."""
    found: list[dict[str, Any]] = []
    for entry in entries(app):
        for message in entry.get("model", []):
            if message.get("role") == "toolResult":
                found.append(message)
    return found


def kill_worker(keeper: WorkerSupervisor) -> int:
    """SIGKILL the worker ``keeper`` started; returns its pid."""
    pid = keeper.pid
    assert pid is not None, "the supervisor has no running worker"
    os.kill(pid, signal.SIGKILL)
    return pid


_SHOWN: dict[int, list[Notification]] = {}
"""Every notification added to a live app's notification list (by the list's id), in order."""


@pytest.fixture(autouse=True)
def _record_toasts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Record every toast as it is shown: Textual's own list drops a toast once it expires
    (5 s), so a test that reads the toasts after a slow wait on a loaded machine would find an
    earlier one gone."""
    add = Notifications.add

    def recording_add(self: Notifications, notification: Notification) -> Notifications:
        _SHOWN.setdefault(id(self), []).append(notification)
        return add(self, notification)

    monkeypatch.setattr(Notifications, "add", recording_add)
    try:
        yield
    finally:
        _SHOWN.clear()


def toasts(app: Any) -> list[tuple[str, str]]:
    """``(severity, message)`` of every toast the app has shown so far (expired ones too)."""
    shown = _SHOWN.get(id(app._notifications))
    if shown is None:  # none recorded (an app made outside the fixture): the live ones
        shown = list(app._notifications)
    return [(n.severity, n.message) for n in shown]


def dialog_ready(app: Any, kind: type[DialogScreen[Any]] = DialogScreen) -> bool:
    """Whether a ``kind`` dialog is on screen and takes answers (chord's dialogs answer
    nothing while they arm, ``ARMING_SECONDS`` after they appear: press keys only then)."""
    screen = app.screen
    return isinstance(screen, kind) and screen.armed


def dialog_title(app: Any) -> str | None:
    """The title of the dialog on screen once it takes answers (``None`` before)."""
    if not dialog_ready(app):
        return None
    return str(app.screen.query_one(".title").render())


def picker_open(app: Any, title: str) -> bool:
    """Whether a choice dialog titled ``title`` is on screen (and, for chord's dialogs,
    armed: ready for keys)."""
    from coding_agent.tui.widgets.session_picker import SessionPickerScreen

    screen = app.screen
    if isinstance(screen, ChoiceScreen):
        return title in (dialog_title(app) or "")
    if not isinstance(screen, SessionPickerScreen):
        return False
    titles = screen.query(".title")  # empty while the screen still composes: not open yet
    return bool(titles) and title in str(titles.first().render())


_NUMBER = re.compile(r"[1-9]\. ")


def options(app: Any) -> list[str]:
    """The option labels of the choice dialog on screen (without a dialog's ``1.`` numbers)."""
    listing = app.screen.query_one(OptionList)
    labels = [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]
    if isinstance(app.screen, ChoiceScreen):
        labels = [_NUMBER.sub("", label, count=1) for label in labels]
    return labels


@pytest.fixture
def kit() -> SimpleNamespace:
    """The helpers above, for test modules (conftest is not importable in importlib mode)."""
    return SimpleNamespace(
        TIMEOUT=TIMEOUT,
        app_of=app_of,
        assistant_texts=assistant_texts,
        dialog_ready=dialog_ready,
        dialog_title=dialog_title,
        drive=drive,
        entries=entries,
        idle=idle,
        kill_worker=kill_worker,
        kinds=kinds,
        options=options,
        picker_open=picker_open,
        script=script,
        FAUX_BIG=FAUX_BIG,
        supervisor=supervisor,
        toasts=toasts,
        tool_results=tool_results,
        wait_for=wait_for,
    )
