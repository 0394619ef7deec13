"""Project trust (issue 8, docs/design/agent.md#features, project trust).

The store and the discovery in process, on real files; the command line as a real subprocess:
a project whose ``.coding-agent/facets/marker_pkg`` writes a marker file when its session facet
loads, run headless (``-p``) untrusted, with ``--trust``, remembered, with ``--no-trust``, and
with a corrupt trust file.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_agent.settings.trust import (
    Decision,
    TrustError,
    TrustStore,
    check_project,
    check_project_servers,
    find_local_config,
    is_trusted,
    local_facets_dirs,
    project_root_for,
    project_servers,
    server_fingerprint,
    trust_path,
)
from coding_agent.settings.xdg import config_home

PLUGIN = """
from pathlib import Path

from chord.facets import define_facet
from chord import hookimpl

MARKER = Path({marker!r})


def setup(env):
    MARKER.write_text("loaded\\n")


facet = define_facet("test/marker", setup)


@hookimpl
def chord_facets(host):
    return [facet] if host == "session" else []
"""

WARNING = "this project's own setup waits for --trust: .coding-agent/facets (1 package)"
FACETS_WARNING = (
    "This project has 1 local facet package (.coding-agent/facets): not loaded. "
    "--trust to trust this folder"
)


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own ``XDG_CONFIG_HOME``: the user's trust file is never touched."""
    folder = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project carrying one local facet package whose session facet writes a marker."""
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (folder / "src").mkdir()
    package = folder / ".coding-agent" / "facets" / "marker_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A project-local facet package."""\n')
    (package / "plugin.py").write_text(PLUGIN.format(marker=str(tmp_path / "marker")))
    return folder


def _store(config_dir: Path) -> TrustStore:
    return TrustStore(config_dir / "coding-agent" / "trust.json")


# -- where things are -----------------------------------------------------------------------------
def test_the_trust_file_lives_under_xdg_config_home(config_dir: Path) -> None:
    assert config_home() == config_dir
    assert trust_path() == config_dir / "coding-agent" / "trust.json"
    assert TrustStore.default().path == trust_path()
    relative = {"XDG_CONFIG_HOME": "relative/dir"}
    assert config_home(relative) == Path(os.path.expanduser("~")) / ".config"


def test_the_project_is_the_git_root_and_its_config_is_found_from_a_subfolder(
    project: Path,
) -> None:
    deep = project / "src" / "pkg"
    deep.mkdir()
    assert find_local_config(deep) == project / ".coding-agent"
    assert project_root_for(deep) == project
    (project / "src" / ".coding-agent").mkdir()
    assert find_local_config(deep) == project / ".coding-agent", "only the git root's counts"
    assert project_root_for(deep) == project


def test_discovery_stops_at_the_git_root(tmp_path: Path) -> None:
    (tmp_path / ".coding-agent" / "facets" / "outside").mkdir(parents=True)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "lib").mkdir()
    assert find_local_config(repo / "lib") is None, "a .coding-agent above the repo is not its"
    assert project_root_for(repo / "lib") == repo, "without one, the project is the git root"
    loose = tmp_path / "loose" / "deeper"
    loose.mkdir(parents=True)
    assert project_root_for(loose) == loose, "no git root: the project is the working folder"
    assert find_local_config(loose) is None, "nothing above the working folder is searched"


def test_an_empty_dot_git_below_a_repository_is_not_the_project_root(tmp_path: Path) -> None:
    """The sandbox's placeholder (an empty ``.git``) in a session folder inside a repository,
    while a command runs: git passes over it, and the project stays the outer repository."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "sub" / ".git").mkdir(parents=True)
    assert project_root_for(repo / "sub") == repo
    (repo / "sub" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert project_root_for(repo / "sub") == repo / "sub", "a repository of its own"


def test_project_paths_are_resolved(tmp_path: Path, project: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(project)
    assert project_root_for(link / "src") == project


def test_local_facets_dirs_lists_package_folders_only(project: Path) -> None:
    facets = project / ".coding-agent" / "facets"
    (facets / "another").mkdir()
    (facets / "__pycache__").mkdir()
    (facets / ".hidden").mkdir()
    (facets / "README.md").write_text("notes\n")
    assert local_facets_dirs(project) == [facets / "another", facets / "marker_pkg"]
    assert local_facets_dirs(project / "src") == [], "no .coding-agent/facets there"


# -- whose folder it is (issue 24 deliver 1) ------------------------------------------------------
def _plant(folder: Path, marker: Path) -> None:
    """What another user leaves in a folder everyone may write: a git root and a facet package
    that writes ``marker`` when loaded."""
    package = folder / ".coding-agent" / "facets" / "evil"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Planted."""\n')
    (package / "plugin.py").write_text(PLUGIN.format(marker=str(marker)))
    (folder / ".git").mkdir(exist_ok=True)


def test_a_planted_config_in_a_world_writable_folder_is_never_searched(
    shared_tmp: Path, tmp_path: Path
) -> None:
    _plant(shared_tmp, tmp_path / "marker")
    work = shared_tmp / "work"
    work.mkdir(mode=0o755)
    work.chmod(0o755)
    assert project_root_for(work) == work, "the walk stops below the world-writable folder"
    assert find_local_config(work) is None
    project = check_project(work, decide=True)
    assert project.root == work and project.facets_dirs == () and project.problem is None
    done = _run(work, tmp_path, "--trust", cwd=work)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "marker").exists(), "the planted package never ran"
    assert str(shared_tmp) not in _recorded(tmp_path)["projects"]


def test_a_world_writable_project_is_never_trusted(shared_tmp: Path, tmp_path: Path) -> None:
    _plant(shared_tmp, tmp_path / "marker")
    problem = f"{shared_tmp} is writable by every user (mode 1777)"
    project = check_project(shared_tmp)
    assert project.root == shared_tmp and project.problem == problem
    assert project.loaded_dirs == () and not project.trusted
    assert project.warning() == (
        "This project has 1 local facet package (.coding-agent/facets): not loaded, "
        f"and never will be: {problem}"
    )
    with pytest.raises(TrustError, match=re.escape("refusing to trust this project: " + problem)):
        check_project(shared_tmp, decide=True)
    TrustStore.default().set(shared_tmp, True)  # an old decision, or a hand-edited trust file
    assert check_project(shared_tmp).loaded_dirs == (), "no decision makes it trusted"
    done = _run(shared_tmp, tmp_path, "--trust", cwd=shared_tmp)
    assert done.returncode == 2
    assert f"coding-agent: error: refusing to trust this project: {problem}" in done.stderr
    assert not (tmp_path / "marker").exists()


def test_under_umask_000_a_fresh_project_is_refused_until_fixed(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        folder = tmp_path / "open"
        (folder / ".coding-agent" / "facets" / "pkg").mkdir(parents=True)
        (folder / ".git").mkdir()
    finally:
        os.umask(old)
    assert "is writable by every user (mode 0777)" in str(check_project(folder).problem)
    folder.chmod(0o755)
    assert "/.coding-agent is writable by every user" in str(check_project(folder).problem)
    (folder / ".coding-agent").chmod(0o755)
    (folder / ".coding-agent" / "facets").chmod(0o755)
    assert check_project(folder).problem is None
    pkg = folder / ".coding-agent" / "facets" / "pkg"
    with pytest.raises(
        TrustError, match=re.escape(f"local facet package {pkg} is writable by every user")
    ):
        check_project(folder, decide=True)


def test_another_users_folders_are_never_trusted_or_searched(
    other_user: pwd.struct_passwd, shared_tmp: Path, tmp_path: Path
) -> None:
    theirs = shared_tmp / "theirs"
    theirs.mkdir()
    theirs.chmod(0o755)
    _plant(theirs, tmp_path / "marker")
    mine = theirs / "mine"
    mine.mkdir()
    for path in (theirs, *theirs.rglob("*")):
        if path != mine:
            os.chown(path, other_user.pw_uid, other_user.pw_gid)
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert project_root_for(mine) == mine, "their git root is not searched"
    assert find_local_config(mine) is None
    project = check_project(theirs)
    assert project.owner == other_user.pw_name
    problem = f"{theirs} is owned by {other_user.pw_name}, not by you ({me})"
    assert project.problem == problem
    with pytest.raises(TrustError, match=re.escape(problem)):
        check_project(theirs, decide=True)
    done = _run(theirs, tmp_path, "--trust", cwd=theirs)
    assert done.returncode == 2 and problem in done.stderr
    done = _run(mine, tmp_path, "--trust", cwd=mine)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "marker").exists(), "their package never ran as me"


# -- the store ------------------------------------------------------------------------------------
def test_a_decision_is_recorded_under_the_resolved_path(config_dir: Path, project: Path) -> None:
    store = TrustStore.default()
    assert store.get(project) is None and not is_trusted(project)
    at = datetime(2026, 11, 29, 23, 40, tzinfo=UTC)
    decision = store.set(project / "src" / "..", True, at=at)
    assert decision == Decision(trusted=True, at=at)
    assert store.get(project) == decision and is_trusted(project)
    data = json.loads(trust_path().read_text())
    assert data == {
        "version": 1,
        "projects": {str(project): {"trusted": True, "at": "2026-11-29T23:40:00Z"}},
    }
    store.set(project, False)
    assert not is_trusted(project)
    leftovers = [p.name for p in trust_path().parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == [], "the temporary file is renamed into place"
    assert trust_path().parent.stat().st_mode & 0o777 == 0o700
    assert trust_path().stat().st_mode & 0o777 == 0o600, "private to the user"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "corrupt"),
        (b"[]", "corrupt"),
        (b'{"version": 1, "projects": {"/p": {"trusted": "yes", "at": "2026-01-01T00:00:00Z"}}}', "corrupt"),
        (b'{"version": 1, "projects": {"/p": {"trusted": true, "at": "2026-01-01T00:00:00"}}}', "corrupt"),
        (b'{"version": 2, "projects": {}}', "unsupported trust file version 2"),
        (b'{"version": 1, "projects": {"rel/p": {"trusted": true, "at": "2026-01-01T00:00:00Z"}}}', "not an absolute path"),
    ],
)  # fmt: skip
def test_a_bad_trust_file_is_an_error_naming_it_and_is_left_alone(
    config_dir: Path, project: Path, content: bytes, problem: str
) -> None:
    path = trust_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    store = TrustStore.default()
    with pytest.raises(TrustError, match=problem) as raised:
        store.get(project)
    assert str(path) in str(raised.value)
    with pytest.raises(TrustError, match=re.escape(problem)):
        store.set(project, True)
    assert path.read_bytes() == content, "never silently reset"


def test_naive_decision_times_are_refused(project: Path) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        TrustStore.default().set(project, True, at=datetime(2026, 1, 1))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans()), max_size=5))
def test_the_store_keeps_the_last_decision_per_project(steps: list[tuple[str, bool]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = TrustStore(Path(folder) / "trust.json")
        expected: dict[str, bool] = {}
        for name, trusted in steps:
            store.set(Path(folder) / name, trusted)
            expected[str((Path(folder) / name).resolve())] = trusted
        assert {key: value.trusted for key, value in store.load().items()} == expected
        assert TrustStore(store.path).load() == store.load(), "a fresh store reads the same"


def test_concurrent_decisions_are_all_kept(tmp_path: Path) -> None:
    # Each writer re-reads the file under the lock, so no decision overwrites another.
    store = TrustStore(tmp_path / "trust.json")
    projects = [tmp_path / f"p{number}" for number in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda project: TrustStore(store.path).set(project, True), projects))
    assert sorted(store.load()) == sorted(str(project) for project in projects)


# -- one start ------------------------------------------------------------------------------------
# -- the project's MCP servers: approved as written -------------------------------------------------
def _servers(project: Path, servers: dict[str, object]) -> None:
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_trusting_approves_the_servers_written_then_and_no_later_one(project: Path) -> None:
    one = {"command": "npx", "args": ["-y", "server-one"]}
    _servers(project, {"one": one, "off": {"command": "x", "disabled": True}})
    check_project(project, decide=True)  # --trust
    assert check_project_servers(project).approved == {"one": one}
    approval = TrustStore.default().approved_servers(project)
    assert approval is not None and list(approval.servers) == ["one"]  # a disabled one is not
    assert json.loads(trust_path().read_text())["projects"][str(project)].keys() == {
        "trusted",
        "at",
    }, "trust.json keeps its shape: an older coding-agent still reads it"

    two = {"command": "sh", "args": ["-c", "evil"]}
    _servers(project, {"one": {**one, "args": ["-y", "server-one@2"]}, "two": two})
    found = check_project_servers(project)
    assert (found.approved, found.waiting) == ({}, ("one", "two"))
    _servers(project, {"two": two, "one": dict(reversed(one.items()))})  # order is no change
    assert check_project_servers(project).waiting == ("two",)

    TrustStore.default().approve_servers(project, project_servers(project))  # /trust agreed
    assert check_project_servers(project).approved == {"two": two, "one": one}


def test_a_project_trusted_before_approvals_keeps_its_servers_as_they_are(project: Path) -> None:
    """No record (trusted by an older coding-agent): today's servers are recorded, once."""
    _servers(project, {"one": {"command": "true"}})
    TrustStore.default().set(project, True)
    assert TrustStore.default().approved_servers(project) is None
    assert check_project_servers(project).approved == {"one": {"command": "true"}}
    _servers(project, {"one": {"command": "true"}, "two": {"command": "false"}})
    assert check_project_servers(project).waiting == ("two",)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_a_fingerprint_changes_with_the_entry_and_not_with_its_key_order(value: object) -> None:
    entry = {"command": "x", "args": value}
    assert server_fingerprint(entry) == server_fingerprint(dict(reversed(entry.items())))
    assert server_fingerprint(entry) != server_fingerprint({**entry, "env": {"A": "1"}})
    assert server_fingerprint(entry) != server_fingerprint({**entry, "args": [value]})


def test_a_bad_approvals_file_is_an_error_naming_it(config_dir: Path, project: Path) -> None:
    _servers(project, {"one": {"command": "true"}})
    check_project(project, decide=True)
    path = config_dir / "coding-agent" / "server-approvals.json"
    path.write_text("{not json")
    with pytest.raises(
        TrustError, match=re.escape(f"{path}: the server approvals file is corrupt")
    ):
        check_project_servers(project)
    assert path.read_text() == "{not json", "left as it is"


def test_check_project_loads_local_packages_only_when_trusted(project: Path) -> None:
    untrusted = check_project(project / "src")
    assert untrusted.root == project and not untrusted.trusted
    assert untrusted.loaded_dirs == ()
    assert untrusted.warning("--trust") == FACETS_WARNING
    trusted = check_project(project, decide=True)
    assert trusted.trusted and trusted.warning() is None
    assert trusted.loaded_dirs == (project / ".coding-agent" / "facets" / "marker_pkg",)
    refused = check_project(project, decide=False)
    assert refused.loaded_dirs == ()
    assert "marked untrusted" in (refused.warning() or "")
    assert check_project(project).decision == refused.decision, "the decision is remembered"


def test_a_trusted_project_with_a_bad_package_folder_is_an_error(project: Path) -> None:
    bad = project / ".coding-agent" / "facets" / "notes"
    bad.mkdir()
    assert check_project(project).loaded_dirs == (), "untrusted: nothing is even looked at"
    with pytest.raises(TrustError, match="not a facet package folder") as raised:
        check_project(project, decide=True)
    assert str(bad) in str(raised.value)


def test_a_project_without_local_packages_warns_about_nothing(tmp_path: Path) -> None:
    (tmp_path / "plain" / ".git").mkdir(parents=True)
    project = check_project(tmp_path / "plain")
    assert project.facets_dirs == () and project.warning() is None


# -- the command line, as a real subprocess -------------------------------------------------------
def _run(
    project: Path, tmp_path: Path, *flags: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Done."}]))
    argv = [sys.executable, "-m", "coding_agent.cli.main", "-p", "hi", "--faux-script", str(script)]
    return subprocess.run(
        [*argv, *flags],
        cwd=cwd if cwd is not None else project / "src",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _recorded(tmp_path: Path) -> dict[str, object]:
    return json.loads((tmp_path / "config" / "coding-agent" / "trust.json").read_text())


def test_an_untrusted_project_runs_without_its_packages_and_warns(
    project: Path, tmp_path: Path
) -> None:
    done = _run(project, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Done."
    assert not (tmp_path / "marker").exists(), "the local package was not loaded"
    assert done.stderr.count("waits for --trust") == 1
    assert f"coding-agent: warning: {WARNING}" in done.stderr
    assert not (tmp_path / "config" / "coding-agent" / "trust.json").exists(), "nothing decided"


def test_trust_loads_the_packages_and_is_remembered(project: Path, tmp_path: Path) -> None:
    done = _run(project, tmp_path, "--trust")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "marker").read_text() == "loaded\n"
    assert "waits for --trust" not in done.stderr
    decision = _recorded(tmp_path)["projects"][str(project)]  # type: ignore[index]
    assert decision["trusted"] is True and decision["at"].endswith("Z")
    (tmp_path / "marker").unlink()
    again = _run(project, tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "marker").exists(), "trust is remembered without the flag"


def test_no_trust_is_remembered_and_skips_the_packages(project: Path, tmp_path: Path) -> None:
    done = _run(project, tmp_path, "--no-trust")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "marker").exists()
    assert "marked untrusted" in done.stderr
    decision = _recorded(tmp_path)["projects"][str(project)]  # type: ignore[index]
    assert decision["trusted"] is False


def test_a_corrupt_trust_file_stops_the_cli_naming_the_file(project: Path, tmp_path: Path) -> None:
    path = tmp_path / "config" / "coding-agent" / "trust.json"
    path.parent.mkdir(parents=True)
    path.write_text("{oops")
    done = _run(project, tmp_path, "--trust")
    assert done.returncode == 2
    assert f"coding-agent: error: {path}: the trust file is corrupt" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "marker").exists()
    assert path.read_text() == "{oops"
    assert not (tmp_path / "state" / "coding-agent" / "sessions").exists(), "no session made"
