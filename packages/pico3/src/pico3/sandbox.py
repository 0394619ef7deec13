"""The OS sandbox a session's commands run in: bubblewrap (``bwrap``) on Linux.

One owner of "how a command is confined": the ``bash`` tool, ``!`` commands and background jobs
ask :meth:`Sandbox.wrap` to turn their argv, working directory and environment into the argv
that runs them inside, and never build a ``bwrap`` command line themselves.

What a sandboxed command gets (:class:`SandboxPolicy`):

* the whole file system **read-only** (``--ro-bind / /``), a fresh ``/dev`` and a ``/proc`` of
  its own PID namespace;
* **writable**: the project folder, the session's temporary folder (``TMPDIR`` points there;
  ``/tmp`` itself stays read-only) and the ``allow_write`` paths, but for the ``read_only``
  paths inside them (the host names what runs code outside: ``.vscode``...) and the
  repositories of the ``read_only_repositories`` work trees (their ``.git``, and each
  submodule's at any depth, a submodule past the most it reads whole:
  :func:`pico3.git.submodule_git_entries`); the ``read_only_folders``, and the
  ``.git`` of a work tree with no repository, cannot be created where missing: an empty
  read-only placeholder lies there while a command runs (:mod:`pico3.sandbox_placeholders`:
  the command then starts as ``bash``, which takes the placeholders' lock and ``exec``s
  bubblewrap);
* **unreadable**: the ``deny_read`` paths (:data:`DEFAULT_DENY_READ`: ``~/.ssh``, ``~/.aws``,
  ``~/.gnupg``, ``~/.config/gcloud``, ``~/.docker``, ``~/.netrc``; the host adds its own
  configuration, trust file and session state): an empty read-only tmpfs over a folder,
  ``/dev/null`` over a file. They are laid last, so a denied path inside the project stays
  hidden;
* **no network** (``--unshare-net``: only a loopback of its own; DNS fails), unless the policy
  says ``network=True``; with a ``proxy_socket`` the allowed domains are reachable over HTTPS
  through :class:`~pico3.sandbox_proxy.DomainProxy` and nothing else (``HTTPS_PROXY`` points
  at a forwarder inside; see :mod:`pico3.sandbox_proxy`);
* a fresh **PID namespace** (``--unshare-pid``) whose first process is bubblewrap's: when the
  command's shell exits, or bubblewrap is killed (``--die-with-parent``), the kernel kills every
  process left in the namespace, so nothing started by a command outlives its call. The caller
  still starts ``bwrap`` as a session leader and kills that session on abort, as for any command;
* ``--new-session`` (no ``TIOCSTI`` into the user's terminal), every capability dropped
  (``--cap-drop ALL``: bubblewrap keeps a root caller's otherwise, and ``mount`` would work), and
  ``--disable-userns`` where bubblewrap supports it (0.8 and later): ``unshare`` inside fails;
* **no unix sockets**: a seccomp filter (:mod:`pico3.unix_sockets`, loaded by bubblewrap with
  ``--seccomp``) refuses ``socket(AF_UNIX, ...)`` and ``io_uring_setup`` with ``EPERM``, so no
  socket outside (a ``tmux`` server's, an ``ssh-agent``'s) takes commands from inside, whatever
  its path; ``socketpair`` still works. The filter's file is kept in a folder of the user's
  own (``<tmp>/pico3-<uid>``), hidden inside; bubblewrap gets it as descriptor 3 from
  ``/bin/sh`` (or the placeholders' ``bash``), which opens it and ``exec``s bubblewrap.

:func:`sandbox_available` says whether a sandbox can start here, and why not (not Linux,
``bwrap`` not on ``PATH``, user namespaces disabled): it runs ``bwrap`` once per binary with the
same options and caches the answer. A host that cannot sandbox must say so and ask instead of
running commands unconfined; this module only reports.

On macOS the same policy runs through ``sandbox-exec`` with a Seatbelt profile
(:mod:`pico3.seatbelt`): no PID namespace there, so a command's leftovers die with its process
group as for an unsandboxed command. That path cannot be tested on this project's Linux
machines; the docs say so.

:func:`explain_refusal` reads a failed command's output for the marks of a refusal (a read-only
file system, permission denied, no network) and returns the one line that tells the model what
happened and how to ask to run outside (:data:`OUTSIDE_HINT`).

Standard library only (a leaf of pico3's layers).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pico3.git import submodule_git_entries
from pico3.sandbox_placeholders import Placeholders, private_folder
from pico3.sandbox_proxy import FORWARDER, PROXY_PORT
from pico3.sandbox_scan import SCAN_DEPTH, find_entries, holds_something
from pico3.seatbelt import SANDBOX_EXEC, seatbelt_profile
from pico3.unix_sockets import unix_socket_filter

__all__ = [
    "DEFAULT_DENY_READ",
    "OUTSIDE_HINT",
    "SANDBOX_MODE_SERVICE",
    "SANDBOX_SERVICE",
    "Sandbox",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxStatus",
    "commands_sandbox",
    "explain_refusal",
    "sandbox_available",
]

SANDBOX_SERVICE = "sandbox"
"""The key of the session's :class:`Sandbox` in ``HarnessOptions.services`` (absent: none)."""

SANDBOX_MODE_SERVICE = "sandbox_mode"
"""The key of the session's :class:`SandboxMode` in ``HarnessOptions.services`` (absent: the
permission mode never sends commands into the sandbox)."""

DEFAULT_DENY_READ: tuple[str, ...] = (
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gcloud",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.claude/.credentials.json",
    "~/.pi/agent/auth.json",
    "~/.pi/agent/models.json",
)
"""Credentials no sandboxed command may read (``~`` is the user's home): key folders, git's
stored passwords, the logins Claude Code and pi keep, and pi's providers (a ``models.json``
``apiKey`` may be the key itself); the file tools ask before reading any of them, in every
mode."""

OUTSIDE_HINT = (
    "if the task really needs it, run the command again with outside_sandbox: true and a "
    "reason (the user is asked)"
)
"""How the model asks to run a command outside the sandbox."""

_PROBE_TIMEOUT = 20.0


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """Whether a sandbox can start: ``available``, the ``bwrap`` path, whether it can disable
    nested user namespaces, and ``reason`` (why not; when available, what runs it)."""

    available: bool
    reason: str
    bwrap: str | None = None
    disable_userns: bool = False
    seatbelt: str | None = None
    """macOS: the ``sandbox-exec`` path (``bwrap`` is ``None`` then)."""


_probed: dict[str, SandboxStatus] = {}


def _probe(bwrap: str, disable_userns: bool) -> subprocess.CompletedProcess[str]:
    argv = [bwrap, *_namespace_options(disable_userns, network=False)]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    seccomp = _filter_file()  # with the filter: a sandbox that cannot load it does not start
    if seccomp is not None:
        argv = _loading_filter(argv, seccomp)
    argv += ["--", "true"]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL
    )


def sandbox_available(path: str | None = None) -> SandboxStatus:
    """Can a sandbox start here? ``path`` is the ``PATH`` to find ``bwrap`` on (default this
    process's). The first call per ``bwrap`` binary starts one sandbox (``true``) to find out;
    later calls return the cached answer."""
    if sys.platform == "darwin":
        if os.access(SANDBOX_EXEC, os.X_OK):
            return SandboxStatus(
                True, f"sandbox-exec ({SANDBOX_EXEC}, untested)", seatbelt=SANDBOX_EXEC
            )
        return SandboxStatus(False, f"{SANDBOX_EXEC} is missing: macOS's sandbox cannot start")
    if not sys.platform.startswith("linux"):
        return SandboxStatus(
            False,
            f"the sandbox needs Linux with bubblewrap or macOS; this is {platform.system()}",
        )
    bwrap = shutil.which("bwrap", path=path)
    if bwrap is None:
        return SandboxStatus(
            False, "bubblewrap (bwrap) is not on PATH: install it (apt-get install bubblewrap)"
        )
    bwrap = os.path.realpath(bwrap)
    cached = _probed.get(bwrap)
    if cached is not None:
        return cached
    try:
        done = _probe(bwrap, disable_userns=True)
        disable = done.returncode == 0
        if not disable and "disable-userns" in done.stderr:  # bubblewrap before 0.8
            done = _probe(bwrap, disable_userns=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        status = SandboxStatus(False, f"bubblewrap ({bwrap}) could not be run: {error}", bwrap)
    else:
        if done.returncode == 0:
            status = SandboxStatus(True, f"bubblewrap ({bwrap})", bwrap, disable)
        else:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            why = (
                "the kernel may lack seccomp filters (CONFIG_SECCOMP_FILTER), which the "
                "sandbox needs to refuse unix sockets"
                if "seccomp" in said.lower()
                else "unprivileged user namespaces may be disabled "
                "(sysctl kernel.unprivileged_userns_clone=1)"
            )
            status = SandboxStatus(
                False, f"bubblewrap cannot start a sandbox here ({said}): {why}", bwrap
            )
    _probed[bwrap] = status
    return status


def _namespace_options(disable_userns: bool, *, network: bool) -> list[str]:
    # --cap-drop ALL matters when the user is root: bubblewrap keeps a privileged caller's
    # capabilities otherwise (an unprivileged caller's are dropped anyway).
    options = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"]
    options += ["--cap-drop", "ALL"]
    if network:
        options.append("--share-net")
    if disable_userns:
        options.append("--disable-userns")
    return options


_FILTER = unix_socket_filter()
_filter_path: list[str] = []


def _loading_filter(options: list[str], seccomp: str) -> list[str]:
    """``options`` (``bwrap`` and its options, before ``--``) loading the filter in ``seccomp``:
    bubblewrap reads it from a descriptor, so ``/bin/sh`` opens the file as descriptor 3 and
    becomes bubblewrap (one ``exec``, no process of its own)."""
    return ["/bin/sh", "-c", 'exec "$@" 3<"$0"', seccomp, *options, "--seccomp", "3"]


def _filter_file() -> str | None:
    """The file holding :data:`_FILTER` (``None`` on an architecture without one), in the
    user's private folder (:func:`~pico3.sandbox_placeholders.private_folder`; hidden inside
    the sandbox, so no command can change the filter the next one loads). Checked once per
    process (written atomically when missing or different), and written again if something
    removed it."""
    if _FILTER is None:
        return None
    if _filter_path and os.path.isfile(_filter_path[0]):
        return _filter_path[0]
    folder = private_folder()
    name = f"unix-sockets-{hashlib.sha256(_FILTER).hexdigest()[:16]}.bpf"
    path = os.path.join(folder, name)
    try:
        with open(path, "rb") as existing:
            same = existing.read() == _FILTER
    except OSError:
        same = False
    if not same:
        fd, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as out:
            out.write(_FILTER)
        os.replace(temporary, path)
    _filter_path[:] = [path]
    return path


def _expand(path: str, home: str | None) -> str:
    if home is not None and (path == "~" or path.startswith("~/")):
        path = home + path[1:]
    return os.path.realpath(os.path.expanduser(path))


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What a sandboxed command may touch (see the module docstring).

    ``project`` and ``temp_dir`` are writable, and so is every ``allow_write`` path; every
    ``deny_read`` path (``~`` is ``home``, default ``$HOME``) is unreadable; ``network`` keeps
    the host's network (default: none). Paths are resolved (symlinks followed) when a command is
    wrapped, so a path that appears later is covered too.
    """

    project: str
    temp_dir: str
    allow_write: tuple[str, ...] = ()
    deny_read: tuple[str, ...] = DEFAULT_DENY_READ
    network: bool = False
    home: str | None = None
    read_only: tuple[str, ...] = ()
    """Paths inside a writable one that stay read-only (laid over it; ``.vscode``...)."""
    read_only_repositories: tuple[str, ...] = ()
    """Work trees inside a writable path whose git repositories stay read-only: the tree's
    ``.git`` (a folder, or a worktree's ``gitdir:`` file), the ``.git`` of every submodule
    its index records, and that of every repository in its folders down to
    :data:`~pico3.sandbox_scan.SCAN_DEPTH` below it (a folder of projects, a clone that is no
    submodule: :func:`pico3.sandbox_scan.find_entries`), looked up when a command is wrapped.
    Git runs what a repository's configuration and hooks name, in the superproject and in each
    submodule a ``git status`` enters, and a command that can write the index can make any
    folder a submodule; so none of it is a command's to change (a commit, a checkout, a stash
    run outside, asked for)."""
    read_only_names: tuple[str, ...] = ()
    """Names of files and folders that run code (``.vscode``, ``.claude``...), read-only
    wherever they exist in the folders of a ``read_only_repositories`` tree, down to
    :data:`~pico3.sandbox_scan.SCAN_DEPTH` below it (``packages/web/.vscode``)."""
    read_only_folders: tuple[str, ...] = ()
    """Folders inside a writable one that stay read-only, and that no command may create
    where they are missing (a project's ``.claude/`` with hooks in it, ``.vscode/``): there an
    empty read-only folder is laid for as long as the command runs, removed after it (see
    :mod:`pico3.sandbox_placeholders`)."""
    proxy_socket: str | None = None
    """The unix socket of the :class:`~pico3.sandbox_proxy.DomainProxy` that is the sandbox's
    only way out (``None``: no network at all). Its folder is bound in read-only."""
    allow_domains: tuple[str, ...] = ()
    """The domains that proxy lets through (shown by :meth:`describe`)."""

    def writable(self) -> list[str]:
        """The writable paths, resolved (the ones that exist)."""
        paths = [self.project, self.temp_dir, *self.allow_write]
        return _existing(_expand(p, self.home) for p in paths)

    def kept_read_only(self) -> list[str]:
        """The read-only paths inside writable ones that exist, resolved: :attr:`read_only`,
        :attr:`read_only_folders` and the repositories and :attr:`read_only_names` of
        :attr:`read_only_repositories`."""
        repositories: list[str] = []
        for tree in (_expand(p, self.home) for p in self.read_only_repositories):
            entries = [
                os.path.join(tree, ".git"),
                *submodule_git_entries(tree),
                *find_entries(tree, (".git", *self.read_only_names)),
            ]
            repositories += [os.path.realpath(entry) for entry in entries]
        folders = [_expand(p, self.home) for p in self.read_only_folders]
        return _existing(
            [*(_expand(p, self.home) for p in self.read_only), *folders, *repositories]
        )

    def kept_absent(self) -> list[str]:
        """The folders no command may create, resolved: every one of
        :attr:`read_only_folders`, and the ``.git`` of each :attr:`read_only_repositories`
        tree that has no repository of its own, whether or not one is above it.

        A ``git init`` from inside would make a repository whose configuration git runs at the
        user's next ``git status`` there. In a tree inside another repository (a session in
        ``repo/packages/web``) the empty ``.git`` costs little: git passes over it to the outer
        repository (an empty ``.git`` folder is no repository, here as for git), and so do the
        agent's own listing and grep (``rg --no-require-git``); only a plain ``rg`` takes the
        tree for a repository's top while a command runs and leaves out the ignore rules of
        the folders above it (``rg --no-require-git`` keeps them)."""
        folders = [_expand(p, self.home) for p in self.read_only_folders]
        for tree in (_expand(p, self.home) for p in self.read_only_repositories):
            if not holds_something(os.path.join(tree, ".git")):
                folders.append(os.path.join(tree, ".git"))
        return folders

    def hidden(self) -> list[str]:
        """The unreadable paths, resolved (the ones that exist)."""
        return _existing(_expand(p, self.home) for p in self.deny_read)

    def hidden_names(self) -> list[str]:
        """Every spelling of the unreadable paths an error message may show: as configured,
        ``~`` expanded, and resolved."""
        names: list[str] = []
        for path in self.deny_read:
            home = self.home or os.path.expanduser("~")
            plain = home + path[1:] if path == "~" or path.startswith("~/") else path
            for name in (path, plain, _expand(path, self.home)):
                if name not in names:
                    names.append(name)
        return names

    def _network(self) -> str:
        return _network(self)

    def describe(self) -> list[str]:
        """The policy as lines a person reads (``/sandbox``, ``coding-agent config``)."""
        return [
            "read-only: the whole file system, except:",
            *(f"  writable: {p}" for p in (self.project, self.temp_dir, *self.allow_write)),
            *(f"  read-only inside: {p}" for p in self.read_only),
            *(
                f"  read-only inside, and not created where missing: {p}"
                for p in self.read_only_folders
            ),
            *(
                f"  read-only inside: {p}/.git (its submodules' and those in its folders "
                f"{SCAN_DEPTH} down too; not created where no repository is)"
                for p in self.read_only_repositories
            ),
            *(
                f"  read-only inside, where they are in its folders {SCAN_DEPTH} down: {p}: "
                + ", ".join(self.read_only_names)
                for p in self.read_only_repositories
                if self.read_only_names
            ),
            *(f"  unreadable: {p}" for p in self.deny_read),
            f"network: {self._network()}",
        ]


def _network(policy: SandboxPolicy) -> str:
    if policy.network:
        return "the host network"
    if policy.proxy_socket is not None:
        return "HTTPS to " + ", ".join(policy.allow_domains) + " only (through the proxy)"
    return "none"


def _existing(paths: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for path in paths:
        if path not in seen and os.path.lexists(path):
            seen.append(path)
    return seen


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A :class:`SandboxPolicy` and the bubblewrap that enforces it (an available
    :class:`SandboxStatus`; :meth:`create` finds one).

    ``enforced``: every command of the host runs inside unless its call was approved to run
    outside; otherwise (the default) only the calls a permission mode sends in do (the ``bash``
    tool's ``outside_sandbox: false``, which facets-approval's ``sandbox`` mode sets).
    """

    policy: SandboxPolicy
    status: SandboxStatus = field(default_factory=lambda: sandbox_available())
    enforced: bool = False

    def __post_init__(self) -> None:
        if not self.status.available or (self.status.bwrap is None and not self.status.seatbelt):
            raise RuntimeError(f"no sandbox: {self.status.reason}")

    @classmethod
    def create(
        cls, policy: SandboxPolicy, path: str | None = None, *, enforced: bool = False
    ) -> Sandbox | SandboxStatus:
        """The sandbox for ``policy``, or the :class:`SandboxStatus` saying why there is none."""
        status = sandbox_available(path)
        return cls(policy, status, enforced) if status.available else status

    def wrap(
        self, argv: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """``argv`` run in ``cwd`` inside the sandbox: the ``bwrap`` argv and its environment
        (``env`` with ``TMPDIR`` set to the session's temporary folder). Creates the temporary
        folder when missing. The argv may start with a shell that ``exec``s bubblewrap (to
        open the filter, or take the placeholders' lock), so the process started is
        bubblewrap's all the same; run it in a session of its own and kill that session to
        stop it, as any command."""
        policy = self.policy
        os.makedirs(policy.temp_dir, exist_ok=True)
        if self.status.seatbelt:
            return self._seatbelt(self.status.seatbelt, argv, cwd, env)
        bwrap = self.status.bwrap
        assert bwrap is not None
        seccomp = _filter_file()
        wrapped = [bwrap, *_namespace_options(self.status.disable_userns, network=policy.network)]
        wrapped += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        writable = policy.writable()
        for path in writable:
            wrapped += ["--bind", path, path]
        places = Placeholders.find(policy.kept_absent(), writable)
        for path in policy.kept_read_only():
            if path not in places.paths:
                wrapped += ["--ro-bind", path, path]
        wrapped += places.mounts()
        hidden = policy.hidden()
        hidden.append(private_folder())
        for path in hidden:
            if os.path.isdir(path):
                wrapped += ["--tmpfs", path, "--remount-ro", path]
            else:
                wrapped += ["--ro-bind", "/dev/null", path]
        environ = dict(env)
        environ["TMPDIR"] = os.path.realpath(policy.temp_dir)
        proxied = policy.proxy_socket is not None and not policy.network
        if proxied:
            assert policy.proxy_socket is not None
            folder = os.path.dirname(os.path.realpath(policy.proxy_socket))
            wrapped += ["--ro-bind", folder, folder]
            # the forwarder connects to the proxy's unix socket for every connection, so it
            # loads the filter itself, for the command only (after forking its loop)
            program = "" if _FILTER is None else _FILTER.hex()
            python = [sys.executable, "-I", "-S", "-c", FORWARDER, str(PROXY_PORT)]
            argv = [*python, os.path.realpath(policy.proxy_socket), program, *argv]
            url = f"http://127.0.0.1:{PROXY_PORT}"
            for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
                environ[name] = url
            environ["NO_PROXY"] = environ["no_proxy"] = "localhost,127.0.0.1"
            seccomp = None
        elif seccomp is not None and not places.transient:
            wrapped = _loading_filter(wrapped, seccomp)
        elif seccomp is not None:
            wrapped += ["--seccomp", "3"]  # opened by the placeholders' wrapper
        wrapped += ["--chdir", os.fspath(cwd), "--", *argv]
        return places.command(wrapped, seccomp), environ

    def _seatbelt(
        self, runner: str, argv: Sequence[str], cwd: str | os.PathLike[str], env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """macOS: ``sandbox-exec -p PROFILE`` around ``argv`` (see :mod:`pico3.seatbelt`)."""
        policy = self.policy
        proxied = policy.proxy_socket is not None and not policy.network
        profile = seatbelt_profile(
            writable=policy.writable(),
            read_only=[*policy.kept_read_only(), *policy.kept_absent()],
            hidden=policy.hidden(),
            network=policy.network,
            proxy_socket=policy.proxy_socket if proxied else None,
            proxy_port=PROXY_PORT,
        )
        environ = dict(env)
        environ["TMPDIR"] = os.path.realpath(policy.temp_dir)
        command = list(argv)
        if proxied:
            assert policy.proxy_socket is not None
            python = [sys.executable, "-I", "-S", "-c", FORWARDER, str(PROXY_PORT)]
            command = [*python, os.path.realpath(policy.proxy_socket), "", *command]
            url = f"http://127.0.0.1:{PROXY_PORT}"
            for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
                environ[name] = url
            environ["NO_PROXY"] = environ["no_proxy"] = "localhost,127.0.0.1"
        chdir = ["/bin/sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", os.fspath(cwd)]
        return [runner, "-p", profile, *chdir, *command], environ


class SandboxMode:
    """Whether the session's permission mode runs its commands in the sandbox now.

    The host puts one in ``HarnessOptions.services`` (:data:`SANDBOX_MODE_SERVICE`); the
    feature that owns the permission mode (facets-approval) sets :attr:`active` whenever the mode
    is, or stops being, ``sandbox``; what runs commands on the session's behalf besides the
    ``bash`` tool (user hooks) reads it through :func:`commands_sandbox`."""

    __slots__ = ("active",)

    def __init__(self, active: bool = False) -> None:
        self.active = active


def commands_sandbox(services: Mapping[str, object]) -> Sandbox | None:
    """The sandbox the session's own commands run in now, read from a harness's ``services``:
    the session's :class:`Sandbox` (:data:`SANDBOX_SERVICE`) when it is enforced
    (``sandbox.enabled``) or the permission mode is ``sandbox`` (:class:`SandboxMode` active);
    else ``None`` (no sandbox here, or commands run unconfined in this mode)."""
    sandbox = services.get(SANDBOX_SERVICE)
    if not isinstance(sandbox, Sandbox):
        return None
    mode = services.get(SANDBOX_MODE_SERVICE)
    if sandbox.enforced or (isinstance(mode, SandboxMode) and mode.active):
        return sandbox
    return None


_REFUSALS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("port not allowed by the sandbox",),
        "the sandbox's proxy refused that port: an allowed domain is reached on ports 80 and 443 "
        "only (a sandbox.allow_domains entry host:port allows another)",
    ),
    (
        (
            "domain not allowed by the sandbox",
            "CONNECT tunnel failed, response 403",
            "Tunnel connection failed: 403",
            "403 Forbidden",
        ),
        "the sandbox's proxy refused that domain or port: only the sandbox.allow_domains are "
        "reachable, over HTTPS on ports 80 and 443 (an entry host:port allows another)",
    ),
    (
        ("Read-only file system",),
        "the sandbox refused a write: only the project folder and the temporary folder "
        "($TMPDIR) are writable, and in the project not its git repository (a commit, "
        "checkout or stash runs outside) nor the files that make code run later",
    ),
    (
        (
            "Network is unreachable",
            "Temporary failure in name resolution",
            "Could not resolve",
            "Name or service not known",
            "Connection refused",
            "No address associated",
        ),
        "the sandbox has no network: connections and DNS lookups fail",
    ),
    (
        ("Permission denied", "Operation not permitted"),
        "the sandbox may have refused this: credentials and the agent's own files are hidden, "
        "and new namespaces and unix sockets (a database's or an agent's local socket) are not "
        "allowed",
    ),
)


def explain_refusal(output: str, hidden: Iterable[str] = ()) -> str | None:
    """The one line to add to a failed sandboxed command's result when its ``output`` shows a
    refusal (what the sandbox refused, and how to ask to run outside), or ``None``. ``hidden``
    are the paths the sandbox hides (as written and resolved): output naming one says so."""
    for path in hidden:
        if path and path in output:
            return (
                f"[Sandbox: {path} is hidden inside the sandbox (credentials and the agent's own "
                f"files are unreadable); {OUTSIDE_HINT}.]"
            )
    for marks, what in _REFUSALS:
        if any(mark in output for mark in marks):
            return f"[Sandbox: {what}; {OUTSIDE_HINT}.]"
    return None
