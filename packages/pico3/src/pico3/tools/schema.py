"""Tool argument schemas: checked when a tool is declared, and every call validated against them.

This module is the one owner of tool-argument validation. :class:`ArgumentSchema` checks a tool's
``parameters`` once (a JSON Schema object; only local ``$ref``) and validates each call against
it; :class:`InvalidArguments` carries what is wrong, one problem per field, and renders the one
message a model (or a person) reads::

    Invalid arguments for tool 'read': arguments.path: is required; arguments.bogus: is not
    allowed (the allowed properties are: limit, offset, path). Fix them and call 'read' again.

Every problem starts with the field's path (``arguments.edits[0].newText``): a missing required
property and an unexpected one are reported at their own paths, everything else with
``jsonschema``'s message. :class:`~pico3.tools.ToolDeclaration` builds an :class:`ArgumentSchema`
when it is declared, and the coding agent's built-in tools build one per tool, so a call rejected
by either reads the same.
"""

from __future__ import annotations

import json
import re
import threading
from typing import TYPE_CHECKING, Any, cast

from chord.json import JsonError, copy_json

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = ["ArgumentSchema", "InvalidArguments"]

_checked: set[str] = set()
"""The schemas (canonical JSON) that passed :class:`ArgumentSchema`'s checks in this process:
the checks depend on the schema alone, and a tool set declares the same schemas more than once
(the app's built-in tools are checked as specs and again as declarations; ~1 ms each in
``check_schema`` at start-up). Only passes are kept: a bad schema is refused, with its tool's
name, every time."""
_checked_lock = threading.Lock()


_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_TEXTS = frozenset({"description", "title", "$comment", "format"})
_COUNTS = frozenset(
    {"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"}
)
_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_FLAGS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})


def _plainly_valid(node: Any, depth: int = 0) -> bool:
    """Whether ``node`` is a schema the 2020-12 meta-schema accepts, judged by a walk that knows
    only the plain keywords tools use (``type``, ``properties``, ``required``, ``items``,
    ``additionalProperties``, ``enum``, texts, bounds, counts, flags): ``False`` when it meets
    anything else (``$schema``, ``$ref``, ``pattern``, ``anyOf``...), and ``check_schema`` then
    decides. A ``True`` is what ``check_schema`` would say: each value is checked as the
    meta-schema checks it. It spares the start-up ``jsonschema`` and its meta-schema walk (~1 ms
    a tool; the import ~40 ms): a plain schema's first validation imports it."""
    if isinstance(node, bool):
        return True
    if not isinstance(node, dict) or depth > 32:
        return False
    for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]
        if key == "type":
            names: Any = [value] if isinstance(value, str) else value
            ok = (
                isinstance(names, list)
                and bool(names)
                and all(isinstance(n, str) and n in _SIMPLE_TYPES for n in names)  # pyright: ignore[reportUnknownVariableType]
                and len(set(names)) == len(names)  # pyright: ignore[reportUnknownArgumentType]
            )
        elif key == "properties":
            ok = isinstance(value, dict) and all(
                _plainly_valid(sub, depth + 1)
                for sub in value.values()  # pyright: ignore[reportUnknownVariableType]
            )
        elif key in ("items", "additionalProperties"):
            ok = _plainly_valid(value, depth + 1)
        elif key == "required":
            ok = (
                isinstance(value, list)
                and all(isinstance(n, str) for n in value)  # pyright: ignore[reportUnknownVariableType]
                and len(set(value)) == len(value)  # pyright: ignore[reportUnknownArgumentType]
            )
        elif key == "enum":
            ok = isinstance(value, list)
        elif key in _TEXTS:
            ok = isinstance(value, str)
        elif key in _COUNTS:
            ok = type(value) is int and value >= 0
        elif key in _BOUNDS:
            ok = type(value) in (int, float)
        elif key in _FLAGS:
            ok = isinstance(value, bool)
        else:
            ok = key in ("default", "const")  # any value
        if not ok:
            return False
    return True


def _is_type(value: Any, name: Any) -> bool:
    """``value`` is of JSON type ``name`` as ``jsonschema``'s 2020-12 type checker says (a bool
    is no number; a float with an integral value is an integer)."""
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "number":
        return isinstance(value, int | float)
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return False


def _plainly_conforms(node: Any, value: Any, depth: int = 0) -> bool:
    """Whether ``value`` plainly meets schema ``node``: ``True`` only when every keyword is a
    plain one (as :func:`_plainly_valid` knows them) and ``value`` meets it, as ``jsonschema``
    would judge; ``False`` when it does not, or when the walk cannot tell (``const``, ``enum``
    of anything but strings, ``uniqueItems``, any other keyword), and ``jsonschema`` then
    decides and names the problems. It spares a valid call's first validation the
    ``jsonschema`` import (~0.1 s: attrs, referencing, rpds) in a short ``-p`` run."""
    if node is True:
        return True
    if not isinstance(node, dict) or depth > 32:
        return False
    for key, rule in node.items():  # pyright: ignore[reportUnknownVariableType]
        if key == "type":
            names: Any = [rule] if isinstance(rule, str) else rule
            if not isinstance(names, list) or not any(_is_type(value, n) for n in names):  # pyright: ignore[reportUnknownVariableType]
                return False
        elif key == "properties":
            if not isinstance(rule, dict):
                return False
            if isinstance(value, dict):
                for name, sub in rule.items():  # pyright: ignore[reportUnknownVariableType]
                    if name in value and not _plainly_conforms(sub, value[name], depth + 1):
                        return False
        elif key == "required":
            if not isinstance(rule, list):
                return False
            if isinstance(value, dict) and any(name not in value for name in rule):  # pyright: ignore[reportUnknownVariableType]
                return False
        elif key == "items":
            if isinstance(value, list) and not all(
                _plainly_conforms(rule, item, depth + 1) for item in value
            ):
                return False
        elif key == "additionalProperties":
            known: Any = node.get("properties", {})  # pyright: ignore[reportUnknownMemberType]
            if not isinstance(known, dict):
                return False
            if isinstance(value, dict) and not all(
                _plainly_conforms(rule, item, depth + 1)
                for name, item in value.items()  # pyright: ignore[reportUnknownVariableType]
                if name not in known
            ):
                return False
        elif key == "enum":
            if not (
                isinstance(rule, list)
                and isinstance(value, str)
                and any(isinstance(option, str) and option == value for option in rule)  # pyright: ignore[reportUnknownVariableType]
            ):
                return False
        elif key in _COUNTS:
            if type(rule) is not int:
                return False
            if not _within_count(key, rule, value):
                return False
        elif key in _BOUNDS:
            if type(rule) not in (int, float):
                return False
            if _is_type(value, "number") and not _within_bound(key, rule, cast("float", value)):
                return False
        elif key in _TEXTS or key in ("deprecated", "readOnly", "writeOnly", "default"):
            continue  # annotations (``format`` too: no format checker is used)
        else:
            return False
    return True


def _within_count(key: str, limit: int, value: Any) -> bool:
    """Whether ``value`` meets a length or count keyword (values of other types do)."""
    if key in ("minLength", "maxLength"):
        size = len(value) if isinstance(value, str) else None
    elif key in ("minItems", "maxItems"):
        size = len(value) if isinstance(value, list) else None
    else:
        size = len(value) if isinstance(value, dict) else None  # pyright: ignore[reportUnknownArgumentType]
    if size is None:
        return True
    return size >= limit if key.startswith("min") else size <= limit


def _within_bound(key: str, limit: float, value: float) -> bool:
    if key == "minimum":
        return value >= limit
    if key == "maximum":
        return value <= limit
    if key == "exclusiveMinimum":
        return value > limit
    return value < limit


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
    """Tool arguments do not satisfy the tool's schema. ``problems`` name each field.

    ``str()`` is the message of every rejected call: the tool, each problem (``path: reason``),
    and what to do about it.
    """

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = problems
        super().__init__(
            f"Invalid arguments for tool {tool!r}: {'; '.join(problems)}. "
            f"Fix them and call {tool!r} again."
        )


class ArgumentSchema:
    """One tool's ``parameters``, checked once, and the validator of every call against them.

    Building one refuses a schema that is not JSON, not ``"type": "object"``, not valid for its
    draft (2020-12 unless ``$schema`` says otherwise), or with a ``$ref`` validation could not
    follow; the :class:`ValueError` names the tool and the place. :attr:`parameters` is a private
    deep copy.
    """

    __slots__ = ("_validator", "parameters", "tool")

    def __init__(self, tool: str, parameters: Any) -> None:
        try:
            schema = copy_json(parameters, ("parameters",))
        except JsonError as exc:
            raise ValueError(f"tool {tool!r}: {exc}") from None
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise ValueError(
                f'tool {tool!r}: parameters must be a JSON Schema with "type": "object"'
            )
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        if key not in _checked:
            if not _plainly_valid(schema):
                _check_schema(tool, schema)
            _check_references(tool, schema)
            with _checked_lock:
                _checked.add(key)
        self.tool = tool
        self.parameters: dict[str, Any] = schema
        self._validator: Validator | None = None  # made at the first call's validation

    def problems(self, arguments: Any) -> list[str]:
        """Every problem of ``arguments`` (``path: reason``, sorted by path); ``[]`` when valid."""
        if _plainly_conforms(self.parameters, arguments):
            return []
        validator = self._validator
        if validator is None:
            validator = self._validator = _validator_class(self.parameters)(self.parameters)
        try:
            errors = sorted(
                validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.path]
            )
        except RecursionError:
            return ["arguments: nested too deeply"]
        problems: list[str] = []
        for error in errors:
            for line in _lines(error):
                if line not in problems:
                    problems.append(line)
        return problems

    def validate(self, arguments: Any) -> None:
        """Raise :class:`InvalidArguments` naming every bad field of ``arguments``."""
        problems = self.problems(arguments)
        if problems:
            raise InvalidArguments(self.tool, problems)


def _validator_class(schema: dict[str, Any]) -> Any:
    """The ``jsonschema`` validator of ``schema``'s draft (2020-12 unless ``$schema`` says
    otherwise); ``jsonschema`` is imported here, at its first use."""
    import jsonschema
    from jsonschema.validators import validator_for

    return validator_for(schema, default=jsonschema.Draft202012Validator)


def _check_schema(tool: str, schema: dict[str, Any]) -> None:
    """Refuse ``schema`` unless its draft's meta-schema accepts it (``check_schema``)."""
    from jsonschema.exceptions import SchemaError

    try:
        _validator_class(schema).check_schema(schema)
    except SchemaError as exc:
        where = _path("parameters", exc.path)
        raise ValueError(f"tool {tool!r}: invalid JSON Schema at {where}: {exc.message}") from None


def _lines(error: ValidationError) -> list[str]:
    """The problems one ``jsonschema`` error stands for, each at the path of its field."""
    instance: Any = error.instance
    schema: Any = error.schema
    if error.validator == "required" and isinstance(instance, dict):
        required: Any = error.validator_value if isinstance(error.validator_value, list) else []
        return [
            f"{_path('arguments', [*error.path, name])}: is required"
            for name in required  # pyright: ignore[reportUnknownVariableType]
            if name not in instance
        ]
    if (
        error.validator == "additionalProperties"
        and error.validator_value is False
        and isinstance(instance, dict)
        and isinstance(schema, dict)
    ):
        allowed: list[str] = sorted(str(name) for name in schema.get("properties") or {})  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        patterns: list[str] = [str(p) for p in schema.get("patternProperties") or {}]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        hint = f" (the allowed properties are: {', '.join(allowed)})" if allowed else ""
        extra = [
            str(key)  # pyright: ignore[reportUnknownArgumentType]
            for key in instance  # pyright: ignore[reportUnknownVariableType]
            if key not in allowed and not any(_matches(p, str(key)) for p in patterns)  # pyright: ignore[reportUnknownArgumentType]
        ]
        if extra:
            return [
                f"{_path('arguments', [*error.path, key])}: is not allowed{hint}" for key in extra
            ]
    return [f"{_path('arguments', error.path)}: {error.message}"]


def _path(root: str, parts: Any) -> str:
    out = root
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _matches(pattern: str, key: str) -> bool:
    try:
        return re.search(pattern, key) is not None
    except re.error:
        return False
