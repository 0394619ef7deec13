"""Files that make the machine run code: a write or edit of one always asks (but in ``auto``).

The one owner of the list. Changing one of these files is as good as running a command: git
runs what ``.git/config`` and ``.git/hooks/`` name, Claude Code and this agent start the MCP
servers of ``.mcp.json``, editors run ``.vscode/`` tasks, direnv runs ``.envrc``. So in every
permission mode but ``auto`` (``accept-edits`` included), and whatever an "always" answer or a
permission rule says, a ``write`` or ``edit`` of such a file asks, and the dialog says why.

The worker hands the list to the approval feature as the harness service ``guarded_paths``
(:func:`guarded_paths`): a list of ``{"pattern": ..., "reason": ...}``. The approval feature
(``facets_approval.guarded.guarded_reason``) matches it; the two packages share only this
JSON shape. A pattern is either

* **relative** (:data:`CODE_PATHS`): matched at any depth of the target's absolute path, so in
  every folder of the project (``sub/.vscode/tasks.json``, a nested repository's
  ``.git/config``) and above it (a project inside ``~/.claude/`` is Claude Code's); a trailing
  ``/`` means the folder and everything in it (a file of that name too: a worktree's ``.git``
  file), otherwise the file itself; or
* **absolute** (the agent's own files, added by :func:`guarded_paths`): that file or folder
  and everything in it.

A target is checked as written (``.git/config`` where ``.git`` is a symlink to elsewhere) and
with every symlink resolved (``hooks`` linking to ``.git/hooks``), case-insensitively (``.GIT``
on a case-insensitive file system), and a file with other hard links asks too (a write goes to
every name of it). To guard another file, add a :class:`GuardedPath` here with its reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from coding_agent.settings.facets_site import facets_site
from coding_agent.settings.trust import trust_path
from coding_agent.settings.xdg import config_home

__all__ = ["CODE_PATHS", "SERVICE", "GuardedPath", "guarded_paths"]

SERVICE = "guarded_paths"
"""The harness service the approval feature reads the list from."""


class GuardedPath(msgspec.Struct, frozen=True):
    """One guarded file or folder and why a change to it must ask."""

    pattern: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """The service's shape: ``{"pattern", "reason"}``."""
        return {"pattern": self.pattern, "reason": self.reason}


CODE_PATHS: tuple[GuardedPath, ...] = (
    GuardedPath(
        ".git/",
        "git runs the hooks, fsmonitor, filters and other commands named in .git/ "
        "(config, hooks, info/attributes)",
    ),
    GuardedPath(".mcp.json", "the MCP servers listed in .mcp.json are started as programs"),
    GuardedPath(
        ".claude/",
        "Claude Code runs the hooks and commands of .claude/ (settings, hooks, commands) and "
        "its settings hold permission rules",
    ),
    GuardedPath(
        ".coding-agent/",
        "this agent loads a project's .coding-agent/ (facet packages are Python code it "
        "imports; config and prompts)",
    ),
    GuardedPath(
        ".pi/",
        "pi runs the extensions of .pi/extensions/ and installs the packages .pi/settings.json "
        "lists; this agent reads its settings, SYSTEM.md, skills and prompts",
    ),
    GuardedPath(
        ".vscode/",
        "VS Code runs the tasks, launch configurations and programs named in .vscode/",
    ),
    GuardedPath(
        ".idea/",
        "JetBrains IDEs run the run configurations, external tools and file watchers in .idea/",
    ),
    GuardedPath(".envrc", "direnv runs .envrc as a shell script when you enter the folder"),
    GuardedPath(".husky/", "husky runs the git hooks in .husky/ on commit, push and checkout"),
    GuardedPath(
        ".pre-commit-config.yaml",
        "pre-commit installs and runs the hooks .pre-commit-config.yaml lists",
    ),
    GuardedPath(
        ".devcontainer/",
        "VS Code and the devcontainer CLI build and run what .devcontainer/ names "
        "(postCreateCommand, Dockerfile)",
    ),
    GuardedPath(".npmrc", "npm runs the programs .npmrc names (script-shell, node-options, git)"),
    GuardedPath(".yarnrc.yml", "yarn runs the yarnPath and plugins .yarnrc.yml names"),
    GuardedPath(".yarnrc", "yarn 1 runs the yarn-path .yarnrc names"),
    # a session started in the home folder (or a dotfiles repository): the shell and git run these
    GuardedPath(".bashrc", "bash runs .bashrc in every interactive shell"),
    GuardedPath(".bash_profile", "bash runs .bash_profile at every login"),
    GuardedPath(".profile", "the login shell runs .profile at every login"),
    GuardedPath(".zshrc", "zsh runs .zshrc in every interactive shell"),
    GuardedPath(".zshenv", "zsh runs .zshenv in every shell"),
    GuardedPath(".zprofile", "zsh runs .zprofile at every login"),
    GuardedPath(
        ".gitconfig", "git runs the hooks, pagers and filters .gitconfig names, everywhere"
    ),
    GuardedPath(".ssh/", "ssh runs what .ssh/config and authorized_keys name, and trusts its keys"),
)
"""The files and folders that run code wherever they are in a project, with the reason shown."""


def guarded_paths(
    env: Mapping[str, str] | None = None,
    *,
    facets_dirs: Iterable[str | os.PathLike[str]] = (),
    state_dir: str | os.PathLike[str] | None = None,
) -> list[dict[str, str]]:
    """The service value: :data:`CODE_PATHS`, then the agent's own files (the trust file, its
    configuration folder, the ``--facets-dir`` folders and ``state_dir``, its session
    storage), each with its reason. The first entry that matches gives the reason, so the
    trust file comes before the folder holding it."""
    own = [
        GuardedPath(
            str(trust_path(env)),
            "it is the agent's trust file (it decides whose code the agent loads)",
        ),
        GuardedPath(
            str(config_home(env) / "coding-agent"),
            "it is the agent's own configuration (it decides what runs and what asks)",
        ),
        *(
            GuardedPath(str(Path(folder)), "it is a facet package folder the agent imports")
            for folder in facets_dirs
        ),
        GuardedPath(
            str(facets_site(env)),
            "it is the agent's installed facet packages (Python it imports at every start, "
            ".pth files included)",
        ),
    ]
    if state_dir is not None:
        own.append(
            GuardedPath(
                str(state_dir),
                "it is the agent's session storage (permission mode, approvals, history)",
            )
        )
    return [entry.to_json() for entry in (*CODE_PATHS, *own)]
