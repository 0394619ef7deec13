"""``[notifications]`` of config.toml: when the agent tells you that a session needs you.

Three events, each from committed session state (see :mod:`coding_agent.worker.notifications`):

* ``attention``: a tool call waits on an approval dialog or a question;
* ``turn``: a turn of a conversation of yours (not a subagent's) finished;
* ``job``: a background job (``job_start``, ``bash`` with ``run_in_background``) exited.

Four channels, each with the events it takes (an empty list turns it off)::

    [notifications]
    terminal = ["attention"]        # the TUI: OSC 9 / OSC 777 and a bell (tmux-aware)
    terminal_style = "auto"         # auto | osc9 | osc777 | bell
    when_focused = false            # the terminal channel also while the TUI has focus
    desktop = ["attention"]         # notify-send, from the session worker
    desktop_when = "detached"       # detached: only while no TUI is attached; always
    webhook = "https://example.org/hook"   # POST of Claude Code's Notification JSON
    webhook_events = ["attention", "turn", "job"]
    command = "~/bin/notify.sh"     # run through /bin/sh with the same JSON on stdin
    command_events = ["attention", "turn", "job"]

The defaults are quiet: the terminal and the desktop for ``attention`` only (the terminal only
while the TUI is not focused, where the terminal reports focus; the desktop only while no TUI is
attached, since an attached TUI's terminal tells you already), no webhook and no command. The
table is read from the user's config.toml only: a project's file that posts your sessions to
its server, or runs a command of its own, is refused.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["ALL_EVENTS", "NotificationSettings"]

ALL_EVENTS: tuple[str, ...] = ("attention", "turn", "job")
"""The events a channel may take."""


class NotificationSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[notifications]`` table (see the module docstring); the defaults are its absence."""

    terminal: tuple[str, ...] = ("attention",)
    terminal_style: Literal["auto", "osc9", "osc777", "bell"] = "auto"
    when_focused: bool = False
    desktop: tuple[str, ...] = ("attention",)
    desktop_when: Literal["detached", "always"] = "detached"
    webhook: str | None = None
    webhook_events: tuple[str, ...] = ALL_EVENTS
    command: str | None = None
    command_events: tuple[str, ...] = ALL_EVENTS

    def __post_init__(self) -> None:
        for key in ("terminal", "desktop", "webhook_events", "command_events"):
            for event in getattr(self, key):
                if event not in ALL_EVENTS:
                    raise ValueError(
                        f"`{key}`: unknown event {event!r}; the events are " + ", ".join(ALL_EVENTS)
                    )
        if self.webhook is not None and not self.webhook.startswith(("http://", "https://")):
            raise ValueError(f"`webhook`: {self.webhook!r} is not an http:// or https:// URL")
        if self.command is not None and not self.command.strip():
            raise ValueError("`command`: empty; remove the key to turn the command off")

    def wanted(self, event: str) -> bool:
        """Whether any channel, the TUI's terminal included, takes ``event``: the worker records
        (two commits) and sends only those."""
        return event in self.terminal or bool(self.channels(event))

    def channels(self, event: str) -> list[str]:
        """The worker's channels that take ``event``: ``desktop``, ``webhook``, ``command``."""
        found: list[str] = []
        if event in self.desktop:
            found.append("desktop")
        if self.webhook is not None and event in self.webhook_events:
            found.append("webhook")
        if self.command is not None and event in self.command_events:
            found.append("command")
        return found
