"""Commands and skills with ``context: fork``: run in a subagent, its result in the conversation.

Claude Code's ``context: fork`` makes a command or a skill run in a forked subagent context: its
body (arguments substituted; a command's ``!`cmd``` lines run first, as for any command) is the
prompt of a subagent of the type its ``agent`` names (``Explore``, ``Plan``, a custom agent;
default ``general-purpose``), which works in its own context window and returns one result. So
it is here, for ``/NAME`` in the TUI and in ``-p``:

1. the subagent runs through the subagents feature's ``subagents.fork`` service
   (:data:`~coding_agent.contracts.SUBAGENT_FORKS`, named by id: the app does not import the
   feature), owned by the conversation the command was typed in, exactly as an ``agent`` call of
   that conversation's model would run it: the agent's system prompt, tools and permission mode,
   never more than the run allows (``--tools``, ``--disallowedTools``, plan mode and deny rules
   bound every subagent); the command's ``model:`` replaces the agent's, and its
   ``allowed-tools:`` are rules the subagent's turn may use without asking;
2. its final report reaches the conversation as one user message (:func:`fork_message`), which
   the model answers, as it goes on after an ``agent`` call's result; the subagent's own work
   (its reads, its tool output) stays in its transcript (``/agents`` in the TUI).

An agent type that no definition has, a session without the subagents feature, or a subagent
that does not finish is a :class:`ForkError` naming the problem (the known agents, the feature
to enable); nothing is sent then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from chord import Context

__all__ = ["ForkError", "fork_message", "fork_request", "run_fork"]


class ForkError(Exception):
    """A ``context: fork`` command that could not run in its subagent (the message says why)."""


def fork_request(
    name: str, agent: str, prompt: str, conversation_id: int, options: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``subagents.fork`` request of command ``/name`` run in a subagent of type ``agent``
    from conversation ``conversation_id``: ``options`` are the command's send options
    (``{"model"?, "allow"?}``: :func:`~coding_agent.context.prompt_templates.send_options`),
    applied to the subagent instead of a turn of the conversation."""
    request: dict[str, Any] = {
        "conversation": conversation_id,
        "agent": agent,
        "description": f"/{name}",
        "prompt": prompt,
    }
    if options.get("model"):
        request["model"] = dict(options["model"])
    if options.get("allow"):
        request["allow"] = list(options["allow"])
    return request


def fork_message(name: str, agent: str, report: str) -> str:
    """What the conversation receives once ``/name``'s subagent of type ``agent`` reported: the
    report, said to be a subagent's (the model did not see its work)."""
    return (
        f"/{name} ran in a subagent ({agent}), which returned:\n\n"
        f'<subagent-result command="/{name}" agent="{agent}">\n{report.strip()}\n'
        "</subagent-result>"
    )


async def run_fork(
    forks: Any,
    name: str,
    agent: str,
    prompt: str,
    conversation_id: int,
    options: Mapping[str, Any],
    ctx: Context,
) -> str:
    """Run ``/name`` (whose text is ``prompt``) in a subagent of type ``agent`` through
    ``forks`` (the ``subagents.fork`` service; ``None`` when the session has no subagents
    feature) and return the message for the conversation (:func:`fork_message`). Raises
    :class:`ForkError` when it cannot run or does not finish."""
    if forks is None:
        raise ForkError(
            f"/{name} says 'context: fork', which runs it in a subagent, but this session has "
            "no subagents feature: enable facets-subagents, or remove 'context: fork' from its "
            "frontmatter to run it in the conversation"
        )
    request = fork_request(name, agent, prompt, conversation_id, options)
    result = cast(Mapping[str, Any], await forks.run(request, ctx))
    error = result.get("error")
    if isinstance(error, str) and error:
        raise ForkError(f"/{name} (agent: {agent}): {error}")
    return fork_message(name, str(result.get("agent") or agent), str(result.get("report") or ""))
