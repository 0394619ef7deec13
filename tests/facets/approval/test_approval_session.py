"""The approval feature end to end: a harness with a faux model, the session facet in a session
host, and presentation hosts (the real TUI facet over a scripted ``Tui``) joined through chord's
loopback source — docs/design/chord.md#observe and issue 7's bad input.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import dialog_support
import pytest
from textual import events

from chord.context import BACKGROUND, Context, cancel_scope
from chord.facets import Facet, FacetEnvironment, create_facet_host, define_facet
from chord.remote import RemoteServiceError, ServiceCall
from chord.services import InstanceAddress
from facets_approval.contract import ApprovalDialogs
from facets_approval.session import ApprovalRules, approval_session_facet, session_facet
from facets_approval.tui import tui_facet
from pico3 import HarnessService, HarnessServiceApi, harness_session_facet
from pico3.harness import Harness, HarnessOptions
from pico3.models.faux import FauxProvider, FauxStep, faux_response, faux_tool_call
from pico3.storage import JsonlStorage, MemoryStorage, Storage
from pico3.tools import ToolDeclaration, ToolResult
from pico3.turn.models import Models
from pico3.turn.tool import TOOL_KIND

pytestmark = pytest.mark.anyio

MODEL = {"provider": "faux", "modelId": "faux-1"}
DECISION_MEMO = "hook:approval:decision"


@dataclass
class Tools:
    """``bash`` and ``read`` tools that record their runs."""

    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list[tuple[str, dict[str, Any]]])

    def declaration(self, name: str) -> ToolDeclaration:
        async def execute(args: dict[str, Any], api: Any, ctx: Context) -> ToolResult:
            self.runs.append((name, args))
            return ToolResult.text(f"{name} ran")

        schema = {"type": "object", "properties": {"command": {"type": "string"}}}
        return ToolDeclaration(name, f"The {name} tool.", schema, execute)


@dataclass
class Session(dialog_support.FeatureSession):
    """The session worker (:class:`dialog_support.FeatureSession`) and the tools it runs."""

    tools: Tools

    async def results(self) -> list[dict[str, Any]]:
        """The tool result messages of the root conversation, oldest first."""
        return [_message(e) for e in await self.result_entries()]

    async def run(self, text: str) -> None:
        """Send ``text`` and wait until its turn is done."""
        handle = await (await self.root()).send(text, BACKGROUND)
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)


def _message(entry: Any) -> dict[str, Any]:
    return entry.model[0]


def storage_at(path: Path) -> Callable[[], Storage]:
    return lambda: JsonlStorage(path / "session", fsync=False)


Install = Callable[[Harness], Callable[[], None]]


@asynccontextmanager
async def session(
    script: Sequence[FauxStep],
    facets: Sequence[Facet] = (session_facet,),
    *,
    storage: Callable[[], Storage] = MemoryStorage,
    extra: Sequence[Install] = (),
) -> AsyncIterator[Session]:
    """A session worker as the app composes it: pico3's harness session facet, the feature's
    session facets, and the worker's own facet (registers the bash and read tools, plus
    ``extra``); dispatch resumes once the host is up (docs/design/chord.md#built-in-services)."""
    tools = Tools()
    options = HarnessOptions(services={"models": Models([FauxProvider(script)])})
    workers: list[HarnessServiceApi] = []

    def worker(env: FacetEnvironment) -> None:
        harness = env.use(HarnessService)
        workers.append(harness)

        def activate() -> None:
            for name in ("bash", "read"):
                declaration = tools.declaration(name)
                env.own(harness.add_registration(lambda h, d=declaration: h.register_tool(d)))
            for install in extra:
                env.own(harness.add_registration(install))

        env.on_activate(activate)

    async with anyio.create_task_group() as group:
        harness_facet = harness_session_facet(storage, options, task_group=group)
        async with create_facet_host(
            [harness_facet, *facets, define_facet("test/worker", worker)]
        ) as host:
            (service,) = workers
            await service.resume(BACKGROUND)
            root = await service.harness.root(BACKGROUND)
            await root.set_config({"model": MODEL, "selectedTools": ["bash", "read"]}, BACKGROUND)
            yield Session(service, host, group, tools)
        group.cancel_scope.cancel()


@asynccontextmanager
async def presentation(s: Session, kit: Any) -> AsyncIterator[Any]:
    """A presentation host with the approval TUI facet over a scripted ``Tui``."""
    tui = kit.ScriptedTui()
    async with kit.presentation(s.host, [tui_facet], tui, s.group):
        yield tui


def calls(*names: str) -> FauxStep:
    """One model response calling each of ``names`` once (ids ``call-<i>``)."""
    blocks = [
        faux_tool_call(name, {"command": f"{name} {i}"}, id=f"call-{i}")
        for i, name in enumerate(names)
    ]
    return faux_response(*blocks)


async def test_an_allowed_call_runs_after_the_dialog_and_the_view_shows_waiting(kit: Any) -> None:
    async with session([calls("bash"), faux_response("done")]) as s, presentation(s, kit) as tui:
        root = await s.root()
        handle = await root.send("go", BACKGROUND)
        prompt = await tui.next_prompt()
        # The observer task got the hydrated request: the call, its args, its ids.
        assert prompt.title == "Allow bash?"
        assert prompt.body == "$ bash 0"
        assert prompt.choices == ["allow", "rule:session", "deny"]
        slot = await s.tool_slot()
        assert slot["waitingOn"] == "approval"
        assert s.tools.runs == []
        prompt.answer("allow")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert s.tools.runs == [("bash", {"command": "bash 0"})]
        (result,) = await s.results()
        assert result["isError"] is False
        assert result["content"][0]["text"] == "bash ran"


async def test_a_denied_call_is_blocked_with_who_denied_it(kit: Any) -> None:
    async with session([calls("bash"), faux_response("ok")]) as s, presentation(s, kit) as tui:
        handle = await (await s.root()).send("go", BACKGROUND)
        (await tui.next_prompt()).answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert s.tools.runs == []
        (result,) = await s.results()
        assert result["isError"] is True
        assert "the user denied this call" in result["content"][0]["text"]


async def test_a_session_rule_is_kept_in_the_root_rewindable_document(kit: Any) -> None:
    script = [calls("bash"), faux_response("one"), calls("bash"), faux_response("two")]
    async with session(script) as s, presentation(s, kit) as tui:
        handle = await (await s.root()).send("first", BACKGROUND)
        (await tui.next_prompt()).answer("rule:session")  # "Allow Bash(bash 0) in this session"
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        rewindable = await (await s.root()).rewindable(BACKGROUND)
        assert rewindable["plugins"]["approval"]["rules"] == ["Bash(bash 0)"]
        await s.run("second")  # not asked again
        assert len(tui.prompts) == 1
        assert [name for name, _ in s.tools.runs] == ["bash", "bash"]


async def test_read_only_tools_run_without_asking_and_rules_are_configurable(kit: Any) -> None:
    async with (
        session([calls("read", "bash"), faux_response("ok")]) as s,
        presentation(s, kit) as tui,
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        prompt = await tui.next_prompt()
        assert prompt.title == "Allow bash?"  # read did not ask
        prompt.answer("allow")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert len(tui.prompts) == 1
        assert sorted(name for name, _ in s.tools.runs) == ["bash", "read"]

    only_read = approval_session_facet(ApprovalRules(frozenset({"read"})))
    async with (
        session([calls("read", "bash"), faux_response("ok")], [only_read]) as s,
        presentation(s, kit) as tui,
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        prompt = await tui.next_prompt()
        assert prompt.title == "Allow read?"
        prompt.answer("deny")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        assert [name for name, _ in s.tools.runs] == ["bash"]
        assert len(tui.prompts) == 1


def test_rules_reject_a_bare_string() -> None:
    with pytest.raises(TypeError, match="set of non-empty tool names"):
        ApprovalRules("bash")  # type: ignore[arg-type]
    assert ApprovalRules(frozenset({"*"})).needs_approval("anything")


async def test_a_late_presentation_sees_and_answers_the_open_dialog(kit: Any) -> None:
    # docs/design/chord.md#observe: late-joiner hydration of an open dialog instance
    seen: list[Any] = []
    opened = anyio.Event()

    def watcher(env: FacetEnvironment) -> None:
        async def record(dialog: Any, ctx: Context) -> None:
            seen.append(dialog.request.value)
            opened.set()

        env.observe(ApprovalDialogs, record)

    async with session([calls("bash"), faux_response("ok")]) as s:
        handle = await (await s.root()).send("go", BACKGROUND)
        async with kit.presentation(
            s.host, [define_facet("watcher", watcher)], kit.ScriptedTui(), s.group
        ):
            with anyio.fail_after(10):
                await opened.wait()  # the dialog is open; nobody has answered
        async with presentation(s, kit) as late:
            prompt = await late.next_prompt()
            assert prompt.title == "Allow bash?"
            prompt.answer("allow")
            with anyio.fail_after(10):
                await handle.wait(BACKGROUND)
        assert seen[0]["name"] == "bash" and seen[0]["callId"] == "call-0"
        assert s.tools.runs == [("bash", {"command": "bash 0"})]


async def test_the_first_decision_wins_and_closing_dismisses_every_presentation(kit: Any) -> None:
    async with (
        session([calls("bash"), faux_response("ok")]) as s,
        presentation(s, kit) as first,
        presentation(s, kit) as second,
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        one = await first.next_prompt()
        two = await second.next_prompt()
        one.answer("deny")
        with anyio.fail_after(10):
            await two.dismissed.wait()  # the instance closed: the other dialog went away
            await handle.wait(BACKGROUND)
        assert s.tools.runs == []
        (result,) = await s.results()
        assert "the user denied this call" in result["content"][0]["text"]


async def test_bad_decisions_and_unknown_keys_are_refused_and_nothing_is_recorded(
    kit: Any,
) -> None:
    # issue 7 "Bad input"
    dialogs: list[Any] = []
    opened = anyio.Event()

    def client(env: FacetEnvironment) -> None:
        async def hold(dialog: Any, ctx: Context) -> None:
            dialogs.append(dialog)
            opened.set()
            await ctx.wait_cancelled()

        env.observe(ApprovalDialogs, hold)

    async with session([calls("bash"), faux_response("ok")]) as s:
        handle = await (await s.root()).send("go", BACKGROUND)
        async with kit.presentation(
            s.host, [define_facet("client", client)], kit.ScriptedTui(), s.group
        ):
            with anyio.fail_after(10):
                await opened.wait()
            (dialog,) = dialogs
            bad: list[Any] = [
                {"decision": "maybe"},
                {"decision": "deny", "always": True},
                {"decision": "allow", "rule": "Bash(*)", "scope": "session"},  # not offered
                {"decision": "allow", "rule": "Bash(bash 0)", "scope": "user"},  # not offered
                {"decision": "allow", "by": 3},
                {"decision": "allow", "reason": "x"},
                "allow",
            ]
            for value in bad:
                with pytest.raises(RemoteServiceError) as caught:
                    await dialog.decide(value, BACKGROUND)
                assert caught.value.code == "service_invalid_value"
                assert "Invalid approval decision" in caught.value.message
            with pytest.raises(RemoteServiceError, match="'allow' or 'deny', got 'maybe'"):
                await dialog.decide({"decision": "maybe"}, BACKGROUND)
            missing = ServiceCall(
                ApprovalDialogs.id, "decide", ({"decision": "allow"},), InstanceAddress("1:nope", 1)
            )
            with pytest.raises(RemoteServiceError) as unknown:
                await s.host.services.invoke(missing, BACKGROUND)
            assert unknown.value.code == "service_instance_not_found"
            for name in ("wait", "_wait"):  # only request and decide are served
                hidden = ServiceCall(ApprovalDialogs.id, name, (), InstanceAddress("1:call-0", 1))
                with pytest.raises(RemoteServiceError) as caught_member, anyio.fail_after(5):
                    await s.host.services.invoke(hidden, BACKGROUND)
                assert caught_member.value.code == "service_member_not_found"
            slot = await s.tool_slot()
            assert DECISION_MEMO not in slot.get("memos", {})  # nothing recorded
            assert slot["waitingOn"] == "approval" and s.tools.runs == []
            await dialog.decide({"decision": "allow", "by": "client"}, BACKGROUND)
            with anyio.fail_after(10):
                await handle.wait(BACKGROUND)
        assert s.tools.runs == [("bash", {"command": "bash 0"})]


async def test_suspend_and_reopen_do_not_ask_again_when_the_decision_is_recorded(
    kit: Any, tmp_path: Path
) -> None:
    # docs/design/reload.md#suspend-and-reopen: a pending call is approved through the new generation without asking
    # twice when a memo exists. A second before_tool hook (namespace "gate") holds the call
    # after the approval memo is written, so the suspend finds it pending with a memo.
    gate_open = anyio.Event()
    held = anyio.Event()

    def install_gate(h: Harness) -> Callable[[], None]:
        ns = h.namespace("gate", {})

        async def before_tool(call: dict[str, Any], api: Any, ctx: Context) -> None:
            held.set()
            with cancel_scope(ctx):
                await gate_open.wait()

        unhook = h.hooks(ns, TOOL_KIND, {"before_tool": before_tool})

        def undo() -> None:
            unhook()
            ns.unregister()

        return undo

    async with (
        session(
            [calls("bash"), faux_response("ok")],
            storage=storage_at(tmp_path),
            extra=[install_gate],
        ) as s,
        presentation(s, kit) as tui,
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        (await tui.next_prompt()).answer("allow")
        with anyio.fail_after(10):
            await held.wait()
        assert (await s.tool_slot())["memos"][DECISION_MEMO] == {"decision": "allow", "by": "tui"}
        await s.worker.suspend(BACKGROUND)
        gate_open.set()
        await s.worker.reopen(BACKGROUND)
        root = await s.root()
        with anyio.fail_after(10):
            await root.wait_for_idle(BACKGROUND)
        assert len(tui.prompts) == 1  # not asked twice
        assert s.tools.runs == [("bash", {"command": "bash 0"})]
        del handle


async def test_the_textual_modal_keeps_a_narrow_session_rule(kit: Any) -> None:
    # The whole chain: model call -> hook -> dialog instance -> Textual modal (Pilot) -> memo.
    app = kit.DialogApp()
    script = [calls("bash"), faux_response("one"), calls("bash"), faux_response("two")]
    async with (
        session(script) as s,
        app.run_test() as pilot,
        kit.presentation(s.host, [tui_facet], app.tui, s.group),
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        screen = await app.shown_dialog(pilot)
        assert kit.title(screen) == "Allow bash?"
        assert kit.body(screen) == "$ bash 0"
        assert kit.options(screen)[1] == "2. Allow Bash(bash 0) in this session"
        await pilot.press("down", "enter")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        await app.until(lambda: app.dialog() is None)
        await s.run("again")  # auto-allowed: no dialog
        assert app.dialog() is None
        assert [name for name, _ in s.tools.runs] == ["bash", "bash"]
        rewindable = await (await s.root()).rewindable(BACKGROUND)
        assert rewindable["plugins"]["approval"]["rules"] == ["Bash(bash 0)"]


NOTICE = "Already answered in another window (or no longer needed): Allow bash?"


async def _notices(app: Any, pilot: Any) -> list[str]:
    """The toasts ``app`` showed, once it handled the ones posted so far."""
    await pilot.pause()
    return [n.message for n in app._notifications]


async def test_another_window_answering_closes_the_dialog_here_with_a_notice(kit: Any) -> None:
    # Two presentations of one session: the Textual one (Pilot) and a scripted one. The
    # scripted window answers; the dialog on the Textual screen goes, saying why.
    app = kit.DialogApp()
    async with (
        session([calls("bash"), faux_response("done")]) as s,
        app.run_test() as pilot,
        kit.presentation(s.host, [tui_facet], app.tui, s.group),
        presentation(s, kit) as other,
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        screen = await app.shown_dialog(pilot)
        prompt = await other.next_prompt()
        prompt.answer("allow")
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        await app.until(lambda: app.dialog() is None)
        with anyio.fail_after(10):
            while NOTICE not in await _notices(app, pilot):
                pass
        assert screen.answered and len(app.screen_stack) == 1
        await pilot.press("enter")  # a late key reaches the editor's screen, not the dialog
        assert s.tools.runs == [("bash", {"command": "bash 0"})]


async def test_two_windows_answering_at_once_make_one_decision_and_no_crash(kit: Any) -> None:
    app = kit.DialogApp()
    script = [calls("bash"), faux_response("done"), calls("bash"), faux_response("two")]
    async with (
        session(script) as s,
        app.run_test() as pilot,
        kit.presentation(s.host, [tui_facet], app.tui, s.group),
        presentation(s, kit) as other,
    ):
        handle = await (await s.root()).send("go", BACKGROUND)
        screen = await app.shown_dialog(pilot)
        prompt = await other.next_prompt()
        # At once: the other window denies, this one presses Enter (Allow) twice.
        prompt.answer("deny")
        app.post_message(events.Key("enter", None))
        app.post_message(events.Key("enter", None))
        with anyio.fail_after(10):
            await handle.wait(BACKGROUND)
        await app.until(lambda: app.dialog() is None)
        assert screen.answered and len(app.screen_stack) == 1
        # One decision, whichever came first: the call ran once or not at all, and each window
        # was asked once.
        assert s.tools.runs in ([], [("bash", {"command": "bash 0"})])
        assert len(other.prompts) == 1
        # The session and both windows go on: the next call asks both again; Deny here.
        again = await (await s.root()).send("again", BACKGROUND)
        await other.next_prompt()
        second = await app.shown_dialog(pilot)
        assert second is not screen
        await pilot.press("3", "enter")
        with anyio.fail_after(10):
            await again.wait(BACKGROUND)
        assert len(s.tools.runs) <= 1  # the second call was denied


async def test_aborting_the_conversation_closes_the_dialog_everywhere(kit: Any) -> None:
    async with session([calls("bash"), faux_response("never")]) as s, presentation(s, kit) as tui:
        root = await s.root()
        handle = await root.send("go", BACKGROUND)
        prompt = await tui.next_prompt()
        with anyio.fail_after(10):
            await root.abort(BACKGROUND)
            await prompt.dismissed.wait()  # the instance closed; the modal went away
            await handle.wait(BACKGROUND)
        assert s.tools.runs == []
        assert len(tui.prompts) == 1
