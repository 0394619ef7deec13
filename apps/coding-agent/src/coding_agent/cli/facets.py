"""``coding-agent facets add|list|remove``: feature packages in the agent's own environment.

* ``facets add PATH`` installs the package folder at PATH **editable** (edits reload with
  ``--dev`` or ``/reload``; a wheel file at PATH is installed as it is); ``facets add
  REQUIREMENT`` installs a requirement (``my-feature==1.2``, a wheel, a URL). Both install into
  the agent's *facets site* (:mod:`coding_agent.settings.facets_site`:
  ``~/.local/share/coding-agent/facets``), not into the environment the agent runs from, so a
  workspace's ``uv sync`` (which removes every package its lock does not name) leaves them be;
  with ``uv pip`` when uv is on PATH, else ``python -m pip``. The package is installed into a
  staging folder first: one that declares no facet package (no ``chord.facets`` entry point,
  ``facets add requests``) is refused and nothing is left installed. An installed package is
  enabled: the next session loads it, and a running agent loads it on ``/reload``.
* ``facets list`` shows every facet package the agent can see: installed ones (name,
  distribution, version, source) and the project's ``.coding-agent/facets`` folders, with their
  trust and state.
* ``facets remove NAME`` uninstalls the distribution that provides facet package NAME (from the
  facets site, or from the agent's environment for a package installed there); a running
  agent retires it on ``/reload``. A package the agent's safety depends on
  (:data:`coding_agent.settings.safety.SAFETY_PACKAGES`: ``facets-approval``) is refused unless
  ``--force`` is given, with what follows (every call that needs approval is then blocked).

A failed install changes nothing and says why (the installer's own message is shown).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # chord is imported where a command runs: `coding-agent --help` stays light
    from chord import FacetPackage

__all__ = ["FacetRow", "add_facets_commands", "facet_rows", "run_facets_command"]


def add_facets_commands(commands: Any) -> None:
    """Add ``facets add|list|remove`` to the CLI's subparsers."""
    facets = commands.add_parser(
        "facets",
        help="add, list or remove feature (facet) packages of this agent",
        description="Install feature packages into the agent's environment, list, remove them.",
    )
    actions = facets.add_subparsers(dest="facets_command", metavar="{add,list,remove}")
    actions.required = True
    add = actions.add_parser(
        "add",
        help="install a feature package (editable for a folder) and enable it",
        description="Install PATH (editable) or REQUIREMENT into the agent's environment. "
        "A running agent loads it on /reload.",
    )
    add.add_argument("target", metavar="PATH|REQUIREMENT")
    actions.add_parser("list", help="every facet package: source, version, trust and state")
    remove = actions.add_parser(
        "remove",
        help="uninstall a feature package",
        description="Uninstall the distribution providing facet package NAME; a running "
        "agent retires it on /reload. A package the agent's safety depends on (facets-approval) "
        "is refused unless --force is given: without it every tool call that needs approval "
        "is blocked.",
    )
    remove.add_argument("name", metavar="NAME")
    remove.add_argument(
        "--force",
        action="store_true",
        help="remove a package the agent's safety depends on (facets-approval) anyway",
    )


@dataclass(frozen=True, slots=True)
class FacetRow:
    """One line of ``facets list``."""

    name: str
    distribution: str
    version: str
    source: str
    trust: str
    state: str


def _installer() -> list[str]:
    import shutil  # here, as subprocess below: the parser (--help) imports this module

    uv = shutil.which("uv")
    if uv is not None:
        return [uv, "pip"]
    return [sys.executable, "-m", "pip"]


def _run_installer(arguments: list[str]) -> None:
    command = [*_installer(), *arguments]
    if command[1] == "pip" and command[0] != sys.executable:
        command[3:3] = ["--python", sys.executable]  # uv pip <verb> --python <this agent>
    environment = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    import subprocess

    result = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip()
        raise RuntimeError(f"{' '.join(command[:3])} failed:\n{output}")


def _add(target: str) -> list[str]:
    """Install ``target`` (a folder: editable) into the facets site through a staging folder;
    returns the facet package names it declares. Raises ``RuntimeError`` for one that declares
    none (nothing is left installed) or a failed install (nothing is changed)."""
    import importlib.metadata
    import shutil
    import tempfile

    from chord import ENTRY_POINT_GROUP
    from coding_agent.settings.facets_site import activate, facets_site, unmet_requirements

    path = Path(target).expanduser()
    if path.is_dir():
        spec = ["-e", str(path.resolve())]
    else:
        spec = [str(path.resolve()) if path.is_file() else target]
    site_dir = facets_site()
    site_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".facets-stage-", dir=site_dir.parent))
    try:
        _run_installer(["install", "--target", str(stage), "--no-deps", *spec])
        staged = list(importlib.metadata.distributions(path=[str(stage)]))
        names = [ep.name for d in staged for ep in d.entry_points if ep.group == ENTRY_POINT_GROUP]
        if not names:
            what = ", ".join(sorted({d.metadata["Name"] for d in staged})) or target
            raise RuntimeError(
                f"{target} is not a feature package: {what} declares no facet package (no "
                f"`{ENTRY_POINT_GROUP}` entry point), so nothing was installed. A feature "
                "package names its facets in pyproject.toml under "
                f'[project.entry-points."{ENTRY_POINT_GROUP}"]; to add a library a facet '
                "needs, list it in that package's dependencies"
            )
        activate()
        requires = [line for d in staged for line in (d.requires or [])]
        unmet = unmet_requirements(requires)
        if unmet:
            _run_installer(["install", "--target", str(stage), *unmet])
        site_dir.mkdir(exist_ok=True)
        for dist in staged:
            _remove_from_site(site_dir, dist.metadata["Name"])
        for item in stage.iterdir():
            destination = site_dir / item.name
            if destination.is_dir() and not destination.is_symlink():
                shutil.rmtree(destination)
            elif destination.exists() or destination.is_symlink():
                destination.unlink()
            os.replace(item, destination)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    activate()
    return names


def _dist_infos(site_dir: Path, distribution: str) -> list[Path]:
    import re

    normalized = re.sub(r"[-_.]+", "_", distribution).lower()
    return [
        info
        for info in site_dir.glob("*.dist-info")
        if re.sub(r"[-_.]+", "_", info.name.removesuffix(".dist-info").rsplit("-", 1)[0]).lower()
        == normalized
    ]


def _remove_from_site(site_dir: Path, distribution: str) -> bool:
    """Remove ``distribution`` from the facets site (the files its ``RECORD`` lists, then its
    metadata); ``False`` when it is not there."""
    import csv
    import shutil

    infos = _dist_infos(site_dir, distribution)
    for info in infos:
        try:
            rows = list(csv.reader((info / "RECORD").read_text().splitlines()))
        except OSError:
            rows = []
        for row in rows:
            if not row:
                continue
            file = (site_dir / row[0]).resolve()
            if file.is_relative_to(site_dir.resolve()) and file.is_file():
                file.unlink()
        shutil.rmtree(info, ignore_errors=True)
    return bool(infos)


def _source(package: FacetPackage) -> str:
    if package.reloadable and package.project_dir is not None:
        return f"editable {package.project_dir}"
    return str(package.package_dir)


def _version(distribution: str | None) -> str:
    if distribution is None:
        return "-"
    import importlib.metadata  # ~25 ms (email, zipfile...): --help and -p need none of it

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def facet_rows(cwd: Path) -> tuple[list[FacetRow], list[str]]:
    """The rows of ``facets list`` and the problems found on the way (broken entry points)."""
    from chord import FacetDiscoveryError, facet_package_from_folder, installed_facet_packages

    problems: list[str] = []
    rows = [
        FacetRow(
            package.name,
            package.distribution or "-",
            _version(package.distribution),
            _source(package),
            "installed (yours)",
            "enabled",
        )
        for package in installed_facet_packages(on_error=lambda error: problems.append(str(error)))
    ]
    # lazy: start-up time (every command line builds this parser; these load only for facets add/remove)
    from coding_agent.settings.trust import TrustError, TrustStore, check_project

    try:
        project = check_project(cwd, store=TrustStore.default())
    except TrustError as error:
        problems.append(str(error))
        return rows, problems
    trust = "trusted project" if project.trusted else "untrusted project"
    state = "enabled" if project.trusted else "disabled (coding-agent --trust to load)"
    for folder in project.facets_dirs:
        try:
            packages = facet_package_from_folder(folder)
        except FacetDiscoveryError as error:
            problems.append(str(error))
            continue
        rows += [FacetRow(p.name, "-", "-", f"folder {folder}", trust, state) for p in packages]
    return rows, problems


def _distribution_of(name: str) -> tuple[str, str]:
    """The facet package named ``name`` (or provided by distribution ``name``): its package
    name and its distribution."""
    from chord import installed_facet_packages

    for package in installed_facet_packages(on_error=lambda _error: None):
        if name in (package.name, package.distribution) and package.distribution is not None:
            return package.name, package.distribution
    raise LookupError(
        f"no installed facet package is named {name!r}; `coding-agent facets list` shows them"
    )


def run_facets_command(args: Any, cwd: Path) -> int:
    """Run ``facets add|list|remove``; returns the exit status (1 with a message on failure)."""
    from chord import FacetDiscoveryError, installed_facet_packages

    command = args.facets_command
    try:
        if command == "list":
            rows, problems = facet_rows(cwd)
            header = FacetRow("NAME", "DISTRIBUTION", "VERSION", "SOURCE", "TRUST", "STATE")
            table = [header, *rows]
            fields = FacetRow.__slots__
            widths = [max(len(getattr(row, f)) for row in table) for f in fields]
            for row in table:
                cells = [getattr(row, f).ljust(w) for f, w in zip(fields, widths, strict=True)]
                print("  ".join(cells).rstrip())
            for problem in problems:
                print(f"coding-agent: warning: {problem}", file=sys.stderr)
            return 0
        if command == "add":
            declared = _add(args.target)
            after = installed_facet_packages(on_error=lambda _error: None)
            added = [p for p in after if p.name in declared]
            for package in added:
                how = "editable" if package.reloadable else "installed"
                print(
                    f"added {package.name} ({package.distribution} "
                    f"{_version(package.distribution)}, {how}): enabled"
                )
            print("a running agent loads it on /reload; new sessions load it at start")
            return 0
        if command == "remove":
            # lazy: start-up time (every command line builds this parser; these load only for facets add/remove)
            from coding_agent.settings.safety import removal_consequence, restore_command

            package, distribution = _distribution_of(args.name)
            consequence = removal_consequence(package)
            if consequence is not None and not args.force:
                print(
                    f"coding-agent facets remove: error: refusing to remove {package}: the "
                    f"agent's safety depends on it ({consequence}). Remove it anyway with "
                    f"`coding-agent facets remove {args.name} --force`.",
                    file=sys.stderr,
                )
                return 1
            from coding_agent.settings.facets_site import facets_site

            if not _remove_from_site(facets_site(), distribution):
                _run_installer(["uninstall", distribution])
            print(f"removed {args.name} ({distribution}); a running agent retires it on /reload")
            if consequence is not None:
                print(
                    f"warning: {consequence}; restore it with `{restore_command(package)}`",
                    file=sys.stderr,
                )
            return 0
    except (RuntimeError, LookupError, FacetDiscoveryError, OSError) as error:
        print(f"coding-agent facets {command}: error: {error}", file=sys.stderr)
        return 1
    raise AssertionError(f"unknown facets command {command!r}")
