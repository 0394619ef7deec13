"""Namespaces: an extension's durable state slices, and the token that authorises them.

``h.namespace("plan", {"rewindable": {...}, "sticky": {...}, "session": {...}}, view=...)``
registers a namespace and returns a :class:`Namespace` *token*. The string is what persists:
values live at ``<document>.plugins[ns][key]``. The token is only current authority: after
``unregister()`` (idempotent) or a re-registration of the same string, the old token is stale
and :func:`NamespaceRegistry.require` rejects it with :class:`StaleDefinition`. A new token for
the same string sees the stored values (and memos), and its new keys are seeded from defaults
the first time a commit touches them; removed keys stay as inert stored data.

Every key lives in exactly one document. :class:`SliceView` (what ``tx.plugins(ns)`` returns)
routes each declared key to its document and refuses undeclared ones, so a namespace can never
write outside its own slice.

The view never shows raw state. :func:`merged_slice` resolves a slice (stored value by key
presence, else the default, with no seeding) for the namespace's ``view`` projection, the only
way a namespace appears in the conversation view.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, Protocol

from chord.json import JsonError, copy_json
from pico3.kernel.errors import StaleDefinition
from pico3.kernel.proxy import TrackedDict

__all__ = [
    "NAME_PATTERN",
    "Namespace",
    "NamespaceRegistry",
    "SliceDoc",
    "SliceSource",
    "SliceView",
    "check_name",
    "merged_slice",
]

SliceDoc = Literal["rewindable", "sticky", "session"]
_DOCS: tuple[SliceDoc, ...] = ("rewindable", "sticky", "session")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]*$", re.IGNORECASE)


def check_name(name: object, what: str) -> str:
    """Validate a namespace or event name (``^[a-z][a-z0-9_.-]*$``, not ``pi.``-prefixed)."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValueError(f"{what} {name!r} must match {NAME_PATTERN.pattern} (case-insensitive)")
    return name


class Namespace:
    """A registration token. Compare by identity; only the registered token is authority."""

    __slots__ = ("_registry", "defaults", "keys", "name", "view")

    def __init__(
        self,
        registry: NamespaceRegistry,
        name: str,
        defaults: dict[SliceDoc, dict[str, Any]],
        view: Callable[[dict[str, Any]], Any] | None,
    ) -> None:
        self._registry = registry
        self.name = name
        self.defaults = defaults
        self.view = view
        self.keys: dict[str, SliceDoc] = {
            key: doc for doc in _DOCS for key in defaults.get(doc, {})
        }

    @property
    def alive(self) -> bool:
        """True while this token is the registered one for its name."""
        return self._registry.current(self.name) is self

    def unregister(self) -> None:
        """Retire this token (idempotent; never touches a newer registration). State stays."""
        self._registry.remove(self)

    def __repr__(self) -> str:
        state = "live" if self.alive else "stale"
        return f"<Namespace {self.name!r} {state}>"


class NamespaceRegistry:
    """The live namespace tokens of one session, by name."""

    __slots__ = ("_live", "on_change")

    def __init__(self) -> None:
        self._live: dict[str, Namespace] = {}
        self.on_change: Callable[[], None] | None = None  # the view registry's refresh hook

    def register(
        self,
        name: str,
        defaults: Mapping[str, Mapping[str, Any]] | None,
        view: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Namespace:
        """Validate and register ``name``; reject duplicates among live registrations."""
        check_name(name, "namespace")
        if name.lower().startswith("pi."):
            raise ValueError(f"namespace {name!r} is reserved: the 'pi.' prefix belongs to core")
        if name in self._live:
            raise ValueError(f"namespace {name!r} is already registered (unregister it first)")
        if view is not None and not callable(view):
            raise TypeError(f"namespace {name!r}: view must be a callable projection")
        checked: dict[SliceDoc, dict[str, Any]] = {}
        owner: dict[str, str] = {}
        for doc, values in (defaults or {}).items():
            if doc not in _DOCS:
                raise ValueError(
                    f"namespace {name!r}: unknown document {doc!r} (use {', '.join(_DOCS)})"
                )
            if not isinstance(values, Mapping):
                raise TypeError(f"namespace {name!r}: defaults[{doc!r}] must be a mapping")
            for key in values:
                if not isinstance(key, str) or not key:
                    raise ValueError(f"namespace {name!r}: key {key!r} must be a non-empty str")
                if key in owner:
                    raise ValueError(
                        f"namespace {name!r}: key {key!r} is declared in both {owner[key]!r} "
                        f"and {doc!r}; each key lives in exactly one document"
                    )
                owner[key] = doc
            try:
                checked[doc] = copy_json(dict(values), ("defaults", doc))  # type: ignore[index]
            except JsonError as exc:
                raise ValueError(f"namespace {name!r}: {exc}") from None
        token = Namespace(self, name, checked, view)
        self._live[name] = token
        self._changed()
        return token

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def current(self, name: str) -> Namespace | None:
        """The live token for ``name``, if any."""
        return self._live.get(name)

    def require(self, token: object) -> Namespace:
        """Return ``token`` if it is the registered one, else raise :class:`StaleDefinition`."""
        if not isinstance(token, Namespace):
            raise TypeError(f"expected a Namespace token, got {type(token).__name__}")
        if self._live.get(token.name) is not token:
            raise StaleDefinition(
                f"namespace token {token.name!r} is stale (unregistered or replaced)"
            )
        return token

    def remove(self, token: Namespace) -> None:
        """Drop ``token`` if it is still the registered one."""
        if self._live.get(token.name) is token:
            del self._live[token.name]
            self._changed()

    def live(self) -> list[Namespace]:
        """Live tokens in registration order."""
        return list(self._live.values())


def merged_slice(
    token: Namespace, docs: Mapping[SliceDoc, Mapping[str, Any] | None]
) -> dict[str, Any]:
    """The resolved slice: each declared key's stored value (by presence), else its default."""
    out: dict[str, Any] = {}
    for key, doc in token.keys.items():
        stored = _stored_slice(docs.get(doc), token.name)
        if stored is not None and key in stored:
            out[key] = copy_json(stored[key])
        else:
            out[key] = copy_json(token.defaults[doc][key])
    return out


def _stored_slice(doc: Mapping[str, Any] | None, name: str) -> Mapping[str, Any] | None:
    if doc is None:
        return None
    plugins = doc.get("plugins")
    if type(plugins) is not dict:
        return None
    found = plugins.get(name)
    return found if type(found) is dict else None


class SliceSource(Protocol):
    """What a :class:`SliceView` needs of its transaction (``pico3.kernel.tx``'s documents
    concern implements it); a protocol here, so this module imports nothing of the
    transaction."""

    def require_namespace(self, token: Namespace) -> Namespace: ...

    def _slice_root(self, doc: SliceDoc) -> TrackedDict: ...


class SliceView:
    """The fixed-key, merged view of one namespace inside one transaction.

    Item access only: ``tx.plugins(ns)["planMode"]["enabled"] = True``. Each key routes to its
    document; a missing stored key is seeded from its default on first access (a ``None``
    default is seeded as a real ``None``). Undeclared keys raise :class:`KeyError`.
    """

    __slots__ = ("_tx", "token")

    def __init__(self, tx: SliceSource, token: Namespace) -> None:
        self._tx = tx
        self.token = token

    def _slice(self, key: str) -> TrackedDict:
        if key not in self.token.keys:
            raise KeyError(
                f"namespace {self.token.name!r} declares no key {key!r} "
                f"(declared: {sorted(self.token.keys)})"
            )
        self._tx.require_namespace(self.token)
        root = self._tx._slice_root(self.token.keys[key])
        if "plugins" not in root:
            root["plugins"] = {}
        plugins = root["plugins"]
        if self.token.name not in plugins:
            plugins[self.token.name] = {}
        return plugins[self.token.name]

    def __getitem__(self, key: str) -> Any:
        stored = self._slice(key)
        if key not in stored:
            stored[key] = self.token.defaults[self.token.keys[key]][key]
        return stored[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._slice(key)[key] = value

    def __delitem__(self, key: str) -> None:
        raise TypeError(
            f"namespace {self.token.name!r}: keys are fixed; assign a value instead of deleting"
        )

    def __contains__(self, key: object) -> bool:
        return key in self.token.keys

    def __iter__(self) -> Iterator[str]:
        return iter(self.token.keys)

    def __len__(self) -> int:
        return len(self.token.keys)

    def keys(self) -> list[str]:
        """The declared keys."""
        return list(self.token.keys)

    def to_plain(self) -> dict[str, Any]:
        """A plain copy of every key (seeding missing ones, like item access)."""
        return {key: copy_json(_unwrap(self[key])) for key in self.token.keys}


def _unwrap(value: Any) -> Any:
    return (
        value.to_plain() if isinstance(value, TrackedDict) or hasattr(value, "to_plain") else value
    )
