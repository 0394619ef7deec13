"""Claude Code's run-scoped flags: rules, system prompt and MCP servers for one run only.

``claude -p "…" --allowedTools "Bash(npm test:*)" Edit --disallowedTools WebFetch
--append-system-prompt "Be terse." --mcp-config servers.json`` means the same here, for the TUI
and ``-p``/``--json`` alike. Nothing of it is written to a settings file, nor to the session's
launch settings: a later ``--continue`` without the flags runs without them.

* ``--allowedTools`` / ``--allowed-tools`` and ``--disallowedTools`` / ``--disallowed-tools``
  take one or more rules of the permission-rule grammar (``Bash(npm test:*)``, ``Edit``,
  ``mcp__github``), as separate words or in one word separated by commas or spaces (a space or a
  comma inside the parentheses stays in the rule: :func:`split_rules`). They are allow and deny
  rules of the source ``command line`` (``/permissions`` lists them so), handed to the approval
  feature beside the files' rules (:class:`~coding_agent.settings.permissions.PermissionFiles`),
  so they get exactly the analysis a settings-file rule gets: deny beats allow, the bash
  parser's narrowness, the guarded paths. A rule the grammar refuses is a usage error (exit 2)
  before anything runs: the worker asks the approval feature (``approval.rules``'
  ``check_rule``) before it resumes the session.
* ``--system-prompt TEXT`` / ``--system-prompt-file FILE`` replace the base prompt (and
  ``SYSTEM.md``: the flag wins); ``--append-system-prompt TEXT`` /
  ``--append-system-prompt-file FILE`` add after it, after ``APPEND_SYSTEM.md``'s text when there
  is one (:func:`coding_agent.context.system_prompt.build_sections`). A file is read once, at
  start.
* ``--mcp-config FILE_OR_JSON…`` adds the servers of each (``{"mcpServers": {name: entry}}``, a
  file path or the JSON itself; a later one wins on a name clash) as the MCP feature's client
  servers (its harness service ``mcp_client_servers``): the user's own decision, so they start
  without the project-trust approval; ``--strict-mcp-config`` leaves every other configured
  server out.

The command line checks what it can read (:meth:`RunFlags.resolve`: a missing file, bad JSON, a
wrong shape is one line, exit 2) and hands the flags, as given, to the session worker's command
line (:meth:`RunFlags.worker_args`; the worker resolves them again) or, for ``-p``, to the
worker config of its own process (:class:`RunOptions`).

**A file is the file as the user gave it.** Every worker of the run reads the files again (a
restarted one, a ``/resume``'d session's), and a file in the project is one the model may edit
meanwhile: ``--mcp-config servers.json`` must not start a server the model wrote there later,
without the approval a project's servers need. So the command line pins each file by its
SHA-256 (:meth:`RunFlags.pin`, carried as ``--pinned-file``) and a worker that finds one changed
refuses to start, saying so; the contents never go on a command line (a server's ``env`` may
hold a token, and ``ps`` shows every process's arguments).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import msgspec

__all__ = [
    "CLAUDE_RUN_AGENTS",
    "CLAUDE_RUN_SETTINGS",
    "CLI_RULE_SOURCE",
    "MCP_CLIENT_SERVERS",
    "RunFlags",
    "RunOptions",
    "RunOptionsError",
    "add_worker_flags",
    "builtin_tools",
    "split_rules",
    "worker_flags",
]

CLI_RULE_SOURCE = "command line"
"""The source the permission rules of ``--allowedTools`` / ``--disallowedTools`` have."""

MCP_CLIENT_SERVERS = "mcp_client_servers"
"""The MCP feature's harness service of the servers a client brought (the feature's
``CLIENT_SERVERS_SERVICE``; the app names feature services by their ids)."""


CLAUDE_RUN_SETTINGS = "claude_run_settings"
"""The hooks feature's harness service of ``--settings`` (``{"source", "settings"}``; its
``RUN_SETTINGS_SERVICE``)."""

CLAUDE_RUN_AGENTS = "claude_run_agents"
"""The subagents feature's harness service of ``--agents`` (``{"source", "agents"}``; its
``RUN_AGENTS_SERVICE``)."""


class RunOptionsError(ValueError):
    """A run-scoped flag's value cannot be used; the message is the one line to print."""


def split_rules(values: Sequence[str]) -> tuple[str, ...]:
    """The rules in ``values`` (each a flag value): separated by commas or white space outside
    parentheses, as Claude Code takes them (``"Bash(git log:*) Edit"``, ``"Read,Edit"``); a rule's
    own spaces and commas, inside its parentheses, stay (``Bash(npm run test:*)``)."""
    rules: list[str] = []
    for value in values:
        depth, word = 0, ""
        for char in value:
            if char == "(":
                depth += 1
            elif char == ")":
                depth = max(0, depth - 1)
            if depth == 0 and (char == "," or char.isspace()):
                if word:
                    rules.append(word)
                word = ""
                continue
            word += char
        if word:
            rules.append(word)
    return tuple(dict.fromkeys(rules))


class RunOptions(msgspec.Struct, frozen=True):
    """The run-scoped flags, resolved: what the session host applies (:class:`RunFlags.resolve`)."""

    allowed: tuple[str, ...] = ()
    """``--allowedTools``' rules."""
    disallowed: tuple[str, ...] = ()
    """``--disallowedTools``' rules."""
    system_prompt: str | None = None
    """The text replacing the base prompt (``--system-prompt`` or the file's)."""
    append_system_prompt: str | None = None
    """The text added after the base prompt (``--append-system-prompt`` or the file's)."""
    mcp_servers: dict[str, Any] | None = None
    """``--mcp-config``'s servers, merged (name -> entry); ``None``: none given."""
    strict_mcp: bool = False
    """``--strict-mcp-config``: only :attr:`mcp_servers` start."""
    settings: dict[str, Any] | None = None
    """``--settings``' JSON object; ``None``: none given."""
    settings_source: str = ""
    """Where :attr:`settings` came from: the file, or ``--settings (JSON)``."""
    agents: dict[str, Any] | None = None
    """``--agents``' definitions (name -> fields); ``None``: none given."""
    tools: tuple[str, ...] | None = None
    """``--tools`` as our tool names; ``None``: every tool (no ``--tools``, or ``default``)."""

    def rules(self) -> list[dict[str, str]]:
        """The permission rules as a permission source's ``load()`` lists them: deny first."""
        return [
            {"rule": rule, "kind": kind, "source": CLI_RULE_SOURCE, "scope": "session"}
            for kind, found in (("deny", self.disallowed), ("allow", self.allowed))
            for rule in found
        ]

    def mcp_service(self) -> dict[str, Any] | None:
        """The MCP feature's ``mcp_client_servers`` value (``None``: nothing given)."""
        if self.mcp_servers is None and not self.strict_mcp:
            return None
        found: dict[str, Any] = {"source": "--mcp-config", "mcpServers": self.mcp_servers or {}}
        if self.strict_mcp:
            found["strict"] = True
        return found

    def services(self) -> dict[str, Any]:
        """The harness services these flags give the features (by id: MCP's
        ``mcp_client_servers``, hooks' ``claude_run_settings``, subagents'
        ``claude_run_agents``), those of the flags given."""
        found = {
            MCP_CLIENT_SERVERS: self.mcp_service(),
            CLAUDE_RUN_SETTINGS: self.settings_service(),
            CLAUDE_RUN_AGENTS: self.agents_service(),
        }
        return {name: value for name, value in found.items() if value is not None}

    def left_out(self) -> frozenset[str]:
        """The built-in tools ``--tools`` leaves out (our names; none without it)."""
        if self.tools is None:
            return frozenset()
        return builtin_tools() - frozenset(self.tools)

    def settings_service(self) -> dict[str, Any] | None:
        """The hooks feature's ``claude_run_settings`` value (``None``: no ``--settings``)."""
        if self.settings is None:
            return None
        return {"source": self.settings_source, "settings": self.settings}

    def agents_service(self) -> dict[str, Any] | None:
        """The subagents feature's ``claude_run_agents`` value (``None``: no ``--agents``)."""
        if self.agents is None:
            return None
        return {"source": "--agents", "agents": self.agents}


class RunFlags(msgspec.Struct, frozen=True):
    """The run-scoped flags as given (files made absolute): what travels to the worker."""

    allowed: tuple[str, ...] = ()
    disallowed: tuple[str, ...] = ()
    system_prompt: str | None = None
    system_prompt_file: str | None = None
    append_system_prompt: str | None = None
    append_system_prompt_file: str | None = None
    mcp_config: tuple[str, ...] = ()
    strict_mcp_config: bool = False
    settings: str | None = None
    agents: str | None = None
    tools: str | None = None
    pinned: tuple[tuple[str, str], ...] = ()
    """``(path, SHA-256)`` of each file as the command line read it (:meth:`pin`)."""

    def files(self) -> list[str]:
        """The files these flags read (prompt files, ``--mcp-config`` and ``--settings``
        files)."""
        given = [self.system_prompt_file, self.append_system_prompt_file]
        given += [v for v in self.mcp_config if not v.lstrip().startswith("{")]
        if self.settings is not None and not self.settings.lstrip().startswith("{"):
            given.append(self.settings)
        return [f for f in given if f is not None]

    def pin(self) -> RunFlags:
        """These flags with every file pinned as it is now (a file that cannot be read is not
        pinned: :meth:`resolve` says what is wrong with it)."""
        pinned: dict[str, str] = {}
        for file in self.files():
            try:
                pinned[file] = hashlib.sha256(Path(file).read_bytes()).hexdigest()
            except OSError:
                continue
        return msgspec.structs.replace(self, pinned=tuple(pinned.items()))

    @property
    def given(self) -> bool:
        """Whether any flag was given."""
        return self != RunFlags()

    def names(self) -> list[str]:
        """The flags given, as the user spells them (for a usage error)."""
        found = {
            "--allowedTools": self.allowed,
            "--disallowedTools": self.disallowed,
            "--system-prompt": self.system_prompt is not None,
            "--system-prompt-file": self.system_prompt_file is not None,
            "--append-system-prompt": self.append_system_prompt is not None,
            "--append-system-prompt-file": self.append_system_prompt_file is not None,
            "--mcp-config": self.mcp_config,
            "--strict-mcp-config": self.strict_mcp_config,
            "--settings": self.settings is not None,
            "--agents": self.agents is not None,
            "--tools": self.tools is not None,
        }
        return [name for name, value in found.items() if value]

    def resolve(self) -> RunOptions:
        """Read the files and the JSON; :class:`RunOptionsError` (one line) for what is wrong."""
        for text, file, flag in (
            (self.system_prompt, self.system_prompt_file, "--system-prompt"),
            (self.append_system_prompt, self.append_system_prompt_file, "--append-system-prompt"),
        ):
            if text is not None and file is not None:
                raise RunOptionsError(f"give {flag} or {flag}-file, not both")
        if self.strict_mcp_config and not self.mcp_config:
            raise RunOptionsError(
                "--strict-mcp-config uses only the servers of --mcp-config: give --mcp-config "
                "FILE_OR_JSON too"
            )
        pins = dict(self.pinned)
        servers: dict[str, Any] | None = None
        for value in self.mcp_config:
            found = _mcp_servers(value, pins)
            servers = {**(servers or {}), **found}
        return RunOptions(
            allowed=self.allowed,
            disallowed=self.disallowed,
            system_prompt=_prompt(
                self.system_prompt, self.system_prompt_file, "--system-prompt-file", pins
            ),
            append_system_prompt=_prompt(
                self.append_system_prompt,
                self.append_system_prompt_file,
                "--append-system-prompt-file",
                pins,
            ),
            mcp_servers=servers,
            strict_mcp=self.strict_mcp_config,
            settings=None if self.settings is None else _settings(self.settings, pins),
            settings_source=_settings_source(self.settings),
            agents=None if self.agents is None else _agents(self.agents),
            tools=None if self.tools is None else _tools(self.tools),
        )

    def worker_args(self) -> list[str]:
        """The session worker's command-line words for these flags (its parser:
        :func:`add_worker_flags`)."""
        argv: list[str] = []
        for rule in self.allowed:
            argv.append(f"--allowed-tool={rule}")
        for rule in self.disallowed:
            argv.append(f"--disallowed-tool={rule}")
        for flag, value in (
            ("--system-prompt", self.system_prompt),
            ("--system-prompt-file", self.system_prompt_file),
            ("--append-system-prompt", self.append_system_prompt),
            ("--append-system-prompt-file", self.append_system_prompt_file),
        ):
            if value is not None:
                argv.append(f"{flag}={value}")
        for value in self.mcp_config:
            argv.append(f"--mcp-config={value}")
        if self.strict_mcp_config:
            argv.append("--strict-mcp-config")
        for flag, value in (
            ("--settings", self.settings),
            ("--agents", self.agents),
            ("--tools", self.tools),
        ):
            if value is not None:
                argv.append(f"{flag}={value}")
        for file, digest in self.pinned:
            argv.append(f"--pinned-file={digest}:{file}")
        return argv


def add_worker_flags(parser: Any) -> None:
    """The session worker's options carrying :class:`RunFlags` (:meth:`RunFlags.worker_args`)."""
    parser.add_argument("--allowed-tool", action="append", default=[], metavar="RULE")
    parser.add_argument("--disallowed-tool", action="append", default=[], metavar="RULE")
    for flag in (
        "--system-prompt",
        "--system-prompt-file",
        "--append-system-prompt",
        "--append-system-prompt-file",
    ):
        parser.add_argument(flag, metavar="TEXT")
    parser.add_argument("--mcp-config", action="append", default=[], metavar="FILE_OR_JSON")
    parser.add_argument("--strict-mcp-config", action="store_true")
    parser.add_argument("--settings", metavar="FILE_OR_JSON")
    parser.add_argument("--agents", metavar="JSON")
    parser.add_argument("--tools", metavar="TOOLS")
    parser.add_argument("--pinned-file", action="append", default=[], metavar="SHA256:FILE")


def worker_flags(args: Any) -> RunFlags:
    """The :class:`RunFlags` of the worker's parsed command line (:func:`add_worker_flags`)."""
    return RunFlags(
        allowed=tuple(args.allowed_tool),
        disallowed=tuple(args.disallowed_tool),
        system_prompt=args.system_prompt,
        system_prompt_file=args.system_prompt_file,
        append_system_prompt=args.append_system_prompt,
        append_system_prompt_file=args.append_system_prompt_file,
        mcp_config=tuple(args.mcp_config),
        strict_mcp_config=args.strict_mcp_config,
        settings=args.settings,
        agents=args.agents,
        tools=args.tools,
        pinned=tuple(
            (file, digest)
            for digest, _, file in (value.partition(":") for value in args.pinned_file)
        ),
    )


def _read(file: str, where: str, pins: Mapping[str, str]) -> str:
    """``file``'s text, when it is still as :meth:`RunFlags.pin` found it."""
    try:
        data = Path(file).read_bytes()
    except FileNotFoundError:
        raise RunOptionsError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise RunOptionsError(f"{where}: a folder, not a file") from None
    except OSError as error:
        raise RunOptionsError(f"{where}: cannot read it ({error})") from None
    pinned = pins.get(file)
    if pinned is not None and hashlib.sha256(data).hexdigest() != pinned:
        raise RunOptionsError(
            f"{where}: changed since this run started (a run uses each file as it was when "
            "the run started); start a new run to use it as it is now"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RunOptionsError(f"{where}: cannot read it ({error})") from None


def _prompt(text: str | None, file: str | None, flag: str, pins: Mapping[str, str]) -> str | None:
    return text if file is None else _read(file, f"{flag} {file}", pins)


def _mcp_servers(value: str, pins: Mapping[str, str]) -> dict[str, Any]:
    """The servers of one ``--mcp-config`` value: JSON text (it starts with ``{``) or a file."""
    if value.lstrip().startswith("{"):
        where, text = "--mcp-config (JSON)", value
    else:
        where = f"--mcp-config {value}"
        if not Path(value).exists():
            raise RunOptionsError(
                f"{where}: no such file (give a file or the JSON itself: "
                "'{\"mcpServers\": {...}}')"
            )
        text = _read(value, where, pins)
    try:
        data = json.loads(text)
    except ValueError as error:
        raise RunOptionsError(f"{where}: not valid JSON ({error})") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise RunOptionsError(f'{where}: expected {{"mcpServers": {{name: server, ...}}}}')
    for name, entry in cast(dict[str, Any], servers).items():
        if not isinstance(entry, dict) or not (
            isinstance(entry.get("command"), str) or isinstance(entry.get("url"), str)  # pyright: ignore[reportUnknownMemberType]
        ):
            raise RunOptionsError(
                f'{where}: server "{name}" needs "command" (a program to start) or "url"'
            )
    return cast(dict[str, Any], servers)


def _json_object(
    value: str, flag: str, *, file: bool, pins: Mapping[str, str] | None = None
) -> tuple[str, dict[str, Any]]:
    """``value`` read as JSON text (it starts with ``{``) or, when ``file``, as a JSON file
    (still as :meth:`RunFlags.pin` found it, given ``pins``): the words naming it in an error
    (``--settings (JSON)``, ``--settings FILE``) and the object."""
    if file and not value.lstrip().startswith("{"):
        label = f"{flag} {value}"
        if not Path(value).exists():
            raise RunOptionsError(
                f"{label}: no such file (give a file or the JSON itself: '{{...}}')"
            )
        text = _read(value, label, pins or {})
    else:
        text, label = value, f"{flag} (JSON)"
    try:
        data = json.loads(text)
    except ValueError as error:
        raise RunOptionsError(f"{label}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise RunOptionsError(f"{label}: expected a JSON object ({{...}})")
    return label, cast(dict[str, Any], data)


def _settings_source(value: str | None) -> str:
    """Where ``--settings``' value comes from, as its notes and rules name it."""
    if value is None:
        return ""
    return "--settings (JSON)" if value.lstrip().startswith("{") else value


def _settings(value: str, pins: Mapping[str, str]) -> dict[str, Any]:
    """``--settings``' object: a settings file's shape (``permissions`` a table of rule lists,
    ``hooks`` a table of events); the rest is for the readers' notes."""
    label, data = _json_object(value, "--settings", file=True, pins=pins)
    table = data.get("permissions")
    if table is not None and not isinstance(table, dict):
        raise RunOptionsError(f"{label}: `permissions` must be an object of allow, ask and deny")
    for kind in ("allow", "ask", "deny"):
        rules = cast(dict[str, Any], table or {}).get(kind)
        if rules is not None and not (
            isinstance(rules, list) and all(isinstance(r, str) for r in cast(list[Any], rules))
        ):
            raise RunOptionsError(f"{label}: `permissions.{kind}` must be a list of rules")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise RunOptionsError(f"{label}: `hooks` must be an object of events")
    return data


def _agents(value: str) -> dict[str, Any]:
    """``--agents``' definitions: each name's object needs ``description`` and ``prompt`` (an
    agent file's frontmatter and body); the rest the subagents feature reads as a file's."""
    _label, data = _json_object(value, "--agents", file=False)
    for name, fields in data.items():
        if not isinstance(fields, dict):
            raise RunOptionsError(
                f'--agents: "{name}" must be an object ({{"description": ..., "prompt": ...}})'
            )
        for key in ("description", "prompt"):
            text = cast(dict[str, Any], fields).get(key)
            if not isinstance(text, str) or not text.strip():
                raise RunOptionsError(f'--agents: "{name}" needs "{key}" (text)')
    return data


def _tools(value: str) -> tuple[str, ...] | None:
    """``--tools``' names as ours (Claude Code's through ``pico3.CLAUDE_CODE_TOOLS``, or ours);
    ``None`` for ``default`` (every tool); ``()`` for ``""`` (no built-in tool)."""
    # lazy: the command line imports pico3 only when --tools is given
    from pico3 import CLAUDE_CODE_TOOLS

    names = split_rules([value])
    if names == ("default",):
        return None
    ours = set(CLAUDE_CODE_TOOLS.values())
    found: list[str] = []
    for name in names:
        tool = CLAUDE_CODE_TOOLS.get(name) or (name if name in ours else None)
        if tool is None:
            known = ", ".join(sorted(CLAUDE_CODE_TOOLS))
            raise RunOptionsError(
                f'--tools: unknown tool {name!r} (the built-in tools: {known}; "" for none, '
                "default for all)"
            )
        found.append(tool)
    return tuple(dict.fromkeys(found))


def builtin_tools() -> frozenset[str]:
    """Our names of the built-in tools ``--tools`` chooses among (the values of
    ``pico3.CLAUDE_CODE_TOOLS``)."""
    from pico3 import CLAUDE_CODE_TOOLS

    return frozenset(CLAUDE_CODE_TOOLS.values())
