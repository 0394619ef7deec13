"""Authority: every forbidden write (docs/design/harness.md#authority), through every surface, rejects and records nothing.

Issue 9 item 4. The design (docs/design/harness.md#principles, #authority, #invocation-tokens) forbids
extensions and hosts a fixed list of writes: outside their namespace, to ``turn`` and ``inbox``,
to other tasks' slots, of ``pi.*`` entries (even after a cast), with stale tokens, and to core
config. Each surface that can write is attacked here, on a real harness over JSONL storage:

* host transactions (``ConversationHandle.commit``),
* the task runtime (``rt.commit`` from a custom kind), including a retained runtime,
* :class:`~pico3.tools.ToolApi` inside a real tool call driven by the faux model,
* :class:`~pico3.hooks.BeforeToolApi` inside a real ``before_tool`` hook,
* the identity-only hook apis and payloads of the other points,
* namespace tokens after ``unregister`` (and after a re-registration of the same string),
* the ``pi.conversation`` service methods (:mod:`pico3.facets`) through a loopback binding.

Every attempt is checked the same way: it raises the expected error type with a message that
names the problem, and the storage files *and* the conversation view are byte-for-byte / value
equal before and after the attempt (:meth:`Session.state`). Nothing sleeps: tests wait on task
records, input records and view deliveries.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.json import copy_json
from chord.state import Delivery
from pico3 import (
    ConfigRejected,
    ConversationHandle,
    ConversationService,
    EntryKind,
    EntryRejected,
    Forbidden,
    Harness,
    HarnessOptions,
    HarnessService,
    JsonlStorage,
    Namespace,
    NewEntry,
    RevokedProxy,
    Runtime,
    StaleDefinition,
    TaskInfo,
    ToolApi,
    ToolDeclaration,
    ToolResult,
    Transaction,
    TransactionClosed,
    define_task,
    harness_session_facet,
)
from pico3.hooks import BeforeToolApi, HookApi, ToolHookApi
from pico3.models.faux import FauxProvider, faux_response, faux_tool_call
from pico3.storage.records import Entry, Input, Task
from pico3.tasks import Completion, Done, TaskKind
from pico3.tools import SlotRejected
from pico3.turn.model_call import MODEL_CALL_KIND
from pico3.turn.models import Models
from pico3.turn.tool import TOOL_KIND

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
TIMEOUT = 20

MODEL = {"provider": "faux", "modelId": "faux-1"}
USER_MESSAGE = {"role": "user", "content": "forged", "timestamp": 1}
ASSISTANT_MESSAGE = {
    "role": "assistant",
    "content": [{"type": "text", "text": "forged"}],
    "timestamp": 1,
}
PLAN_DEFAULTS = {"rewindable": {"mode": "off"}, "sticky": {"items": []}}
OTHER_DEFAULTS = {"sticky": {"cache": {}}}

Outcome = tuple[BaseException | None, bool]
"""What one attempt did: the error it raised (``None``: it succeeded) and whether storage and
view were unchanged by it."""

Expected = tuple[type[BaseException] | tuple[type[BaseException], ...], str]
"""The error type(s) an attempt must raise and a regex its message must match."""


# -- the session under attack ------------------------------------------------------------------
@dataclass
class Session:
    """A resumed harness on JSONL storage with a faux model and two namespaces."""

    harness: Harness
    root: ConversationHandle
    other: ConversationHandle
    path: Path
    plan: Namespace
    other_ns: Namespace
    faux: FauxProvider
    reports: list[BaseException] = field(default_factory=list[BaseException])
    storage: JsonlStorage | None = None

    async def state(self) -> tuple[dict[str, bytes], list[Any]]:
        """Every storage file's bytes, and the view of both conversations."""
        if self.storage is not None:  # a task that just ended may still have its sidecar queued
            self.storage.settle()
        files = {
            str(p.relative_to(self.path)): p.read_bytes()
            for p in sorted(self.path.rglob("*"))
            if p.is_file()
        }
        views: list[Any] = []
        for conversation in (self.root, self.other):
            watch = await conversation.watch(ctx)
            views.append(copy_json(watch.view))
            watch.stop()
        return files, views

    async def outcome(self, attempt: Callable[[], object]) -> Outcome:
        """Run ``attempt`` (sync or async) between two state captures."""
        before = await self.state()
        error: BaseException | None = None
        try:
            result = attempt()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            error = exc
        return error, before == await self.state()


@asynccontextmanager
async def open_session(
    tmp_path: Path,
    script: list[Any] | None = None,
    setup: Callable[[Harness], object] | None = None,
) -> AsyncIterator[Session]:
    path = tmp_path / "session"
    faux = FauxProvider(script or [])
    reports: list[BaseException] = []
    options = HarnessOptions(
        require_approval=False, on_report=reports.append, services={"models": Models([faux])}
    )
    storage = JsonlStorage(path, fsync=False)
    harness = await Harness.open(storage, options, ctx)
    async with harness:
        plan = harness.namespace("plan", PLAN_DEFAULTS)
        other_ns = harness.namespace("other", OTHER_DEFAULTS)
        if setup is not None:
            setup(harness)
        root = await harness.root(ctx)
        await root.set_config({"model": MODEL}, ctx)
        anchor = await root.write("note", ctx, data={"n": 0})
        placed = await harness.wait_for_input(anchor, ctx)
        assert isinstance(placed.entry, int)
        other = await root.fork(placed.entry, ctx)
        await harness.resume(ctx)
        yield Session(harness, root, other, path, plan, other_ns, faux, reports, storage)


def assert_rejected(outcomes: dict[str, Outcome], expected: dict[str, Expected]) -> None:
    """Every attempt raised the expected error with a clear message and recorded nothing."""
    assert sorted(outcomes) == sorted(expected)
    for name, (types, pattern) in expected.items():
        error, unchanged = outcomes[name]
        assert isinstance(error, types), f"{name}: not rejected as {types}: {error!r}"
        assert re.search(pattern, str(error)), f"{name}: unclear message {str(error)!r}"
        assert unchanged, f"{name}: storage or view changed"


async def _never_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
    return lambda tx, cur, c: None


_STARTED: dict[int, anyio.Event] = {}


async def _parked(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
    _STARTED.setdefault(task.id, anyio.Event()).set()
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


PARKED = define_task(
    "test.parked",
    initial=_parked,
    phases={},
    abort=_never_abort,
    slot=lambda _input: {"progress": 0},
)
"""A kind whose tasks stay live (running, with a slot) until the harness closes."""

BARE = define_task("test.bare", initial=_parked, phases={}, abort=_never_abort)
"""Like :data:`PARKED`, without a declared slot (nothing is stored until someone writes one)."""


async def _park(s: Session, conversation: ConversationHandle, kind: TaskKind = PARKED) -> int:
    """Create a parked task and return once it runs (its dispatch commit is behind us)."""
    task_id = await conversation.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
    with anyio.fail_after(TIMEOUT):
        await _STARTED.setdefault(task_id, anyio.Event()).wait()
    return task_id


# -- forbidden builders shared by hosts and tasks ------------------------------------------------
Builder = Callable[[Transaction, int], object]
"""``build(tx, target_task)``: one forbidden operation inside a commit of the bound conversation
(``target_task`` is another live task of that conversation)."""


def _forbidden_writes(s: Session) -> dict[str, tuple[Builder, Expected]]:
    root = s.root.id
    stale = s.harness.namespace("stale", {"sticky": {"x": 1}})
    stale.unregister()
    return {
        "turn (raw sticky)": (
            lambda tx, _t: tx.document("sticky").__setitem__("turn", {"tools": []}),
            (Forbidden, r"raw document access requires core"),
        ),
        "inbox (raw sticky)": (
            lambda tx, _t: tx.document("sticky")["inbox"],
            (Forbidden, r"raw document access requires core"),
        ),
        "session document": (
            lambda tx, _t: tx.document("session"),
            (Forbidden, r"raw document access requires core"),
        ),
        "another task's slot": (
            lambda tx, t: tx.slot(t).__setitem__("progress", 99),
            (Forbidden, r"slot\(\)"),
        ),
        "patch another task's record": (
            lambda tx, t: tx.set_task(cast(Any, None)),
            (Forbidden, r"set_task requires core"),
        ),
        "mark a task": (lambda tx, t: tx.mark_task(t), (Forbidden, r"mark_task requires core")),
        "finish a task": (
            lambda tx, t: tx.finish_task(t, {"status": "completed"}),
            (Forbidden, r"finish_task requires core"),
        ),
        "input record": (
            lambda tx, _t: tx.put_input(Input(id=10**9, conversation_id=root, status="done")),
            (Forbidden, r"put_input requires core"),
        ),
        "core append": (
            lambda tx, _t: tx.append_entry(root, NewEntry(kind="note")),
            (Forbidden, r"append_entry requires core"),
        ),
        "core event": (
            lambda tx, _t: tx.emit_event(root, {"type": "turn.started"}),
            (Forbidden, r"emit_event requires core"),
        ),
        "pi.* entry after a cast": (
            lambda tx, _t: tx.write(root, cast(Any, "pi.assistant"), model=[ASSISTANT_MESSAGE]),
            (EntryRejected, r"'pi\.assistant' is reserved for core"),
        ),
        "pi.* entry in another case": (
            lambda tx, _t: tx.write(root, "PI.User", model=[USER_MESSAGE]),
            (EntryRejected, r"reserved for core"),
        ),
        "pi.* entry through a forged EntryKind": (
            lambda tx, _t: tx.write(root, EntryKind("pi.reset"), data={}),
            (EntryRejected, r"reserved for core"),
        ),
        "head on a passive write": (
            lambda tx, _t: tx.write(root, "note", data={}, head="self"),
            (EntryRejected, r"entry\.head is core-only"),
        ),
        "edits on a passive write": (
            lambda tx, _t: tx.write(root, "note", data={}, edits=[{"target": 1, "action": "omit"}]),
            (EntryRejected, r"entry\.edits is core-only"),
        ),
        "pi.notice with a head": (
            lambda tx, _t: tx.write(root, "pi.notice", model=[USER_MESSAGE], head="self"),
            (EntryRejected, r"core-only"),
        ),
        "core task kind object": (
            lambda tx, _t: tx.create_task(MODEL_CALL_KIND, {}),
            (Forbidden, r"core kind 'pi\.generation' requires core authority"),
        ),
        "core task kind by name": (
            lambda tx, _t: tx.create_task("pi.tool", {}),
            (TypeError, r"needs a registered kind object"),
        ),
        "namespace key it does not declare": (
            lambda tx, _t: tx.plugins(s.plan).__setitem__("cache", {"k": "v"}),
            (KeyError, r"declares no key 'cache'"),
        ),
        "namespace key deleted": (
            lambda tx, _t: tx.plugins(s.plan).__delitem__("mode"),
            (TypeError, r"keys are fixed"),
        ),
        "stale namespace token (plugins)": (
            lambda tx, _t: tx.plugins(stale).__setitem__("x", 2),
            (StaleDefinition, r"'stale' is stale"),
        ),
        "stale namespace token (emit)": (
            lambda tx, _t: tx.emit(stale, "ping", {}),
            (StaleDefinition, r"'stale' is stale"),
        ),
        "fork seed into turn": (
            lambda tx, _t: tx.create_conversation(sticky={"turn": {"tools": []}}),
            (ConfigRejected, r"config\.turn: not a sticky config key"),
        ),
        "fork seed into plugins": (
            lambda tx, _t: tx.create_conversation(rewindable={"plugins": {"plan": {}}}),
            (ConfigRejected, r"config\.plugins: not a rewindable config key"),
        ),
    }


# -- host transactions -------------------------------------------------------------------------
async def test_host_transactions_cannot_make_any_forbidden_write(tmp_path: Path) -> None:
    async with open_session(tmp_path, setup=lambda h: h.register_task_kind(PARKED)) as s:
        target = await _park(s, s.root)
        outcomes: dict[str, Outcome] = {}
        expected: dict[str, Expected] = {}
        for name, (build, expect) in _forbidden_writes(s).items():

            async def run(tx: Transaction, _c: Context, build: Builder = build) -> None:
                tx.plugins(s.plan)["mode"] = "written"  # a legal write: must not survive
                result = build(tx, target)
                if inspect.isawaitable(result):
                    await result

            outcomes[name] = await s.outcome(lambda run=run: s.root.commit(run, ctx))
            expected[name] = expect

        async def own_slot_of_new_task(tx: Transaction, _c: Context) -> None:
            tx.slot(tx.create_task(PARKED, None))  # created in this very batch: still not hosts'

        outcomes["slot of a task created in the batch"] = await s.outcome(
            lambda: s.root.commit(own_slot_of_new_task, ctx)
        )
        expected["slot of a task created in the batch"] = (Forbidden, r"hosts cannot reach")
        outcomes["checkpoint"] = await s.outcome(
            lambda: s.root.commit(lambda tx, _c: tx.checkpoint({"phase": "x"}), ctx)
        )
        expected["checkpoint"] = (Forbidden, r"only a task invocation checkpoints")
        assert_rejected(outcomes, expected)


async def test_host_config_writes_are_validated_and_cannot_reach_core_documents(
    tmp_path: Path,
) -> None:
    async with open_session(tmp_path) as s:
        attempts: dict[str, tuple[dict[str, Any], Expected]] = {
            key: ({key: {}}, (ConfigRejected, rf"config\.{key}: unknown key"))
            for key in ("turn", "inbox", "tasks", "plugins")
        }
        attempts["bad value"] = ({"thinkingLevel": "ultra"}, (ConfigRejected, "thinkingLevel"))
        attempts["good key with a bad one"] = (
            {"keepRecent": 5, "nope": 1},
            (ConfigRejected, r"config\.nope: unknown key"),
        )
        outcomes = {
            name: await s.outcome(lambda patch=patch: s.root.set_config(patch, ctx))
            for name, (patch, _e) in attempts.items()
        }
        assert_rejected(outcomes, {name: e for name, (_p, e) in attempts.items()})


async def test_retained_transactions_and_proxies_cannot_write_after_their_commit(
    tmp_path: Path,
) -> None:
    async with open_session(tmp_path) as s:
        kept: dict[str, Any] = {}

        def capture(tx: Transaction, _c: Context) -> None:
            kept["tx"] = tx
            kept["items"] = tx.plugins(s.plan)["items"]  # seeds the default (a real write)

        await s.root.commit(capture, ctx)
        outcomes = {
            "retained proxy": await s.outcome(lambda: kept["items"].append("late")),
            "retained transaction": await s.outcome(
                lambda: kept["tx"].write(s.root.id, "note", data={})
            ),
        }
        assert_rejected(
            outcomes,
            {
                "retained proxy": (RevokedProxy, r"after revocation"),
                "retained transaction": (TransactionClosed, r"transaction is closed"),
            },
        )


# -- namespace tokens --------------------------------------------------------------------------
async def test_namespace_tokens_go_stale_on_unregister_and_on_replacement(tmp_path: Path) -> None:
    async with open_session(tmp_path) as s:
        first = s.harness.namespace("plugin", {"sticky": {"n": 0}})
        await s.root.commit(lambda tx, _c: tx.plugins(first).__setitem__("n", 1), ctx)
        first.unregister()
        first.unregister()  # idempotent
        replacement = s.harness.namespace("plugin", {"sticky": {"n": 0, "added": True}})
        second_unregistered = s.harness.namespace("gone", {"sticky": {"n": 0}})
        second_unregistered.unregister()

        def on_tool(*_args: Any) -> None:
            return None

        outcomes: dict[str, Outcome] = {}
        for label, token in (("replaced", first), ("unregistered", second_unregistered)):
            outcomes[f"{label}: plugins"] = await s.outcome(
                lambda t=token: s.root.commit(lambda tx, _c: tx.plugins(t).__setitem__("n", 5), ctx)
            )
            outcomes[f"{label}: emit"] = await s.outcome(
                lambda t=token: s.root.commit(lambda tx, _c: tx.emit(t, "ping", None), ctx)
            )
            outcomes[f"{label}: harness hooks"] = await s.outcome(
                lambda t=token: s.harness.hooks(t, TOOL_KIND, {"before_tool": on_tool})
            )
            outcomes[f"{label}: conversation hooks"] = await s.outcome(
                lambda t=token: s.root.hooks(t, TOOL_KIND, {"after_tool": on_tool})
            )
        assert_rejected(outcomes, {name: (StaleDefinition, r"is stale") for name in outcomes})
        # the replacement finds the stored value (the string persists, not the token)
        stored = await s.root.commit(lambda tx, _c: tx.plugins(replacement).to_plain(), ctx)
        assert stored == {"n": 1, "added": True}


# -- the task runtime --------------------------------------------------------------------------
async def test_a_custom_kind_cannot_make_any_forbidden_write_through_rt_commit(
    tmp_path: Path,
) -> None:
    outcomes: dict[str, Outcome] = {}
    expected: dict[str, Expected] = {}
    kept: list[Runtime] = []
    box: dict[str, Any] = {}

    async def attack(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
        s: Session = box["session"]
        kept.append(rt)
        sibling: int = box["sibling"]
        for name, (build, expect) in _forbidden_writes(s).items():

            async def run(tx: Transaction, cur: Task, _c: Context, build: Builder = build) -> None:
                tx.plugins(s.plan)["mode"] = "written"  # a legal write: must not survive
                result = build(tx, sibling)
                if inspect.isawaitable(result):
                    await result

            outcomes[name] = await s.outcome(lambda run=run: rt.commit(run, ctx))
            if name.startswith("fork seed"):  # a task may create only conversations it owns
                expect = (Forbidden, r"only conversations it owns")
            expected[name] = expect
        task_only: dict[str, tuple[Callable[[Transaction, Task], object], Expected]] = {
            "core config set": (
                lambda tx, cur: tx.config(cur.conversation_id).set({"thinkingLevel": "high"}),
                (Forbidden, r"read config but cannot write it"),
            ),
            "core config reset": (
                lambda tx, cur: tx.config(cur.conversation_id).reset(["model"]),
                (Forbidden, r"read config but cannot write it"),
            ),
            "its own kind's config key": (
                lambda tx, cur: tx.config(cur.conversation_id).set({"attackDepth": 2}),
                (Forbidden, r"read config but cannot write it"),
            ),
            "write outside its subtree": (
                lambda tx, _cur: tx.write(s.other.id, "note", data={}),
                (Forbidden, r"outside task \d+'s conversation and owned subtree"),
            ),
            "task outside its subtree": (
                lambda tx, _cur: tx.create_task(PARKED, None, conversation_id=s.other.id),
                (Forbidden, r"outside task \d+'s conversation"),
            ),
            "conversation owned by another task": (
                lambda tx, _cur: tx.create_conversation(owner=sibling),
                (Forbidden, r"only conversations it owns"),
            ),
            "unowned conversation": (
                lambda tx, _cur: tx.create_conversation(),
                (Forbidden, r"only conversations it owns"),
            ),
            "owned fork of a conversation outside its subtree": (
                lambda tx, cur: tx.create_conversation(fork=(s.other.id, 1), owner=cur.id),
                (Forbidden, r"outside task \d+'s conversation"),
            ),
        }
        for name, (build2, expect) in task_only.items():

            async def run2(tx: Transaction, cur: Task, _c: Context, build2: Any = build2) -> None:
                result = build2(tx, cur)
                if inspect.isawaitable(result):
                    await result

            outcomes[name] = await s.outcome(lambda run2=run2: rt.commit(run2, ctx))
            expected[name] = expect
        outcomes["abort a task outside its subtree"] = await s.outcome(
            lambda: rt.abort_task(box["foreign"], ctx)
        )
        expected["abort a task outside its subtree"] = (Forbidden, r"outside task \d+'s subtree")
        # rt.harness is the task's narrow window: registries, no way to a host or core commit
        box["window"] = {
            name: hasattr(rt.harness, name)
            for name in ("kernel", "scheduler", "conversation", "root", "commit", "tools")
        }
        box["window tools"] = rt.harness.tools is s.harness.tools
        return Done(lambda tx, cur, c: Completion.completed(None))

    attacker = define_task(
        "test.attacker",
        initial=attack,
        phases={},
        abort=_never_abort,
        config={"sticky": {"attackDepth": 1}},
    )

    def setup(h: Harness) -> None:
        h.register_task_kind(PARKED)
        h.register_task_kind(attacker)

    async with open_session(tmp_path, setup=setup) as s:
        box["session"] = s
        box["sibling"] = await _park(s, s.root)
        box["foreign"] = await _park(s, s.other)
        task_id = await s.root.commit(lambda tx, _c: tx.create_task(attacker, None), ctx)
        with anyio.fail_after(TIMEOUT):
            done = await s.harness.wait_for_task(task_id, ctx)
        assert done.outcome == {"status": "completed", "result": None}
        assert_rejected(outcomes, expected)
        assert box["window"] == {
            "kernel": False,
            "scheduler": False,
            "conversation": False,
            "root": False,
            "commit": False,
            "tools": True,
        }
        assert box["window tools"] is True

        # docs/design/harness.md#invocation-tokens: the runtime's token died with its handler
        late = await s.outcome(
            lambda: kept[0].commit(
                lambda tx, cur, _c: tx.plugins(s.plan).__setitem__("mode", 1), ctx
            )
        )
        assert_rejected({"retained runtime": late}, {"retained runtime": (Forbidden, "returned")})


async def _finish(task: TaskInfo, rt: Runtime, ctx: Context) -> Done:
    return Done(lambda tx, cur, c: Completion.completed(None))


async def test_a_core_flag_confers_nothing_on_an_extension_kind(tmp_path: Path) -> None:
    # docs/design/harness.md#authority: "a user-supplied core: true or similar confers nothing"
    with pytest.raises(ValueError, match=r"core authority is reserved for the kernel's 'pi\.'"):
        define_task("ext.sneaky", initial=_finish, phases={}, abort=_never_abort, core=True)
    forged = TaskKind(name="ext.sneaky", initial=_finish, phases={}, abort=_never_abort, core=True)
    reserved = TaskKind(name="pi.sneaky", initial=_finish, phases={}, abort=_never_abort)
    async with open_session(tmp_path) as s:
        outcomes = {
            "forged core kind": await s.outcome(lambda: s.harness.register_task_kind(forged)),
            "reserved name": await s.outcome(lambda: s.harness.register_task_kind(reserved)),
        }
        assert_rejected(
            outcomes,
            {
                "forged core kind": (ValueError, r"core authority is reserved"),
                "reserved name": (ValueError, r"'pi\.' prefix belongs to core"),
            },
        )


# -- tools ----------------------------------------------------------------------------------------
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def _script(*tool_names: str) -> list[Any]:
    return [
        faux_response(*(faux_tool_call(name, {"text": "a"}) for name in tool_names)),
        faux_response("done"),
    ]


def _first_block(entry: Entry) -> dict[str, Any]:
    """The first content block of an entry's first model message."""
    assert isinstance(entry.model, list)
    return entry.model[0]["content"][0]


async def _turn(s: Session) -> None:
    handle = await s.root.send("go", ctx)
    with anyio.fail_after(TIMEOUT):
        record = await handle.wait(ctx)
    assert record.status == "done", record


async def test_a_tool_cannot_make_any_forbidden_write_through_its_api(tmp_path: Path) -> None:
    outcomes: dict[str, Outcome] = {}
    expected: dict[str, Expected] = {}
    kept: list[ToolApi] = []
    box: dict[str, Any] = {}
    stale = define_task("test.stale", initial=_finish, phases={}, abort=_never_abort)

    async def attack(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        s: Session = box["session"]
        kept.append(api)
        for protected in ("callId", "name", "args", "status", "output", "waitingOn", "memos"):

            def poke(slot: dict[str, Any], key: str = protected) -> None:
                slot[key] = "forged"

            outcomes[f"progress: {protected}"] = await s.outcome(
                lambda poke=poke: api.progress(poke, ctx)
            )
            expected[f"progress: {protected}"] = (
                SlotRejected,
                rf"protected or unknown.*{protected}",
            )
        bad_free: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
            "progress: non-str progress": (lambda slot: slot.update(progress=3), r"slot\.progress"),
            "progress: non-JSON details": (
                lambda slot: slot.update(details={"x": float("nan")}),
                r"details",
            ),
            "progress: bad continuedBy": (
                lambda slot: slot.update(continuedBy="me"),
                r"slot\.continuedBy",
            ),
        }
        for name, (update, pattern) in bad_free.items():
            outcomes[name] = await s.outcome(lambda update=update: api.progress(update, ctx))
            expected[name] = (SlotRejected, pattern)
        outcomes["memo: non-JSON"] = await s.outcome(lambda: api.memo("m", {1, 2}, ctx))
        expected["memo: non-JSON"] = (ValueError, r"memo 'tool:m'")
        for name, kind in (("pi.generation", MODEL_CALL_KIND), ("pi.tool", TOOL_KIND)):
            outcomes[f"task: {name}"] = await s.outcome(
                lambda kind=kind: api.task(kind, {}, None, ctx)
            )
            expected[f"task: {name}"] = (Forbidden, r"ordinary tasks only")
        outcomes["task: stale kind"] = await s.outcome(lambda: api.task(stale, None, None, ctx))
        expected["task: stale kind"] = (StaleDefinition, r"'test\.stale' is stale")
        outcomes["slot of a task outside its subtree"] = await s.outcome(
            lambda: api.slot(box["foreign"], ctx)
        )
        expected["slot of a task outside its subtree"] = (Forbidden, r"outside task \d+'s subtree")

        # reading a sibling's slot is allowed, is a copy, and records nothing
        before = await s.state()
        snapshot = await api.slot(box["sibling"], ctx)
        assert snapshot == {"progress": 0}
        snapshot["progress"] = 99
        assert await api.slot(box["bare"], ctx) in (None, {})
        box["read unchanged"] = before == await s.state()
        box["surface"] = [n for n in ("commit", "write", "document", "send") if hasattr(api, n)]
        return ToolResult.text("attacked")

    def setup(h: Harness) -> None:
        h.register_task_kind(PARKED)
        h.register_task_kind(BARE)
        h.register_tool(ToolDeclaration("attack", "attack", SCHEMA, attack))

    async with open_session(tmp_path, _script("attack"), setup) as s:
        box["session"] = s
        box["sibling"] = await _park(s, s.root)
        box["bare"] = await _park(s, s.root, BARE)
        box["foreign"] = await _park(s, s.other)
        await s.root.set_config({"selectedTools": ["attack"]}, ctx)
        await _turn(s)
        assert_rejected(outcomes, expected)
        assert box["read unchanged"] is True
        assert box["surface"] == []

        # the api dies with the tool task: nothing writes through a retained one
        late = {
            "retained api: memo": await s.outcome(lambda: kept[0].memo("late", 1, ctx)),
            "retained api: progress": await s.outcome(
                lambda: kept[0].progress(lambda slot: slot.update(progress="late"), ctx)
            ),
        }
        assert_rejected(late, {name: (Forbidden, r"returned") for name in late})


# -- hooks -----------------------------------------------------------------------------------------
async def test_before_tool_api_cannot_write_outside_its_namespace_memo_and_event(
    tmp_path: Path,
) -> None:
    outcomes: dict[str, Outcome] = {}
    expected: dict[str, Expected] = {}
    kept: list[BeforeToolApi] = []
    box: dict[str, Any] = {}

    async def guard(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
        s: Session = box["session"]
        kept.append(api)
        attempts: dict[str, tuple[Callable[[], object], Expected]] = {
            "memo: non-JSON": (lambda: api.memo("m", float("inf"), ctx), (ValueError, r"memo")),
            "memo: empty name": (lambda: api.memo("", 1, ctx), (ValueError, r"non-empty")),
            "emit: bad name": (
                lambda: api.emit("no spaces allowed", {}, ctx),
                (ValueError, r"event name"),
            ),
            "emit: non-JSON data": (
                lambda: api.emit("ping", {"x": object()}, ctx),
                (ValueError, r"event guard\.ping"),
            ),
        }
        for name, (attempt, expect) in attempts.items():
            outcomes[name] = await s.outcome(attempt)
            expected[name] = expect
        for attribute in ("conversation_id", "task_id", "call_id", "kind"):
            # identity is read-only: waiting() aims its core event with it
            outcomes[f"reassign {attribute}"] = await s.outcome(
                lambda a=attribute: setattr(api, a, s.other.id)
            )
            expected[f"reassign {attribute}"] = (AttributeError, attribute)
        box["surface"] = [n for n in ("commit", "write", "document", "slot") if hasattr(api, n)]

    async def doomed(call: dict[str, Any], api: BeforeToolApi, ctx: Context) -> None:
        s: Session = box["session"]
        box["doomed"].unregister()  # the running handler continues, its token is stale
        for name, attempt in {
            "stale token: memo": lambda: api.memo("d", True, ctx),
            "stale token: waiting": lambda: api.waiting(ctx),
            "stale token: emit": lambda: api.emit("ping", None, ctx),
        }.items():
            outcomes[name] = await s.outcome(attempt)
            expected[name] = (StaleDefinition, r"'doomed' is stale")

    async def echo(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        return ToolResult.text("ok")

    def setup(h: Harness) -> None:
        guard_ns = h.namespace("guard", {"sticky": {"seen": 0}})
        box["doomed"] = h.namespace("doomed", {"sticky": {"seen": 0}})
        h.hooks(guard_ns, TOOL_KIND, {"before_tool": guard})
        h.hooks(box["doomed"], TOOL_KIND, {"before_tool": doomed})
        h.register_tool(ToolDeclaration("echo", "echo", SCHEMA, echo))

    async with open_session(tmp_path, _script("echo"), setup) as s:
        box["session"] = s
        await s.root.set_config({"selectedTools": ["echo"]}, ctx)
        await _turn(s)
        assert_rejected(outcomes, expected)
        assert box["surface"] == []
        results = [e for e in await s.root.entries(ctx) if e.kind == "pi.tool_result"]
        assert [_first_block(e)["text"] for e in results] == ["ok"]  # not blocked

        late = {
            "retained api: memo": await s.outcome(lambda: kept[0].memo("late", 1, ctx)),
            "retained api: waiting": await s.outcome(lambda: kept[0].waiting(ctx)),
        }
        assert_rejected(late, {name: (Forbidden, r"returned") for name in late})


async def test_other_hook_points_get_identity_only_apis_and_private_payloads(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}

    def after_tool(
        call: dict[str, Any], result: ToolResult, api: ToolHookApi, ctx: Context
    ) -> None:
        call["arguments"]["text"] = "forged"  # a private copy
        seen["after_tool"] = api
        return None

    def after_response(message: dict[str, Any], api: HookApi, ctx: Context) -> None:
        message["content"] = [{"type": "text", "text": "forged"}]  # a private copy
        seen.setdefault("after_response", api)

    def after_tools(assistant: int, results: list[int], api: HookApi, ctx: Context) -> None:
        results.clear()
        seen["after_tools"] = api

    async def echo(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        return ToolResult.text(f"echo {args['text']}")

    def setup(h: Harness) -> None:
        from pico3.turn.post_tools import POST_TOOLS_KIND

        ns = h.namespace("observer", {"sticky": {"n": 0}})
        h.hooks(ns, TOOL_KIND, {"after_tool": after_tool})
        h.hooks(ns, MODEL_CALL_KIND, {"after_response": after_response})
        h.hooks(ns, POST_TOOLS_KIND, {"after_tools": after_tools})
        h.register_tool(ToolDeclaration("echo", "echo", SCHEMA, echo))

    async with open_session(tmp_path, _script("echo"), setup) as s:
        await s.root.set_config({"selectedTools": ["echo"]}, ctx)
        await _turn(s)
        for point in ("after_tool", "after_response", "after_tools"):
            api = seen[point]
            assert isinstance(api, HookApi)
            with pytest.raises(AttributeError):  # frozen
                api.conversation_id = s.other.id  # type: ignore[misc]
            assert [n for n in ("memo", "waiting", "emit", "commit") if hasattr(api, n)] == []
        entries = list(reversed(await s.root.entries(ctx)))
        kinds = [e.kind for e in entries]
        assert kinds[-4:] == ["pi.system", "pi.assistant", "pi.tool_result", "pi.assistant"]
        first, result, final = entries[-3], entries[-2], entries[-1]
        assert _first_block(first)["arguments"] == {"text": "a"}
        assert _first_block(result)["text"] == "echo a"
        assert _first_block(final)["text"] == "done"


# -- pi.conversation over loopback -----------------------------------------------------------------
async def test_the_conversation_service_rejects_forbidden_writes_over_loopback(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session"
    seen: list[Any] = []
    deliveries: list[tuple[str, int]] = []
    arrived = anyio.Event()
    box: dict[str, Any] = {}

    def presentation(env: FacetEnvironment) -> None:
        async def on_instance(instance: Any, ctx: Context) -> None:
            def deliver(value: Any, _ctx: Context, delivery: Delivery) -> None:
                deliveries.append((delivery.kind, delivery.sequence))

            stop = instance.view.subscribe(deliver)
            seen.append(instance)
            arrived.set()
            try:
                await ctx.wait_cancelled()
            finally:
                stop()

        env.observe(ConversationService, on_instance)

    def worker(env: FacetEnvironment) -> None:
        box["harness"] = env.use(HarnessService)

    async def files() -> dict[str, bytes]:
        return {
            str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
        }

    async with anyio.create_task_group() as group:
        facet = harness_session_facet(lambda: JsonlStorage(path, fsync=False), task_group=group)
        async with create_facet_host(
            [facet, define_facet("worker", worker), define_facet("presentation", presentation)]
        ):
            await box["harness"].resume(ctx)
            with anyio.fail_after(TIMEOUT):
                await arrived.wait()
            (service,) = seen
            user = [USER_MESSAGE]
            attempts: dict[str, tuple[Callable[[], Awaitable[Any]], Expected]] = {
                "write pi.assistant": (
                    lambda: service.write(
                        {"kind": "pi.assistant", "model": [ASSISTANT_MESSAGE]}, ctx
                    ),
                    (ValueError, r"reserved for core"),
                ),
                "write pi.* in another case": (
                    lambda: service.write({"kind": "Pi.Tool_Result", "model": user}, ctx),
                    (ValueError, r"reserved for core"),
                ),
                "write pi.notice with two messages": (
                    lambda: service.write({"kind": "pi.notice", "model": user + user}, ctx),
                    (ValueError, r"exactly one user"),
                ),
                "write with a head": (
                    lambda: service.write({"kind": "note", "head": "self"}, ctx),
                    (ValueError, r"unsupported field\(s\) head"),
                ),
                "write with edits": (
                    lambda: service.write({"kind": "note", "edits": []}, ctx),
                    (ValueError, r"unsupported field\(s\) edits"),
                ),
                "fork seeding turn": (
                    lambda: service.fork("start", {"sticky": {"turn": {}}}, ctx),
                    (ValueError, r"config\.turn: not a sticky config key"),
                ),
                "fork seeding a namespace": (
                    lambda: service.fork("start", {"rewindable": {"plugins": {}}}, ctx),
                    (ValueError, r"config\.plugins: not a rewindable config key"),
                ),
                "fork seeding inbox": (
                    lambda: service.fork("start", {"sticky": {"inbox": []}}, ctx),
                    (ValueError, r"config\.inbox"),
                ),
            }
            for key in ("turn", "inbox", "tasks", "plugins"):
                attempts[f"config {key}"] = (
                    lambda key=key: service.config_set({key: {}}, ctx),
                    (ValueError, rf"config\.{key}: unknown key"),
                )
            outcomes: dict[str, Outcome] = {}
            for name, (attempt, _expect) in attempts.items():
                before = (await files(), list(deliveries))
                error: BaseException | None = None
                try:
                    await attempt()
                except Exception as exc:
                    error = exc
                outcomes[name] = (error, before == (await files(), list(deliveries)))
            assert_rejected(outcomes, {name: e for name, (_a, e) in attempts.items()})
            assert [kind for kind, _seq in deliveries] == ["hydrate"]
