"""The approval gate through the real turn loop (docs/design/harness.md#approval-gate): a call
not declared replay-safe runs only when a live approval authority ruled on it; with none it is
the ordinary blocked result the model reads, worded by the host; no reload window lets a call
through unapproved."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3 import ApprovalAuthority, HarnessHandle, reload
from pico3.harness import ConversationHandle, Harness, HarnessOptions
from pico3.models.faux import FauxProvider, faux_response, faux_tool_call
from pico3.storage import MemoryStorage
from pico3.tasks.clock import ManualClock
from pico3.tools import ToolApi, ToolDeclaration, ToolResult
from pico3.turn.models import Models
from pico3.turn.tool import TOOL_KIND

pytestmark = pytest.mark.anyio
MODEL = {"provider": "faux", "modelId": "faux-1"}
REASON = "bash needs approval and facets-approval is missing: coding-agent facets add it"


class Tools:
    """An effectful tool (``"unsafe"``, the default) and a read-only one, counting their runs."""

    def __init__(self) -> None:
        self.ran: list[str] = []

        async def effect(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
            self.ran.append("effect")
            return ToolResult.text("effect ran")

        async def look(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
            self.ran.append("look")
            return ToolResult.text("looked")

        self.effect = ToolDeclaration("effect", "Changes the world.", {"type": "object"}, effect)
        self.look = ToolDeclaration("look", "Reads only.", {"type": "object"}, look, replay="safe")


def _script(*tools: str) -> FauxProvider:
    turns = [faux_response(faux_tool_call(name, {})) for name in tools]
    return FauxProvider([item for turn in turns for item in (turn, faux_response("done"))])


def _options(faux: FauxProvider, **extra: Any) -> HarnessOptions:
    return HarnessOptions(
        clock=ManualClock(1_000_000), services={"models": Models([faux])}, **extra
    )


async def _prepare(h: Harness) -> ConversationHandle:
    root = await h.root(BACKGROUND)
    await root.set_config({"model": MODEL, "selectedTools": ["effect", "look"]}, BACKGROUND)
    return root


def allow(call: dict[str, Any], api: Any, ctx: Context) -> None:
    return None


def install_authority(
    h: Harness, handler: Callable[..., Any] = allow, name: str = "approval"
) -> ApprovalAuthority:
    """What an approval feature does: a namespace, its ``before_tool`` hook, the authority."""
    return h.register_approval_authority(
        h.hooks(h.namespace(name), TOOL_KIND, {"before_tool": handler})
    )


async def _results(root: ConversationHandle) -> list[dict[str, Any]]:
    """The tool results of the conversation, oldest first: text, error flag, diagnostic code."""
    entries = await root.entries(BACKGROUND, kind="pi.tool_result", limit=50)
    out: list[dict[str, Any]] = []
    for entry in reversed(entries):
        message = (entry.model or [{}])[0]
        diagnostics = (entry.data or {}).get("diagnostics") or [{}]
        out.append(
            {
                "text": message["content"][0]["text"],
                "error": message["isError"],
                "code": diagnostics[0].get("code"),
            }
        )
    return out


async def _turn(root: ConversationHandle, h: Harness) -> None:
    await root.send("go", BACKGROUND)
    await h.wait_for_idle(BACKGROUND)


@asynccontextmanager
async def harness(faux: FauxProvider, **extra: Any) -> AsyncIterator[tuple[Harness, Tools]]:
    tools = Tools()
    async with await Harness.open(MemoryStorage(), _options(faux, **extra), BACKGROUND) as h:
        h.register_tool(tools.effect)
        h.register_tool(tools.look)
        yield h, tools


async def test_with_no_authority_a_call_with_effects_is_blocked_with_the_hosts_reason() -> None:
    async with harness(_script("effect"), unapproved=lambda call: f"{call['name']}: {REASON}") as (
        h,
        tools,
    ):
        root = await _prepare(h)
        await h.resume(BACKGROUND)
        await _turn(root, h)
        assert tools.ran == []
        assert await _results(root) == [
            {"text": f"Tool call blocked: effect: {REASON}", "error": True, "code": "unapproved"}
        ]


async def test_the_default_reason_says_no_approval_authority_serves_the_session() -> None:
    async with harness(_script("effect")) as (h, tools):
        root = await _prepare(h)
        # a before_tool hook that is not an authority cannot approve anything
        h.hooks(h.namespace("audit"), TOOL_KIND, {"before_tool": allow})
        await h.resume(BACKGROUND)
        await _turn(root, h)
        [result] = await _results(root)
        assert tools.ran == [] and result["code"] == "unapproved"
        assert "no approval authority serves this session" in result["text"]


async def test_a_replay_safe_tool_runs_without_an_authority() -> None:
    async with harness(_script("look")) as (h, tools):
        root = await _prepare(h)
        await h.resume(BACKGROUND)
        await _turn(root, h)
        assert tools.ran == ["look"]
        assert (await _results(root))[0]["error"] is False


async def test_calls_run_while_the_authority_is_live_and_are_blocked_once_it_is_removed() -> None:
    async with harness(_script("effect", "effect", "effect", "effect")) as (h, tools):
        root = await _prepare(h)
        authority = install_authority(h)
        await h.resume(BACKGROUND)
        await _turn(root, h)
        assert tools.ran == ["effect"] and authority.alive
        assert h.approval_authorities() == [authority]
        authority()  # the feature's uninstall
        authority()  # idempotent
        await _turn(root, h)
        assert tools.ran == ["effect"] and not authority.alive
        assert h.approval_authorities() == []
        # a new authority; then its *hook* goes (the namespace retired by a reload): none again
        second = install_authority(h, name="approval2")
        await _turn(root, h)
        assert tools.ran == ["effect", "effect"]
        second.hook()
        assert not second.alive
        await _turn(root, h)
        assert tools.ran == ["effect", "effect"]
        codes = [r["code"] for r in await _results(root)]
        assert codes == [None, "unapproved", None, "unapproved"]


async def test_an_authority_that_blocks_blocks_and_one_that_did_not_rule_cannot_approve() -> None:
    async with harness(_script("effect", "effect")) as (h, tools):
        root = await _prepare(h)
        other = await root.fork("start", BACKGROUND)
        ns = h.namespace("approval")
        # the authority's hook serves another conversation only: it never ruled on root's call
        scoped = other.hooks(ns, TOOL_KIND, {"before_tool": allow})
        h.register_approval_authority(scoped)
        await h.resume(BACKGROUND)
        await _turn(root, h)
        assert tools.ran == []
        scoped()
        h.register_approval_authority(
            h.hooks(ns, TOOL_KIND, {"before_tool": lambda c, a, x: {"block": "the user said no"}})
        )
        await _turn(root, h)
        assert tools.ran == []
        results = await _results(root)
        assert [r["code"] for r in results] == ["unapproved", "blocked"]
        assert results[1]["text"] == "Tool call blocked: the user said no"


async def test_an_authority_removed_while_it_decides_does_not_let_the_call_run() -> None:
    async with harness(_script("effect")) as (h, tools):
        root = await _prepare(h)
        asked = anyio.Event()
        answer = anyio.Event()

        async def ask(call: dict[str, Any], api: Any, ctx: Context) -> None:
            asked.set()
            await answer.wait()
            return None  # "allow", from an authority that is gone by now

        authority = install_authority(h, ask)
        await h.resume(BACKGROUND)
        await root.send("go", BACKGROUND)
        await asked.wait()
        authority()  # retired mid-decision (a reload outside the harness's guard)
        answer.set()
        await h.wait_for_idle(BACKGROUND)
        assert tools.ran == []
        assert [r["code"] for r in await _results(root)] == ["unapproved"]


async def test_registering_an_authority_checks_what_it_is_given() -> None:
    async with harness(_script()) as (h, _tools):
        ns = h.namespace("approval")
        with pytest.raises(TypeError, match="an approval authority is a HookRegistration"):
            h.register_approval_authority(lambda: None)  # type: ignore[arg-type]
        removed = h.hooks(ns, TOOL_KIND, {"before_tool": allow})
        removed()
        with pytest.raises(ValueError, match="not a live hook registration of this harness"):
            h.register_approval_authority(removed)
        after = h.hooks(ns, TOOL_KIND, {"after_tool": lambda call, result, api, ctx: None})
        with pytest.raises(ValueError, match="an approval authority is a 'before_tool' hook"):
            h.register_approval_authority(after)


async def test_the_gate_is_off_only_when_the_host_says_so() -> None:
    async with harness(_script("effect"), require_approval=False) as (h, tools):
        root = await _prepare(h)
        await h.resume(BACKGROUND)
        await _turn(root, h)
        assert tools.ran == ["effect"]


# -- reload ------------------------------------------------------------------------------------
class Feature:
    """An approval feature as a HarnessHandle registration (what a session facet adds), whose
    hook waits for ``answer`` when ``ask`` is set."""

    def __init__(self, name: str, *, ask: bool = False) -> None:
        self.name = name
        self.ask = ask
        self.asked = anyio.Event()
        self.answer = anyio.Event()
        self.ruled: list[str] = []

    def __call__(self, h: Harness) -> Callable[[], None]:
        async def before_tool(call: dict[str, Any], api: Any, ctx: Context) -> None:
            if self.ask:
                self.asked.set()
                await self.answer.wait()
            self.ruled.append(call["name"])

        ns = h.namespace("approval")
        hook = h.hooks(ns, TOOL_KIND, {"before_tool": before_tool})
        authority = h.register_approval_authority(hook)

        def uninstall() -> None:
            authority()
            hook()
            ns.unregister()

        return uninstall


@asynccontextmanager
async def handle_with(faux: FauxProvider) -> AsyncIterator[tuple[HarnessHandle, Tools]]:
    tools = Tools()

    def register(h: Harness) -> Callable[[], None]:
        removers = [h.register_tool(tools.effect), h.register_tool(tools.look)]

        def unregister() -> None:
            for remove in removers:
                remove()

        return unregister

    async with HarnessHandle(lambda: storage, _options(faux)) as handle:
        storage = MemoryStorage()
        handle.add_registration(register)
        yield handle, tools


async def test_a_quiescent_swap_that_retires_the_authority_blocks_the_next_call() -> None:
    async with handle_with(_script("effect", "effect")) as (handle, tools):
        old = Feature("old")
        remove_old = handle.add_registration(old)
        h = await handle.open(BACKGROUND)
        root = await _prepare(h)
        await _turn(root, h)
        assert tools.ran == ["effect"] and old.ruled == ["effect"]
        # the swap retires the old generation; the new one never arrives (it failed to load)
        assert await reload(handle, remove_old, BACKGROUND) == "quiescent"
        h = handle.harness
        root = await h.root(BACKGROUND)
        await _turn(root, h)
        assert tools.ran == ["effect"]
        assert [r["code"] for r in await _results(root)] == [None, "unapproved"]


async def test_a_suspend_swap_with_a_call_waiting_for_approval_never_runs_it_unapproved() -> None:
    async with handle_with(_script("effect")) as (handle, tools):
        old = Feature("old", ask=True)
        remove_old = handle.add_registration(old)
        h = await handle.open(BACKGROUND)
        root = await _prepare(h)
        await root.send("go", BACKGROUND)
        await old.asked.wait()  # the call waits for the old authority: not quiescent
        old.answer.set()  # its answer arrives while the swap cancels it
        assert await reload(handle, remove_old, BACKGROUND) == "reopened"
        h = handle.harness
        await h.wait_for_idle(BACKGROUND)  # recovery ran the call again: no authority now
        assert tools.ran == []
        assert [r["code"] for r in await _results(await h.root(BACKGROUND))] == ["unapproved"]


async def test_a_swap_to_a_new_authority_lets_the_new_one_rule() -> None:
    async with handle_with(_script("effect")) as (handle, tools):
        old = Feature("old", ask=True)
        remove_old = handle.add_registration(old)
        h = await handle.open(BACKGROUND)
        root = await _prepare(h)
        await root.send("go", BACKGROUND)
        await old.asked.wait()
        new = Feature("new")

        def swap() -> None:
            remove_old()
            handle.add_registration(new)

        assert await reload(handle, swap, BACKGROUND) == "reopened"
        await handle.harness.wait_for_idle(BACKGROUND)
        assert old.ruled == [] and new.ruled == ["effect"] and tools.ran == ["effect"]
