"""Hook registration: tokens, exact idempotent removal, docs/design/decisions.md#d8-g9 order and subtree scoping
(docs/design/harness.md#hooks, #namespaces, docs/design/reload.md#registrations)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chord.context import BACKGROUND, Context
from pico3.harness import Harness
from pico3.hooks import CORE_POINTS, HookRegistry, HookRunner, kernel_owner_of
from pico3.kernel.errors import StaleDefinition
from pico3.kernel.namespaces import NamespaceRegistry
from pico3.kernel.tx import Authority, Transaction
from pico3.storage import MemoryStorage
from pico3.tasks.kinds import KindRegistry, define_task

pytestmark = pytest.mark.anyio


async def _never(*_: Any) -> Any:
    raise AssertionError("not run in these tests")


def kind(name: str, **options: Any) -> Any:
    return define_task(name, initial=_never, phases={}, abort=_never, **options)


TOOL = kind("pi.tool", core=True, turn=True)
INDEXER = kind("repo.indexer")


def runner(registry: HookRegistry, conversation_id: int = 1, of: Any = TOOL) -> HookRunner:
    return HookRunner(registry, of, task_id=7, conversation_id=conversation_id, report=_raise)


def _raise(error: BaseException) -> None:
    raise AssertionError(f"unexpected report: {error!r}")


def tagger(log: list[str], tag: str) -> Any:
    def handler(*args: Any) -> None:
        log.append(tag)

    return handler


async def order(registry: HookRegistry, conversation_id: int) -> list[str]:
    log: list[str] = []
    for binding in await registry.bindings(TOOL, "after_tool", conversation_id, BACKGROUND):
        binding.handler(log)
    return log


def record(tag: str) -> Any:
    return lambda log: log.append(tag)


def test_registration_needs_a_current_namespace_token() -> None:
    namespaces = NamespaceRegistry()
    registry = HookRegistry(namespaces)
    old = namespaces.register("approval", None)
    old.unregister()
    with pytest.raises(StaleDefinition, match="'approval' is stale"):
        registry.register(old, TOOL, {"before_tool": _never})
    namespaces.register("approval", None)  # a replacement does not revive the old token
    with pytest.raises(StaleDefinition):
        registry.register(old, TOOL, {"before_tool": _never})
    assert registry.registrations() == []


def test_registration_needs_a_current_kind_token() -> None:
    namespaces = NamespaceRegistry()
    kinds = KindRegistry({})
    registry = HookRegistry(namespaces, kind_current=lambda k: kinds.get(k.name) is k)  # type: ignore[attr-defined]
    ns = namespaces.register("plugin", None)
    remove = kinds.register(INDEXER)
    registry.register(ns, INDEXER, {"anything": _never})
    remove()
    with pytest.raises(StaleDefinition, match=r"kind token 'repo\.indexer' is stale"):
        registry.register(ns, INDEXER, {"anything": _never})
    kinds.register(kind("repo.indexer"))  # redeclared: the old object stays stale
    with pytest.raises(StaleDefinition):
        registry.register(ns, INDEXER, {"anything": _never})


@pytest.mark.parametrize(
    ("handlers", "error", "message"),
    [
        ({}, ValueError, "non-empty mapping"),
        ({"beforeTool": _never}, ValueError, "unknown point 'beforeTool'"),
        ({"before tool": _never}, ValueError, "not an identifier"),
        ({"before_tool": "not callable"}, TypeError, "not callable"),
    ],
)
def test_bad_handlers_are_rejected_and_nothing_is_registered(
    handlers: dict[str, Any], error: type[Exception], message: str
) -> None:
    namespaces = NamespaceRegistry()
    registry = HookRegistry(namespaces)
    with pytest.raises(error, match=message):
        registry.register(namespaces.register("plugin", None), TOOL, handlers)
    assert registry.registrations() == []


def test_custom_kinds_accept_their_declared_points() -> None:
    namespaces = NamespaceRegistry()
    registry = HookRegistry(namespaces)
    ns = namespaces.register("plugin", None)
    registry.register(ns, INDEXER, {"before_batch": _never})  # no declared points: any name

    class Declared:  # a custom kind that declares its points
        name = "repo.other"
        hook_points = ("before_batch",)

    declared = Declared()
    registry.register(ns, declared, {"before_batch": _never})
    with pytest.raises(ValueError, match="unknown point 'after_batch'"):
        registry.register(ns, declared, {"after_batch": _never})
    assert CORE_POINTS["pi.tool"] == {"before_tool", "after_tool", "permission_request"}


def test_subtree_needs_a_conversation() -> None:
    namespaces = NamespaceRegistry()
    with pytest.raises(ValueError, match="subtree=True needs a conversation"):
        HookRegistry(namespaces).register(
            namespaces.register("plugin", None), TOOL, {"after_tool": _never}, subtree=True
        )


async def test_unregister_is_exact_and_idempotent() -> None:
    namespaces = NamespaceRegistry()
    registry = HookRegistry(namespaces)
    ns = namespaces.register("plugin", None)
    first = registry.register(ns, TOOL, {"after_tool": record("first")})
    registry.register(ns, TOOL, {"after_tool": record("second")})
    first()
    first()
    assert await order(registry, 1) == ["second"]
    assert not first.alive


async def test_unregistering_the_namespace_retires_its_hooks() -> None:
    namespaces = NamespaceRegistry()
    registry = HookRegistry(namespaces)
    ns = namespaces.register("plugin", None)
    registration = registry.register(ns, TOOL, {"after_tool": record("old")})
    ns.unregister()
    again = namespaces.register("plugin", None)
    assert await order(registry, 1) == []
    assert not registration.alive
    registry.register(again, TOOL, {"after_tool": record("new")})
    assert await order(registry, 1) == ["new"]


async def test_order_is_harness_wide_then_outermost_to_innermost_conversation() -> None:
    # docs/design/decisions.md#d8-g9. Conversation 1 owns 2 (a subagent), 2 owns 3.
    owners = {3: 2, 2: 1}

    async def owner_of(cid: int, ctx: Context) -> int | None:
        return owners.get(cid)

    namespaces = NamespaceRegistry()
    registry = HookRegistry(namespaces, owner_of=owner_of)
    ns = namespaces.register("plugin", None)
    add = registry.register
    add(ns, TOOL, {"after_tool": record("c3")}, conversation_id=3)
    add(ns, TOOL, {"after_tool": record("c1-subtree")}, conversation_id=1, subtree=True)
    add(ns, TOOL, {"after_tool": record("h1")})
    add(ns, TOOL, {"after_tool": record("c2-subtree")}, conversation_id=2, subtree=True)
    add(ns, TOOL, {"after_tool": record("c1-only")}, conversation_id=1)
    add(ns, TOOL, {"after_tool": record("h2")})
    add(ns, TOOL, {"after_tool": record("c3-second")}, conversation_id=3)
    assert await order(registry, 3) == ["h1", "h2", "c1-subtree", "c2-subtree", "c3", "c3-second"]
    assert await order(registry, 2) == ["h1", "h2", "c1-subtree", "c2-subtree"]
    assert await order(registry, 1) == ["h1", "h2", "c1-subtree", "c1-only"]
    assert await order(registry, 4) == ["h1", "h2"]  # an unrelated conversation


async def test_hooks_of_other_kinds_and_points_are_not_in_the_chain() -> None:
    namespaces = NamespaceRegistry()
    registry = HookRegistry(namespaces)
    ns = namespaces.register("plugin", None)
    registry.register(ns, TOOL, {"before_tool": record("before")})
    registry.register(ns, INDEXER, {"after_tool": record("indexer")})
    registry.register(ns, TOOL, {"after_tool": record("after")})
    assert await order(registry, 1) == ["after"]


async def test_a_running_handler_finishes_after_unregister_and_later_ones_are_skipped() -> None:
    namespaces = NamespaceRegistry()
    registry = HookRegistry(namespaces)
    ns = namespaces.register("plugin", None)
    started, release = anyio.Event(), anyio.Event()
    log: list[str] = []

    async def slow(call: Any, result: Any, api: Any, ctx: Context) -> None:
        started.set()
        await release.wait()
        log.append("slow finished")

    registry.register(ns, TOOL, {"after_tool": slow})
    later = registry.register(ns, TOOL, {"after_tool": lambda *a: log.append("later")})
    from pico3.tools import ToolResult

    async with anyio.create_task_group() as group:
        group.start_soon(runner(registry).after_tool, {"id": "c"}, ToolResult.text("r"), BACKGROUND)
        await started.wait()
        for registration in registry.registrations():
            registration()  # unregister everything while the first handler runs
        release.set()
    assert log == ["slow finished"]
    assert not later.alive


async def test_kernel_owner_of_walks_real_owned_conversations() -> None:
    h = await Harness.open(MemoryStorage(), None, BACKGROUND)
    kinds = KindRegistry(h.kernel.config_keys)
    h.kernel.kinds = kinds
    kinds.register(INDEXER)
    root = (await h.root(BACKGROUND)).id

    async def owned_by_a_task_of(parent: int) -> int:
        async def build(tx: Transaction, _ctx: Context) -> int:
            task = tx.create_task(INDEXER, {"root": "."})
            return await tx.create_conversation(owner=task)

        return await h.kernel.commit(
            build, BACKGROUND, conversation_id=parent, authority=Authority.CORE
        )

    child = await owned_by_a_task_of(root)
    grandchild = await owned_by_a_task_of(child)
    registry = HookRegistry(h.kernel.namespaces, owner_of=kernel_owner_of(h.kernel))
    assert await registry.ancestry(grandchild, BACKGROUND) == [root, child, grandchild]
    assert await registry.ancestry(root, BACKGROUND) == [root]
    await h.close(BACKGROUND)
