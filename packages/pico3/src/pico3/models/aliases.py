"""Model names as Claude Code's files write them: ``sonnet``, ``opus``, ``haiku``, ``inherit``, a
``provider/id`` or a bare id, resolved to a model config value (``{"provider", "modelId"}``).

One mapping serves every place a file names a model: a subagent definition's ``model:`` and a
command's (prompt template's) ``model:``. An alias names a model of the *calling*
conversation's provider: Claude Code's own variables ``ANTHROPIC_DEFAULT_SONNET_MODEL`` /
``…_OPUS_…`` / ``…_HAIKU_…`` choose it (a ``provider/id`` there is used whatever the caller's
provider; a bare id on the ``anthropic`` provider only), else :data:`ANTHROPIC_ALIASES` on
``anthropic``; any other provider keeps the caller's model, since it has no model of that name,
and a note says so. A bare id is on the caller's provider (Claude Code passes an unknown name to
its API), except a ``claude-…`` id on a provider that does not name Claude models so
(:data:`CLAUDE_ID_PROVIDERS`): the caller's model, with a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ANTHROPIC_ALIASES", "MODEL_ALIASES", "resolve_model_spec"]

MODEL_ALIASES = ("sonnet", "opus", "haiku")
"""Claude Code's model aliases (``inherit`` is no model: the caller's)."""

ANTHROPIC_ALIASES: Mapping[str, str] = {
    "sonnet": "claude-sonnet-4-6",
    "opus": "claude-opus-4-7",
    "haiku": "claude-haiku-4-5",
}
"""What an alias means on the ``anthropic`` provider when no variable says otherwise (the
current models of the app's Anthropic catalogue)."""


CLAUDE_ID_PROVIDERS = ("anthropic", "vertex")
"""The providers a bare ``claude-…`` id is sent to as written (Anthropic's API and Vertex AI name
Claude models so); on any other (``openai``, ``bedrock``'s regional ids, a local server) it names
no model, so the caller's model answers and a note says so, as for an alias. Published commands
and agents pin such ids (``model: claude-sonnet-4-0``)."""


def resolve_model_spec(
    spec: str | None, caller: Any, env: Mapping[str, str], *, who: str = "it"
) -> tuple[Any, str | None]:
    """The model config value for a file's ``model`` and a note when an alias fell back.

    ``spec``: ``None``, ``""`` or ``inherit`` (the caller's), an alias, ``provider/id``, or a
    bare model id. ``caller``: the calling conversation's ``{"provider", "modelId"}`` (returned
    as given when the spec names no other model). ``who`` names the user of the model in the
    note (``"the subagent"``)."""
    spec = spec.strip() if spec is not None else None
    if not spec or spec == "inherit":
        return caller, None
    if "/" in spec:
        provider, _, model_id = spec.partition("/")
        return {"provider": provider, "modelId": model_id}, None
    provider = str(caller.get("provider", "")) if isinstance(caller, dict) else ""
    if spec not in MODEL_ALIASES:
        if not provider:
            return caller, None
        if spec.startswith("claude-") and provider not in CLAUDE_ID_PROVIDERS:
            return caller, (
                f"model {spec!r} is a Claude model id, which provider {provider!r} does not "
                f"serve: {who} uses the caller's (write provider/id, e.g. anthropic/{spec}, to "
                "choose one)"
            )
        return {"provider": provider, "modelId": spec}, None
    variable = f"ANTHROPIC_DEFAULT_{spec.upper()}_MODEL"
    chosen = (env.get(variable) or "").strip()
    if "/" in chosen:
        named, _, model_id = chosen.partition("/")
        return {"provider": named, "modelId": model_id}, None
    if provider == "anthropic":
        return {"provider": provider, "modelId": chosen or ANTHROPIC_ALIASES[spec]}, None
    return caller, (
        f"model {spec!r} has no model on provider {provider or '?'!r}: {who} uses the caller's "
        f"(set {variable}=provider/id to choose one)"
    )
