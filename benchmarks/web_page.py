"""Benchmark: the web page's time to a rendered 2,000-entry transcript (issue 43, target <= 1 s).

A session of ``--entries`` transcript entries is made first, in the worker's own session host
(:func:`coding_agent.worker.main.open_session_host`) on the faux model: each turn is a prompt, a
``read`` tool call (a tool card), its result and a short answer, so the transcript is made of
the entries a real one has. Then the real binary serves it (``coding-agent web SESSION``) and
Debian's headless Chromium (``/usr/bin/chromium``, driven by Playwright) opens the page:

* **page**: from the navigation's start to the moment the page has built the transcript's DOM
  and laid it out (the page stamps ``performance.now()`` after the baseline's render, which
  reads the transcript's ``scrollHeight``, a forced layout): the page's files, the WebSocket,
  the token, the server attaching to the worker, the view crossing the WebSocket, ``JSON.parse``
  and the DOM. The first load (**cold**) also waits for the worker to start; the next
  ``--runs`` loads (**warm**, median) find it running, as a second browser tab or a reload does;
  and the same with a TUI (a wire client) attached meanwhile, so the worker keeps the view
  watched (with no client, its first watch builds it again from storage);
* **baseline** (same run, same view): the TUI's decode of that view, pico3's ``view_from_json``
  (every entry decoded fresh, as on an attach), median of ``--runs``; and the wire's own part:
  the same view's JSON encoded with msgspec, as the bridge sends it.

Run: ``uv run python benchmarks/web_page.py [--entries N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec

os.environ["CODING_AGENT_WARM_START"] = "0"  # processes start cold unless a line says warm

BINARY = Path(sys.executable).with_name("coding-agent")
CHROMIUM = "/usr/bin/chromium"
ENTRIES_PER_TURN = 4  # the prompt, the tool call, its result, the answer


def _script(turns: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for turn in range(turns):
        steps.append({"toolCalls": [{"name": "read", "arguments": {"path": "README.md"}}]})
        steps.append({"text": f"Answer {turn}: the README says what the project is for."})
    return steps


async def _make_session(folder: Path, env: dict[str, str], entries: int) -> tuple[str, int]:
    """A session of at least ``entries`` transcript entries; returns its id and its count."""
    os.environ.update(env)  # the session host reads XDG_* from the environment
    from chord.context import BACKGROUND
    from coding_agent.session_files.folders import create_session
    from coding_agent.worker.main import WorkerConfig, open_session_host

    project = folder / "project"
    project.mkdir()
    (project / "README.md").write_text("# A project\n\nIt does one thing well.\n" * 20)
    turns = -(-entries // ENTRIES_PER_TURN)
    script = folder / "faux.json"
    script.write_text(json.dumps(_script(turns)))
    session = create_session(project, env=env)
    config = WorkerConfig(session, faux_script=script, fsync=False, installed_features=True)
    async with open_session_host(config) as runtime:
        root = (await runtime.harness.harness.root(BACKGROUND)).id
        handle = await runtime.harness.conversation(root, BACKGROUND)
        assert handle is not None
        for turn in range(turns):
            sent = await handle.send(f"What does the README say? ({turn})", BACKGROUND)
            await sent.wait(BACKGROUND)
            await handle.wait_for_idle(BACKGROUND)
    return session.id, turns * ENTRIES_PER_TURN


async def _view(
    socket_path: Path, found: dict[str, Any], got: anyio.Event, release: anyio.Event
) -> None:
    """The root conversation's view, as a wire client (the TUI) replicates it, into ``found``
    (``got`` is set then); the client stays attached (the view stays watched) until
    ``release``."""
    from chord import (
        Context,
        FacetEnvironment,
        cancel_scope,
        connect_service_source,
        connect_unix,
        create_facet_host,
        define_facet,
    )
    from pico3 import ConversationService

    def setup(env: FacetEnvironment) -> None:
        async def observe(instance: Any, ctx: Context) -> None:
            def changed(value: Any, *_: Any) -> None:
                if isinstance(value, dict) and "parent" not in value.get("conversation", {}):
                    found["view"] = value
                    got.set()

            stop = instance.view.subscribe(changed)
            try:
                with cancel_scope(ctx):
                    await anyio.sleep_forever()
            finally:
                stop()

        env.observe(ConversationService, observe)

    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(socket_path), task_group=group)
        async with create_facet_host([define_facet("bench/view", setup)], service_sources=[source]):
            with anyio.fail_after(120):
                await got.wait()
            await release.wait()
        await source.aclose()
        group.cancel_scope.cancel()


async def _page_load(browser: Any, url: str) -> tuple[float, int]:
    """One load: milliseconds from navigation start to the rendered transcript, and its entries.

    The first view the page receives is the whole transcript (one baseline), so the page's
    first ``data-rendered-at`` stamp is the moment that transcript was laid out."""
    page = await browser.new_page()
    try:
        await page.goto(url)
        await page.wait_for_selector("body[data-rendered-at]", state="attached", timeout=120_000)
        stamps = {
            name: float(await page.get_attribute("body", f"data-{name}") or "nan")
            for name in ("welcome-at", "view-at", "rendered-at")
        }
        entries = int(await page.get_attribute("body", "data-entries") or 0)
        print(f"  load: welcome {stamps['welcome-at']:.0f} ms, view arrived "
              f"{stamps['view-at']:.0f} ms, rendered {stamps['rendered-at']:.0f} ms", flush=True)  # fmt: skip
        return stamps["rendered-at"], entries
    finally:
        await page.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--entries", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from anyio.streams.buffered import BufferedByteReceiveStream
    from playwright.async_api import async_playwright

    from coding_agent.session_files.folders import open_session
    from pico3 import view_from_json

    with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
        folder = Path(tmp)
        env = {**os.environ, "XDG_STATE_HOME": str(folder / "state"),
               "XDG_CONFIG_HOME": str(folder / "config"), "CLAUDE_CONFIG_DIR": str(folder / "claude")}  # fmt: skip
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "CODING_AGENT_TOKEN"):
            env.pop(key, None)
        started = time.perf_counter()
        session_id, made = await _make_session(folder, env, args.entries)
        print(f"a session of {made} entries made in {time.perf_counter() - started:.1f} s")
        process = await anyio.open_process(
            [str(BINARY), "web", session_id], cwd=folder / "project", env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            assert process.stdout is not None
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096)
            url = line.decode()
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
                try:
                    cold, entries = await _page_load(browser, url)  # starts the worker
                    print(f"cold load: {cold:.0f} ms, {entries} entries", flush=True)
                    print("warm, no other client:", flush=True)
                    warm = [(await _page_load(browser, url))[0] for _ in range(args.runs)]
                    found: dict[str, Any] = {}
                    watched: list[float] = []
                    got, release = anyio.Event(), anyio.Event()
                    async with anyio.create_task_group() as group:
                        socket_path = open_session(session_id, env=env).socket_path
                        group.start_soon(_view, socket_path, found, got, release)
                        await got.wait()
                        print("warm, a TUI attached (the view stays watched):", flush=True)
                        watched = [(await _page_load(browser, url))[0] for _ in range(args.runs)]
                        release.set()
                    view = found["view"]
                finally:
                    await browser.close()
        finally:
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(30):
                await process.wait()
    decode: list[float] = []
    encode: list[float] = []
    size = 0
    for _ in range(args.runs):
        start = time.perf_counter()
        view_from_json(view)
        decode.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        size = len(msgspec.json.encode(view))
        encode.append((time.perf_counter() - start) * 1000)
    median = statistics.median(warm)
    print(f"transcript: {entries} entries on the page ({len(view['entries'])} in the view), "
          f"{size / 1e6:.1f} MB of view JSON")  # fmt: skip
    print(f"page, cold (the worker's start included): {cold:8.1f} ms")
    print(f"page, warm (median of {args.runs}):                {median:8.1f} ms   "
          f"target <= 1000 ms: {'met' if median <= 1000 else 'NOT met'}")  # fmt: skip
    print(f"page, warm with a TUI attached (median):  {statistics.median(watched):8.1f} ms")
    print(f"baseline: view_from_json (the TUI's decode):   {statistics.median(decode):8.1f} ms")
    print(f"baseline: msgspec encode of the same view:     {statistics.median(encode):8.1f} ms")


if __name__ == "__main__":
    anyio.run(main)
