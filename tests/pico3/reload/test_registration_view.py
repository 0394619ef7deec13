"""A namespace registered (or unregistered) while conversations are watched reaches their views
with the next envelope, whatever that commit touches (docs/design/reload.md#registrations: reload re-registers)."""

from __future__ import annotations

from typing import Any

import pytest

from chord.context import BACKGROUND
from pico3.harness import Harness
from pico3.kernel import Envelope

pytestmark = pytest.mark.anyio
ctx = BACKGROUND


async def test_namespace_registration_refreshes_watched_views_in_the_next_envelope(
    harness: Harness,
) -> None:
    root = await harness.root(ctx)
    other = await root.fork("start", ctx)
    watch = await root.watch(ctx)
    envelopes: list[Envelope] = []
    watch.start(envelopes.append)
    assert watch.view["plugins"] == {}
    token = harness.namespace("plan", {"rewindable": {"enabled": False}}, view=lambda s: s)
    await other.write("note", ctx, data={})  # a commit that touches another conversation only
    ops: list[Any] = [op for env in envelopes for op in env.ops]
    assert ("s", ("plugins", "plan"), {"enabled": False}) in ops
    envelopes.clear()
    token.unregister()
    await other.write("note", ctx, data={})
    assert [op for env in envelopes for op in env.ops] == [("d", ("plugins", "plan"))]
