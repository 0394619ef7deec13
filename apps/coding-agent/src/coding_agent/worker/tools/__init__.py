"""The coding agent's built-in tools: read, write, edit, bash, grep, find, ls, the job tools and
the ``todo`` list (:mod:`.todo`) and the web tools (``web_fetch``; ``web_search`` through a configured
backend or the model provider's own search: :mod:`.web`, :mod:`.web_search`).

Each tool is a :class:`ToolSpec`: a name, a description for the model, a JSON Schema for its
arguments, and an async handler. They do not depend on the harness; a harness registers
:func:`builtin_tools` and calls :meth:`ToolSpec.execute` with the model's arguments and a
:class:`ToolContext` (working directory, chord context, search backend)::

    tools = {spec.name: spec for spec in builtin_tools()}
    result = await tools["read"].execute({"path": "README.md"}, ToolContext(cwd="."))
    result.content   # [{"type": "text", "text": ...}] for the model
    result.details   # truncation facts, diffs, spill paths... for the UI and state
    result.is_error  # True for bad arguments and failed calls

Behaviours and limits follow pi's coding agent (2000 lines / 50 KB truncation with actionable
footers, exact-match multi-edit with a forgiving fallback, bash with a spill file and process
tree kill); see each module's docstring. ``bash`` with ``background: true``, ``job_output`` and
``job_kill`` work through the :class:`JobControl` of the :class:`ToolContext` (:mod:`.jobs`).
"""

from __future__ import annotations

from collections.abc import Mapping

from .bash import BASH_TOOL, DEFAULT_BASH_TIMEOUT, BashRun, run_bash
from .edit import EDIT_TOOL, Edit, apply_edits
from .find import FIND_TOOL
from .grep import GREP_TOOL
from .host import EDITOR_FILES_SERVICE, EditorFiles, JobControl, JobInfo, JobState
from .jobs import JOB_KILL_TOOL, JOB_OUTPUT_TOOL
from .ls import LS_TOOL
from .read import READ_TOOL
from .spec import (
    OnUpdate,
    SearchBackend,
    ToolArgumentError,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
    resolve_path,
    text_result,
    validate_args,
)
from .todo import TODO_NAMESPACE, TODO_TOOL, TodoStore
from .web import WebSettings
from .web_fetch import web_fetch_tool
from .web_search import provider_search_tool, web_search_tool
from .write import WRITE_TOOL

__all__ = [
    "BASH_TOOL",
    "DEFAULT_BASH_TIMEOUT",
    "EDITOR_FILES_SERVICE",
    "EDIT_TOOL",
    "FIND_TOOL",
    "GREP_TOOL",
    "JOB_KILL_TOOL",
    "JOB_OUTPUT_TOOL",
    "LS_TOOL",
    "READ_TOOL",
    "TODO_NAMESPACE",
    "TODO_TOOL",
    "WRITE_TOOL",
    "BashRun",
    "Edit",
    "EditorFiles",
    "JobControl",
    "JobInfo",
    "JobState",
    "OnUpdate",
    "SearchBackend",
    "TodoStore",
    "ToolArgumentError",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "WebSettings",
    "apply_edits",
    "builtin_tools",
    "provider_search_tool",
    "resolve_path",
    "run_bash",
    "text_result",
    "validate_args",
    "web_fetch_tool",
    "web_search_tool",
]


def builtin_tools(
    web: WebSettings | None = None, env: Mapping[str, str] | None = None
) -> list[ToolSpec]:
    """All built-in tools, in the order they are offered: read, bash, edit, write, grep, find, ls,
    job_output, job_kill, todo, web_fetch, and web_search: the backend's when ``web`` names one (its
    key is read from ``env``, default ``os.environ``), else the one running the model provider's
    own search (offered only to a model whose provider has one)."""
    settings = web if web is not None else WebSettings()
    web_tools = [web_fetch_tool(settings)]
    if settings.search_backend is not None:
        web_tools.append(web_search_tool(settings, env))
    else:  # the model provider's own search (offered only to a model it serves)
        web_tools.append(provider_search_tool())
    return [
        READ_TOOL,
        BASH_TOOL,
        EDIT_TOOL,
        WRITE_TOOL,
        GREP_TOOL,
        FIND_TOOL,
        LS_TOOL,
        JOB_OUTPUT_TOOL,
        JOB_KILL_TOOL,
        TODO_TOOL,
        *web_tools,
    ]
