"""Where the permission rules come from, and where a new or removed one goes.

Three kinds of source, gathered by :class:`RuleStore` into one :class:`~.rules.RuleSet`:

* **Files** — the app hands the feature a *permission source* as the harness service
  ``permission_rules`` (the feature never imports the app; see :class:`PermissionSource`): the
  user's and the trusted project's ``config.toml`` (``[permissions]`` ``allow``/``ask``/``deny``)
  and Claude Code's ``settings.json`` files. Its ``load()`` returns the raw rules with their
  files; this module parses them, so one grammar (:func:`~.rules.parse_rule`) serves every file.
  A rule that does not parse is left out and reported once (a warning in the worker's log and a
  line in :attr:`RuleStore.problems`, which the ``/permissions`` view and a notice show):
  ``<file>: deny rule 'Bash(git * x)' is invalid (a `*` … is allowed only at the end …); it is
  ignored``. A bad rule is never fatal and never silently dropped.
* **The session** — the standing choices made at ``session`` scope and the rules added with
  ``/permissions`` for this session: the keys ``rules`` (allow), ``askRules`` and ``denyRules``
  (:data:`SESSION_KEYS`) of the ``approval`` namespace in the *rewindable document of the user's conversation* — the one the
  call belongs to, or for a subagent's call the conversation at the top of its owner chain, so
  a subagent follows (and adds to) its parent's rules. Durable (a worker restart keeps them) and
  rewindable: a rewind or a branch is a fork, which inherits the rules as of its fork point, so
  rewinding to before a choice drops the rule, and a rule chosen on one branch stays there.
  ``/permissions`` lists the session rules of the conversation that last ran a tool (the one the
  user is working in; the root before any call).
* **Older sessions** — a conversation's ``autoAllow`` list (sticky), what "Always allow <tool>"
  stored before permission rules existed. It is honoured unchanged, as whole-tool allow rules
  of that conversation, listed by ``/permissions`` (source ``autoAllow``) and removable there;
  nothing is migrated or rewritten.

A dialog's standing choice adds an allow rule (:meth:`RuleStore.keep`); ``/permissions`` adds
any kind at any offered scope (:meth:`RuleStore.add`, after :meth:`RulesProvider.check_rule`:
the rule parses, it is not there already, and an allow rule for a whole tool that asks — all of
bash, every edit, a whole MCP server, any fetch — was confirmed: :func:`widens`). Any kind can be removed. A rule added or removed applies from the next call:
every decision reads the files (again when one changed) and the session's storage.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import anyio.to_thread

from chord import Context, MutableReplicatedState, RemoteServiceError
from pico3 import Harness, Namespace, Transaction

from .contract import (
    OWNER_MODE_KEY,
    CommandVerdict,
    RuleCheck,
    RuleEntry,
    RuleScope,
    RulesState,
    check_rule_addition,
    check_rule_entry,
)
from .git_approvals import forget, listing
from .restrictions import Restrictions
from .rules import RULE_KINDS, Rule, RuleError, RuleKind, RuleSet, SourcedRule, parse_rule
from .widening import wide_allow, widens

__all__ = [
    "PERMISSION_SOURCE",
    "SESSION_KEYS",
    "PermissionSource",
    "RuleStore",
    "RulesProvider",
    "SessionRules",
    "invalid_rule",
    "owner_chain",
    "session_rule_reader",
    "top_conversation",
    "turn_rules",
    "wide_allow",
    "widens",
]

PERMISSION_SOURCE = "permission_rules"
"""The harness service (``HarnessOptions.services``) holding the app's :class:`PermissionSource`."""

SESSION_KEYS: dict[RuleKind, str] = {"allow": "rules", "ask": "askRules", "deny": "denyRules"}
"""The ``approval`` namespace's rewindable key holding the session's rules of each kind."""

SessionRules = Mapping[str, Sequence[str]]
"""A conversation's session rules by kind (what :func:`session_rule_reader` returns)."""

_log = logging.getLogger("facets_approval")


def invalid_rule(kind: str, text: object, error: RuleError) -> str:
    """The parser's message for a bad rule, as ``/permissions`` shows it for a file's (after
    the file's name) and for a rule typed there: ``allow rule 'Bash(git * x)' is invalid (a
    `*` … is allowed only at the end, as a prefix: Bash(git log:*))``."""
    return f"{kind} rule {text!r} is invalid ({error})"


class PermissionSource(Protocol):
    """What the app provides as the harness service ``permission_rules`` (duck-typed).

    ``load()`` returns ``{"root": <project root>, "scopes": [...], "rules": [{"rule", "kind",
    "source", "scope"}, ...], "problems": [...], "restrictions": {...}}``: ``scopes`` are where
    :meth:`add` can write (``"user"``, plus ``"project"`` in a trusted project); ``problems``
    name files that could not be read; ``trusted`` (optional) is ``True`` when the user trusts
    the project at ``root`` (:mod:`.gitconfig`); ``restrictions`` (optional) are Claude Code's
    restrictive switches in force, each with the file that turned it on
    (:mod:`.restrictions`). ``add(rule, kind, scope)`` appends a rule to that scope's file and
    returns the file's path; ``remove(rule, kind, source)`` deletes it from the file
    ``source``. Both raise ``ValueError`` with a message for the user."""

    def load(self) -> Mapping[str, Any]: ...

    def add(self, rule: str, kind: str, scope: str) -> str: ...

    def remove(self, rule: str, kind: str, source: str) -> None: ...


def _services(harness: Harness) -> Mapping[str, Any]:
    return getattr(getattr(harness, "scheduler", None), "services", None) or {}


async def top_conversation(harness: Harness, conversation_id: int, ctx: Context) -> int:
    """The conversation at the top of ``conversation_id``'s owner chain (itself when no
    subagent task owns it)."""
    return (await owner_chain(harness, conversation_id, ctx))[0]


async def owner_chain(
    harness: Harness, conversation_id: int, ctx: Context
) -> tuple[int, tuple[object, ...]]:
    """The conversation at the top of ``conversation_id``'s owner chain, and the
    :data:`~.contract.OWNER_MODE_KEY` each owning task's input names on the way (nearest
    first; the tasks that name none are left out)."""
    seen: set[int] = set()
    modes: list[object] = []
    current = conversation_id
    while current not in seen:
        seen.add(current)
        handle = await harness.conversation(current, ctx)
        if handle is None:
            break
        record = await handle.commit(lambda tx, _ctx, cid=current: tx.conversation(cid), ctx)
        owner = getattr(record, "owner", None)
        if not isinstance(owner, int):
            break
        task = await harness.get_task(owner, ctx)
        if task is None:
            break
        given = task.input if isinstance(task.input, dict) else {}
        if given.get(OWNER_MODE_KEY) is not None:
            modes.append(given[OWNER_MODE_KEY])
        current = task.conversation_id
    return current, tuple(modes)


def session_rule_reader(ns: Namespace) -> Any:
    """A builder reading a conversation's session rules by kind (:data:`SessionRules`)."""

    def read(tx: Transaction, _ctx: Context) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for kind, key in SESSION_KEYS.items():
            stored = tx.plugins(ns)[key]  # a tracked proxy of the stored list
            if isinstance(stored, str | bytes | dict) or not hasattr(stored, "__iter__"):
                found[kind] = []  # edited by hand into something else: no session rules
            else:
                found[kind] = [r for r in stored if isinstance(r, str)]
        return found

    return read


async def turn_rules(tx: Transaction, conversation_id: int) -> list[str]:
    """The allow rules the running turn of ``conversation_id`` was given: the ``allow`` list of
    the input that started it (``Input.allow``, a command's ``allowed-tools:``, through
    ``tx.turn_input``), read from storage at decision time. Empty when no turn runs, the input
    has none or anything is not as expected: a grant never outlives its turn, never reaches
    another conversation (a subagent's turn is its own), and a doubt is no grant."""
    record = await tx.turn_input(conversation_id)
    allow = getattr(record, "allow", None)
    if not isinstance(allow, list):
        return []
    return [rule for rule in allow if isinstance(rule, str) and rule]  # pyright: ignore[reportUnknownVariableType]


class RuleStore:
    """The rules of one harness: file rules from the app's source, the root's session rules,
    and a conversation's old ``autoAllow`` list, parsed and checked."""

    def __init__(self, harness: Harness, ns: Namespace) -> None:
        self._harness = harness
        self._ns = ns
        self._reported: set[str] = set()
        self._tops: dict[int, tuple[int, tuple[object, ...]]] = {}
        self.problems: list[str] = []
        self.current: int | None = None
        """The user's conversation that last ran a tool (``/permissions`` lists its rules)."""

    async def top(self, conversation_id: int, ctx: Context) -> int:
        """:func:`top_conversation`, cached (a conversation's owner never changes)."""
        return (await self.chain(conversation_id, ctx))[0]

    async def chain(self, conversation_id: int, ctx: Context) -> tuple[int, tuple[object, ...]]:
        """:func:`owner_chain`, cached (an owner and its task's input never change)."""
        found = self._tops.get(conversation_id)
        if found is None:
            found = await owner_chain(self._harness, conversation_id, ctx)
            self._tops[conversation_id] = found
        return found

    async def listed(self, ctx: Context) -> Any:
        """The conversation whose session rules ``/permissions`` shows and edits."""
        if self.current is not None:
            handle = await self._harness.conversation(self.current, ctx)
            if handle is not None:
                return handle
        return await self._harness.root(ctx)

    @property
    def source(self) -> PermissionSource | None:
        found = _services(self._harness).get(PERMISSION_SOURCE)
        return found if found is not None and hasattr(found, "load") else None

    def _files(self) -> tuple[list[dict[str, Any]], list[str], str | None, list[RuleScope]]:
        source = self.source
        if source is None:
            return [], [], None, []
        try:
            loaded = source.load()
        except Exception as error:  # a source must never stop a decision; it is reported
            return [], [f"cannot read the permission rules: {error}"], None, []
        raw = loaded.get("rules") or []
        root = loaded.get("root")
        offered = loaded.get("scopes") or ()
        scopes: list[RuleScope] = [s for s in ("project", "user") if s in offered]
        return (
            list(raw),
            [str(p) for p in loaded.get("problems") or ()],
            root if isinstance(root, str) else None,
            scopes,
        )

    def restrictions(self) -> Restrictions:
        """Claude Code's restrictive switches the source reports (:mod:`.restrictions`); all
        off without a source or when it cannot be read (reported by :meth:`build`)."""
        source = self.source
        if source is None:
            return Restrictions()
        try:
            return Restrictions.of(source.load())
        except Exception:  # a source must never stop a decision; build reports it
            return Restrictions()

    def root(self) -> str | None:
        """The project root the source names (``./`` patterns are relative to it)."""
        return self._files()[2]

    def report(self, problem: str) -> None:
        """Report ``problem`` once (the log and :attr:`problems`)."""
        if problem not in self._reported:
            self._reported.add(problem)
            _log.warning("permission rules: %s", problem)
        if problem not in self.problems:
            self.problems.append(problem)

    def scopes(self) -> list[RuleScope]:
        """Where a standing choice may be kept: ``session`` always, then the source's."""
        return ["session", *self._files()[3]]

    def build(
        self,
        session: SessionRules | Sequence[str],
        auto_allow: Sequence[str],
        workspace: str | None,
        turn: Sequence[str] = (),
    ) -> tuple[RuleSet, list[RuleEntry]]:
        """The rule set for a decision and the entries ``/permissions`` lists. ``session``: the
        session's rules by kind (a plain list: allow rules); ``turn``: the allow rules of the
        running turn (:func:`turn_rules`), for this decision only."""
        raw, problems, root, _scopes = self._files()
        by_kind = session if isinstance(session, Mapping) else {"allow": session}
        raw = [
            *raw,
            *(
                {
                    "rule": r,
                    "kind": "allow",
                    "source": "this turn's allowed-tools",
                    "scope": "session",
                }
                for r in turn
            ),
            *(
                {"rule": r, "kind": kind, "source": "session", "scope": "session"}
                for kind in ("deny", "ask", "allow")
                for r in by_kind.get(kind, ())
            ),
            *(
                {"rule": r, "kind": "allow", "source": "autoAllow", "scope": "session"}
                for r in auto_allow
            ),
        ]
        rules: list[SourcedRule] = []
        entries: list[RuleEntry] = []
        for item in raw:
            text, kind = item.get("rule"), item.get("kind")
            source, scope = str(item.get("source", "?")), str(item.get("scope", "?"))
            if kind not in RULE_KINDS:
                problems.append(f"{source}: {kind!r} is not a rule list (allow, ask or deny)")
                continue
            try:
                rule = parse_rule(text)
            except RuleError as error:
                problems.append(f"{source}: {invalid_rule(kind, text, error)}; it is ignored")
                continue
            rules.append(SourcedRule(rule, kind, source))
            entries.append({"rule": rule.text, "kind": kind, "source": source, "scope": scope})
        kept = [p for p in self.problems if p.startswith("the rule ")]  # failed keeps stay listed
        self.problems = []
        for problem in [*problems, *kept]:
            self.report(problem)
        return RuleSet(rules, root=root, workspace=workspace), entries

    async def keep(
        self,
        rule: str,
        scope: RuleScope,
        conversation_id: int,
        ctx: Context,
        *,
        kind: RuleKind = "allow",
    ) -> None:
        """Keep the ``kind`` ``rule`` (allow: a dialog's standing choice; any kind: a
        ``PermissionRequest`` hook's ``updatedPermissions``, session only) at ``scope``, for a
        call in ``conversation_id``; idempotent."""
        parse_rule(rule)  # the offered rule always parses; a bad one never reaches a file
        if scope == "session":
            ns, key = self._ns, SESSION_KEYS[kind]

            def write(tx: Transaction, _ctx: Context) -> None:
                stored = list(tx.plugins(ns)[key] or [])
                if rule not in stored:
                    tx.plugins(ns)[key] = [*stored, rule]

            top = await self._harness.conversation(await self.top(conversation_id, ctx), ctx)
            await (top or await self._harness.root(ctx)).commit(write, ctx)
            return
        source = self.source
        if source is None:
            raise ValueError(f"no configuration file can hold a {scope} rule in this session")
        existing = [
            r
            for r in self._files()[0]
            if r.get("rule") == rule and r.get("kind") == kind and r.get("scope") == scope
        ]
        if not existing:
            await anyio.to_thread.run_sync(source.add, rule, kind, scope)

    async def add(self, rule: Rule, kind: RuleKind, scope: RuleScope, ctx: Context) -> str:
        """Keep the parsed ``rule`` as a ``kind`` rule at ``scope`` (``/permissions``): the
        session rules of the conversation ``/permissions`` shows (:meth:`listed`), or appended
        to the scope's ``config.toml`` by the app's source; returns where (``"session"`` or the
        file's path). Raises ``ValueError`` for a scope not offered now."""
        if scope not in self.scopes():
            if scope == "project":
                raise ValueError(
                    "this project is not trusted (/trust), so its config.toml is not read; "
                    "add the rule to this session or to your config.toml"
                )
            raise ValueError(f"no configuration file can hold a {scope} rule in this session")
        if scope == "session":
            ns, key = self._ns, SESSION_KEYS[kind]

            def write(tx: Transaction, _ctx: Context) -> None:
                stored = list(tx.plugins(ns)[key] or [])
                if rule.text not in stored:
                    tx.plugins(ns)[key] = [*stored, rule.text]

            await (await self.listed(ctx)).commit(write, ctx)
            return "session"
        source = self.source
        assert source is not None  # a file scope is offered only with a source
        return str(await anyio.to_thread.run_sync(source.add, rule.text, kind, scope))

    async def remove(self, entry: RuleEntry, ctx: Context) -> bool:
        """Remove ``entry`` from its source; False when it was not there."""
        ns = self._ns
        if entry["source"] in ("session", "autoAllow"):
            key = "autoAllow" if entry["source"] == "autoAllow" else SESSION_KEYS[entry["kind"]]

            def write(tx: Transaction, _ctx: Context) -> bool:
                stored = list(tx.plugins(ns)[key] or [])
                if entry["rule"] not in stored:
                    return False
                tx.plugins(ns)[key] = [r for r in stored if r != entry["rule"]]
                return True

            return bool(await (await self.listed(ctx)).commit(write, ctx))
        source = self.source
        if source is None:
            return False
        await anyio.to_thread.run_sync(source.remove, entry["rule"], entry["kind"], entry["source"])
        return True


class RulesProvider:
    """The :data:`~.contract.ApprovalRulesService` provider: the published rules and problems,
    ``refresh``, ``check_command``, ``check_rule``, ``add`` and ``remove`` (its only public
    members, so the only ones served). ``live``
    returns the current :class:`~.session.ApprovalInstallation` (raising while the session is
    not open)."""

    def __init__(self, live: Callable[[], Any], state: MutableReplicatedState) -> None:
        self._live = live
        self.state = state
        self._lock = anyio.Lock()

    async def _publish(self, ctx: Context) -> RulesState:
        entries, problems = await self._live().rules(ctx)
        repositories, unread = listing(self._live().git_approvals)  # .git_approvals
        state: RulesState = {"rules": entries, "problems": problems + unread}
        if repositories is not None:
            state["repositories"] = repositories  # type: ignore[typeddict-item] - JSON values
        self.state.replace(ctx, state)
        return state

    async def forget_repository(self, git_dir: Any, ctx: Context) -> RulesState:
        async with self._lock:
            await anyio.to_thread.run_sync(forget, self._live().git_approvals, git_dir)
            return await self._publish(ctx)

    def publish_files(self, ctx: Context) -> None:
        """Publish the files' rules and problems without touching storage (at activation: a
        presentation shows the problems at once; ``refresh`` adds the session's rules)."""
        _rules, entries = self._live().store.build((), (), None)
        self.state.replace(ctx, {"rules": entries, "problems": list(self._live().store.problems)})

    async def refresh(self, ctx: Context) -> RulesState:
        async with self._lock:
            return await self._publish(ctx)

    async def check_command(self, command: Any, ctx: Context) -> CommandVerdict:
        if not isinstance(command, str) or not command.strip():
            raise RemoteServiceError(
                "service_invalid_value", f"Invalid command: expected a command, got {command!r}"
            )
        return await self._live().command_verdict(command, ctx)

    def _parsed(self, rule: object, kind: str) -> tuple[Rule, RuleCheck]:
        try:
            parsed = parse_rule(rule)
        except RuleError as error:
            raise RemoteServiceError(
                "service_invalid_value", invalid_rule(kind, rule, error)
            ) from None
        found: RuleCheck = {
            "rule": parsed.text,
            "kind": kind,  # type: ignore[typeddict-item]  # checked by the callers
            "widens": widens(parsed, kind),
            "scopes": self._live().store.scopes(),
        }
        wide = wide_allow(parsed, kind)
        if wide is not None:
            found["allows"], found["runs"] = wide[0], wide[1]
        return parsed, found

    async def check_rule(self, rule: Any, kind: Any, ctx: Context) -> RuleCheck:
        if kind not in RULE_KINDS:
            raise RemoteServiceError(
                "service_invalid_value", f"Invalid kind {kind!r}: expected allow, ask or deny"
            )
        return self._parsed(rule, kind)[1]

    async def add(self, addition: Any, ctx: Context) -> RuleEntry:
        checked = check_rule_addition(addition)  # raises before anything is changed
        kind, scope = checked["kind"], checked["scope"]
        parsed, found = self._parsed(checked["rule"], kind)
        if found["widens"] and not checked.get("confirmed"):
            raise RemoteServiceError(
                "service_invalid_value",
                f"Not added: {found['widens']}. Confirm it to add it (/permissions asks)",
            )
        async with self._lock:
            installation = self._live()
            entries, _problems = await installation.rules(ctx)
            for entry in entries:
                if (entry["rule"], entry["kind"], entry["scope"]) == (parsed.text, kind, scope):
                    where = "this session" if entry["source"] == "session" else entry["source"]
                    raise RemoteServiceError(
                        "service_invalid_value",
                        f"The {kind} rule {parsed.text} is already in {where}; nothing was added",
                    )
            try:
                source = await installation.store.add(parsed, kind, scope, ctx)
            except (OSError, ValueError) as error:
                raise RemoteServiceError("service_invalid_value", f"Not added: {error}") from None
            await self._publish(ctx)
        return {"rule": parsed.text, "kind": kind, "source": source, "scope": scope}

    async def remove(self, entry: Any, ctx: Context) -> RulesState:
        checked = check_rule_entry(entry)  # raises before anything is changed
        async with self._lock:
            installation = self._live()
            entries, _problems = await installation.rules(ctx)
            if checked not in entries:
                raise RemoteServiceError(
                    "service_invalid_value",
                    f"No {checked['kind']} rule {checked['rule']} in {checked['source']} "
                    "(already removed?)",
                )
            try:
                removed = await installation.store.remove(checked, ctx)
            except (OSError, ValueError) as error:
                raise RemoteServiceError("service_invalid_value", str(error)) from None
            if not removed:
                raise RemoteServiceError(
                    "service_invalid_value",
                    f"{checked['rule']} was not found in {checked['source']}",
                )
            return await self._publish(ctx)
