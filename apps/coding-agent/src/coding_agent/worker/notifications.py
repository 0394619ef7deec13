"""Notifications from committed state: the session worker decides, records and sends them.

The worker sees every commit of its session, whether or not a TUI is attached, so it is the one
that decides that you should be told something (``[notifications]`` of config.toml, see
:mod:`coding_agent.settings.notifications`):

* ``attention``: a ``tool.waiting`` event on the ``approval`` or ``question`` namespace (an
  approval dialog or a question waits for you), in any conversation;
* ``turn``: a ``turn.ended`` event of a conversation no task owns (not a subagent's), unless
  the user aborted it;
* ``job``: a ``task.ended`` event of a ``pi.job`` task (a background command exited).

**Only what a channel takes.** An event no channel takes (``turn`` and ``job`` by default, see
:meth:`~coding_agent.settings.notifications.NotificationSettings.wanted`) is not due: it costs
a session no commit.

**Durable, outbox first.** Each due notification gets a key (``attention:<conversation>:<call
id>``, ``turn:<conversation>:<inputs>:<answer>``, ``job:<task id>``) and is written into the
session document's ``coding-agent.notifications`` namespace (``outbox``) in one commit, unless
its key is there already or among the keys ``sent``. Then the worker delivers it on its
channels (notify-send, the webhook, the command) and, in a second commit, moves its key from
``outbox`` to ``sent`` (the newest :data:`KEEP_SENT` keys are kept). So:

* a notification is never lost because no TUI is attached: the worker delivers it;
* a worker killed after the second commit never sends it again: its key is ``sent``;
* a worker killed before it (a due notification, not yet delivered) sends it when it starts
  again: the ``outbox`` is delivered first thing. This is at-least-once: a worker killed
  between a delivery and its commit repeats that one delivery (an external effect cannot be
  exactly-once, docs/design/harness.md#memos; the JSON's ``key`` lets a receiver drop it);
* an approval that started waiting in the instant before a crash, before its outbox commit,
  is found again at start-up in the conversations' ``turn.tools[i].waitingOn``; a turn's end
  or a job's exit committed in that instant is not (the event is not kept in the session's
  state), and goes untold.

The webhook, the command and ``notify-send`` get the worker's environment with the session's
secrets withheld (as commands get it: :mod:`coding_agent.settings.secret_env`); ``notify-send``
runs only where there is a desktop session (``DBUS_SESSION_BUS_ADDRESS``, ``DISPLAY`` or
``WAYLAND_DISPLAY`` set), so a server's worker stays quiet.

**The terminal.** The TUI owns the terminal, so it writes OSC 9/777 and the bell itself
(:mod:`coding_agent.tui.notify`): each delivered notification is published in the worker's
status document (``notifications``, the newest :data:`~coding_agent.worker.status.MAX_NOTICES`,
see :mod:`coding_agent.worker.status`), which every attached TUI receives.

**The desktop from the worker.** ``notify-send`` runs here, not in the TUI: a notification due
while no TUI is attached (a closed terminal, a ``serve`` session, a parked approval) reaches
the desktop all the same. By default (``desktop_when = "detached"``) it fires only while no
TUI is attached (:class:`TuiWatch`; a ``-p`` run, the browser or an editor do not count),
because an attached TUI tells you through its terminal already.

**Claude Code's ``Notification`` hooks** (settings.json) are run by facets-hooks on the same
waits; this module does not run them again.

The webhook gets an HTTP POST and the command (``/bin/sh -c``, in the project folder) its
stdin of the same JSON, Claude Code's ``Notification`` hook input plus our fields::

    {"session_id": "...", "transcript_path": "", "cwd": "/home/me/repo",
     "hook_event_name": "Notification", "message": "Needs your permission to use bash",
     "title": "coding-agent: repo", "notification_type": "permission_prompt",
     "event": "attention", "key": "attention:1:call_1"}
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec

from chord import BACKGROUND, Context, Facet, FacetEnvironment, cancel_scope, define_facet
from coding_agent.contracts import TuiWatchService
from coding_agent.settings.notifications import NotificationSettings

__all__ = ["KEEP_SENT", "NAMESPACE", "Notifier", "TuiWatch", "notices_in"]

NAMESPACE = "coding-agent.notifications"
KEEP_SENT = 500
"""How many delivered keys the session keeps (keys are never reused, so old ones can go)."""
WEBHOOK_TIMEOUT = 10.0
COMMAND_TIMEOUT = 60.0
DESKTOP_TIMEOUT = 10.0

_log = logging.getLogger("coding_agent.worker")

_WAITING = {
    "approval": ("Needs your permission to use {tool}", "permission_prompt"),
    "question": ("Waits for your answer to a question", "elicitation_dialog"),
}


def _attention(conversation: int, call: str, on: str, tool: str) -> dict[str, Any]:
    message, kind = _WAITING[on]
    return {
        "key": f"attention:{conversation}:{call}",
        "event": "attention",
        "message": message.format(tool=tool or "a tool"),
        "notification_type": kind,
    }


def notices_in(batch: Any, kernel: Any) -> list[dict[str, Any]]:
    """The notifications a committed batch makes due (see the module docstring)."""
    found: list[dict[str, Any]] = []
    for conversation, events in batch.events.items():
        for event in events:
            kind = event.get("type")
            if kind == "tool.waiting" and event.get("on") in _WAITING:
                task = kernel.task_index.get(event.get("taskId"))
                value: Any = task.input if task is not None else None
                call = value.get("call") if isinstance(value, dict) else None
                name = str(call.get("name", "")) if isinstance(call, dict) else ""
                found.append(_attention(conversation, str(event["callId"]), event["on"], name))
            elif kind == "turn.ended" and event.get("reason") != "aborted":
                record = kernel.conversations.get(conversation)
                if record is None or record.owner is not msgspec.UNSET:
                    continue  # a subagent's turn: its parent's turn goes on
                inputs = ",".join(str(i) for i in event.get("inputs") or [])
                done = event.get("status") == "done"
                found.append(
                    {
                        "key": f"turn:{conversation}:{inputs}:{event.get('answer')}",
                        "event": "turn",
                        "message": "Finished its turn"
                        if done
                        else f"Stopped without an answer ({event.get('reason')})",
                        "notification_type": "turn_finished",
                    }
                )
            elif kind == "task.ended" and event.get("kind") == "pi.job":
                task_id = event.get("taskId")
                found.append(
                    {
                        "key": f"job:{task_id}",
                        "event": "job",
                        "message": _job_message(batch.tasks.get(task_id)),
                        "notification_type": "job_exited",
                    }
                )
    return found


def _job_message(task: Any) -> str:
    value: Any = task.input if task is not None and isinstance(task.input, dict) else {}
    args = value.get("args") or []
    if len(args) >= 2 and args[-2] == "-c" and isinstance(args[-1], str):
        command = args[-1]
    else:
        command = " ".join([str(value.get("command", "?")), *map(str, args)])
    outcome: Any = task.outcome if task is not None and isinstance(task.outcome, dict) else {}
    if outcome.get("status") == "completed":
        code = (outcome.get("result") or {}).get("exitCode")
        return f"Job `{command}` exited with code {code}"
    if outcome.get("status") == "failed":
        return f"Job `{command}` failed: {(outcome.get('failure') or {}).get('reason', '?')}"
    return f"Job `{command}` was stopped"


class TuiWatch:
    """How many TUIs are attached now: :data:`~coding_agent.contracts.TuiWatchService`, whose
    one instance each TUI holds a ``watching`` call open on (the wire cancels it when the TUI
    goes). Served by every session host, with notifications configured or not."""

    def __init__(self) -> None:
        self.count = 0

    def facet(self) -> Facet:
        """The facet providing the service's instance ``"worker"``."""
        watch = self

        class Instance:  # what crosses the wire: the one method
            async def watching(self, ctx: Context) -> None:
                watch.count += 1
                try:
                    with cancel_scope(ctx):
                        await anyio.sleep_forever()
                finally:
                    watch.count -= 1

        def setup(env: FacetEnvironment) -> None:
            spawner = env.provide_many(TuiWatchService)
            env.on_activate(lambda: env.own(spawner.spawn("worker", Instance())))

        return define_facet("coding-agent/tui-watch", setup)


class Notifier:
    """Decides, records and delivers the session's notifications (see the module docstring).

    Register :meth:`install` with ``HarnessServiceApi.add_registration`` after the resume and
    run :meth:`run` in the worker's task group. ``publish`` receives every delivered notice
    (the worker's status, for the TUIs' terminals)."""

    def __init__(
        self,
        settings: NotificationSettings,
        *,
        session_id: str,
        cwd: Path,
        env: Mapping[str, str],
        tuis: TuiWatch | None = None,
        publish: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.settings = settings
        self._session_id = session_id
        self._cwd = cwd
        self._env = dict(env)
        self._tuis = tuis
        self._publish = publish
        self._title = f"coding-agent: {cwd.name or cwd}"
        self._harness: Any = None
        self._ns: Any = None
        self._found: list[dict[str, Any]] = []
        self._scan = True  # at start-up (and after a reopen): waits the outbox may have missed
        self._wake = anyio.Event()
        self._idle = anyio.Event()  # set while nothing is due and nothing is being delivered

    def _kick(self) -> None:
        self._wake.set()
        if self._idle.is_set():
            self._idle = anyio.Event()

    async def settle(self, seconds: float) -> None:
        """Wait (at most ``seconds``) until what is due has been delivered: a closing host
        (``-p`` ends with its turn) sends the turn's notification now, not at the next start."""
        with anyio.move_on_after(seconds):
            while True:
                idle = self._idle
                await idle.wait()
                if idle is self._idle:
                    return

    # -- deciding ---------------------------------------------------------------------------
    def install(self, harness: Any) -> Callable[[], None]:
        """The harness registration: the namespace and a commit listener."""
        self._ns = ns = harness.namespace(NAMESPACE, {"session": {"outbox": {}, "sent": []}})
        kernel = harness.kernel

        def on_commit(batch: Any) -> None:
            if batch.events:
                wanted = self.settings.wanted
                found = [n for n in notices_in(batch, kernel) if wanted(n["event"])]
                if found:
                    self._found.extend(found)
                    self._kick()

        remove = kernel.add_commit_listener(on_commit)
        self._harness, self._scan = harness, True
        self._kick()

        def uninstall() -> None:
            remove()
            ns.unregister()
            if self._harness is harness:
                self._harness = None

        return uninstall

    async def _waiting_now(self, harness: Any) -> list[dict[str, Any]]:
        """The tool calls waiting on a dialog now (``turn.tools[i].waitingOn``)."""
        found: list[dict[str, Any]] = []
        kernel = harness.kernel
        for conversation in sorted({t.conversation_id for t in kernel.live_tasks()}):
            handle = await harness.conversation(conversation, BACKGROUND)
            if handle is None:
                continue
            sticky = await handle.sticky(BACKGROUND)
            turn = sticky.get("turn") if isinstance(sticky, dict) else None
            tools = turn.get("tools") if isinstance(turn, dict) else None
            for slot in tools if isinstance(tools, list) else []:
                on = slot.get("waitingOn") if isinstance(slot, dict) else None
                if on in _WAITING:
                    found.append(
                        _attention(
                            conversation, str(slot.get("callId")), on, str(slot.get("name") or "")
                        )
                    )
        return found

    # -- recording and delivering -----------------------------------------------------------
    async def run(self) -> None:
        """Deliver what is due, whenever a commit (or the start) makes something due."""
        while True:
            if not self._wake.is_set() and not self._found:
                self._idle.set()
            await self._wake.wait()
            self._wake = anyio.Event()
            harness, ns = self._harness, self._ns
            if harness is None:
                continue
            try:
                await self._step(harness, ns)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as error:  # a closed harness (reload, stop): the next wake retries
                _log.warning("notifications: %s", error)

    async def _step(self, harness: Any, ns: Any) -> None:
        taken = len(self._found)
        found = self._found[:taken]
        if self._scan and self.settings.wanted("attention"):
            found.extend(await self._waiting_now(harness))
        root = await harness.root(BACKGROUND)

        def enqueue(tx: Any, _ctx: Any) -> list[dict[str, Any]]:
            # read first (a commit that writes nothing is not stored), write only what is new
            stored = tx.snapshot("session").get("plugins", {}).get(NAMESPACE, {})
            outbox: dict[str, Any] = dict(stored.get("outbox") or {})
            known = set(stored.get("sent") or ())
            for notice in found:
                if notice["key"] not in outbox and notice["key"] not in known:
                    tx.plugins(ns)["outbox"][notice["key"]] = notice
                    outbox[notice["key"]] = notice
            return [dict(notice) for notice in outbox.values()]

        due = await root.commit(enqueue, BACKGROUND)
        del self._found[:taken]  # recorded: from here on the outbox holds them
        self._scan = False
        for notice in due:
            await self._deliver(notice)

            def mark(tx: Any, _ctx: Any, key: str = notice["key"]) -> None:
                state = tx.plugins(ns)
                if key in state["outbox"]:
                    del state["outbox"][key]
                sent = state["sent"]
                if key not in sent:
                    sent.append(key)
                    while len(sent) > KEEP_SENT:
                        del sent[0]

            await root.commit(mark, BACKGROUND)
            if self._publish is not None:  # sent: now the attached TUIs' terminals
                self._publish(self.payload(notice))

    def payload(self, notice: Mapping[str, Any]) -> dict[str, Any]:
        """Claude Code's ``Notification`` hook input, plus ``event`` and ``key``."""
        return {
            "session_id": self._session_id,
            "transcript_path": "",
            "cwd": str(self._cwd),
            "hook_event_name": "Notification",
            "message": notice["message"],
            "title": self._title,
            "notification_type": notice["notification_type"],
            "event": notice["event"],
            "key": notice["key"],
        }

    async def _deliver(self, notice: Mapping[str, Any]) -> None:
        payload = self.payload(notice)
        for channel in self.settings.channels(str(notice["event"])):
            try:
                if channel == "desktop":
                    await self._desktop(payload)
                elif channel == "webhook":
                    await self._webhook(payload)
                else:
                    await self._command(payload)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as error:  # one channel failing does not stop the others
                _log.warning("notification by %s failed: %s", channel, error)

    async def _desktop(self, payload: Mapping[str, Any]) -> None:
        attended = self._tuis is not None and self._tuis.count > 0
        if self.settings.desktop_when == "detached" and attended:
            return  # the attached TUI tells you through its terminal
        program = shutil.which("notify-send", path=self._env.get("PATH", os.defpath))
        desktop = ("DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY")
        if program is None or not any(self._env.get(name) for name in desktop):
            return  # no desktop here (a server, a container, an ssh session): nothing to show
        with anyio.fail_after(DESKTOP_TIMEOUT):
            await anyio.run_process(
                [program, "--app-name=coding-agent", payload["title"], payload["message"]],
                env=self._env,
                check=True,
            )

    async def _webhook(self, payload: Mapping[str, Any]) -> None:
        assert self.settings.webhook is not None
        import httpx  # lazy: a worker that posts nothing starts without it

        async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT) as client:
            response = await client.post(self.settings.webhook, json=dict(payload))
            response.raise_for_status()

    async def _command(self, payload: Mapping[str, Any]) -> None:
        assert self.settings.command is not None
        with anyio.fail_after(COMMAND_TIMEOUT):
            result = await anyio.run_process(
                ["/bin/sh", "-c", self.settings.command],
                input=json.dumps(payload).encode(),
                env=self._env,
                cwd=self._cwd if self._cwd.is_dir() else None,
                check=False,
            )
        if result.returncode != 0:
            detail = result.stderr.decode(errors="replace").strip() or "no output on stderr"
            raise RuntimeError(
                f"`{self.settings.command}` exited with code {result.returncode}: {detail}"
            )
