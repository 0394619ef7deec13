"""The MCP TUI facet: the ``/mcp`` screen and command.

``/mcp`` opens a screen listing every configured server, **failed ones first** (then starting,
then ready), one line each with its state, transport and tool count, and the configuration
problems above; the list scrolls (arrows, Page Up/Down), so no server is out of reach. Picking a
server shows its details (:func:`server_lines`): the file it is configured in (and, for
``~/.claude.json``, the scope), the reason it failed, the last lines of its stderr, whether it
is tried again or was given up on, its tools, resources and prompts, and the tools left out (task-augmented ones); **Restart** starts it again at once. ``/mcp restart
NAME`` does that without the screen. A running subagent's own servers (its agent file's
``mcpServers``) are listed after the session's and restart the same way; once the subagent has
ended, ``/mcp restart`` says so.

Every prompt of a ready server is a command ``/mcp__<server>__<prompt> ARGS``
(:func:`prompt_command`): the words of ``ARGS`` fill the prompt's arguments in order (quote a
word with spaces; the last argument takes the rest; ``name=value`` names one), the server's
prompt is fetched (``prompts/get``) and its text is sent to the root conversation as your
message. The commands follow the servers (a ``list_changed`` adds or removes them).

A server's elicitation during a tool call (:data:`~.contract.McpElicitations`) is a dialog
(chord's keyed dialogs, :func:`chord.textual.show_dialogs`, asking with
:func:`ask_elicitation`): each field of its form in turn (an enum's values and a boolean's
yes/no as choices, text and numbers typed), with **Decline** always offered and Escape
cancelling; a ``url`` elicitation shows the page to open. A server's sampling request
(:data:`~.contract.McpSampling`) shows what it would send to the model (:func:`sampling_body`)
with **Allow** and **Deny** (Escape denies; :func:`ask_sampling`). :func:`panel_text` is the whole state as text (the same
lines, failed servers first). The facet holds no authority and no state of its own; every text
is made inert (:func:`chord.inert`): a server's names, errors and stderr are the server's.

``/mcp login NAME`` logs in to a remote server with OAuth: it prints the authorization URL (a
notification, and the server's details while the login waits) and opens it
(:func:`open_in_browser`: ``$BROWSER``, macOS, or ``xdg-open`` on a desktop); the worker's
loopback callback gets the redirect.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import anyio.to_thread

from chord import Context, Delivery, FacetEnvironment, RemoteServiceError, define_facet, inert
from chord.textual import (
    Arg,
    Arguments,
    Choice,
    Command,
    CommandError,
    CommandOutcome,
    Modal,
    Tui,
    TuiService,
    register_commands,
    show_dialogs,
)
from pico3 import ConversationService

from .contract import ElicitationResponse, McpElicitations, McpSampling, McpServers, tool_name

__all__ = [
    "ask_elicitation",
    "ask_sampling",
    "open_in_browser",
    "panel_text",
    "prompt_arguments",
    "prompt_command",
    "sampling_body",
    "server_lines",
    "sorted_servers",
    "tui_facet",
]

_log = logging.getLogger("facets_mcp")
_ICONS = {"starting": "◐", "ready": "●", "failed": "✗", "stopped": "○"}
_ORDER = {"failed": 0, "stopped": 1, "starting": 2, "ready": 3}
NOT_SUPPORTED = (
    "Not supported: tools that require task-augmented execution (hidden). A server's "
    "sampling request asks you first; its elicitation is answered during a tool call only."
)
NONE_CONFIGURED = (
    "(none configured: add mcpServers to ~/.config/coding-agent/mcp.json, "
    "a trusted project's .mcp.json, or ~/.claude.json with claude mcp add)"
)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def sorted_servers(state: Any) -> list[dict[str, Any]]:
    """The state's servers, failed ones first (then stopped, starting, ready), each group in
    configuration order."""
    if not isinstance(state, dict):
        return []
    found = cast(dict[str, Any], state).get("servers") or []
    servers = [cast(dict[str, Any], s) for s in found if isinstance(s, dict)]
    return sorted(servers, key=lambda s: _ORDER.get(str(s.get("state")), 0))


def _head(server: dict[str, Any]) -> str:
    tools = server.get("tools") or []
    icon = _ICONS.get(str(server.get("state")), "?")
    head = (
        f"{icon} {server.get('name')} "
        f"({server.get('transport')}{', sandboxed' if server.get('sandboxed') else ''}) "
        f"{server.get('state')} · {_count(len(tools), 'tool')}"
    )
    if server.get("restarts"):
        head += f" · {_count(server['restarts'], 'restart')}"
    return head


def server_lines(server: dict[str, Any]) -> list[str]:
    """One server as lines (not yet inert): its head, then its details indented."""
    lines = [_head(server)]
    tools = server.get("tools") or []
    if server.get("source"):
        lines.append(f"    source: {server['source']}")
    if server.get("error"):
        lines.append(f"    error: {server['error']}")
    if server.get("state") == "failed" and "gaveUpAfter" in server:
        lines.append(
            f"    gave up after {server['gaveUpAfter']} failed starts in a row; "
            f"/mcp restart {server.get('name')} tries again"
        )
    elif server.get("state") == "failed" and "retryInSeconds" in server:
        lines.append(
            f"    retrying in {server['retryInSeconds']:g} s (/mcp restart {server.get('name')})"
        )
    if server.get("state") == "stopped":
        lines.append(
            "    stopped while no client is attached; it starts again on the next use, or when "
            "a client attaches"
        )
    if server.get("loginUrl"):
        lines.append(f"    log in: open {server['loginUrl']}")
    for line in (server.get("stderr") or "").splitlines()[-8:]:
        lines.append(f"    stderr| {line}")
    if tools:
        lines.append("    tools: " + ", ".join(t.get("tool", "?") for t in tools))
    for note in server.get("notes") or []:
        lines.append(f"    note: {note}")
    for resource in server.get("resources") or []:
        lines.append(f"    resource: {resource.get('name')} <{resource.get('uri')}>")
    for prompt in server.get("prompts") or []:
        args = ", ".join(prompt.get("arguments") or [])
        lines.append(f"    prompt: {prompt.get('name')}({args})")
    return lines


def prompt_command(server: str, prompt: str) -> str:
    """The command of ``prompt`` of ``server``: ``mcp__<server>__<prompt>`` (as tools are named)."""
    return tool_name(server, prompt)


def prompt_arguments(names: list[str], text: str) -> dict[str, str]:
    """``text`` (the words after the command) as the prompt's arguments ``names``: in order,
    the last taking the rest; a word ``name=value`` names one. Raises ``ValueError`` for
    unbalanced quotes."""
    words = shlex.split(text)
    found: dict[str, str] = {}
    rest: list[str] = []
    for word in words:
        key, sep, value = word.partition("=")
        if sep and key in names and key not in found:
            found[key] = value
        else:
            rest.append(word)
    free = [n for n in names if n not in found]
    for i, name in enumerate(free):
        if i >= len(rest):
            break
        found[name] = " ".join(rest[i:]) if i == len(free) - 1 else rest[i]
    return found


_DECLINE = "\0decline"
_SKIP = "\0skip"


def _typed(kind: str, text: str) -> Any:
    """``text`` as a ``kind`` value (``ValueError`` when it is not one)."""
    if kind == "integer":
        return int(text.strip())
    if kind == "number":
        return float(text.strip())
    return text


async def ask_elicitation(modal: Modal, request: Any) -> ElicitationResponse:
    """Ask the user what an elicitation request asks (see the module docstring)."""
    title = f"MCP server {request.get('server')} asks"
    message = str(request.get("message") or "")
    if request.get("mode") == "url":
        picked = await modal.choose(
            title,
            [Choice("accept", "I opened it"), Choice(_DECLINE, "Decline")],
            body=f"{message}\n\n{request.get('url')}",
            hint="Open the page yourself · Escape: cancel",
        )
        if picked is None:
            return {"action": "cancel"}
        return {"action": "accept" if picked == "accept" else "decline"}
    schema = request.get("schema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, spec in (schema.get("properties") or {}).items():
        kind = str(spec.get("type"))
        label = str(spec.get("title") or name)
        about = f" ({spec['description']})" if spec.get("description") else ""
        choices: list[Choice] = []
        if "enum" in spec:
            choices = [Choice(str(v)) for v in spec["enum"]]
        elif kind == "boolean":
            choices = [Choice("true", "Yes"), Choice("false", "No")]
        if name not in required:
            choices.append(Choice(_SKIP, "Skip"))
        choices.append(Choice(_DECLINE, "Decline"))
        problem = ""
        while True:
            picked = await modal.choose(
                title,
                choices,
                body=f"{message}\n\n{label}{about}{problem}",
                allow_text="enum" not in spec and kind != "boolean",
                hint="Escape: cancel",
            )
            if picked is None:
                return {"action": "cancel"}
            if picked == _DECLINE:
                return {"action": "decline"}
            if picked == _SKIP:
                break
            if kind == "boolean":
                content[name] = picked == "true"
                break
            enum = spec.get("enum")
            if enum is not None:
                content[name] = next(v for v in enum if str(v) == picked)
                break
            try:
                content[name] = _typed(kind, picked)
                break
            except ValueError:
                problem = f"\n\n{picked!r} is not {'an' if kind == 'integer' else 'a'} {kind}"
    return {"action": "accept", "content": content}


async def ask_sampling(modal: Modal, request: Any) -> dict[str, str]:
    """Ask the user whether a server may use the model (:func:`sampling_body` shows what it
    would send); Escape denies."""
    picked = await modal.choose(
        f"MCP server {request.get('server')} asks to use the model",
        [Choice("allow", "Allow"), Choice("deny", "Deny")],
        body=sampling_body(request),
        hint="Escape: deny",
    )
    return {"decision": "allow" if picked == "allow" else "deny"}


def sampling_body(request: Any) -> str:
    """What a sampling request would send to the model, for the approval dialog (inert)."""
    lines = [f"Up to {request.get('maxTokens')} tokens from the session's model, for:"]
    if request.get("systemPrompt"):
        lines += ["", "[system]", str(request["systemPrompt"])]
    for message in request.get("messages") or []:
        lines += ["", f"[{message.get('role')}]", str(message.get("text"))]
    return inert("\n".join(lines))


def panel_text(state: Any) -> str:
    """The whole state as text (failed servers first), made inert (:func:`chord.inert`)."""
    if not isinstance(state, dict):
        return "MCP: not available"
    lines = ["MCP servers"]
    for error in state.get("errors") or []:
        lines.append(f"  ! {error}")
    servers = sorted_servers(state)
    if not servers:
        lines.append("  " + NONE_CONFIGURED)
    for server in servers:
        lines += server_lines(server)
    lines.append(NOT_SUPPORTED)
    return inert("\n".join(lines))


def open_in_browser(url: str) -> bool:
    """Open ``url`` in a graphical browser; ``False`` when there is none to use.

    ``$BROWSER`` (the user's choice) and macOS go through :mod:`webbrowser`; elsewhere only
    ``xdg-open`` on a desktop (``DISPLAY`` or ``WAYLAND_DISPLAY``): :mod:`webbrowser` would fall
    back to a console browser (``lynx``, ``w3m``) that fights the TUI for the terminal."""
    if os.environ.get("BROWSER") or sys.platform == "darwin":
        return webbrowser.open(url)
    opener = shutil.which("xdg-open")
    if opener is None or not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:  # called in a thread: xdg-open hands the URL over and exits
        done = subprocess.run(
            [opener, url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass(frozen=True, slots=True)
class McpTarget:
    """What ``/mcp`` and the prompt commands act on: the TUI, the session's
    :data:`~.contract.McpServers` and the root conversations followed (a prompt goes to the
    newest)."""

    tui: TuiService
    servers: Any  # McpServers: a remote service handle
    roots: list[Any] = field(default_factory=lambda: [])


@dataclass(frozen=True, slots=True)
class PromptTarget:
    """The target of one server prompt's command (``/mcp__<server>__<prompt>``)."""

    mcp: McpTarget
    server: str
    prompt: str
    names: tuple[str, ...]


async def run_prompt(target: PromptTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """A server prompt's command: get the prompt with the arguments typed (see
    :func:`prompt_arguments`) and send its text to the root conversation."""
    try:
        arguments = prompt_arguments(list(target.names), args.text)
    except ValueError as exc:
        raise CommandError(f"/{prompt_command(target.server, target.prompt)}: {exc}") from exc
    got = await target.mcp.servers.get_prompt(target.server, target.prompt, arguments, ctx)
    if "error" in got:
        raise CommandError(inert(str(got["error"])))
    text = "\n\n".join(m["text"] for m in got.get("messages") or [])
    if not target.mcp.roots:
        raise CommandError("No conversation to send the prompt to")
    await target.mcp.roots[-1].send({"content": text}, ctx)
    return None


async def _restart(target: McpTarget, name: str, ctx: Context) -> CommandOutcome:
    try:
        await target.servers.restart(name, ctx)
    except RemoteServiceError as exc:  # unknown, or a subagent's whose subagent is not running
        raise CommandError(f"MCP restart {name}: {exc.message}") from exc
    return inert(f"Restarting MCP server {name}")


async def _screen(target: McpTarget, ctx: Context) -> CommandOutcome:
    """The servers' screen: a server's details on Enter, where it can be restarted."""
    modal = await target.tui.acquire_modal(ctx)
    try:
        while True:
            state = target.servers.state.value
            state = state if isinstance(state, dict) else {}
            listed = sorted_servers(state)
            body = "\n".join(f"! {e}" for e in state.get("errors") or [])
            body = "\n".join(filter(None, [body, NONE_CONFIGURED if not listed else ""]))
            body = "\n".join(filter(None, [body, NOT_SUPPORTED]))
            choices = [
                Choice(str(server.get("name")), _head(server), str(server.get("error") or "")[:120])
                for server in listed
            ]
            picked = await modal.choose(
                "MCP servers",
                [*choices, Choice("\0close", "Close")],
                body=body,
                # the key line already says "enter answers": say what Enter opens, and that
                # Escape closes (it read "… enter answers · Enter: a server's details · Escape:
                # close", and offered the details with no server to open)
                hint="enter on a server: its details · esc closes" if listed else "esc closes",
            )
            found = next((s for s in listed if s.get("name") == picked), None)
            if found is None:
                return None
            name = str(found.get("name"))
            action = await modal.choose(
                f"MCP server {name}",
                [Choice("restart", "Restart"), Choice("back", "Back")],
                body="\n".join(server_lines(found)),
                hint="esc closes",
            )
            if action == "restart":
                return await _restart(target, name, ctx)
            if action != "back":
                return None
    finally:
        modal.close()


async def _login(target: McpTarget, name: str, ctx: Context) -> CommandOutcome:
    try:
        url = await target.servers.login(name, ctx)
    except RemoteServiceError as exc:
        raise CommandError(f"MCP login {name}: {exc.message}") from exc
    if url is None:
        return f"MCP server {name} connected without asking for a login"
    # the URL also stays in the server's details (/mcp) until the browser comes back
    target.tui.notify(inert(f"Log in to MCP server {name}: open {url}"))
    try:
        await anyio.to_thread.run_sync(open_in_browser, url)
    except Exception:  # no browser here: the URL is shown
        pass
    return None


async def mcp(target: McpTarget, args: Arguments, ctx: Context) -> CommandOutcome:
    """``/mcp``: the servers' screen; ``/mcp restart NAME``; ``/mcp login NAME``."""
    action, server = args["action"], args["server"]
    if action and not server:
        raise CommandError(f"Usage: /mcp {action} NAME")
    if action == "restart":
        return await _restart(target, server, ctx)
    if action == "login":
        return await _login(target, server, ctx)
    return await _screen(target, ctx)


COMMANDS = (
    Command(
        "mcp",
        "Show the MCP servers, their tools, resources and prompts",
        mcp,
        args=(
            Arg("action", optional=True, choices=("restart", "login")),
            Arg("server", optional=True, hint="[NAME]"),
        ),
    ),
)


@define_facet("@pi/mcp")
def tui_facet(env: FacetEnvironment) -> None:
    """Offer ``/mcp`` (the servers' screen), ``/mcp restart NAME`` and ``/mcp login NAME``."""
    tui = env.use(Tui)
    servers = env.use(McpServers)

    roots: list[Any] = []
    target = McpTarget(tui, servers, roots)
    commands: dict[str, tuple[tuple[str, str, tuple[str, ...]], Callable[[], None]]] = {}
    active = [False]

    async def follow(conversation: Any, ctx: Context) -> None:
        info = conversation.conversation.value
        if isinstance(info, dict) and ("parent" in info or "owner" in info):
            return  # a subagent's or a fork's: prompts go to the root
        roots.append(conversation)
        try:
            await ctx.wait_cancelled()
        finally:
            roots.remove(conversation)

    def sync(value: Any) -> None:
        """Register a command per ready server's prompt; drop the ones gone."""
        wanted: dict[str, tuple[str, str, tuple[str, ...]]] = {}
        for server in sorted_servers(value):
            if server.get("state") != "ready":
                continue
            for prompt in server.get("prompts") or []:
                key = (str(server.get("name")), str(prompt.get("name")))
                names = tuple(str(a) for a in prompt.get("arguments") or [])
                wanted[prompt_command(*key)] = (*key, names)
        for name in list(commands):
            if wanted.get(name) != commands[name][0]:
                commands.pop(name)[1]()
        for name, (server, prompt, names) in wanted.items():
            if name in commands:
                continue
            usage = " ".join(f"<{n}>" for n in names)
            try:
                command = Command(
                    name,
                    inert(f"MCP prompt {prompt} of {server}" + (f": {usage}" if usage else "")),
                    run_prompt,
                    args=None,  # the prompt's own syntax: see prompt_arguments
                )
                remove = register_commands(
                    tui, [command], PromptTarget(target, server, prompt, names)
                )
            except ValueError as exc:  # a name taken by another command: that one stays
                _log.warning("MCP prompt %s of %s is not a command: %s", prompt, server, exc)
                continue
            commands[name] = ((server, prompt, names), remove)

    def on_state(value: Any, _ctx: Context, _delivery: Delivery) -> None:
        if active[0]:
            sync(value)

    def drop_all() -> None:
        active[0] = False
        for _key, remove in commands.values():
            remove()
        commands.clear()

    def activate() -> None:
        active[0] = True
        env.own(drop_all)
        env.own(servers.state.subscribe(on_state))
        sync(servers.state.value)
        env.own(register_commands(tui, COMMANDS, target))

    env.observe(ConversationService, follow)
    show_dialogs(env, McpElicitations, ask_elicitation)
    show_dialogs(env, McpSampling, ask_sampling, answer="decide")
    env.on_activate(activate)
