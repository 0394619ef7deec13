"""The approval gate: a tool call with effects runs only when an approval authority ruled on it
(docs/design/harness.md#approval-gate).

Whether a call *may* run is a feature's decision (the approval package asks a person, applies
the permission mode). Whether a call *needs* a decision, and what happens when nobody can make
one, is the core's: otherwise a missing, broken, retired or uninstalled approval feature would
let every call run unasked (it did: the hook was the only thing standing in the way).

* **Which calls.** A call needs approval unless its declaration says ``replay="safe"`` (the
  declaration's promise that running it has no effect outside the conversation: reads,
  searches, the question tool, which only asks the user). ``bash``, ``write``, ``edit``, MCP
  tools, job tools that start or kill processes are ``"unsafe"`` (the default).
* **Who rules.** An *approval authority* is a live harness-wide or conversation-scoped
  ``before_tool`` registration on ``pi.tool`` that was registered as one with
  :meth:`Harness.register_approval_authority <pico3.Harness.register_approval_authority>`. The
  approval feature registers its hook so when it installs, and its uninstall removes it: absent,
  failed to load, retired by a reload or removed all mean *no authority*.
* **The rule** (``pi.tool``, before ``started``): with no live authority the call is blocked at
  once, before any hook runs; otherwise the ``before_tool`` chain runs, and the call goes on only
  when an authority that is **still live** after the chain **ran in it and did not block**. So
  no window fails open: a reload that retired the old authority before the new one arrived, a
  chain resolved while the authority was away, or an authority removed while it was deciding
  all block. The block is the ordinary synthetic error result the model reads (diagnostic code
  ``"unapproved"``), its text the :class:`ApprovalGate`'s ``reason`` — which the application
  supplies through :attr:`HarnessOptions.unapproved <pico3.HarnessOptions.unapproved>`, naming
  the package that is missing and how to restore it.

An embedding with nobody to ask and no feature to decide (a unit test, a batch run of its own
tools) turns the gate off with ``HarnessOptions(require_approval=False)``; it is on by default,
and the coding agent never turns it off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pico3.hooks import HookRegistration

__all__ = [
    "ApprovalAuthority",
    "ApprovalGate",
    "Unapproved",
    "default_reason",
    "needs_approval",
]

Unapproved = Callable[[Mapping[str, Any]], str]
"""``reason(call) -> str``: why a call that needs approval was blocked with no authority
(``call`` is ``{id, name, arguments}``)."""


def default_reason(call: Mapping[str, Any]) -> str:
    """The default reason: the tool, and that no approval authority serves the session."""
    name = call.get("name") or "the tool"
    return (
        f"{name} was not run: it has effects outside the conversation and needs approval, but "
        "no approval authority serves this session (the approval feature is not installed, "
        "failed to load, or was retired). Tell the user; do not try to work around it."
    )


def needs_approval(declaration: Any) -> bool:
    """True when a call of ``declaration`` runs only with an approval authority: every tool
    not declared ``replay="safe"``."""
    return getattr(declaration, "replay", "unsafe") != "safe"


class ApprovalAuthority:
    """One registered approval authority; call it to remove exactly this one (idempotent).

    It is live while not removed and while its ``before_tool`` registration is live (removing
    the hook, or retiring its namespace, ends the authority too)."""

    __slots__ = ("_gate", "_removed", "hook")

    def __init__(self, gate: ApprovalGate, hook: HookRegistration) -> None:
        self._gate = gate
        self._removed = False
        self.hook = hook

    @property
    def name(self) -> str:
        """The namespace string of the authority's hook (``"approval"``)."""
        return self.hook.namespace.name

    @property
    def alive(self) -> bool:
        """True until removed, and only while its hook registration is alive."""
        return not self._removed and self.hook.alive

    def __call__(self) -> None:
        if self._removed:
            return
        self._removed = True
        self._gate._discard(self)  # pyright: ignore[reportPrivateUsage]

    def __repr__(self) -> str:
        state = "live" if self.alive else "retired"
        return f"<ApprovalAuthority {self.name!r} ({state})>"


class ApprovalGate:
    """The approval authorities of one harness and the rule ``pi.tool`` applies (module doc).

    ``required`` is :attr:`HarnessOptions.require_approval`; ``reason`` builds the text of a
    block for want of an authority."""

    def __init__(self, *, required: bool = True, reason: Unapproved | str | None = None) -> None:
        self.required = required
        self._reason = reason
        self._authorities: list[ApprovalAuthority] = []

    def register(self, hook: HookRegistration) -> ApprovalAuthority:
        """Make ``hook`` (a live ``before_tool`` registration on ``pi.tool``) an authority."""
        if not isinstance(hook, HookRegistration):
            raise TypeError(
                f"an approval authority is a HookRegistration (what h.hooks returns), got {hook!r}"
            )
        if not hook.alive:
            raise ValueError(f"{hook!r} is removed or its namespace retired: it cannot approve")
        if getattr(hook.kind, "name", None) != "pi.tool" or "before_tool" not in hook.handlers:
            raise ValueError(
                f"{hook!r} cannot approve tool calls: an approval authority is a "
                "'before_tool' hook on pi.tool"
            )
        authority = ApprovalAuthority(self, hook)
        self._authorities.append(authority)
        return authority

    def _discard(self, authority: ApprovalAuthority) -> None:
        if authority in self._authorities:
            self._authorities.remove(authority)

    def live(self) -> list[ApprovalAuthority]:
        """The live authorities, in registration order (retired ones are dropped)."""
        self._authorities = [a for a in self._authorities if a.alive]
        return list(self._authorities)

    def ruled(self, hooks: tuple[HookRegistration, ...] | frozenset[HookRegistration]) -> bool:
        """True when a live authority is among ``hooks`` (the registrations whose
        ``before_tool`` handler ran for a call and did not block it)."""
        return any(authority.hook in hooks for authority in self.live())

    def reason(self, call: Mapping[str, Any]) -> str:
        """Why ``call`` was blocked for want of an authority (the application's words)."""
        reason = self._reason
        if isinstance(reason, str):
            return reason
        if reason is None:
            return default_reason(call)
        try:
            text = reason(call)
        except Exception as exc:  # the block stands; only its wording is lost
            return f"{default_reason(call)} (The host's reason failed: {type(exc).__name__}: {exc})"
        return text if isinstance(text, str) and text else default_reason(call)
