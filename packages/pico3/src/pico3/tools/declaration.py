"""What a tool is: :class:`ToolDeclaration` (name, description, schema, ``execute``), the
:class:`ToolResult` it returns, argument validation and the harness's :class:`ToolRegistry`."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from chord.context import Context
from chord.json import copy_json
from pico3.registry import NamedRegistry, Registration, RegistrySnapshot
from pico3.tools.api import ToolApi
from pico3.tools.output import OutputBounds
from pico3.tools.schema import ArgumentSchema

__all__ = [
    "TOOL_NAME",
    "Execute",
    "ToolDeclaration",
    "ToolRegistry",
    "ToolResult",
    "validate_arguments",
]


TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names every provider accepts (letters, digits, ``_`` and ``-``; at most 64)."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What ``execute`` returns (and ``after_tool`` hooks may replace).

    ``content`` is a list of content blocks (``{"type": "text", "text": ...}`` or images); leave
    it ``None`` when the tool streamed, and the stream becomes the content. ``details`` is JSON
    for renderers, ``diagnostics`` a list of ``{"severity", "message", "code"?}``, ``control``
    ``{"terminate"?, "handoff"?, "addTools"?}`` for the post-tools step.
    """

    content: list[dict[str, Any]] | None = None
    is_error: bool = False
    details: Any = None
    diagnostics: list[dict[str, Any]] | None = None
    control: dict[str, Any] | None = None

    @classmethod
    def text(cls, text: str, *, is_error: bool = False, details: Any = None) -> ToolResult:
        """A one-text-block result."""
        return cls(content=[{"type": "text", "text": text}], is_error=is_error, details=details)

    @property
    def plain_text(self) -> str:
        """All text blocks of ``content`` joined by newlines (what a plain-text model sees)."""
        return "\n".join(
            str(block["text"]) for block in self.content or () if block.get("type") == "text"
        )


Execute = Callable[[dict[str, Any], "ToolApi", Context], Awaitable[ToolResult]]


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """A tool. ``parameters`` is a JSON Schema for the arguments object; it is checked (and
    deep-copied) when the declaration is built, so a bad schema fails at definition time.

    ``interrupted`` (optional, same signature as ``execute``) reports a call of an ``"unsafe"``
    tool that a crash interrupted after it started: it runs once, in the restarted process,
    with the call's arguments and a :class:`ToolApi` whose memos are the ones the interrupted
    run stored, so it can clean up what that run left behind (``bash`` kills the command's
    processes) and say what is known. Its result closes the call as an error."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Execute
    replay: Literal["safe", "unsafe"] = "unsafe"
    output: OutputBounds = field(default_factory=OutputBounds)
    interrupted: Execute | None = None
    _arguments: ArgumentSchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {TOOL_NAME.pattern}")
        if not isinstance(self.description, str):
            raise TypeError(f"tool {self.name!r}: description must be a str")
        if self.replay not in ("safe", "unsafe"):
            raise ValueError(f"tool {self.name!r}: replay must be 'safe' or 'unsafe'")
        if not isinstance(self.output, OutputBounds):
            raise TypeError(f"tool {self.name!r}: output must be an OutputBounds")
        if not callable(self.execute):
            raise TypeError(f"tool {self.name!r}: execute must be callable")
        if self.interrupted is not None and not callable(self.interrupted):
            raise TypeError(f"tool {self.name!r}: interrupted must be callable or None")
        arguments = ArgumentSchema(self.name, self.parameters)
        object.__setattr__(self, "parameters", arguments.parameters)
        object.__setattr__(self, "_arguments", arguments)

    def validate(self, arguments: Any) -> None:
        """Raise :class:`~pico3.tools.InvalidArguments` naming every bad field of ``arguments``."""
        self._arguments.validate(arguments)

    def wire(self) -> dict[str, Any]:
        """The model-facing shape ``{name, description, parameters}`` (a fresh copy)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": copy_json(self.parameters),
        }


def validate_arguments(declaration: ToolDeclaration, arguments: Any) -> None:
    """Validate ``arguments`` against the declaration's schema (see :class:`ArgumentSchema`).

    Every problem names its field: ``arguments.path.to.field: <reason>``; a missing required
    property is reported at its own path (``arguments.question: is required``).
    """
    declaration.validate(arguments)


def _check_declaration(declaration: ToolDeclaration) -> str:
    if not isinstance(declaration, ToolDeclaration):
        raise TypeError(f"expected a ToolDeclaration, got {type(declaration).__name__}")
    return declaration.name


class ToolRegistry(NamedRegistry[ToolDeclaration]):
    """The harness's tools: unique live names, exact idempotent removal, a revision."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("tool", _check_declaration)

    def register(self, item: ToolDeclaration) -> Registration:
        """Register a tool; returns its idempotent remover."""
        return super().register(item)

    def snapshot(self) -> RegistrySnapshot[ToolDeclaration]:
        """The tools at the current revision (preparation compares revisions)."""
        return super().snapshot()
