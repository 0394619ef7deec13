"""The feature packages the agent's safety depends on, in one place.

Safety is core, not a feature: pico3 blocks every tool call that needs approval while no
approval authority serves the session (docs/design/harness.md#approval-gate), so a missing
approval package makes the agent refuse, never run unasked. This module is the app's side of
that rule:

* :data:`SAFETY_PACKAGES` names the facet packages whose absence changes what the agent may do,
  and what follows when one is missing (``facets remove`` refuses them without ``--force``;
  ``coding-agent doctor`` checks them);
* :func:`unapproved_reason` words the block the model and the user read (the worker hands it
  to the harness as ``HarnessOptions.unapproved``): the package that is missing, whether it is
  installed at all, and the command that restores it (:func:`restore_command`).

The app never imports a feature package (the import-linter contract): packages are named by
their facet-package name and found through entry points, as discovery finds them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = [
    "APPROVAL_PACKAGE",
    "SAFETY_PACKAGES",
    "default_packages",
    "removal_consequence",
    "restore_command",
    "source_checkout",
    "unapproved_reason",
]

APPROVAL_PACKAGE = "facets-approval"
"""The facet package that approves tool calls (the session's approval authority)."""

SAFETY_PACKAGES: Mapping[str, str] = {
    APPROVAL_PACKAGE: (
        "every tool call that needs approval (write, edit, bash, MCP tools, job tools that "
        "start or kill processes) will be blocked, in every permission mode, and the "
        "permission mode cannot be changed"
    ),
}
"""Facet package name → what follows when it is missing (the one list of the app)."""


_APP_DISTRIBUTION = "pico-coding-agent"


def default_packages() -> tuple[str, ...]:
    """The feature packages every install of the app brings: the ``facets-*`` distributions the
    app's pyproject depends on (read from the installed app's metadata, so that list is the one
    place a feature package is added to the app)."""
    import importlib.metadata  # here: only `doctor` needs it
    import re

    try:
        requires = importlib.metadata.requires(_APP_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return ()
    names = (re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0] for requirement in requires)
    return tuple(name for name in names if name.startswith("facets-"))


def _installed_from() -> Path | None:
    """The local path the app was installed from (``direct_url.json``): its project folder
    (``uv tool install ./apps/coding-agent``, ``pip install ./apps/coding-agent``) or its wheel
    (``pip install dist/*.whl``). ``None`` for an index install or when nothing is recorded."""
    try:
        import importlib.metadata  # here: only a block or `doctor` needs it

        text = importlib.metadata.distribution(_APP_DISTRIBUTION).read_text("direct_url.json")
    except Exception:
        return None
    try:
        url = json.loads(text or "{}").get("url", "")
    except (ValueError, AttributeError):
        return None
    parsed = urlparse(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


def source_checkout() -> Path | None:
    """The clone the agent was installed from, when it is known: the workspace this module
    runs from (an editable or ``uv run`` install), else the clone holding the project folder
    recorded in the app's ``direct_url.json``. ``None`` for a wheel or an index install."""
    here = Path(__file__).resolve()
    candidates: list[Path] = []
    if len(here.parents) > 4:
        candidates.append(here.parents[4])  # <clone>/apps/coding-agent/src/coding_agent/
    origin = _installed_from()
    if origin is not None and origin.suffix != ".whl":
        candidates.append(origin.parent.parent)  # <clone>/apps/coding-agent
    for root in candidates:
        if (root / "packages" / APPROVAL_PACKAGE / "pyproject.toml").is_file():
            return root
    return None


def restore_command(package: str) -> str:
    """The command that installs ``package`` again into this agent's environment: from the
    clone the agent came from, else from the wheel beside the app's own wheel."""
    root = source_checkout()
    if root is not None:
        return f"coding-agent facets add {root / 'packages' / package}"
    origin = _installed_from()
    if origin is not None and origin.suffix == ".whl":
        wheels = sorted(origin.parent.glob(f"{package.replace('-', '_')}-*.whl"))
        if wheels:
            return f"coding-agent facets add {wheels[-1]}"
    return (
        f"coding-agent facets add <the agent's source>/packages/{package} (or install the "
        "agent again the way you installed it: its packages come with it)"
    )


def _installed(package: str) -> bool:
    from chord import installed_facet_packages

    return any(p.name == package for p in installed_facet_packages(on_error=lambda _e: None))


def unapproved_reason(package: str = APPROVAL_PACKAGE) -> Callable[[Mapping[str, Any]], str]:
    """``reason(call)``: the block of a call that needs approval when ``package`` serves no
    approval authority. It says whether the package is installed (then it failed to load or a
    reload retired it, and ``/reload`` loads it again) and how to restore it."""

    def reason(call: Mapping[str, Any]) -> str:
        tool = call.get("name") or "this tool"
        if _installed(package):
            state = (
                f"{package} is installed but not serving this session (it failed to load or "
                "a reload retired it: see the worker's log); /reload loads it again, or start "
                "the agent again"
            )
        else:
            state = (
                f"{package} is not installed; restore it with `{restore_command(package)}`, "
                "then /reload (or start the agent again)"
            )
        return (
            f"{tool} needs approval and no approval package serves this session, so it was "
            f"not run: {state}."
        )

    return reason


def removal_consequence(package: str) -> str | None:
    """What follows from removing ``package`` (``None``: the agent's safety does not depend
    on it)."""
    consequence = SAFETY_PACKAGES.get(package)
    if consequence is None:
        return None
    return f"without {package}, {consequence}"
