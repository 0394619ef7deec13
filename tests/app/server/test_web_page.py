"""The session in a browser (issue 43 deliver 2): the page of ``coding-agent web`` and ``serve
--web`` in real headless Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright; never a
downloaded browser), against real workers of the real binary on the faux model.

Every wait is on the page's state with a deadline (Playwright's ``wait_for_*`` poll the DOM) or
on what the processes print; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from chord import (
    BACKGROUND,
    Context,
    FacetEnvironment,
    cancel_scope,
    connect_service_source,
    connect_unix,
    create_facet_host,
    define_facet,
    define_service,
)
from coding_agent.contracts import SessionTreeService
from coding_agent.session_files.folders import open_session
from tests.app.server.conftest import TOKEN
from tests.app.tui.process.test_tmux import Terminal

pytestmark = pytest.mark.anyio

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT = 120
WAIT_MS = 60_000
"""A deadline for each wait on the page (Playwright's unit): generous, for a loaded machine."""
APPROVALS = define_service("pi.approval-dialog")
TOUCH = [
    {"toolCalls": [{"name": "bash", "arguments": {"command": "touch from-the-page.txt"}}]},
    {"text": "Touched it."},
]
ANSWERS = [{"text": "Hello from the page."}, {"text": "Still here after the restart."}]

if not CHROMIUM.exists():  # pragma: no cover - Debian's chromium is part of the test machine
    pytest.skip(
        "the web page tests need Debian's chromium at /usr/bin/chromium (apt-get install "
        "chromium); Playwright drives it, no browser is downloaded",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-wide: the tests run on one event loop, which the module's one Chromium needs."""
    return "asyncio"


@pytest.fixture(scope="module")
async def chromium() -> AsyncIterator[Any]:
    """One headless Chromium for the module: launching it is a second or two per test on a
    loaded machine, and no test depends on a fresh one (see :class:`Pages`)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            await launched.close()


class Pages:
    """What a test opens pages with: each :meth:`new_page` in a browser context of its own (no
    cookie, storage or cache shared with any other page, as ``Browser.new_page`` gives), all of
    them closed when the test ends, so nothing a test's page did outlives the test."""

    def __init__(self, chromium: Any) -> None:
        self._chromium = chromium
        self._contexts: list[Any] = []

    async def new_page(self) -> Any:
        context = await self._chromium.new_context()
        self._contexts.append(context)
        return await context.new_page()

    async def close(self) -> None:
        for context in self._contexts:
            await context.close()


@pytest.fixture
async def browser(chromium: Any) -> AsyncIterator[Pages]:
    pages = Pages(chromium)
    try:
        yield pages
    finally:
        with anyio.CancelScope(shield=True):
            await pages.close()


def _script(tmp_path: Path, steps: list[dict[str, Any]]) -> Path:
    path = tmp_path / "faux.json"
    path.write_text(json.dumps(steps))
    return path


async def _web(
    env: dict[str, str],
    project: Path,
    script: Path,
    group: anyio.abc.TaskGroup,
    session: str | None = None,
) -> tuple[anyio.abc.Process, str, list[str]]:
    """``coding-agent web [SESSION]`` in ``project``: the process, the URL it printed, its
    stderr lines."""
    chosen = [session] if session is not None else []
    process = await anyio.open_process(
        [sys.executable, "-m", "coding_agent.cli.main", "web", *chosen, "--faux-script", str(script)],
        cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    lines: list[str] = []

    async def follow(stream: Any) -> None:
        async for chunk in stream:
            lines.extend(chunk.decode(errors="replace").splitlines())

    group.start_soon(follow, process.stderr)
    with anyio.fail_after(TIMEOUT):
        url = (await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096)).decode()
    return process, url, lines


async def _stop(process: anyio.abc.Process) -> None:
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        with anyio.fail_after(TIMEOUT):
            await process.wait()


async def _open(browser: Any, url: str) -> Any:
    page = await browser.new_page()
    await page.goto(url)
    await page.wait_for_selector('#status[data-state="live"]', timeout=WAIT_MS)
    return page


async def _prompt(page: Any, text: str) -> None:
    await page.fill("#prompt", text)
    await page.press("#prompt", "Enter")


async def test_a_prompt_sent_from_the_page_is_answered_and_the_token_stays_out_of_sight(
    browser: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    log: list[str] = []
    token = ""
    async with anyio.create_task_group() as group:
        process, url, log = await _web(agent_env, project, _script(tmp_path, ANSWERS), group)
        try:
            assert url.startswith("http://127.0.0.1:") and "#token=" in url
            token = url.split("#token=")[1].split("&")[0]
            page = await _open(browser, url)
            assert token not in page.url, "the token leaves the address bar"
            await _prompt(page, "say hello")
            await page.wait_for_selector(".kind-pi-user >> text=say hello", timeout=WAIT_MS)
            await page.wait_for_selector("text=Hello from the page.", timeout=WAIT_MS)
            assert await page.input_value("#prompt") == ""
            # Another page without the token is refused, and asked for it.
            other = await browser.new_page()
            await other.goto(url.split("#")[0] + "#token=not-the-token")
            await other.wait_for_selector("#login-error >> text=refused the token", timeout=WAIT_MS)
        finally:
            await _stop(process)
        group.cancel_scope.cancel()
    assert any("refused" in line and "reason=unauthorized" in line for line in log), log
    assert not any(token in line for line in log), "the token is never logged"


async def test_the_live_page_hides_the_login_form_and_a_refused_page_hides_the_session(
    browser: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """The stylesheet gives ``#login`` and ``#app`` a grid display, which beat the ``hidden``
    attribute the page toggles: a live session had the token form drawn above it, and a
    refused page the empty session below the form."""
    async with anyio.create_task_group() as group:
        process, url, _log = await _web(agent_env, project, _script(tmp_path, ANSWERS), group)
        try:
            page = await _open(browser, url)
            assert await page.is_visible("#prompt")
            assert not await page.is_visible("#login"), "the token form hides once live"
            other = await browser.new_page()
            await other.goto(url.split("#")[0] + "#token=not-the-token")
            await other.wait_for_selector("#login-error >> text=refused the token", timeout=WAIT_MS)
            assert await other.is_visible("#login")
            assert not await other.is_visible("#app"), "a refused page shows only the form"
        finally:
            await _stop(process)
        group.cancel_scope.cancel()


async def _watch_approvals(socket_path: Path, seen: list[str], changed: anyio.Event) -> None:
    """A second client of the worker (as ``coding-agent attach`` is): records each approval
    dialog it sees open and close, answering nothing."""

    def setup(env: FacetEnvironment) -> None:
        async def on_dialog(dialog: Any, ctx: Context) -> None:
            seen.append(f"open {dialog.request.value['args']['command']}")
            changed.set()
            try:
                with cancel_scope(ctx):
                    await anyio.sleep_forever()
            finally:
                seen.append("closed")
                changed.set()

        env.observe(APPROVALS, on_dialog)

    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(socket_path), task_group=group)
        async with create_facet_host([define_facet("test/watch", setup)], service_sources=[source]):
            await anyio.sleep_forever()


async def test_an_approval_is_answered_from_the_page_of_serve_web_while_another_client_watches(
    browser: Any, servers: Any, agent_env: dict[str, str], project: Path, tmp_path: Path,
    tls_files: dict[str, Path],
) -> None:  # fmt: skip
    script = _script(tmp_path, TOUCH)
    server = await servers(
        agent_env,
        ["--faux-script", str(script), "serve", "--cwd", str(project), "--web",
         "tcp://127.0.0.1:0", "--insecure", "--token-file", str(tls_files["token"])],
        lines=2,
    )  # fmt: skip
    web = next(a for a in server.addresses if a.startswith("http://"))
    page = await _open(browser, f"{web}#token={TOKEN}")  # no session: a new one
    session = open_session(page.url.split("#session=")[1], env=agent_env)
    seen: list[str] = []
    changed = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(_watch_approvals, session.socket_path, seen, changed)
        await _prompt(page, "touch it")
        await page.wait_for_selector(".dialog.approval >> text=touch from-the-page.txt",
                                     timeout=WAIT_MS)  # fmt: skip
        with anyio.fail_after(TIMEOUT):
            while "open touch from-the-page.txt" not in seen:
                await changed.wait()
                changed = anyio.Event()
        assert not (project / "from-the-page.txt").exists()
        # The call's card in the transcript shows what it waits on.
        await page.wait_for_selector("#transcript .tool-card.pending >> text=waiting on approval",
                                     timeout=WAIT_MS)  # fmt: skip
        await page.click(".dialog.approval button.allow")
        await page.wait_for_selector("text=Touched it.", timeout=WAIT_MS)
        with anyio.fail_after(TIMEOUT):
            while "closed" not in seen:
                await changed.wait()
                changed = anyio.Event()
        group.cancel_scope.cancel()
    assert (project / "from-the-page.txt").exists()
    assert await page.locator(".dialog").count() == 0
    assert await page.locator(".tool-card.done >> text=bash touch from-the-page.txt").count() == 1
    accepted = await server.wait_event(lambda e: "accepted peer=web:" in e, "the page's accept")
    assert "token=default" in accepted and TOKEN not in "\n".join(server.events)


async def test_the_page_reconnects_after_the_worker_is_killed_and_shows_the_transcript(
    browser: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    log: list[str] = []
    async with anyio.create_task_group() as group:
        process, url, log = await _web(agent_env, project, _script(tmp_path, ANSWERS), group)
        try:
            page = await _open(browser, url)
            await _prompt(page, "say hello")
            await page.wait_for_selector("text=Hello from the page.", timeout=WAIT_MS)
            session = open_session(url.split("session=")[1].strip(), env=agent_env)
            before = await page.evaluate("document.body.dataset.renderedAt")
            pid = int(session.lock_path.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            # A fresh baseline from a new worker: rendered again, the transcript all there.
            await page.wait_for_selector(
                f'body:not([data-rendered-at="{before}"])', state="attached", timeout=WAIT_MS
            )
            await page.wait_for_selector('#status[data-state="live"]', timeout=WAIT_MS)
            assert int(session.lock_path.read_text().split()[0]) != pid
            assert await page.locator("text=Hello from the page.").count() == 1
            assert await page.locator(".kind-pi-user >> text=say hello").count() == 1
            await _prompt(page, "are you there")
            await page.wait_for_selector("text=Still here after the restart.", timeout=WAIT_MS)
        finally:
            await _stop(process)
        group.cancel_scope.cancel()
    assert sum("worker started" in line for line in log) == 2, log


async def test_steering_and_aborting_from_the_page_while_a_turn_waits_on_an_approval(
    browser: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    async with anyio.create_task_group() as group:
        process, url, _ = await _web(agent_env, project, _script(tmp_path, TOUCH), group)
        try:
            page = await _open(browser, url)
            await _prompt(page, "touch it")
            await page.wait_for_selector(".dialog.approval", timeout=WAIT_MS)
            await page.wait_for_selector("body.busy #send >> text=Steer", timeout=WAIT_MS)
            await _prompt(page, "on second thought, do not")  # Enter while busy: a steer
            await page.wait_for_selector("#live .queued >> text=on second thought, do not",
                                         timeout=WAIT_MS)  # fmt: skip
            await page.click("#abort")
            await page.wait_for_selector("body:not(.busy)", state="attached", timeout=WAIT_MS)
            await page.wait_for_selector(".dialog", state="detached", timeout=WAIT_MS)
        finally:
            await _stop(process)
        group.cancel_scope.cancel()
    assert not (project / "from-the-page.txt").exists(), "the aborted call never ran"


async def _tree(socket_path: Path, method: str, *args: Any) -> Any:
    """Call the worker's session tree service as another client does (``/tree`` in a TUI)."""
    used: list[Any] = []
    result: Any = None

    def setup(env: FacetEnvironment) -> None:
        used.append(env.use(SessionTreeService))

    async with anyio.create_task_group() as group:
        source = connect_service_source(lambda: connect_unix(socket_path), task_group=group)
        async with create_facet_host([define_facet("test/tree", setup)], service_sources=[source]):
            with anyio.fail_after(TIMEOUT):
                await source.wait_connected()
                result = await getattr(used[0], method)(*args, BACKGROUND)
        await source.aclose()
        group.cancel_scope.cancel()
    return result


async def test_switching_branches_from_the_page(
    browser: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    # The faux model answers by the conversation's history: both branches get "First answer.".
    script = _script(tmp_path, [{"text": "First answer."}])
    async with anyio.create_task_group() as group:
        process, url, _ = await _web(agent_env, project, script, group)
        try:
            page = await _open(browser, url)
            await _prompt(page, "first question")
            await page.wait_for_selector("text=First answer.", timeout=WAIT_MS)
            session = open_session(url.split("session=")[1].strip(), env=agent_env)
            outline = await _tree(session.socket_path, "outline")
            (prompt,) = outline["prompts"]
            root = prompt["conversationId"]
            # A branch that forks at the prompt: it holds the question, not the answer.
            branch = await _tree(session.socket_path, "branch", root, prompt["id"])
            assert branch != root
            await page.focus("#branches")  # loads the session's branches
            await page.wait_for_selector(f'#branches option[value="{branch}"]', state="attached",
                                         timeout=WAIT_MS)  # fmt: skip
            await page.select_option("#branches", str(branch))
            await page.wait_for_selector(f'body[data-conversation="{branch}"]', state="attached",
                                         timeout=WAIT_MS)  # fmt: skip
            await page.wait_for_selector("text=First answer.", state="detached", timeout=WAIT_MS)
            await _prompt(page, "on the branch")
            await page.wait_for_selector(".kind-pi-user >> text=on the branch", timeout=WAIT_MS)
            await page.wait_for_selector("text=First answer.", timeout=WAIT_MS)  # the branch's
            await page.focus("#branches")
            await page.select_option("#branches", str(root))
            await page.wait_for_selector(f'body[data-conversation="{root}"]', state="attached",
                                         timeout=WAIT_MS)  # fmt: skip
            await page.wait_for_selector("text=First answer.", timeout=WAIT_MS)
            assert await page.locator(".kind-pi-user >> text=first question").count() == 1
            assert await page.locator(".kind-pi-user >> text=on the branch").count() == 0
        finally:
            await _stop(process)
        group.cancel_scope.cancel()


async def test_a_token_revoked_by_sighup_closes_its_page_which_then_asks_for_a_token(
    browser: Any, servers: Any, agent_env: dict[str, str], project: Path, tmp_path: Path,
    tls_files: dict[str, Path],
) -> None:  # fmt: skip
    server = await servers(
        agent_env,
        ["--faux-script", str(_script(tmp_path, ANSWERS)), "serve", "--cwd", str(project),
         "--web", "tcp://127.0.0.1:0", "--insecure", "--token-file", str(tls_files["token"])],
        lines=2,
    )  # fmt: skip
    web = next(a for a in server.addresses if a.startswith("http://"))
    page = await _open(browser, f"{web}#token={TOKEN}")
    tls_files["token"].write_text("another-token-of-the-test-0123456789\n")
    server.process.send_signal(signal.SIGHUP)
    await page.wait_for_selector("#login-error >> text=refused the token", timeout=WAIT_MS)
    reload = await server.wait_event(lambda e: " reload " in e, "the reload")
    assert "revoked=default" in reload and "closed=1" in reload


async def test_an_approval_answered_from_the_page_closes_in_a_tui_watching_the_same_session(
    browser: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """The issue's scenario: a TUI (``coding-agent attach`` in tmux) watches while the approval
    is answered from the page; the TUI shows the dialog, then the answer's result, and never
    answers it itself."""
    if shutil.which("tmux") is None:  # pragma: no cover - .ci/run installs tmux
        pytest.skip("tmux is not installed (apt-get install tmux; .ci/run does it)")
    env = dict(agent_env, TERM="xterm-256color", COLORTERM="truecolor", LANG="C.UTF-8")
    env.pop("TMUX", None)
    socket = Path(tempfile.gettempdir()) / f"ca-web-{uuid.uuid4().hex[:10]}.sock"
    terminal = Terminal(socket, env)
    async with anyio.create_task_group() as group:
        process, url, _log = await _web(agent_env, project, _script(tmp_path, TOUCH), group)
        try:
            page = await _open(browser, url)
            session_id = url.split("session=")[1].strip()
            attach = f"{sys.executable} -m coding_agent.cli.main attach {session_id}"
            await anyio.to_thread.run_sync(terminal.start, "tui", project, attach)
            await anyio.to_thread.run_sync(terminal.wait_text, "tui", "enter sends")
            await _prompt(page, "touch it")
            await page.wait_for_selector(".dialog.approval >> text=touch from-the-page.txt",
                                         timeout=WAIT_MS)  # fmt: skip
            shown = await anyio.to_thread.run_sync(terminal.wait_dialog, "tui", "Allow bash?")
            assert "touch from-the-page.txt" in shown
            assert not (project / "from-the-page.txt").exists()
            await page.click(".dialog.approval button.allow")
            await page.wait_for_selector("text=Touched it.", timeout=WAIT_MS)
            after = await anyio.to_thread.run_sync(
                terminal.wait,
                "tui",
                lambda text: "Touched it." in text and "Allow bash?" not in text,
                "the TUI's dialog closed and the answer shown",
            )
            assert "touch from-the-page.txt" in after  # the call's card, done
        finally:
            await anyio.to_thread.run_sync(terminal.close)
            await _stop(process)
        group.cancel_scope.cancel()
    assert (project / "from-the-page.txt").exists()


async def test_an_imported_slash_commands_expanded_prompt_is_a_collapsed_line_on_the_page(
    browser: Any, agent_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """What Claude Code hid (an ``isMeta`` line: the expanded prompt of ``/review``) is not
    shown as the user's message: one dim, collapsed line names it (``data.meta``)."""
    from coding_agent.importing.store import import_session, read_session_file

    source = (
        Path(__file__).parents[1] / "fixtures" / "session_imports" / "claude_slash_command.jsonl"
    )
    session = await import_session(read_session_file(source), cwd=project, env=agent_env)
    async with anyio.create_task_group() as group:
        process, url, _log = await _web(
            agent_env, project, _script(tmp_path, ANSWERS), group, session.id
        )
        try:
            page = await _open(browser, url)
            await page.wait_for_selector("text=Fixed: the discount is applied", timeout=WAIT_MS)
            line = page.locator(".kind-pi-user.meta details:not([open]) > summary")
            assert await line.all_inner_texts() == [
                "(expanded /review prompt)",
                "(local command caveat)",
                "(output of /model)",
            ]
            assert not await page.is_visible("text=Review cart.py for bugs")  # collapsed
            typed = page.locator(".kind-pi-user:not(.meta) .text")
            assert await typed.all_inner_texts() == [
                "/review cart.py",  # as typed, not the tags Claude Code wrote for it
                "/model sonnet",
                "Fix it, please.",
            ]
            assert not any("Review cart.py" in t for t in await typed.all_inner_texts())
        finally:
            await _stop(process)
        group.cancel_scope.cancel()
