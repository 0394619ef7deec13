"""``host.add`` and ``host.retire``: facets of a package installed or removed while the host runs."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from chord.context import BACKGROUND, Context
from chord.facets import FacetEnvironment, create_facet_host, define_facet
from chord.remote.loopback import LoopbackServiceSource
from chord.services import define_service

Base = define_service("test.add.base")
Added = define_service("test.add.added")
Dialogs = define_service("test.add.dialogs")
Names = define_service("test.add.names", local=True)

pytestmark = pytest.mark.anyio


class _Value:
    def __init__(self, value: str) -> None:
        self._value = value

    async def read(self, ctx: Context) -> str:
        return self._value


class _Names:
    def __init__(self) -> None:
        self.live: list[str] = []

    def register(self, name: str) -> Any:
        self.live.append(name)
        return lambda: self.live.remove(name)


def _base(names: _Names) -> Any:
    def setup(env: FacetEnvironment) -> None:
        env.provide(Base, _Value("base"))
        env.provide(Names, names)

    return define_facet("base", setup)


def _added(seen: list[str], *, fail: bool = False) -> Any:
    """Uses the running host's services; provides a remotable singleton and a keyed service."""

    def setup(env: FacetEnvironment) -> None:
        base = env.use(Base)
        names = env.use(Names)
        env.provide(Added, _Value("added"))
        dialogs = env.provide_many(Dialogs)

        async def activate() -> None:
            seen.append(await base.read(BACKGROUND))
            env.own(names.register("added"))
            env.own(dialogs.spawn("one", _Value("dialog")))
            if fail:
                raise RuntimeError("activation failed")

        env.on_activate(activate)

    return define_facet("added", setup)


def _consumer(seen: list[str]) -> Any:
    def setup(env: FacetEnvironment) -> None:
        added = env.use(Added)

        async def on_dialog(dialog: Any, ctx: Context) -> None:
            seen.append(f"dialog {await dialog.read(ctx)}")

        env.observe(Dialogs, on_dialog)

        async def activate() -> None:
            seen.append(await added.read(BACKGROUND))

        env.on_activate(activate)

    return define_facet("consumer", setup)


async def test_added_facets_use_and_offer_services_and_retire_cleanly() -> None:
    names, seen = _Names(), []
    async with create_facet_host([_base(names)]) as host:
        await host.add([_consumer(seen), _added(seen)])  # provider first, whatever the order
        assert host.facet_ids == ["base", "added", "consumer"]
        assert seen[:2] == ["base", "added"]
        with anyio.fail_after(5):
            while "dialog dialog" not in seen:
                await anyio.lowlevel.checkpoint()
        assert names.live == ["added"]
        ids = {entry.service_id for entry in host.services.catalogue}
        assert {"test.add.added", "test.add.dialogs"} <= ids
        with pytest.raises(RuntimeError, match=r"facet consumer uses its service test\.add\.added"):
            await host.retire(["added"])
        await host.retire(["consumer", "added"])
        assert host.facet_ids == ["base"]
        assert names.live == []
        assert "test.add.added" not in {e.service_id for e in host.services.catalogue}
        await host.add([_added(seen)])  # the same package again, after it was removed
        assert names.live == ["added"]
    assert names.live == []


async def test_a_failed_add_leaves_the_running_facets_untouched() -> None:
    names, seen = _Names(), []
    async with create_facet_host([_base(names)]) as host:
        with pytest.raises(RuntimeError, match="activation failed"):
            await host.add([_added(seen, fail=True)])
        assert host.facet_ids == ["base"] and host.phase == "active"
        assert names.live == []  # its registration was released
        assert [e.service_id for e in host.services.catalogue] == ["test.add.base"]
        with pytest.raises(RuntimeError, match="already serves; restart required"):
            await host.add([define_facet("dup", lambda env: env.provide(Base, _Value("x")))])
        with pytest.raises(RuntimeError, match="but no facet provides it"):
            await host.add([define_facet("lonely", lambda env: env.use(Added))])
        await host.add([_added(seen)])
        assert names.live == ["added"]


async def test_an_added_facet_reaches_a_service_another_host_started_offering_later() -> None:
    """Like the TUI: the worker adds a package's service, then the TUI adds its presentation."""
    names, seen = _Names(), []
    async with create_facet_host([_base(names)]) as worker, anyio.create_task_group() as group:
        source = LoopbackServiceSource(worker.services, task_group=group)
        async with create_facet_host([], service_sources=[source]) as tui:
            await worker.add([_added(seen)])
            await tui.add([_consumer(seen)])
            with anyio.fail_after(5):
                while "dialog dialog" not in seen:
                    await anyio.lowlevel.checkpoint()
            assert "added" in seen  # the consumer's activation read the worker's service
            await tui.retire(["consumer"])
            await worker.retire(["added"])
        group.cancel_scope.cancel()
