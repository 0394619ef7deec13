"""Shared helpers of the feature packages' dialog tests (approval and question).

Both features show their dialogs through chord's ``Tui`` service, so their tests need the same
two presentations: :class:`DialogApp`, a minimal Textual app around :class:`TextualTui`, and
:class:`ScriptedTui`, the ``Tui`` contract without a terminal, where each dialog becomes a
:class:`Prompt` the test answers; and the same stand-in session side, :class:`ScriptedDialogs`
(each feature's conftest names its service and answer method). :func:`presentation` joins a
presentation facet host to a session host's services through the loopback source,
:func:`shown` runs a :class:`DialogApp` joined so to a :class:`ScriptedDialogs`; :func:`worker`
and :func:`wire_presentation` do the same across two real processes. ``tests/facets/conftest.py`` puts this
folder on ``sys.path`` (importlib mode cannot import a conftest module by name).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import anyio
import anyio.abc
from anyio.abc import TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream
from textual import events
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Label, OptionList, Static

from chord.context import BACKGROUND, Context, cancel_scope
from chord.facets import Facet, FacetEnvironment, FacetHost, create_facet_host, define_facet
from chord.facets.environment import ServiceSpawner
from chord.remote import LoopbackServiceSource
from chord.services import Service
from chord.textual import Choice, ChoiceScreen, TextualTui, tui_facet
from chord.transport import connect_unix
from chord.wire import connect_service_source
from pico3 import HarnessServiceApi
from pico3.harness import ConversationHandle


class DialogApp(App[None]):
    """A minimal app around :class:`TextualTui` that reports screen changes as events and
    routes keys through ``TextualTui.handle_key`` (as the coding agent's app does)."""

    def __init__(self) -> None:
        super().__init__()
        self.tui = TextualTui(self, ready=False)
        self._changed = anyio.Event()

    def compose(self) -> ComposeResult:
        yield Vertical(id="panels")

    def on_mount(self) -> None:
        self.screen_change_signal.subscribe(self, self._screen_changed)
        self.tui.mark_ready()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and self.tui.handle_key(event):
            return
        await super().on_event(event)

    def _screen_changed(self, _screen: Screen[Any]) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait (on screen-change events, never a timer) until ``predicate()`` holds."""
        with anyio.fail_after(60):  # a deadline, not a pace: loaded machines are slow
            while not predicate():
                await self._changed.wait()

    def dialog(self) -> ChoiceScreen | None:
        screen = self.screen
        return screen if isinstance(screen, ChoiceScreen) else None

    async def shown_dialog(self, pilot: Any) -> ChoiceScreen:
        """The dialog on screen once it takes answers: a dialog answers nothing while it arms
        (``ARMING_SECONDS`` after it appears), so keys are pressed only once it is armed.
        Polls the dialog's state between frames, with a deadline."""
        await self.until(lambda: self.dialog() is not None)
        with anyio.fail_after(60):
            while not ((screen := self.dialog()) is not None and screen.armed):
                await pilot.pause(0.01)
        return screen


def dialog_title(screen: ChoiceScreen) -> str:
    return str(screen.query_one(".title", Label).content)


def dialog_body(screen: ChoiceScreen) -> str:
    return str(screen.query_one(".body Static", Static).content)


def dialog_options(screen: ChoiceScreen) -> list[str]:
    options = screen.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


@asynccontextmanager
async def presentation(
    session: FacetHost, facets: Sequence[Facet], tui: Any, group: TaskGroup
) -> AsyncIterator[FacetHost]:
    """A presentation host (``Tui`` from ``tui`` plus ``facets``) using ``session``'s services."""
    source = LoopbackServiceSource(session.services, task_group=group)
    async with create_facet_host([tui_facet(tui), *facets], service_sources=[source]) as host:
        yield host


@dataclass
class FeatureSession:
    """A session worker composed as the app composes it (each feature's ``session()`` test
    helper makes one): its harness service, its facet host and the task group its services run
    in (what :func:`presentation` joins a presentation host to)."""

    worker: HarnessServiceApi
    host: FacetHost
    group: TaskGroup

    async def root(self) -> ConversationHandle:
        """The root conversation."""
        return await self.worker.harness.root(BACKGROUND)

    async def tool_slot(self, index: int = 0) -> dict[str, Any]:
        """The ``index``-th tool slot of the root conversation's turn (its memos, its state)."""
        sticky = await (await self.root()).sticky(BACKGROUND)
        return sticky["turn"]["tools"][index]

    async def result_entries(self) -> list[Any]:
        """The tool result entries of the root conversation, oldest first."""
        entries = await (await self.root()).entries(BACKGROUND, limit=100)
        return [e for e in reversed(entries) if e.kind == "pi.tool_result"]


@asynccontextmanager
async def shown(
    app: DialogApp, scripted: ScriptedDialogs[Any], facets: Sequence[Facet]
) -> AsyncIterator[Pilot[None]]:
    """``app`` running under Pilot, its presentation host (``facets``: the feature's TUI facet)
    joined to a session host of ``scripted``'s facet; everything stops when the block ends."""
    async with (
        app.run_test() as pilot,
        anyio.create_task_group() as group,
        create_facet_host([scripted.facet]) as session,
        presentation(session, facets, app.tui, group),
    ):
        yield pilot
        group.cancel_scope.cancel()


_Answer = TypeVar("_Answer")


class ScriptedDialog(Generic[_Answer]):
    """A contract-conforming dialog instance that records the answers it receives (``answers``,
    each checked by the contract; ``answered`` is set at the first).

    Only ``implementation`` (the request state and the answer method) is spawned; the recording
    stays on this object, out of the service's members.
    """

    def __init__(
        self,
        env: FacetEnvironment,
        request: dict[str, Any],
        method: str,
        check: Callable[[Any, dict[str, Any]], _Answer],
    ) -> None:
        self.answers: list[_Answer] = []
        self.answered = anyio.Event()

        async def answer(value: Any, ctx: Context) -> None:
            self.answers.append(check(value, request))
            self.answered.set()

        self.implementation = {"request": env.replicated_state(request), method: answer}


class ScriptedDialogs(Generic[_Answer]):
    """A stand-in session host of a dialog feature: provides ``service`` (the contract's keyed
    dialogs) and spawns a :class:`ScriptedDialog` for each :meth:`open`. ``method`` is the
    contract's answer method (``decide``, ``submit``) and ``check`` its check of an answer
    against the request; ``feature`` names the facet (``test/<feature>-session``)."""

    def __init__(
        self,
        service: Service[Any],
        method: str,
        check: Callable[[Any, dict[str, Any]], _Answer],
        feature: str,
    ) -> None:
        self.env: FacetEnvironment | None = None
        self.spawner: ServiceSpawner[Any] | None = None
        self._method = method
        self._check = check

        def setup(env: FacetEnvironment) -> None:
            self.env = env
            self.spawner = env.provide_many(service)

        self.facet = define_facet(f"test/{feature}-session", setup)

    def open(
        self, key: str, request: dict[str, Any]
    ) -> tuple[ScriptedDialog[_Answer], Callable[[], None]]:
        """A dialog instance for ``request`` under ``key`` and the function that closes it."""
        assert self.env is not None and self.spawner is not None
        dialog = ScriptedDialog(self.env, request, self._method, self._check)
        return dialog, self.spawner.spawn(key, dialog.implementation)


class Prompt:
    """One dialog a :class:`ScriptedTui` shows: what it asked, and a way to answer it."""

    def __init__(
        self,
        title: str,
        choices: list[str],
        body: str,
        allow_text: bool,
        labels: list[str] | None = None,
    ) -> None:
        self.title = title
        self.choices = choices
        self.labels = labels if labels is not None else list(choices)
        """What each choice says (its value when it is a plain string)."""
        self.body = body
        self.allow_text = allow_text
        self.dismissed = anyio.Event()
        self._answered = anyio.Event()
        self._answer: str | None = None

    def answer(self, value: str | None) -> None:
        self._answer = value
        self._answered.set()


class _ScriptedModal:
    def __init__(self, tui: ScriptedTui, ctx: Context) -> None:
        self._tui = tui
        self._ctx = ctx
        self._prompt: Prompt | None = None
        self._closed = False

    async def confirm(
        self, title: str, body: str = "", *, yes: str = "Allow", no: str = "Deny"
    ) -> bool:
        raise AssertionError(f"the {self._tui.feature} facet asks with choices, never a yes/no")

    async def choose(
        self,
        title: str,
        choices: Sequence[Choice | str],
        *,
        body: Any = "",
        allow_text: bool = False,
        hint: str = "",
    ) -> str | None:
        del hint
        values = [c if isinstance(c, str) else c.value for c in choices]
        labels = [c if isinstance(c, str) else (c.label or c.value) for c in choices]
        prompt = Prompt(title, values, str(body), allow_text, labels)
        self._prompt = prompt
        self._tui.show(prompt)
        with cancel_scope(self._ctx):
            await prompt._answered.wait()
        return prompt._answer

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._prompt is not None and not self._prompt._answered.is_set():
            self._prompt.dismissed.set()
        self._tui._lock.release()


class ScriptedTui:
    """chord's ``Tui`` contract without a terminal: each dialog becomes a :class:`Prompt` that
    the test answers (one at a time, like the real modal slot). ``feature`` names the facet
    under test in the errors its unexpected calls raise."""

    feature: ClassVar[str] = "dialog"

    def __init__(self) -> None:
        self.prompts: list[Prompt] = []
        self._taken = 0
        self._changed = anyio.Event()
        self._lock = anyio.Lock()

    def show(self, prompt: Prompt) -> None:
        self.prompts.append(prompt)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def next_prompt(self) -> Prompt:
        """The next dialog shown (in order), waiting for it."""
        with anyio.fail_after(60):  # a deadline, not a pace
            while len(self.prompts) <= self._taken:
                await self._changed.wait()
        self._taken += 1
        return self.prompts[self._taken - 1]

    async def acquire_modal(self, ctx: Context) -> _ScriptedModal:
        with cancel_scope(ctx):
            await self._lock.acquire()
        return _ScriptedModal(self, ctx)

    def notify(self, message: str, *, severity: str = "information") -> None:
        raise AssertionError(f"unexpected toast {message!r}")

    def register_command(self, name: str, description: str, handler: Any) -> Callable[[], None]:
        raise AssertionError(f"the {self.feature} facet registers no command")

    def mount_panel(self, panel_id: str, factory: Any) -> Callable[[], None]:
        raise AssertionError(f"the {self.feature} facet mounts no panel")

    def register_key(self, key: str, description: str, handler: Any) -> Callable[[], None]:
        raise AssertionError(f"the {self.feature} dialog facet registers no key")


WORKER_TIMEOUT = 30
"""Seconds any wait on a worker process may take."""


class Worker:
    """The session worker process and the lines it printed, read in order."""

    def __init__(self, process: anyio.abc.Process, socket: Path) -> None:
        self.process = process
        self.socket = socket
        self.lines: list[str] = []
        assert process.stdout is not None
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def until(self, prefix: str) -> str:
        """Read lines until one starting with ``prefix`` (already read ones count); returns it."""
        with anyio.fail_after(WORKER_TIMEOUT):
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line
                raw = await self._stdout.receive_until(b"\n", 4096)
                self.lines.append(raw.decode())

    async def stop(self) -> None:
        """End the worker the polite way (its stdin closes) and wait for it."""
        if self.process.returncode is None:
            assert self.process.stdin is not None
            await self.process.stdin.aclose()
            with anyio.fail_after(WORKER_TIMEOUT):
                await self.process.wait()

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        with anyio.fail_after(WORKER_TIMEOUT):
            await self.process.wait()


@asynccontextmanager
async def worker(script: Path, state: Path, name: str, *options: str) -> AsyncIterator[Worker]:
    """Run ``script STATE SOCKET OPTIONS...`` (a feature's session worker) until it prints
    ``READY``; stopped through its stdin afterwards."""
    socket = state / f"{name}.sock"
    argv = [sys.executable, str(script), str(state), str(socket), *options]
    process = await anyio.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    child = Worker(process, socket)
    try:
        await child.until("READY")
        yield child
    finally:
        with anyio.CancelScope(shield=True):
            await child.stop()
            await process.aclose()


@asynccontextmanager
async def wire_presentation(child: Worker, tui: Any, facet: Facet) -> AsyncIterator[Any]:
    """A TUI-process facet host: the feature's TUI ``facet`` over ``tui``, using the worker's
    services through a wire source; yields ``tui``.

    The worker is gone before the presentation is torn down (the test stops or kills it first),
    so the wire client ends on end-of-stream rather than being cancelled mid-read: anyio 4.16's
    asyncio UNIX socket stream can raise ``InvalidStateError`` from its reader callback when a
    receive is cancelled just as data arrives (cf. agronholm/anyio#1267).
    """
    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(child.socket), task_group=group)
        async with create_facet_host([tui_facet(tui), facet], service_sources=[source]):
            yield tui
        await source.aclose()
        group.cancel_scope.cancel()
