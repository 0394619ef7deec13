"""The hooks session facet: Claude Code's hook events on pico3's hook points.

Each event and where it runs (docs/design/harness.md#hook-points):

===================== ==================================================================
``PermissionRequest`` ``permission_request`` of ``pi.tool`` (the approval feature runs it right
                      before it would ask): ``allow``/``deny`` answer the dialog (a deny may
                      stop the turn, an allow add session rules: :mod:`.permission`).
``PreToolUse``        ``before_tool`` of ``pi.tool``: exit 2, ``permissionDecision: "deny"``
                      or ``"ask"``, ``decision: "block"``, ``continue: false``, a changed
                      ``updatedInput`` block it (the model reads why); ``"allow"`` adds none.
``PostToolUse``       ``after_tool`` of ``pi.tool``, after a call that succeeded (an error result
                      runs ``PostToolUseFailure``, with ``error``): exit 2's stderr, a ``decision:
                      "block"`` reason, ``additionalContext`` are added to the result it reads.
``UserPromptSubmit``  ``before_request`` of ``pi.generation``, once per prompt of the user (not
                      for a subagent's task, nor for a ``Stop`` hook's continuation):
                      ``additionalContext`` or plain stdout is added after the prompt in every
                      request; exit 2 or ``decision: "block"`` replace the prompt with a note
                      that a hook blocked it.
``Stop``              ``on_yield`` of a conversation nobody owns: exit 2's stderr or a
                      ``decision: "block"`` reason continues the turn with it as the next
                      message; ``stop_hook_active`` says the turn already continued so.
``SubagentStop``      ``on_yield`` of a subagent's (owned) conversation, the same way. A
                      subagent's own hooks (:mod:`.agent_hooks`) run after the session's.
``SessionStart``      when the feature activates (worker start, ``/reload``): source
                      ``startup`` for an empty session, else ``resume``;
                      ``additionalContext`` or plain stdout is added before the first prompt.
``SessionEnd``        when the feature deactivates (worker exit, ``/reload``): reason ``other``;
                      started and not waited for.
``PreCompact``        ``before_collapse`` of ``pi.collapse``: trigger ``manual`` for
                      ``/compact``, else ``auto``; it cannot stop the compaction.
``Notification``      a tool call of any conversation starts waiting on the approval dialog
                      ("Claude needs your permission to use Bash") or on a question ("Claude
                      is waiting for your input"): once per call, seen in the conversation's
                      view (``turn.tools[i].waitingOn``, :mod:`.observer`); not for Claude
                      Code's idle prompt.
===================== ==================================================================

**Safety.** A ``PreToolUse`` hook only ever adds restrictions: the session's approval (modes,
rules, guarded paths) keeps deciding, and its ``"allow"`` never skips the dialog. Only a
``PermissionRequest`` hook answers the dialog, and only once approval would ask (a deny rule,
plan mode or ``denyInsteadOfPrompting`` decide before it runs; an error in it asks).
A hook's ``"ask"`` cannot open the approval dialog (the approval feature owns it), so it blocks
the call with the hook's reason, telling the model the user must confirm: fail closed.
A hook with ``"onFailure": "block"`` that fails (cannot start, times out, exits with an
unexpected code, prints broken JSON) blocks as exit 2 does, with a reason naming it
(:mod:`.on_failure`); a ``Stop`` hook's failure continues the turn once, not in a loop.

**Durability.** Each ``PreToolUse`` hook's verdict is a memo on the tool task's slot
(``api.memo("pre:<hook key>")``), written when the hook ends: after a crash or a reload the
``before_tool`` chain runs again, finds the verdicts of the hooks that ended and runs only the
others (one that was running when the worker died runs again, from the start). The hooks of an
event run one after another, in file order; the first that blocks a tool call ends the chain.
A ``UserPromptSubmit`` verdict is stored in the conversation's rewindable state (``hooks``
namespace, ``prompts``), so a restarted worker neither runs it again nor loses its context. A
``PostToolUse``, ``Stop`` or ``PreCompact`` hook may run again after a crash that falls between
the hook and the commit that records what follows it. A waiting call's ``Notification`` hooks
are recorded as run (session key ``notified``: ``<conversation>:<call id>``) once they ended,
so a restarted worker, which finds the call waiting again, does not run them again
(one killed while they ran does).

What a hook says to the *user* (a non-blocking error, a timeout, stderr of an event whose
stderr is for the user) goes to the worker's log (``coding-agent worker: ...``).

Why one module: :class:`Hooks` is the one place where each event meets its hook point, and
those handlers share one state (the loaded hooks, the payload, the memo and namespace, the
Stop continuations); each hook type's own running is already elsewhere (:mod:`.protocol`,
:mod:`.prompt_hooks`, :mod:`.hook_agents`, :mod:`.mcp_hooks`, :mod:`.permission`), and
splitting the handlers would scatter that shared state across modules.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio

from chord import BACKGROUND, Context, FacetEnvironment, cancel_scope, define_facet
from pico3 import (
    MISSING,
    MODEL_CALL_KIND,
    TOOL_KIND,
    ChildEnvironment,
    ConversationService,
    HarnessService,
    HarnessServiceApi,
    Sandbox,
    ToolResult,
    commands_sandbox,
    explain_refusal,
)

from .agent_hooks import AgentHooks
from .contract import RUN_SETTINGS_SERVICE, HookInfo, HooksListing, HooksSummary
from .hook_agents import HookAgents, ask_agent
from .mcp_hooks import MCP_HOOK_TOOLS, McpHookRunner
from .observer import follow_conversation
from .on_failure import BLOCK, apply_on_failure
from .permission import answer_permission
from .prompt_hooks import ask_model, check_models
from .protocol import (
    HookRun,
    add_text,
    assistant_text,
    claude_tool,
    hook_argv,
    prompt_key,
    prompt_text,
    run_command,
    tool_names,
)
from .settings import HookSpec, LoadedHooks, load_hooks
from .verdicts import (
    post_notes,
    pre_verdict,
    prompt_verdict,
    replaced_output,
    start_context,
    stop_continuation,
)

__all__ = ["NAMESPACE", "Hooks", "session_facet"]

_log = logging.getLogger("facets_hooks")
NAMESPACE = "hooks"
KEEP_NOTIFIED = 500
"""How many waiting calls' ``Notification`` runs the session remembers (call ids are unique)."""
COLLAPSE_KIND = "pi.collapse"


class Hooks:
    """One activation's hooks: the loaded settings and the handlers on the hook points."""

    def __init__(self, harness: HarnessServiceApi) -> None:
        self._harness = harness
        self.loaded = LoadedHooks()
        self.cwd = os.getcwd()
        self.session_id = ""
        self.child_env: dict[str, str] = {}
        self.session_context = ""
        self._prompts: dict[int, dict[str, Any]] = {}  # conversation -> stored verdicts
        self._continued: dict[int, str] = {}  # conversation -> the Stop continuation it got
        self._warned: set[str] = set()
        self._ns: Any = None
        self.agents = AgentHooks(harness, self.warn)  # each subagent's own (.agent_hooks)
        self.hook_agents = HookAgents()  # "type": "agent" hooks' subagents (.hook_agents)
        self.unchecked_models: list[HookSpec] = []  # checked once the session has a model
        self.mcp = McpHookRunner()  # mcp_tool hooks, through the MCP feature's service
        self.harness = harness

    # -- loading ----------------------------------------------------------------------------
    def load(self) -> None:
        services = self._harness.handle.services
        project = services.get("project_root") or services.get("workspace")
        self.cwd = str(services.get("workspace") or project or os.getcwd())
        env = services.get("mcp_env")
        self.loaded = load_hooks(
            env=os.environ if env is None else env,
            project=project,
            project_trusted=bool(services.get("project_trusted", False)),
            plugins=services.get("claude_plugins"),
            given=services.get(RUN_SETTINGS_SERVICE),
        )
        self.agents.load(services)
        state_dir = services.get("state_dir")
        self.session_id = Path(state_dir).parent.name if isinstance(state_dir, str) else ""
        self.child_env = ChildEnvironment.of(services).environ(
            {"CLAUDE_PROJECT_DIR": str(project or self.cwd)}
        )
        for problem in self.loaded.problems:
            self.warn(problem)
        for waiting in self.loaded.waiting:
            self.warn(f"{waiting}: hooks not loaded: the project is not trusted (/trust)")

    def warn(self, message: str) -> None:
        """Log ``message`` once in this facet's life."""
        if message not in self._warned:
            self._warned.add(message)
            _log.warning("%s", message)

    def summary(self) -> HooksSummary:
        hooks: list[HookInfo] = []
        for h in self.loaded.hooks:
            info: HookInfo = {
                "event": h.event,
                "matcher": h.matcher,
                "command": h.label,
                "timeout": h.timeout,
                "source": h.source,
            }
            if h.on_failure == BLOCK:
                info["onFailure"] = BLOCK
            if h.kind == "mcp_tool":
                self.mcp.info(h.command, info)
            hooks.append(info)
        return {
            "hooks": hooks,
            "problems": list(self.loaded.problems),
            "waiting": list(self.loaded.waiting),
        }

    # -- running ----------------------------------------------------------------------------
    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "transcript_path": "",
            "cwd": self.cwd,
            "hook_event_name": event,
            **fields,
        }

    def sandbox(self) -> Sandbox | None:
        """The sandbox hooks run in now: the session's when its commands run inside
        (``sandbox.enabled``, or the ``sandbox`` permission mode), else ``None``."""
        return commands_sandbox(self._harness.handle.services)

    async def run(self, hook: HookSpec, payload: dict[str, Any], ctx: Context) -> HookRun:
        """Run one hook (inside the sandbox when the session's commands run there); what it
        says to the user (a failure, a timeout) is logged. A prompt hook asks a model
        (:mod:`.prompt_hooks`), an agent hook a read-only subagent (:mod:`.hook_agents`), an
        mcp_tool hook a tool of one of the session's MCP servers (:mod:`.mcp_hooks`)."""
        if hook.kind == "agent":
            return await ask_agent(self._harness, self.hook_agents, hook, payload, ctx, self.warn)
        if hook.kind == "prompt":
            return await ask_model(self._harness, hook, payload, ctx, self.warn)
        where = f"{hook.event} hook `{hook.label}` ({hook.source})"
        if hook.kind == "mcp_tool":  # a tool of a server the session runs (.mcp_hooks)
            run = await self.mcp.run(hook.command, payload, hook.timeout, where, ctx)
        else:
            run = await self._run_command(hook, payload, where, ctx)
        message = (run.output or {}).get("systemMessage")
        if isinstance(message, str) and message.strip():  # for the user, not the model
            _log.warning("%s: %s", where, message.strip())
        return self._on_failure(hook, where, run)

    async def _run_command(
        self, hook: HookSpec, payload: dict[str, Any], where: str, ctx: Context
    ) -> HookRun:
        """Run a command (or HTTP) hook; a failure or a timeout is logged."""
        sandbox = self.sandbox()
        with cancel_scope(ctx):
            run = await run_command(
                hook.command,
                payload,
                env=hook.environ(self.child_env),
                cwd=self.cwd,
                seconds=hook.timeout,
                sandbox=sandbox,
            )
        if run.timed_out:
            _log.warning("%s timed out after %g s; it was stopped", where, hook.timeout)
        elif run.exit_code not in (0, 2):
            detail = run.stderr.strip() or "no output on stderr"
            refused = explain_refusal(detail, sandbox.policy.hidden_names()) if sandbox else None
            if refused:  # for the user: the hook ran in the sandbox, and that is why
                detail += f" (it ran inside the sandbox: {refused.strip('[]')})"
            _log.warning("%s failed with exit code %s: %s", where, run.exit_code, detail)
        return run

    def _on_failure(self, hook: HookSpec, where: str, run: HookRun) -> HookRun:
        """``run`` as its event reads it: a failure of a hook with ``"onFailure": "block"``
        becomes an exit 2 with the reason (:mod:`.on_failure`), and the log says so."""
        if hook.on_failure != BLOCK:
            return run
        blocked = apply_on_failure(run, name=where, timeout=hook.timeout)
        if blocked.failed:
            _log.warning("%s", blocked.stderr)
        return blocked

    async def owned(self, conversation_id: int, ctx: Context) -> bool:
        """Whether a task owns the conversation (a subagent's)."""
        return await self._harness.harness.owner_task(conversation_id, ctx) is not None

    async def before_tool(self, call: dict[str, Any], api: Any, ctx: Context) -> Any:
        name, arguments = str(call.get("name", "")), call.get("arguments", {})
        names = tool_names(name, arguments)
        found = await self.agents.add(self.loaded, "PreToolUse", api.conversation_id, ctx)
        hooks = [h for h in found if h.matches(names)]
        if not hooks:
            return None
        tool_name, tool_input = claude_tool(name, arguments, self.cwd)
        payload = self.payload(
            "PreToolUse",
            tool_name=tool_name,
            tool_input=tool_input,
            tool_use_id=str(call.get("id", "")),
        )
        for hook in hooks:
            key = f"pre:{hook.key}"
            verdict = await api.memo(key, ctx)
            if verdict is MISSING:
                await api.waiting(ctx)
                verdict = pre_verdict(await self.run(hook, payload, ctx), tool_input)
                verdict = await api.memo(key, verdict, ctx)
            if isinstance(verdict, dict) and verdict.get("block"):
                return {"block": str(verdict["block"])}  # pyright: ignore[reportUnknownArgumentType]
        return None

    async def permission_request(self, call: dict[str, Any], api: Any, ctx: Context) -> Any:
        return await answer_permission(self, call, api.conversation_id, ctx)

    async def after_tool(
        self, call: dict[str, Any], result: ToolResult, api: Any, ctx: Context
    ) -> ToolResult | None:
        name, arguments = str(call.get("name", "")), call.get("arguments", {})
        names, failed = tool_names(name, arguments), result.is_error
        event = "PostToolUseFailure" if failed else "PostToolUse"
        found = await self.agents.add(self.loaded, event, api.conversation_id, ctx)
        hooks = [h for h in found if h.matches(names)]
        if not hooks:
            return None
        tool_name, tool_input = claude_tool(name, arguments, self.cwd)
        response: dict[str, Any] = {"content": result.plain_text, "success": True}
        if isinstance(tool_input, dict) and "file_path" in tool_input:
            response["filePath"] = tool_input["file_path"]
        about = {"error": result.plain_text, "is_interrupt": False} if failed else {}
        payload = self.payload(
            event,
            tool_name=tool_name,
            tool_input=tool_input,
            **(about or {"tool_response": response}),
            tool_use_id=str(call.get("id", "")),
        )
        notes: list[str] = []
        content = list(result.content or [])
        for hook in hooks:
            run = await self.run(hook, payload, ctx)
            notes.extend(post_notes(run, event))
            replaced = replaced_output(run) if not failed else None
            if replaced is not None:  # the last hook that replaces it wins
                content = [{"type": "text", "text": replaced}]
        if not notes and content == list(result.content or []):
            return None
        extra = [{"type": "text", "text": f"\n\n{note}"} for note in notes]
        return ToolResult(
            content=[*content, *extra],
            is_error=result.is_error,
            details=result.details,
            diagnostics=result.diagnostics,
            control=result.control,
        )

    async def _stored_prompts(self, conversation: Any, ctx: Context) -> dict[str, Any]:
        cid = conversation.id if hasattr(conversation, "id") else None
        if isinstance(cid, int) and cid in self._prompts:
            return self._prompts[cid]
        ns = self._ns

        def read(tx: Any, _ctx: Context) -> dict[str, Any]:
            return dict(tx.plugins(ns)["prompts"])

        stored = await conversation.commit(read, ctx)
        if isinstance(cid, int):
            self._prompts[cid] = stored
        return stored

    async def before_request(self, request: Any, api: Any, ctx: Context) -> Any:
        prompt_hooks = self.loaded.for_event("UserPromptSubmit")
        if not (prompt_hooks or self.session_context or self._continued):
            return None
        messages: list[dict[str, Any]] = request.get("messages") or []
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not users or await self.owned(api.conversation_id, ctx):
            return None
        # the newest message the model reads (system prompt messages are placed after it)
        last = next((m for m in reversed(messages) if m.get("role") != "system"), None)
        prompt = last if isinstance(last, dict) and last.get("role") == "user" else None
        if prompt is not None and prompt_text(prompt) != self._continued.get(api.conversation_id):
            self._continued.pop(api.conversation_id, None)  # a prompt of the user: a new stop
        else:
            prompt = None  # the model's own turn goes on, or a Stop hook's continuation
        keys = [prompt_key(message) for message in users]  # before anything is added
        stored: dict[str, Any] = {}
        if prompt_hooks:
            conversation = await self._harness.harness.conversation(api.conversation_id, ctx)
            if conversation is None:  # pragma: no cover - the generation's conversation exists
                return None
            stored = await self._stored_prompts(conversation, ctx)
            if prompt is not None and prompt_key(prompt) not in stored:
                key = prompt_key(prompt)
                verdict = await self._prompt_verdict(prompt_hooks, prompt_text(prompt), ctx)
                stored[key] = verdict
                ns = self._ns

                def write(tx: Any, _ctx: Context) -> None:
                    prompts = dict(tx.plugins(ns)["prompts"])
                    prompts.setdefault(key, verdict)
                    tx.plugins(ns)["prompts"] = prompts

                await conversation.commit(write, ctx)
        for message, key in zip(users, keys, strict=True):
            verdict = stored.get(key)
            if not isinstance(verdict, dict):
                continue
            if verdict.get("blocked"):
                self.warn(f"a UserPromptSubmit hook blocked a prompt: {verdict['blocked']}")
                message["content"] = (
                    "(The user's prompt was blocked by a UserPromptSubmit hook and is not shown. "
                    "Do nothing; say only that the prompt was blocked by a hook.)"
                )
            elif verdict.get("context"):
                add_text(message, f"UserPromptSubmit hook additional context: {verdict['context']}")
        if self.session_context:
            add_text(users[0], self.session_context, before=True)
        return {"messages": messages}

    async def _prompt_verdict(
        self, hooks: list[HookSpec], prompt: str, ctx: Context
    ) -> dict[str, str]:
        """Run the ``UserPromptSubmit`` hooks on ``prompt``: their contexts joined, or the
        first block."""
        verdict = {"context": "", "blocked": ""}
        payload = self.payload("UserPromptSubmit", prompt=prompt)
        for hook in hooks:
            found = prompt_verdict(await self.run(hook, payload, ctx))
            if found["context"]:
                verdict["context"] = "\n".join(
                    p for p in (verdict["context"], found["context"]) if p
                )
            if found["blocked"]:
                verdict["blocked"] = found["blocked"]
                break
        return verdict

    async def on_yield(self, answer: Any, api: Any, ctx: Context) -> Any:
        owned = await self.owned(api.conversation_id, ctx)
        event = "SubagentStop" if owned else "Stop"  # a subagent's own Stop is its SubagentStop
        hooks = self.loaded.for_event(event)
        if owned:  # then the subagent's own hooks
            hooks = await self.agents.add(self.loaded, event, api.conversation_id, ctx)
        if not hooks:
            return None
        active = api.conversation_id in self._continued
        last = assistant_text(answer)
        payload = self.payload(event, stop_hook_active=active, last_assistant_message=last)
        for hook in hooks:
            run = await self.run(hook, payload, ctx)
            if run.failed and active:  # it failed again on the turn its failure continued
                self.warn(
                    f"{event} hook `{hook.label}` ({hook.source}) failed again after the model "
                    "went on once because of its failure; the turn ends here instead of looping"
                )
                continue
            reason = stop_continuation(run)
            if reason:
                self._continued[api.conversation_id] = reason
                return {"continue": reason}
        self._continued.pop(api.conversation_id, None)
        return None

    async def before_collapse(
        self, reason: str, through: int, entries: Any, api: Any, ctx: Context
    ) -> None:
        trigger = "manual" if reason == "manual" else "auto"
        hooks = [h for h in self.loaded.for_event("PreCompact") if h.matches((trigger,))]
        payload = self.payload("PreCompact", trigger=trigger, custom_instructions="")
        for hook in hooks:
            run = await self.run(hook, payload, ctx)
            if run.exit_code == 2 and run.stderr.strip():
                _log.warning("PreCompact hook `%s`: %s", hook.command, run.stderr.strip())
        return None

    async def session_start(self, ctx: Context) -> None:
        """Run the ``SessionStart`` hooks: source ``startup`` for a session with no prompt in it
        yet, ``resume`` for one that has (a restarted worker, ``coding-agent --resume``)."""
        root = await self._harness.harness.root(ctx)
        source = "resume" if await root.entries(ctx, limit=1, kind="pi.user") else "startup"
        parts: list[str] = []
        for hook in [h for h in self.loaded.for_event("SessionStart") if h.matches((source,))]:
            context = start_context(
                await self.run(hook, self.payload("SessionStart", source=source), ctx)
            )
            if context:
                parts.append(context)
        self.session_context = (
            "SessionStart hook additional context: " + "\n".join(parts) if parts else ""
        )

    async def notify(self, message: str, conversation_id: int | None, ctx: Context) -> None:
        """Run the ``Notification`` hooks with ``message`` (their output is for the user): the
        session's, then those of the subagent whose conversation is ``conversation_id``."""
        hooks = self.loaded.for_event("Notification")
        if conversation_id is not None:
            hooks = await self.agents.add(self.loaded, "Notification", conversation_id, ctx)
        for hook in hooks:
            run = await self.run(hook, self.payload("Notification", message=message), ctx)
            if run.exit_code == 2 and run.stderr.strip():
                _log.warning("Notification hook `%s`: %s", hook.command, run.stderr.strip())

    async def notify_once(
        self, key: str, message: str, conversation_id: int | None, ctx: Context
    ) -> None:
        """:meth:`notify` for the waiting call ``key``, unless the session records that it ran
        already; recorded once the hooks ended (the ``hooks`` namespace's ``notified``, the
        newest :data:`KEEP_NOTIFIED`), so a restarted worker does not run them again."""
        ns = self._ns
        if ns is None:
            await self.notify(message, conversation_id, ctx)
            return
        root = await self._harness.harness.root(ctx)

        def done(tx: Any, _ctx: Context) -> bool:  # a read: nothing is stored
            stored = tx.snapshot("session").get("plugins", {}).get(NAMESPACE, {})
            return key in (stored.get("notified") or ())

        if await root.commit(done, ctx):
            return
        await self.notify(message, conversation_id, ctx)

        def record(tx: Any, _ctx: Context) -> None:
            notified = tx.plugins(ns)["notified"]
            if key not in notified:
                notified.append(key)
                while len(notified) > KEEP_NOTIFIED:
                    del notified[0]

        await root.commit(record, ctx)

    def session_end(self) -> None:
        """Start the ``SessionEnd`` hooks; they are not waited for (the worker is leaving)."""
        payload = json.dumps(self.payload("SessionEnd", reason="other")).encode()
        sandbox = self.sandbox()
        for hook in self.loaded.for_event("SessionEnd"):
            argv, environ = hook_argv(
                hook.command, env=hook.environ(self.child_env), cwd=self.cwd, sandbox=sandbox
            )
            if sandbox is not None:  # bwrap dies with its parent: give it one that waits
                argv = ["/bin/sh", "-c", '"$@"; exit $?', "sh", *argv]
            try:
                process = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=environ,
                    cwd=self.cwd if os.path.isdir(self.cwd) else None,
                    start_new_session=True,
                )
                assert process.stdin is not None
                process.stdin.write(payload)
                process.stdin.close()
            except OSError as exc:
                _log.warning("SessionEnd hook `%s` could not start: %s", hook.command, exc)

    # -- registration -----------------------------------------------------------------------
    def install(self, h: Any) -> Callable[[], None]:
        with ExitStack() as undo:  # on a failure, what was registered is undone
            self._ns = ns = h.namespace(
                NAMESPACE, {"rewindable": {"prompts": {}}, "session": {"notified": []}}
            )
            self._prompts.clear()
            undo.callback(ns.unregister)
            undo.callback(self.hook_agents.install(h, ns))
            undo.callback(
                h.hooks(
                    ns,
                    TOOL_KIND,
                    {
                        "before_tool": self.before_tool,
                        "after_tool": self.after_tool,
                        "permission_request": self.permission_request,
                    },
                )
            )
            undo.callback(
                h.hooks(
                    ns,
                    MODEL_CALL_KIND,
                    {"before_request": self.before_request, "on_yield": self.on_yield},
                )
            )
            # the collapse kind's token is not exported: the scheduler's registered one is it
            collapse = h.scheduler.kinds.get(COLLAPSE_KIND)
            if collapse is not None:
                undo.callback(h.hooks(ns, collapse, {"before_collapse": self.before_collapse}))
            return undo.pop_all().close


class _ListingService:
    """:data:`~.contract.HooksListing` (a remotable service exposes methods only)."""

    def __init__(self, hooks: Hooks) -> None:
        self._hooks = hooks

    async def summary(self, ctx: Context) -> HooksSummary:
        return self._hooks.summary()


@define_facet("@pi/hooks")
def session_facet(env: FacetEnvironment) -> None:
    """Load the hooks, register them on the hook points, run ``SessionStart`` (and
    ``SessionEnd`` at deactivation) and ``Notification`` (when a call waits for the user),
    provide ``hooks.list``, and follow the MCP feature's ``mcp.hook-tools`` when it runs
    (``mcp_tool`` hooks: :mod:`.mcp_hooks`)."""
    harness = env.use(HarnessService)
    hooks = Hooks(harness)
    loaded = anyio.Event()
    env.provide(HooksListing, _ListingService(hooks))

    async def activate() -> None:
        hooks.load()
        hooks.unchecked_models = await check_models(harness, hooks.loaded.hooks, hooks.warn)
        loaded.set()
        env.own(harness.add_registration(hooks.install))
        env.own(hooks.session_end)
        if hooks.loaded.for_event("SessionStart"):
            await hooks.session_start(BACKGROUND)

    env.observe(ConversationService, lambda i, c: follow_conversation(hooks, loaded, i, c))
    # optional: without the MCP feature there is no instance, and mcp_tool hooks fail
    env.observe(MCP_HOOK_TOOLS, hooks.mcp.follow, optional=True)
    env.on_activate(activate)
