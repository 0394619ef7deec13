"""Approvals fail closed in the real session worker (issue 36, item 1): a ``/reload`` that
retires the approval package, or whose new generation fails to load, leaves the session with no
approval authority, and the next call that needs approval is blocked (named package, nothing
run), even in ``auto`` mode; an installed approval package that fails to load at start is
skipped and ``-p`` exits 3. (Absent and removed packages: tests/app/cli/test_fail_closed_install.py.)

The worker runs in this process (:func:`open_session_host`, as ``-p`` does) with the approval
package from a ``--facets-dir`` copy, so the test can take it away or break it; ``/reload`` is the
worker's own ``coding-agent.reload`` service.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from worker_support import TIMEOUT, write_script

from chord import BACKGROUND, FacetEnvironment, define_facet
from coding_agent.cli.headless import EXIT_BLOCKED, run_headless
from coding_agent.contracts import ReloadService
from coding_agent.session_files.folders import Session
from coding_agent.worker.main import SessionRuntime, WorkerConfig, open_session_host

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[3]


def _bash(command: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": "bash", "arguments": {"command": command}}]}


@asynccontextmanager
async def worker_with_approval_copy(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> AsyncIterator[tuple[SessionRuntime, Any, Path]]:
    """The worker in ``auto`` mode with facets-approval loaded from a copy (yielded), and its
    ``/reload`` service."""
    copy = tmp_path / "facets-approval"
    shutil.copytree(
        ROOT / "packages" / "facets-approval", copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    script = write_script(
        tmp_path / "script.json",
        [_bash("touch one.txt"), {"text": "one"}, _bash("touch two.txt"), {"text": "two"}],
    )
    config = WorkerConfig(
        session,
        faux_script=script,
        permission_mode="auto",
        installed_features=False,
        facets_dirs=(copy,),
        fsync=False,
        env=agent_env,
    )
    box: list[Any] = []

    def reloader(env: FacetEnvironment) -> None:
        box.append(env.use(ReloadService))

    async with open_session_host(
        config, extra_facets=[define_facet("test/reload", reloader)]
    ) as runtime:
        yield runtime, box[0], copy


async def _turn(runtime: SessionRuntime) -> dict[str, Any]:
    """Send a prompt, wait for the turn, and return its tool result's model message."""
    harness = runtime.harness.harness
    root = await harness.root(BACKGROUND)
    with anyio.fail_after(TIMEOUT):
        await root.send("go", BACKGROUND)
        await harness.wait_for_idle(BACKGROUND)
    [entry] = await root.entries(BACKGROUND, kind="pi.tool_result", limit=1)
    assert isinstance(entry.model, list)
    message = dict(entry.model[0])
    message["code"] = [d.get("code") for d in (entry.data or {}).get("diagnostics") or []]
    return message


def _blocked_for_want_of_approval(message: dict[str, Any]) -> None:
    text = message["content"][0]["text"]
    assert message["isError"] is True and message["code"] == ["unapproved"]
    assert text.startswith(
        "Tool call blocked: bash needs approval and no approval package serves this session, "
        "so it was not run: facets-approval "
    )


async def test_a_reload_that_retires_the_approval_package_blocks_the_next_call(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    async with worker_with_approval_copy(session, agent_env, tmp_path) as (runtime, reload, copy):
        first = await _turn(runtime)
        assert first["isError"] is False and (session.cwd / "one.txt").exists()
        shutil.rmtree(copy)  # the package is gone: /reload retires it
        outcomes = await reload.reload(BACKGROUND)
        assert {"package": "facets-approval", "outcome": "removed", "ok": True} in [
            {k: o[k] for k in ("package", "outcome", "ok")} for o in outcomes
        ]
        _blocked_for_want_of_approval(await _turn(runtime))
        assert not (session.cwd / "two.txt").exists()


async def test_an_approval_package_that_fails_to_load_on_reload_blocks_the_next_call(
    session: Session, agent_env: dict[str, str], tmp_path: Path
) -> None:
    async with worker_with_approval_copy(session, agent_env, tmp_path) as (runtime, reload, copy):
        assert (await _turn(runtime))["isError"] is False
        # declared anew (another plugin module), and the new generation does not import: the
        # reload retires the running one and cannot add its replacement
        pyproject = copy / "pyproject.toml"
        text = pyproject.read_text()
        pyproject.write_text(text.replace('"facets_approval.plugin"', '"facets_approval.plugin2"'))
        (copy / "src" / "facets_approval" / "plugin2.py").write_text("def broken(:\n")
        outcomes = await reload.reload(BACKGROUND)
        [outcome] = [o for o in outcomes if o["package"] == "facets-approval"]
        assert outcome["outcome"] == "failed" and outcome["ok"] is False
        _blocked_for_want_of_approval(await _turn(runtime))
        assert not (session.cwd / "two.txt").exists()


async def test_an_installed_approval_package_that_fails_to_load_blocks_and_p_exits_3(
    session: Session,
    agent_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An install of facets-approval whose code does not import, found first on sys.path (the
    # first distribution of a name wins, as in importlib.metadata): the worker skips it, logs
    # why, and starts without an approval authority.
    site = tmp_path / "site"
    package = site / "facets_approval_broken"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text("def chord_facets(:\n")
    dist_info = site / "facets_approval-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: facets-approval\nVersion: 0.1.0\n"
    )
    (dist_info / "entry_points.txt").write_text(
        "[chord.facets]\nfacets-approval = facets_approval_broken.plugin\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("CHORD_CODE_CACHE", "off")
    script = write_script(tmp_path / "s.json", [_bash("touch x.txt"), {"text": "done"}])
    config = WorkerConfig(session, faux_script=script, fsync=False, env=agent_env)
    out, err = io.StringIO(), io.StringIO()
    assert await run_headless("go", config, mode="print", out=out, err=err) == EXIT_BLOCKED
    assert out.getvalue() == "done\n"
    assert err.getvalue() == (
        "coding-agent: error: blocked the bash call (touch x.txt): bash needs approval and no "
        "approval package serves this session, so it was not run: facets-approval is installed "
        "but not serving this session (it failed to load or a reload retired it: see the "
        "worker's log); /reload loads it again, or start the agent again.\n"
    )
    assert "skipping a broken facet package: facet package 'facets-approval'" in caplog.text
    assert not (session.cwd / "x.txt").exists()
