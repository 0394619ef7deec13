"""Section seeds: the private ``sections`` of a conversation record, which its canonical section
fold starts from until it writes a managed ``pi.system`` entry of its own (docs/design/harness.md#section-seeds,
docs/design/turn.md#model-call, docs/design/view.md#never-in-the-view, the fork of docs/design/harness.md#public-api)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from chord.context import BACKGROUND, Context
from chord.delta import apply_immutable
from pico3.harness import ConversationHandle, Harness
from pico3.kernel.tx import Transaction
from pico3.models.faux import faux_response, faux_tool_call
from pico3.owned import OwnedSpec, create_owned_conversation
from pico3.session_data.section_seed import SectionSeedRejected, check_section_seed
from pico3.storage import (
    Conversation,
    ConversationWrite,
    InvalidBatch,
    MemoryStorage,
    SectionSeed,
    Storage,
)
from pico3.tasks import Completion, Done, Runtime, Step, TaskInfo, define_task
from pico3.tools import ToolApi, ToolDeclaration, ToolResult
from pico3.turn.model_call import MODEL_CALL_KIND
from pico3.turn.sections import define_section

pytestmark = pytest.mark.anyio
ctx = BACKGROUND
MODEL = {"provider": "faux", "modelId": "faux-1"}
PERSONA = define_section("persona", lambda value: f"You are {value}.")
MARK = "SEEDED-ONLY-TEXT"


def seed() -> list[dict[str, Any]]:
    return [
        {"key": "persona", "value": "a reviewer", "rendered": f"You are a reviewer. {MARK}"},
        {"key": "focus", "value": {"on": ["tests"]}, "rendered": "Focus on tests."},
    ]


async def ask(conversation: ConversationHandle, text: str) -> Any:
    return await (await conversation.send(text, ctx)).wait(ctx)


async def systems(conversation: ConversationHandle) -> list[Any]:
    entries = await conversation.entries(ctx, limit=1000, kind="pi.system")
    return list(reversed(entries))


def terse_root(s: Any) -> None:
    """A root-only hook: the root's prompt says "You are terse." (forks do not run it)."""
    s.harness.register_section(PERSONA)
    ns = s.harness.namespace("persona")

    def instruct(payload: dict[str, Any], api: Any, ctx: Context) -> None:
        payload["sections"].set(PERSONA, "terse")

    s.root.hooks(ns, MODEL_CALL_KIND, {"system_instructions": instruct})


# -- the first request ----------------------------------------------------------------------------


async def test_a_seeded_fork_sends_a_delta_to_its_seed_over_the_inherited_prompt(
    open_session: Any,
) -> None:
    async with open_session([faux_response("1"), faux_response("2")]) as s:
        terse_root(s)
        await ask(s.root, "one")
        assert s.faux.state.requests[0].system == ["## persona\nYou are terse."]
        newest = (await s.root.entries(ctx, limit=1))[0]
        fork = await s.root.fork(newest.id, ctx, sections=seed())
        await ask(fork, "two")
        # The inherited baseline stays in context; the seed arrives as a delta over it.
        assert s.faux.state.requests[1].system == [
            "## persona\nYou are terse.",
            f"The persona section now reads:\nYou are a reviewer. {MARK}\n\n"
            "The focus section now reads:\nFocus on tests.",
        ]
        (own,) = [e for e in await systems(fork) if e.conversation_id == fork.id]
        assert own.data["sections"] == {
            "persona": {"value": "a reviewer", "rendered": f"You are a reviewer. {MARK}"},
            "focus": {"value": {"on": ["tests"]}, "rendered": "Focus on tests."},
        }


async def test_a_seeded_fork_at_start_sends_its_seed_as_the_baseline(open_session: Any) -> None:
    async with open_session([faux_response("1")]) as s:
        terse_root(s)
        fork = await s.root.fork("start", ctx, rewindable={"model": MODEL}, sections=seed())
        await ask(fork, "one")
        assert s.faux.state.requests[0].system == [
            f"## persona\nYou are a reviewer. {MARK}\n\n## focus\nFocus on tests."
        ]


async def test_a_fork_without_a_seed_keeps_the_inherited_sections(open_session: Any) -> None:
    async with open_session([faux_response("1"), faux_response("2")]) as s:
        terse_root(s)
        await ask(s.root, "one")
        newest = (await s.root.entries(ctx, limit=1))[0]
        fork = await s.root.fork(newest.id, ctx)
        await ask(fork, "two")
        assert s.faux.state.requests[1].system == ["## persona\nYou are terse."]
        assert [e.conversation_id for e in await systems(fork)] == [s.root.id]


async def test_an_empty_seed_removes_the_inherited_sections(open_session: Any) -> None:
    async with open_session([faux_response("1"), faux_response("2")]) as s:
        terse_root(s)
        await ask(s.root, "one")
        newest = (await s.root.entries(ctx, limit=1))[0]
        fork = await s.root.fork(newest.id, ctx, sections=[])
        await ask(fork, "two")
        assert s.faux.state.requests[1].system == [
            "## persona\nYou are terse.",
            "The persona section no longer applies.",
        ]


# -- after the first managed entry ----------------------------------------------------------------


async def test_once_the_fork_wrote_its_own_entry_the_fold_comes_from_entries(
    open_session: Any,
) -> None:
    async with open_session([faux_response("1"), faux_response("2")]) as s:
        s.harness.register_section(PERSONA)
        source = seed()
        fork = await s.root.fork("start", ctx, rewindable={"model": MODEL}, sections=source)
        # The caller's objects were copied: changing them later changes nothing.
        source[0]["rendered"] = "MUTATED"
        source[1]["value"]["on"].append("MUTATED")
        seen: list[Any] = []
        ns = s.harness.namespace("editor")

        def instruct(payload: dict[str, Any], api: Any, ctx: Context) -> None:
            draft = payload["sections"]
            seen.append(draft.get("persona"))
            if len(seen) == 1:
                draft.set(PERSONA, "an editor")

        fork.hooks(ns, MODEL_CALL_KIND, {"system_instructions": instruct})
        await ask(fork, "one")
        assert s.faux.state.requests[0].system == [
            "## persona\nYou are an editor.\n\n## focus\nFocus on tests."
        ]
        await ask(fork, "two")
        # The second preparation folds from the fork's own entry, not from the seed: its draft
        # starts at "an editor", nothing changed, so no entry is appended and no delta back to
        # the seeded "a reviewer" reaches the model.
        assert seen == ["a reviewer", "an editor"]
        assert len(await systems(fork)) == 1
        assert s.faux.state.requests[1].system == s.faux.state.requests[0].system
        assert "MUTATED" not in json.dumps([r.system for r in s.faux.state.requests])


async def test_a_fork_of_a_seeded_fork_inherits_entries_not_the_seed(open_session: Any) -> None:
    async with open_session([faux_response("1"), faux_response("2")]) as s:
        s.harness.register_section(PERSONA)
        first = await s.root.fork("start", ctx, rewindable={"model": MODEL}, sections=seed())
        await ask(first, "one")
        newest = (await first.entries(ctx, limit=1))[0]
        second = await first.fork(newest.id, ctx)
        assert s.harness.kernel.conversations[second.id].sections is UNSET
        await ask(second, "two")
        assert s.faux.state.requests[1].system == s.faux.state.requests[0].system
        assert [e.conversation_id for e in await systems(second)] == [first.id]


async def test_a_builder_reads_a_private_copy_of_the_seed(open_session: Any) -> None:
    async with open_session([]) as s:
        fork = await s.root.fork("start", ctx, sections=seed())

        def build(tx: Transaction, _ctx: Context) -> None:
            record = tx.conversation(fork.id)
            assert record is not None and record.sections is not UNSET
            record.sections[1].value["on"].append("MUTATED")
            record.sections.clear()

        await s.root.commit(build, ctx)
        assert s.harness.kernel.conversations[fork.id].sections == check_section_seed(seed())


# -- durability -----------------------------------------------------------------------------------


async def test_the_seed_survives_a_reopen_and_drives_the_first_generation(
    open_session: Any, storage_factory: Callable[[], Storage]
) -> None:
    first = storage_factory()
    # A MemoryStorage is reopened as the same object; a JsonlStorage from its directory.
    again = first if isinstance(first, MemoryStorage) else storage_factory()
    async with open_session([], storage=first) as s:
        fork = await s.root.fork("start", ctx, rewindable={"model": MODEL}, sections=seed())
        fid = fork.id
    async with open_session([faux_response("1")], storage=again) as s:
        record = s.harness.kernel.conversations[fid]
        assert record.sections == check_section_seed(seed())
        reopened = await s.harness.conversation(fid, ctx)
        assert reopened is not None
        await ask(reopened, "one")
        assert s.faux.state.requests[0].system == [
            f"## persona\nYou are a reviewer. {MARK}\n\n## focus\nFocus on tests."
        ]


def test_records_without_sections_still_decode_and_seeds_round_trip() -> None:
    old = msgspec.json.decode(b'{"id":3,"parent":{"conversation_id":1,"at":2}}', type=Conversation)
    assert old.sections is UNSET and old.parent is not UNSET and old.parent.at == 2
    seeded = Conversation(id=4, sections=check_section_seed(seed()))
    encoded = msgspec.json.encode(seeded)
    assert msgspec.json.decode(encoded, type=Conversation) == seeded
    nullable = msgspec.json.decode(
        b'{"id":5,"sections":[{"key":"k","value":null,"rendered":""}]}', type=Conversation
    )
    assert nullable.sections == [SectionSeed(key="k", value=None, rendered="")]


async def test_storage_refuses_a_malformed_seed_written_past_the_kernel() -> None:
    storage = MemoryStorage()
    await storage.open(ctx)
    # Past the types: a plain mapping instead of a SectionSeed, a non-str rendered text.
    mapping: Any = [{"key": "k", "value": 1, "rendered": "r"}]
    number: Any = 2
    bad = (
        Conversation(id=1, sections=mapping),
        Conversation(id=1, sections=[SectionSeed(key="k", value=float("nan"), rendered="r")]),
        Conversation(id=1, sections=[SectionSeed(key="k", value=1, rendered=number)]),
    )
    for record, field_name in zip(
        bad, ("sections[0]", "sections[0].value", "sections[0]"), strict=True
    ):
        with pytest.raises(InvalidBatch, match=field_name.replace("[", r"\[").replace("]", r"\]")):
            await storage.commit([ConversationWrite(conversation=record)], ctx)
    assert await storage.conversations(ctx) == []
    await storage.close(ctx)


# -- validation -----------------------------------------------------------------------------------

BAD_SEEDS: list[tuple[Any, str]] = [
    ({"persona": "x"}, "sections: must be a list"),
    (["persona"], "sections[0]: must be a SectionSeed or an object"),
    ([{"key": "persona", "value": 1}], "sections[0].rendered: missing"),
    ([{"key": "persona", "value": 1, "rendered": "", "colour": 1}], "sections[0]: unknown fields"),
    ([{"key": "no spaces", "value": 1, "rendered": ""}], "sections[0].key: section key"),
    (
        [{"key": "pi.system", "value": 1, "rendered": ""}],
        "sections[0].key: section key 'pi.system' is reserved",
    ),
    ([{"key": 7, "value": 1, "rendered": ""}], "sections[0].key"),
    (
        [{"key": "a", "value": 1, "rendered": ""}, {"key": "a", "value": 2, "rendered": ""}],
        "sections[1].key: 'a' repeats sections[0]",
    ),
    ([{"key": "a", "value": {"x": float("inf")}, "rendered": ""}], "sections[0].value: non-finite"),
    ([{"key": "a", "value": {1: "x"}, "rendered": ""}], "sections[0].value: non-string key"),
    ([{"key": "a", "value": b"x", "rendered": ""}], "sections[0].value"),
    ([{"key": "a", "value": 1, "rendered": 3}], "sections[0].rendered: must be a str, got int"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_SEEDS)
def test_check_section_seed_names_the_bad_field(bad: Any, message: str) -> None:
    with pytest.raises(SectionSeedRejected) as caught:
        check_section_seed(bad)
    assert message in str(caught.value)


def test_check_section_seed_accepts_records_and_mappings_and_copies() -> None:
    value = {"on": ["x"]}
    checked = check_section_seed(
        (
            SectionSeed(key="a", value=value, rendered="A"),
            {"key": "b", "value": None, "rendered": ""},
        )
    )
    value["on"].append("y")
    assert checked == [
        SectionSeed(key="a", value={"on": ["x"]}, rendered="A"),
        SectionSeed(key="b", value=None, rendered=""),
    ]
    assert check_section_seed([]) == []


async def test_an_invalid_seed_is_rejected_on_every_surface_and_creates_nothing(
    open_session: Any,
) -> None:
    async with open_session([]) as s:
        before = set(s.harness.kernel.conversations)
        bad: Any = [{"key": "a", "value": 1, "rendered": None}]
        with pytest.raises(SectionSeedRejected, match=r"sections\[0\]\.rendered"):
            await s.root.fork("start", ctx, sections=bad)

        async def build(tx: Transaction, _ctx: Context) -> int:
            return await tx.create_conversation(sections=bad)

        with pytest.raises(SectionSeedRejected, match=r"sections\[0\]\.rendered"):
            await s.root.commit(build, ctx)
        with pytest.raises(SectionSeedRejected, match=r"sections\[0\]\.rendered"):
            OwnedSpec.of({"sections": bad})
        with pytest.raises(SectionSeedRejected, match=r"sections\[0\]\.rendered"):
            OwnedSpec(sections=bad)
        assert set(s.harness.kernel.conversations) == before
        assert len(await s.harness.kernel.storage.conversations(ctx)) == len(before)


# -- owned conversations --------------------------------------------------------------------------


async def test_an_owned_conversation_created_with_a_seed_uses_it(open_session: Any) -> None:
    created: dict[str, Any] = {}

    async def no_abort(task: TaskInfo, rt: Runtime, ctx: Context) -> Any:
        return lambda tx, current, ctx: None

    async def initial(task: TaskInfo, rt: Runtime, ctx: Context) -> Step:
        spec = {"rewindable": {"model": MODEL}, "sections": seed()}
        child = await create_owned_conversation(rt, spec, ctx)
        created["child"] = child.id
        record = await (await child.send("hello?", ctx, request_id="ask")).wait(ctx)
        return Done(lambda tx, cur, c: Completion.completed({"status": record.status}))

    kind = define_task("test.seeded_maker", initial=initial, phases={}, abort=no_abort)

    def setup(h: Harness) -> None:
        h.register_task_kind(kind)

    async with open_session([faux_response("child answer")], setup=setup) as s:
        task_id = await s.root.commit(lambda tx, _c: tx.create_task(kind, None), ctx)
        task = await s.harness.wait_for_task(task_id, ctx)
        assert task.outcome is not UNSET and task.outcome["result"] == {"status": "done"}
        record = s.harness.kernel.conversations[created["child"]]
        assert record.owner == task_id and record.sections == check_section_seed(seed())
        assert s.faux.state.requests[0].system == [
            f"## persona\nYou are a reviewer. {MARK}\n\n## focus\nFocus on tests."
        ]


async def test_a_tool_subagent_created_with_a_seed_uses_it(open_session: Any) -> None:
    answers: list[Any] = []

    async def delegate(args: dict[str, Any], api: ToolApi, ctx: Context) -> ToolResult:
        spec = {"rewindable": {"model": MODEL}, "sections": seed()}
        child = await api.conversation(spec, ctx)
        answers.append(await (await child.send("review this", ctx)).wait(ctx))
        return ToolResult.text("reviewed")

    def setup(h: Harness) -> None:
        h.register_tool(ToolDeclaration("delegate", "Delegate.", {"type": "object"}, delegate))

    script = [
        faux_response(faux_tool_call("delegate", {})),
        faux_response("child answer"),
        faux_response("done"),
    ]
    config = {"selectedTools": ["delegate"]}
    async with open_session(script, setup=setup, config=config) as s:
        assert (await ask(s.root, "go")).status == "done"
        assert [record.status for record in answers] == ["done"]
        assert s.faux.state.requests[1].system == [
            f"## persona\nYou are a reviewer. {MARK}\n\n## focus\nFocus on tests."
        ]


# -- privacy --------------------------------------------------------------------------------------


async def test_the_seed_never_appears_in_the_view_or_any_public_snapshot(
    open_session: Any,
) -> None:
    async with open_session([faux_response("1")]) as s:
        await s.root.write("test.note", ctx, data={"n": 1})
        at = (await s.root.entries(ctx, limit=1))[0].id
        fork = await s.root.fork(at, ctx, sections=seed())
        watch = await fork.watch(ctx)
        envelopes: list[Any] = []
        watch.start(envelopes.append)
        # docs/design/view.md#shape: conversation carries only {id, parent?, owner?}.
        assert watch.view["conversation"] == {
            "id": fork.id,
            "parent": {"conversationId": s.root.id, "at": at},
        }
        public = [
            watch.view,
            await fork.config(ctx),
            await fork.rewindable(ctx),
            await fork.sticky(ctx),
            msgspec.to_builtins(await fork.context(ctx)),
            s.view,
        ]
        assert MARK not in json.dumps(public)
        assert "a reviewer" not in json.dumps(public)
        await ask(fork, "one")
        # Once the generation ran, the rendered text is in a pi.system entry (the transcript),
        # as any system prompt is; the conversation member still carries no seed, neither in
        # the replica a client folds from the envelopes nor in a fresh snapshot.
        replica = watch.view
        for envelope in envelopes:
            replica = apply_immutable(replica, envelope.ops)
        fresh = await fork.watch(ctx)
        for view in (replica, fresh.view):
            assert view["conversation"] == {
                "id": fork.id,
                "parent": {"conversationId": s.root.id, "at": at},
            }
            assert any(entry["kind"] == "pi.system" for entry in view["entries"])
        fresh.stop()
        watch.stop()
