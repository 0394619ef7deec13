"""Keyed dialogs, the asking side (chord.provide_dialogs, Dialogs, dialog_key).

A session facet asks through a keyed dialog service; presentations answer through the
instance's answer method: locally (an observer in the same host) or remotely (a second host
over the loopback source, as a TUI process is joined to the session worker). The Textual side
is in tests/chord/textual/test_keyed_dialogs.py.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord import (
    BACKGROUND,
    Context,
    ContextCancelled,
    Dialogs,
    FacetEnvironment,
    RemoteServiceError,
    create_facet_host,
    define_facet,
    define_service,
    dialog_key,
    provide_dialogs,
    with_cancel,
)
from chord.remote import LoopbackServiceSource

pytestmark = pytest.mark.anyio

Questions = define_service("test.dialogs.question")


def check_answer(value: object, request: Any) -> str:
    """The answer must be one of the request's options."""
    if value not in request["options"]:
        raise RemoteServiceError("service_invalid_value", f"not an option: {value!r}")
    return str(value)


class Spawned:
    """The facet's spawner, and an event set at each spawn (so a test waits without polling)."""

    def __init__(self, spawner: Any) -> None:
        self.spawner = spawner
        self.spawned = anyio.Event()

    def spawn(self, key: str, implementation: Any) -> Any:
        close = self.spawner.spawn(key, implementation)
        self.spawned.set()
        return close

    @property
    def keys(self) -> list[str]:
        return self.spawner.keys

    async def wait(self) -> None:
        with anyio.fail_after(10):
            await self.spawned.wait()


class Session:
    """A session facet asking through :data:`Questions`; ``dialogs`` once it is set up."""

    def __init__(self, answer: str = "submit") -> None:
        self.dialogs: Dialogs[Any, str] | None = None
        self.spawned: Spawned | None = None
        self.answer = answer

        def setup(env: FacetEnvironment) -> None:
            self.dialogs = provide_dialogs(env, Questions, check_answer, answer=self.answer)
            self.spawned = self.dialogs.spawner = Spawned(self.dialogs.spawner)

        self.facet = define_facet("test/session", setup)

    async def opened(self) -> None:
        assert self.spawned is not None
        await self.spawned.wait()

    async def ask(self, key: str, ctx: Context = BACKGROUND) -> str:
        assert self.dialogs is not None
        return await self.dialogs.ask(key, {"question": "Colour?", "options": ["red", "blue"]}, ctx)

    @property
    def keys(self) -> list[str]:
        assert self.spawned is not None
        return self.spawned.keys


class Presentation:
    """An observer that records each dialog it sees and answers with ``answers`` in turn."""

    def __init__(self, answers: list[Any], method: str = "submit") -> None:
        self.seen: list[Any] = []
        self.refused: list[str] = []
        self.closed = anyio.Event()
        self._answers = answers
        self._seen = anyio.Event()

        def setup(env: FacetEnvironment) -> None:
            async def on_dialog(dialog: Any, ctx: Context) -> None:
                self.seen.append(dialog.request.value)
                self._seen.set()
                try:
                    for value in self._answers:
                        try:
                            await getattr(dialog, method)(value, ctx)
                        except RemoteServiceError as error:
                            self.refused.append(error.message)
                    await anyio.sleep_forever()  # until the instance closes
                finally:
                    self.closed.set()

            env.observe(Questions, on_dialog)

        self.facet = define_facet("test/presentation", setup)

    async def wait_seen(self) -> None:
        with anyio.fail_after(10):
            await self._seen.wait()


def test_the_key_of_a_calls_dialog_is_conversation_and_call() -> None:
    assert dialog_key(3, "toolu_01") == "3:toolu_01"
    assert dialog_key(0, "c", 2) == "0:c:2"
    assert dialog_key(1, "c", "second") == "1:c:second"
    with pytest.raises(ValueError, match="conversation id must be a non-negative int"):
        dialog_key(-1, "c")
    with pytest.raises(ValueError, match="conversation id must be a non-negative int"):
        dialog_key(True, "c")  # a bool is not a conversation id
    with pytest.raises(ValueError, match="call id must be a non-empty str"):
        dialog_key(1, "")
    with pytest.raises(ValueError, match="a key part must be"):
        dialog_key(1, "c", "")


def test_the_answer_method_must_be_a_public_name_other_than_request() -> None:
    for name in ("request", "_answer", "not a name", ""):
        with pytest.raises(ValueError, match="answer method's name"):
            Dialogs(object(), lambda value: value, check_answer, answer=name)  # type: ignore[arg-type]


async def test_a_local_presentation_answers_the_first_accepted_answer_wins() -> None:
    session = Session(answer="decide")
    presentation = Presentation(["green", "blue", "red"], method="decide")
    async with create_facet_host([session.facet, presentation.facet]):
        with anyio.fail_after(10):
            answer = await session.ask("1:call-1")
        assert answer == "blue"  # "green" was refused; "red" came after the winner
        assert presentation.seen == [{"question": "Colour?", "options": ["red", "blue"]}]
        assert presentation.refused == ["not an option: 'green'"]
        with anyio.fail_after(10):
            await presentation.closed.wait()  # answered: the instance closed, its task ended
        assert session.keys == []


async def test_cancelling_the_ask_raises_and_dismisses_the_dialog() -> None:
    session = Session()
    presentation = Presentation([])  # sees the dialog, never answers
    async with create_facet_host([session.facet, presentation.facet]):
        ctx, cancel = with_cancel(BACKGROUND)
        outcome: list[BaseException] = []

        async def ask() -> None:
            try:
                await session.ask("1:call-1", ctx)
            except ContextCancelled as error:
                outcome.append(error)

        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            await presentation.wait_seen()
            assert session.keys == ["1:call-1"]
            cancel()
        assert len(outcome) == 1
        with anyio.fail_after(10):
            await presentation.closed.wait()
        assert session.keys == []


async def test_with_no_presentation_the_dialog_waits_for_one_to_attach() -> None:
    session = Session()
    answers: list[str] = []
    answered = anyio.Event()
    async with anyio.create_task_group() as group, create_facet_host([session.facet]) as host:

        async def ask() -> None:
            answers.append(await session.ask("1:call-1"))
            answered.set()

        group.start_soon(ask)
        await session.opened()
        assert session.keys == ["1:call-1"]
        assert answers == []  # nobody attached: nothing answers on the user's behalf

        presentation = Presentation(["red"])  # attaches later, in another host, remotely
        source = LoopbackServiceSource(host.services, task_group=group)
        async with create_facet_host([presentation.facet], service_sources=[source]):
            await presentation.wait_seen()  # the open dialog arrives with its request
            assert presentation.seen == [{"question": "Colour?", "options": ["red", "blue"]}]
            with anyio.fail_after(10):
                await answered.wait()
        assert answers == ["red"]
        assert session.keys == []
        group.cancel_scope.cancel()


async def test_a_second_ask_under_a_live_key_is_refused() -> None:
    session = Session()
    async with anyio.create_task_group() as group, create_facet_host([session.facet]):
        group.start_soon(session.ask, "1:call-1")
        await session.opened()
        with pytest.raises(RuntimeError, match="already has a live instance with key 1:call-1"):
            await session.ask("1:call-1")
        group.cancel_scope.cancel()
