"""Headless runs (``-p``, issue 40) and ``coding-agent acp`` (before ``session/new`` answers)
wait for the MCP servers before the first request.

:class:`McpWatch` is a facet that follows the MCP feature's ``mcp.servers`` state (named by id:
the app imports no feature package) and :meth:`McpWatch.settled` waits until every configured
server was ready or failed once, at most the state's ``startupTimeout`` (the ``startup_timeout``
of ``mcp.json``, default 30 s). A ready server's tools are registered and selected before its
state says ``ready``, so the first request offers them. A server that failed or is late gets one
``coding-agent: warning:`` line (why it failed and the lines of its stderr that say so, the
``stderrGist`` of its state; or what is wrong so far with a late one); the run goes on without
its tools.
"""

from __future__ import annotations

from typing import Any, TextIO, cast

import anyio

from chord import Context, Delivery, Facet, FacetEnvironment, define_facet, define_service, inert

__all__ = ["MCP_SERVERS", "MCP_STARTUP_TIMEOUT", "McpWatch"]

MCP_SERVERS = define_service("mcp.servers")
"""The MCP feature's servers, by id (its replicated ``state``: ``servers``, ``startupTimeout``)."""
MCP_STARTUP_TIMEOUT = 30.0
"""How long to wait for the MCP feature's configuration when its state does not say."""


class McpWatch:
    """The MCP feature's state as a facet follows it: ``value`` and a ``changed`` event."""

    def __init__(self) -> None:
        self.value: Any = None
        self.changed = anyio.Event()

    def facet(self) -> Facet:
        def setup(env: FacetEnvironment) -> None:
            servers = env.use(MCP_SERVERS)

            def deliver(value: Any, _ctx: Context, _delivery: Delivery) -> None:
                self.value = value
                self.changed.set()

            async def follow() -> None:
                env.own(servers.state.subscribe(deliver))

            env.on_activate(follow)

        return define_facet("coding-agent/headless-mcp", setup)

    async def settled(self, err: TextIO) -> None:
        """Wait until every configured server was ready or failed once, at most the state's
        ``startupTimeout``; one warning line on ``err`` per server that failed or is late."""
        settled: dict[str, dict[str, Any]] = {}
        limit = MCP_STARTUP_TIMEOUT
        waited = anyio.current_time()
        servers: list[dict[str, Any]] = []
        while True:
            value = self.value
            if isinstance(value, dict) and "startupTimeout" in value:
                limit = float(cast(dict[str, Any], value)["startupTimeout"])
                servers = list(cast(dict[str, Any], value).get("servers") or [])
                for server in servers:
                    # stopped: a lingering worker's server asleep; its tools are offered
                    if server.get("state") in ("ready", "failed", "stopped"):
                        settled.setdefault(str(server.get("name")), server)
                if all(str(s.get("name")) in settled for s in servers):
                    break
            left = limit - (anyio.current_time() - waited)
            if left <= 0:
                break
            self.changed = anyio.Event()
            with anyio.move_on_after(left):
                await self.changed.wait()
        for server in servers:
            name = str(server.get("name"))
            found = settled.get(name)
            if found is not None and found.get("state") in ("ready", "stopped"):
                continue
            if found is None:
                why = f"was not ready after {limit:g} s (startup_timeout in mcp.json)"
                if server.get("error"):  # what is wrong so far (it writes garbage on stdout)
                    why += f": {server['error']}"
            else:
                why = f"failed to start: {found.get('error') or 'no reason given'}"
                # the lines that say what went wrong (the feature picks them), else the last
                stderr = str(found.get("stderr") or "").strip().splitlines()
                gist = str(found.get("stderrGist") or (stderr[-1][:200] if stderr else ""))
                if gist:
                    why += f" (stderr: {gist})"
            why = " ".join(why.split())  # one line per server, whatever the server wrote
            print(
                inert(
                    f"coding-agent: warning: MCP server {name} {why}; going on without its tools"
                ),
                file=err,
            )
        err.flush()
