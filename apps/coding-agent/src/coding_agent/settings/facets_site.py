"""Where ``coding-agent facets add`` installs feature packages: a folder of the agent's own.

A package added with ``facets add`` does not go into the environment the agent runs from: in a
clone of the repository that is the workspace's ``.venv``, and ``uv sync`` removes from it every
package the lock file does not name (it silently uninstalled added facets). It goes into the
*facets site* instead::

    $XDG_DATA_HOME/coding-agent/facets/      (default ~/.local/share/coding-agent/facets)

a folder installed into with ``uv pip install --target`` (``-e`` for a package folder, whose
``.pth`` file points at the folder) and added to ``sys.path`` as a site directory (so its
``.pth`` files work) by every process of the agent at start (:func:`activate`). ``uv sync``,
``uv tool upgrade`` and a new virtual environment never touch it; ``facets remove`` empties it
again. The agent's own environment still wins: the site comes after it on ``sys.path``, so a
package there never shadows the agent's ``chord`` or ``pico3``.

The package itself is installed without its dependencies (a resolver asked to install ``chord``
into an empty folder would fetch another one, or fail: the workspace's packages are not on
PyPI); the requirements it names that the agent's environment does not already satisfy are then
installed into the site with theirs.
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["activate", "facets_site", "unmet_requirements"]


def facets_site(env: Mapping[str, str] | None = None) -> Path:
    """The facets site: ``$XDG_DATA_HOME/coding-agent/facets`` (``~/.local/share`` when unset
    or not absolute, as the XDG spec says)."""
    environ = os.environ if env is None else env
    value = environ.get("XDG_DATA_HOME", "")
    base = Path(value) if value and os.path.isabs(value) else Path.home() / ".local" / "share"
    return base / "coding-agent" / "facets"


def activate(env: Mapping[str, str] | None = None) -> Path | None:
    """Add the facets site to ``sys.path`` (after the agent's environment, its ``.pth`` files
    processed) if it exists; returns it, or ``None`` when there is none. Idempotent."""
    folder = facets_site(env)
    if not folder.is_dir():
        return None
    if str(folder) not in sys.path:
        site.addsitedir(str(folder))
    return folder


def unmet_requirements(requirements: list[str]) -> list[str]:
    """The requirements (``Requires-Dist`` lines) that no distribution on ``sys.path``
    satisfies, markers evaluated for this interpreter (extras' requirements are skipped)."""
    import importlib.metadata

    from packaging.requirements import InvalidRequirement, Requirement

    unmet: list[str] = []
    for line in requirements:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            unmet.append(line)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            unmet.append(line)
            continue
        if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
            unmet.append(line)
    return unmet
