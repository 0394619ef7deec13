"""``coding-agent doctor``: is every package the agent's safety depends on live?

For each package of :data:`coding_agent.settings.safety.SAFETY_PACKAGES` (``facets-approval``) it checks,
in order, and stops at the first failure:

1. **installed** — an entry point of group ``chord.facets`` declares it (what discovery finds);
2. **loads** — a fresh generation of its ``"session"`` facets imports (what a worker loads);
3. **approves** — set up beside a harness (on memory storage, nothing of a session touched), it
   registers the approval authority pico3's gate requires
   (docs/design/harness.md#approval-gate).

It prints one line per package (``live`` or what failed, what follows and the command that
restores it), then the other default feature packages (installed or not; they do not change the
exit status), and exits 0 when every safety package is live, 1 otherwise. A separate subcommand
rather than part of ``config``: ``config`` reads files and prints settings, while this imports and
activates code, and its exit status is the answer (a script can run ``coding-agent doctor`` before
trusting an install).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from coding_agent.settings import safety

__all__ = ["SafetyCheck", "check_safety_package", "run_doctor", "warm_start_state"]


@dataclass(frozen=True, slots=True)
class SafetyCheck:
    """The outcome for one safety package: ``live``, else the failed step and why."""

    package: str
    live: bool
    detail: str


def check_safety_package(package_name: str) -> SafetyCheck:
    """Installed, loadable and providing the approval authority (module docs)."""
    from chord import FacetDiscoveryError, installed_facet_packages, load_generation

    problems: list[str] = []
    found = [
        p
        for p in installed_facet_packages(on_error=lambda error: problems.append(str(error)))
        if p.name == package_name
    ]
    if not found:
        why = f"not installed{': ' + '; '.join(problems) if problems else ''}"
        return SafetyCheck(package_name, False, why)
    package = found[0]
    version = _version(package.distribution)
    where = f"{package.distribution or package_name} {version}, {package.package_dir}"
    try:
        generation = load_generation(package, "session")
    except (FacetDiscoveryError, Exception) as error:
        return SafetyCheck(package_name, False, f"installed ({where}) but fails to load: {error}")
    try:
        import anyio

        approves = anyio.run(_provides_authority, generation.facets)
    except Exception as error:
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]  # the one failure inside the task group
        why = f"{type(error).__name__}: {error}"
        return SafetyCheck(
            package_name, False, f"installed ({where}), loads, but fails to start: {why}"
        )
    finally:
        generation.purge()
    if not approves:
        return SafetyCheck(
            package_name,
            False,
            f"installed ({where}) and loads, but registers no approval authority",
        )
    return SafetyCheck(package_name, True, f"installed ({where}), loads, approves tool calls")


async def _provides_authority(facets: tuple[object, ...]) -> bool:
    """Set ``facets`` up beside a harness on memory storage: is an approval authority live?"""
    import anyio

    from chord import BACKGROUND, Facet, FacetEnvironment, create_facet_host, define_facet
    from pico3 import HarnessService, HarnessServiceApi, MemoryStorage, harness_session_facet

    storage = MemoryStorage()
    box: list[HarnessServiceApi] = []
    live = False

    def probe(env: FacetEnvironment) -> None:
        box.append(env.use(HarnessService))

    async with anyio.create_task_group() as group:
        host = create_facet_host(
            [
                harness_session_facet(lambda: storage, task_group=group),
                *(facet for facet in facets if isinstance(facet, Facet)),
                define_facet("coding-agent/doctor", probe),
            ]
        )
        async with host:
            await box[0].resume(BACKGROUND)
            live = bool(box[0].harness.approval_authorities())
        group.cancel_scope.cancel()
    return live


def _version(distribution: str | None) -> str:
    if distribution is None:
        return "-"
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def warm_start_state() -> str:
    """Whether the warm start is on (and why), and whether its fork server runs now."""
    from coding_agent.settings import warm_start

    on, origin = warm_start.enabled()
    server = warm_start.ping()
    running = (
        f"a server is running (pid {server['pid']}, {server['modules']} modules preloaded, "
        f"{server['children']} commands running; stop it: coding-agent warm-start stop)"
        if server is not None
        else "no server is running"
    )
    return f"{'on' if on else 'off'} ({origin}); {running}"


def run_doctor(out: TextIO, err: TextIO) -> int:
    """Print the checks to ``out`` (the problems to ``err``); 0 when every safety package is
    live, 1 otherwise."""
    from chord import installed_facet_packages

    status = 0
    print("safety packages (without them the agent blocks what it cannot ask about):", file=out)
    for name, consequence in safety.SAFETY_PACKAGES.items():
        check = check_safety_package(name)
        print(f"  {name}: {'live' if check.live else 'MISSING'}: {check.detail}", file=out)
        if not check.live:
            status = 1
            print(
                f"coding-agent doctor: error: {name} is not live, so {consequence}; restore it "
                f"with `{safety.restore_command(name)}`",
                file=err,
            )
    installed = {p.name: p for p in installed_facet_packages(on_error=lambda _error: None)}
    print("default feature packages:", file=out)
    for name in safety.default_packages():
        if name in safety.SAFETY_PACKAGES:
            continue
        package = installed.get(name)
        state = (
            f"installed ({package.distribution or name} {_version(package.distribution)})"
            if package is not None
            else f"not installed (restore: `{safety.restore_command(name)}`)"
        )
        print(f"  {name}: {state}", file=out)
    print(f"warm start: {warm_start_state()}", file=out)
    out.flush()
    err.flush()
    return status
