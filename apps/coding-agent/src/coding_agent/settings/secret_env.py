"""Secrets: which environment variables a session keeps from the processes it starts, and the
values an export redacts.

The secret variables are

* every provider key the registry reads (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY`` and each
  provider's ``api_key_env``: :func:`~coding_agent.worker.providers.registry.key_variables`),
* the server token ``CODING_AGENT_TOKEN`` (:data:`SERVER_TOKEN_ENV`),
* the web search keys ``BRAVE_API_KEY`` and ``TAVILY_API_KEY`` (:data:`SEARCH_KEYS`; the
  worker adds ``web_search.api_key_env`` to the config's list), and
* the names in the config's ``secrets`` list.

:func:`child_environment` turns them into the session's :class:`pico3.ChildEnvironment` (minus
the config's ``secrets_passthrough``): the one object every spawn of the worker asks for its
environment (``bash``, ``!``/``!!`` commands, background jobs, MCP servers), handed to features
as the harness service ``child_environment``. The worker also withholds them from its own
``os.environ`` once its providers have read their keys.

:func:`secret_values` lists what an export must not show: the values of every secret variable
in the exporting process's environment (passed through or not) and the ``api_key`` values of
the config files; :func:`redact` replaces them, and text shaped like a well-known key
(:data:`KEY_SHAPES`), with ``[redacted NAME]`` / ``[redacted key]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from coding_agent.settings.config import ConfigError, load_config
from coding_agent.settings.model_config import key_variables, parse_registry_config
from pico3 import MIN_SECRET_LENGTH, ChildEnvironment

__all__ = [
    "KEY_SHAPES",
    "SEARCH_KEYS",
    "SERVER_TOKEN_ENV",
    "child_environment",
    "hide_secrets_from_proc",
    "redact",
    "secret_names",
    "secret_values",
]

SERVER_TOKEN_ENV = "CODING_AGENT_TOKEN"
"""The server token's variable (``coding_agent.server.remote.TOKEN_ENV``; not imported from
there, which would put the TLS client on the worker's import path)."""

SEARCH_KEYS = ("BRAVE_API_KEY", "TAVILY_API_KEY")
"""The web search backends' default key variables (:mod:`coding_agent.worker.tools.web_search`)."""

KEY_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-[A-Za-z0-9_-]{20,}"  # Anthropic (sk-ant-...) and OpenAI (sk-..., sk-proj-...)
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub tokens
    r"|AKIA[0-9A-Z]{16}"  # AWS access key ids
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r")"
)
"""Text redacted in exports whatever the environment holds: a word starting ``sk-``, ``ghp_``
(and the other GitHub prefixes), ``github_pat_``, ``AKIA`` or ``xoxb-`` (and Slack's others)
followed by key characters and holding both a letter and a digit."""


def secret_names(
    *,
    secrets: Iterable[str] = (),
    registry: Mapping[str, object] | None = None,
) -> tuple[str, ...]:
    """The secret variable names: the provider keys the registry (config dict ``registry``)
    reads, :data:`SERVER_TOKEN_ENV` and ``secrets`` (the config's list)."""

    try:
        parsed = parse_registry_config(registry) if registry is not None else None
    except ValueError:  # reported where the model is resolved; the usual names still count
        parsed = None
    names = [*key_variables(parsed), SERVER_TOKEN_ENV, *SEARCH_KEYS]
    names += [name for name in secrets if name not in names]
    return tuple(names)


def child_environment(
    *,
    secrets: Iterable[str] = (),
    passthrough: Iterable[str] = (),
    registry: Mapping[str, object] | None = None,
    env: Mapping[str, str] | None = None,
) -> ChildEnvironment:
    """The session's :class:`~pico3.ChildEnvironment`: :func:`secret_names` withheld unless
    named in ``passthrough``; the values are read from ``env`` (default ``os.environ``)."""
    return ChildEnvironment(
        secret_names(secrets=secrets, registry=registry),
        passthrough=passthrough,
        source=os.environ if env is None else env,
    )


def secret_values(
    cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``{value: name}`` of every secret this process knows for project ``cwd``: the secret
    variables' values in ``env`` (default ``os.environ``) and the config files' ``api_key``s.
    Values shorter than :data:`pico3.MIN_SECRET_LENGTH` are left out. A config that does not
    load leaves the usual names (its error is reported where the config is used)."""

    environ = os.environ if env is None else env
    registry: Mapping[str, object] | None = None
    listed: list[str] = []
    found: dict[str, str] = {}
    try:
        config = load_config(Path(cwd) if cwd is not None else None, env=environ)
    except ConfigError:
        config = None
    if config is not None:
        registry, listed = config.registry(), config.secrets
        for provider, values in config.providers.items():
            key = values.get("api_key")
            if isinstance(key, str) and len(key) >= MIN_SECRET_LENGTH:
                found[key] = f"providers.{provider}.api_key"
    for name in secret_names(secrets=listed, registry=registry):
        value = environ.get(name, "")
        if len(value) >= MIN_SECRET_LENGTH:
            found.setdefault(value, name)
    return found


def hide_secrets_from_proc(cwd: str | os.PathLike[str] | None = None) -> None:
    """Blank the secret variables of project ``cwd`` in this process's ``/proc/self/environ``
    and keep them in ``os.environ`` (:meth:`pico3.ChildEnvironment.hide_from_proc`): for the
    TUI, which starts its worker with them, so that a command reading its ancestors'
    environments finds no key there."""

    try:
        config = load_config(Path(cwd) if cwd is not None else None)
    except ConfigError:  # reported where the config is used; the usual names still count
        ChildEnvironment(secret_names()).hide_from_proc()
        return
    ChildEnvironment(
        secret_names(secrets=config.secrets, registry=config.registry())
    ).hide_from_proc()


def _shaped(match: re.Match[str]) -> str:
    word = match.group(0)
    if any(c.isdigit() for c in word) and any(c.isalpha() for c in word[4:]):
        return "[redacted key]"
    return word


def redact(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each known secret value (``values``: value → name) replaced by
    ``[redacted NAME]`` and each :data:`KEY_SHAPES` match by ``[redacted key]``."""
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, f"[redacted {values[value]}]")
    return KEY_SHAPES.sub(_shaped, text)
