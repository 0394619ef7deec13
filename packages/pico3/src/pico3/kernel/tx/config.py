"""``tx.config(cid)``: the :class:`ConfigFacade` that reads resolved config and routes validated
writes to the document each key lives in (one ``config.changed`` event per commit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pico3.kernel.proxy import TrackedDict
from pico3.kernel.tx.base import TxBase
from pico3.session_data.config import ABSENT, ConfigKey, ConfigRejected, check_value, resolve_config
from pico3.storage.records import DocRef

__all__ = ["ConfigFacade"]


class ConfigFacade:
    """``tx.config(cid)``: reads resolve defaults; writes are validated and routed per key."""

    __slots__ = ("_cid", "_tx")

    def __init__(self, tx: TxBase, conversation_id: int) -> None:
        self._tx = tx
        self._cid = conversation_id

    def _key(self, name: str) -> ConfigKey:
        key = self._tx._kernel.config_keys.get(name)  # pyright: ignore[reportPrivateUsage]
        if key is None:
            raise ConfigRejected(f"config.{name}: unknown key")
        return key

    def _root(self, key: ConfigKey) -> TrackedDict:
        ref = DocRef.rewindable(self._cid) if key.doc == "rewindable" else DocRef.sticky(self._cid)
        return self._root_of(ref)

    def _root_of(self, ref: DocRef) -> TrackedDict:
        return self._tx._doc_root(ref)  # pyright: ignore[reportPrivateUsage]

    def _mark(self, keys: list[str]) -> None:
        """Record ``keys`` for this commit's one ``config.changed`` event."""
        batch = self._tx._batch  # pyright: ignore[reportPrivateUsage]
        changed = batch.config_changed.setdefault(self._cid, [])
        for key in keys:
            if key not in changed:
                changed.append(key)

    def get(self, name: str) -> Any:
        """The resolved value (stored by presence, else the default; unset ``model``: None)."""
        self._tx._check()  # pyright: ignore[reportPrivateUsage]
        key = self._key(name)
        root = self._root(key)
        if name in root:
            value = root[name]
            return value.to_plain() if hasattr(value, "to_plain") else value
        return None if key.default is ABSENT else key.default_copy()

    def resolved(self) -> dict[str, Any]:
        """Every declared key, resolved."""
        self._tx._check()  # pyright: ignore[reportPrivateUsage]
        kernel = self._tx._kernel  # pyright: ignore[reportPrivateUsage]
        rewindable = self._root_of(DocRef.rewindable(self._cid)).to_plain()
        sticky = self._root_of(DocRef.sticky(self._cid)).to_plain()
        return resolve_config(kernel.config_keys, rewindable, sticky)

    def set(self, patch: dict[str, Any]) -> None:
        """Validate every key first, then store them all (nothing is half-applied)."""
        tx = self._tx
        tx._check()  # pyright: ignore[reportPrivateUsage]
        tx._no_task_config()  # pyright: ignore[reportPrivateUsage]
        if not isinstance(patch, dict) or not patch:
            raise ConfigRejected("config.set needs a non-empty mapping of key -> value")
        staged: list[tuple[ConfigKey, Any]] = []
        for name, value in patch.items():
            key = self._key(name)
            if value is ABSENT:
                raise ConfigRejected(f"config.{name}: cannot set an absent value; use reset")
            staged.append((key, check_value(key, value)))
        for key, value in staged:
            self._root(key)[key.name] = value
        self._mark([key.name for key, _ in staged])

    def reset(self, names: Sequence[str]) -> None:
        """Delete stored overrides; reads then resolve the declared default."""
        tx = self._tx
        tx._check()  # pyright: ignore[reportPrivateUsage]
        tx._no_task_config()  # pyright: ignore[reportPrivateUsage]
        if isinstance(names, str):
            raise ConfigRejected("config.reset takes a list of keys")
        keys = [self._key(name) for name in names]
        changed: list[str] = []
        for key in keys:
            root = self._root(key)
            if key.name in root:
                del root[key.name]
                changed.append(key.name)
        if changed:
            self._mark(changed)
