"""Tool argument schemas: checked when a tool is declared, and every call validated against them
(:class:`InvalidArguments` names each bad field)."""

from __future__ import annotations

from typing import Any

__all__ = ["InvalidArguments"]


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose values are instance data, not schemas (a ``$ref`` key there is data)."""


_DESCENDING = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "items",
        "prefixItems",
        "additionalItems",
        "unevaluatedItems",
        "contains",
    }
)
"""Keywords whose subschemas apply to a *part* of the instance (recursion through them ends)."""


def _check_references(tool: str, schema: dict[str, Any]) -> None:
    """Refuse a ``$ref`` that validation could not follow, when the tool is declared.

    ``check_schema`` accepts any string as a ``$ref``; resolution happens only when a call
    reaches it, where it would raise instead of naming bad arguments. Tool parameters may only
    use local references: ``#``, a JSON pointer ``#/...`` into the schema, or ``#name`` for a
    declared ``$anchor``; and a reference to an enclosing schema must pass through a keyword
    that descends into the arguments (``{"$ref": "#"}`` at the root would recurse forever).
    """
    refs: list[tuple[str, list[str]]] = []
    anchors: set[str] = set()

    def walk(node: Any, segments: list[str]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]
                if key == "$ref" and isinstance(value, str):
                    refs.append((value, segments))
                elif key == "$anchor" and isinstance(value, str):
                    anchors.add(value)
                elif key not in _DATA_KEYWORDS:
                    walk(value, [*segments, str(key)])  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(node, list):
            for index, value in enumerate(node):  # pyright: ignore[reportUnknownVariableType]
                walk(value, [*segments, str(index)])

    walk(schema, [])
    for ref, segments in refs:
        where = "".join(f"[{s}]" if s.isdigit() else f".{s}" for s in ["parameters", *segments])
        where = where[1:]
        if ref.startswith("#") and ref[1:] in anchors and not ref.startswith("#/"):
            continue
        target = _pointer(schema, ref)
        if target is None:
            raise ValueError(
                f"tool {tool!r}: invalid JSON Schema at {where}.$ref: reference {ref!r} does not "
                "resolve (only local '#/...' pointers and declared anchors are allowed)"
            )
        if segments[: len(target)] == target and not _DESCENDING & set(segments[len(target) :]):
            raise ValueError(
                f"tool {tool!r}: invalid JSON Schema at {where}.$ref: reference {ref!r} refers "
                "to an enclosing schema without descending into the arguments (endless recursion)"
            )


def _pointer(schema: Any, ref: str) -> list[str] | None:
    """The segments of a local ``#``/``#/...`` reference if it resolves in ``schema``."""
    from urllib.parse import unquote

    if ref == "#":
        return []
    if not ref.startswith("#/"):
        return None
    segments = [unquote(raw).replace("~1", "/").replace("~0", "~") for raw in ref[2:].split("/")]
    if not _pointer_exists(schema, segments):
        return None
    return segments


def _pointer_exists(schema: Any, segments: list[str]) -> bool:
    node = schema
    for part in segments:
        if isinstance(node, dict) and part in node:
            node = node[part]  # pyright: ignore[reportUnknownVariableType]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):  # pyright: ignore[reportUnknownArgumentType]
            node = node[int(part)]  # pyright: ignore[reportUnknownVariableType]
        else:
            return False
    return True


class InvalidArguments(ValueError):
    """Tool arguments do not satisfy the tool's schema. ``problems`` name each field."""

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = problems
        super().__init__(f"invalid arguments for tool {tool!r}: {'; '.join(problems)}")


def _path(root: str, parts: Any) -> str:
    out = root
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
