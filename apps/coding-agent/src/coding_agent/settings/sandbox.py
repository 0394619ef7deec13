"""The session's sandbox: :class:`pico3.SandboxPolicy` from ``[sandbox]`` in config.toml.

:func:`session_sandbox` builds the policy of one session: the project folder and a temporary
folder of the session's own (``<tmp>/coding-agent-<uid>/<session id>``, created ``0700``)
writable, besides the user's ``sandbox.allow_write``; with ``sandbox.allow_domains``, a
:class:`pico3.DomainProxy` socket (:func:`proxy_socket_path`) as the only way out; unreadable: :data:`pico3.DEFAULT_DENY_READ`
(``~/.ssh``, ``~/.aws``, ...), the agent's configuration folder (its trust file inside), the
agent's session storage, pi's ``~/.pi/agent/auth.json`` (the keys pi's ``/login`` stored, which
the agent reads as its providers' keys: :mod:`coding_agent.settings.pi_setup`) and its
``models.json`` (a provider's ``apiKey`` may be the key itself), the unix sockets through which a command could have code run outside
(:data:`SESSION_SOCKETS`: the user's runtime folder with the session bus and the warm start's
fork server, Docker's, the X server's), and ``sandbox.deny_read``. Inside the project, the files that make the
machine run code later, outside the sandbox (:data:`PROJECT_READ_ONLY`: ``.claude``,
``.coding-agent``, ``.mcp.json``, ``.vscode``..., at the top and in the folders two levels
down: ``packages/web/.vscode``; and the git repository, whole, with its submodules' and the
nested clones') stay read-only
(``.claude``, ``.coding-agent``, ``.vscode``... cannot be created where missing:
:data:`PROJECT_PLACEHOLDERS`),
and so do the shell's and git's start-up files in the home folder (:data:`HOME_READ_ONLY`, for a
project opened in ``~``).

:func:`session_sandbox` returns the :class:`pico3.Sandbox` when bubblewrap works here (enforced
for every command when ``sandbox.enabled`` is on; else used by the ``sandbox`` permission mode),
else the :class:`pico3.SandboxStatus` saying why not (the worker publishes it in its status;
the TUI says so once at start and in ``/sandbox``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from coding_agent.settings.guarded_paths import CODE_PATHS
from coding_agent.settings.xdg import config_home, pi_home, state_home
from pico3 import DEFAULT_DENY_READ, Sandbox, SandboxPolicy, SandboxStatus, sandbox_available

__all__ = [
    "HOME_READ_ONLY",
    "PROJECT_PLACEHOLDERS",
    "PROJECT_READ_ONLY",
    "SESSION_SOCKETS",
    "proxy_socket_path",
    "sandbox_policy",
    "sandbox_temp_dir",
    "session_sandbox",
]

PROJECT_READ_ONLY: tuple[str, ...] = tuple(
    g.pattern.rstrip("/") for g in CODE_PATHS if not g.pattern.startswith(".git/")
)
"""Paths in the project a sandboxed command may not change, where they exist (and the same
names in its folders, :attr:`pico3.SandboxPolicy.read_only_names`): each makes code run
outside (:data:`~coding_agent.settings.guarded_paths.CODE_PATHS`, the list a write or edit
asks for). The project's git repository is read-only too, whole, with its submodules'
(:attr:`pico3.SandboxPolicy.read_only_repositories`): its configuration and hooks run code,
and so does any folder a command could make a submodule by writing the index; a commit, a
checkout or a stash is asked for, to run outside."""

PROJECT_PLACEHOLDERS: tuple[str, ...] = (".claude", ".coding-agent", ".pi", ".vscode", ".idea")
"""Of those, the folders no command may create where they are missing: a placeholder (an empty
read-only folder) lies there while a sandboxed command runs, removed after it
(:mod:`pico3.sandbox_placeholders`). Created from inside, each would run code outside later:
this agent's at its next start in a trusted project (``.coding-agent/facets/``, the hooks of
``.claude/settings.json``), pi's at its next start (``.pi/extensions/``), VS Code's and
JetBrains' when the user opens the project. A project with no git repository of its own (a folder of another repository too) gets one for ``.git``
(:meth:`pico3.SandboxPolicy.kept_absent`). The rest of the list has a gate of its own where
it is missing: git runs ``.husky/`` only through ``core.hooksPath`` (in the read-only
repository; a project set up with husky has the folder, read-only), a new ``.mcp.json``'s
servers start only once approved (``/trust``), direnv runs a new ``.envrc`` only after ``direnv
allow``; a new ``.pre-commit-config.yaml`` runs only where pre-commit's hook is installed in a
repository without one (its ``init-templatedir``): that gap is left (a placeholder file would
show in ``git status`` while commands run)."""

HOME_READ_ONLY: tuple[str, ...] = (
    "~/.bashrc", "~/.bash_profile", "~/.profile", "~/.zshrc", "~/.zprofile", "~/.gitconfig",
)  # fmt: skip
"""Shell and git start-up files kept read-only even when a writable path holds them (a project
opened in the home folder): a command that planted code there would run it outside later."""


SESSION_SOCKETS: tuple[str, ...] = (
    "/run/user/{uid}", "/var/run/docker.sock", "/run/docker.sock", "/tmp/.X11-unix",
)  # fmt: skip
"""Unix sockets outside the sandbox through which a command could have code run outside it:
the user's runtime folder (its ``$XDG_RUNTIME_DIR`` too, when set elsewhere) holds the session
bus (``systemd-run --user`` runs any command, unconfined), systemd's private socket, the warm
start's fork server and the user's agents; Docker's socket starts containers as root; the X
server's take keystrokes for any window. A path socket is reached whatever the network
namespace, so they are hidden (an empty folder, ``/dev/null``), as the credentials are. One that
holds the project or the session's temporary folder stays visible: hiding it would hide them."""


def _session_sockets(environ: Mapping[str, str], keep: Sequence[str]) -> list[str]:
    """:data:`SESSION_SOCKETS` and ``$XDG_RUNTIME_DIR``, but those holding a ``keep`` path."""
    found = [p.format(uid=os.getuid()) for p in SESSION_SOCKETS]
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        found.insert(0, runtime)
    kept = [Path(os.path.realpath(p)) for p in keep]
    return [
        path
        for path in dict.fromkeys(found)
        if not any(k.is_relative_to(os.path.realpath(path)) for k in kept)
    ]


def sandbox_temp_dir(session_id: str) -> Path:
    """The session's temporary folder (``$TMPDIR`` inside the sandbox)."""
    return Path(tempfile.gettempdir()) / f"coding-agent-{os.getuid()}" / session_id


def proxy_socket_path(session_id: str) -> Path:
    """Where the session's :class:`pico3.DomainProxy` listens (its folder is bound into the
    sandbox read-only; a folder of its own, so a restarted worker's new socket shows there)."""
    return sandbox_temp_dir(session_id).parent / f"{session_id}.proxy" / "proxy.sock"


def sandbox_policy(
    project: str | os.PathLike[str],
    session_id: str,
    *,
    env: Mapping[str, str] | None = None,
    deny_read: Sequence[str] = (),
    allow_write: Sequence[str] = (),
    allow_domains: Sequence[str] = (),
) -> SandboxPolicy:
    """The policy of the session ``session_id`` working on ``project`` (see the module docs)."""
    environ = os.environ if env is None else env
    home = environ.get("HOME") or os.path.expanduser("~")
    root = os.path.realpath(project)
    own = (
        str(config_home(env) / "coding-agent"),
        str(state_home(env) / "coding-agent"),
        str(pi_home(env) / "auth.json"),  # pi's /login keys, which this agent reads too
        str(pi_home(env) / "models.json"),  # its providers, whose apiKey may be the key itself
    )
    temp = str(sandbox_temp_dir(session_id))
    sockets = _session_sockets(environ, [root, temp])
    return SandboxPolicy(
        project=root,
        temp_dir=temp,
        allow_write=tuple(allow_write),
        deny_read=(*DEFAULT_DENY_READ, *own, *sockets, *deny_read),
        # the placeholders are read-only as read_only_folders: listed once (``/sandbox``)
        read_only=(
            *(os.path.join(root, p) for p in PROJECT_READ_ONLY if p not in PROJECT_PLACEHOLDERS),
            *HOME_READ_ONLY,
        ),
        read_only_repositories=(root,),
        read_only_names=PROJECT_READ_ONLY,
        read_only_folders=tuple(os.path.join(root, p) for p in PROJECT_PLACEHOLDERS),
        home=home,
        proxy_socket=str(proxy_socket_path(session_id)) if allow_domains else None,
        allow_domains=tuple(allow_domains),
    )


def session_sandbox(
    policy: SandboxPolicy, env: Mapping[str, str] | None = None, *, enforced: bool = False
) -> Sandbox | SandboxStatus:
    """The sandbox enforcing ``policy``, or why there is none (``bwrap`` looked up on ``env``'s
    ``PATH``). The temporary folder is made private to the user."""
    status = sandbox_available((env or os.environ).get("PATH"))
    if not status.available:
        return status
    parent = Path(policy.temp_dir).parent
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    Path(policy.temp_dir).mkdir(mode=0o700, exist_ok=True)
    return Sandbox(policy, status, enforced)
