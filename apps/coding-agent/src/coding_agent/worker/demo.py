"""The offline demo: a faux model that shows the product working without any API key.

:class:`ScriptedProvider` is the ``faux`` provider the worker runs when no real model is
configured. Unlike a plain :class:`~pico3.models.FauxProvider`, whose script is a queue consumed
by the process, it picks each answer from the **conversation itself**: step ``n`` answers the
request that already holds ``n`` finished assistant messages. The same transcript therefore
always gets the same answer, which is what makes the demo survive a crash: a worker killed
mid-turn and started again (a fresh process, a fresh provider) resumes the turn and the model
carries on where the transcript says it was. Beyond the last step, ``fallback`` answers.

:func:`demo_steps` is the built-in tour (the demo of issue 8): list the project, read a file,
ask the user a question, write a notes file and edit it with the answer (both need approval),
run a command (approval again), and sum up. Steps are reactive where it matters: the file read
is one the listing showed, and the edit uses the user's answer.

Tests and users can script the model instead with a JSON file (:func:`load_script`)::

    [{"text": "Let me look.", "toolCalls": [{"name": "ls", "arguments": {"path": "."}}]},
     {"thinking": "It is small.", "text": "This folder holds one file."}]

or, to script conversations separately (a subagent's own conversation, say), an object whose
``conversations`` each name a ``when`` text: a request whose system prompt or first user message
contains it plays that script (the first match wins), every other request plays ``steps``::

    {"steps": [{"toolCalls": [{"name": "agent", "arguments": {"description": "look",
                                                              "prompt": "task 1: look"}}]},
               {"text": "The subagent looked."}],
     "conversations": [{"when": "task 1:", "steps": [{"text": "I looked."}]}]}

A conversation script may also name a ``model`` (an id): it then plays only to requests for that
model (a hook's or subagent's own ``model``, say). Each script counts its own conversation's
finished answers, and the tool calls of the ``n``-th
conversation script get ids ``faux_c<n>_<step>_<i>``, so no two conversations share a call id.
The object form may also give ``latency``: seconds every answer waits before it starts (a
model's time to first token; ``benchmarks/subagents_parallel.py --worker`` uses it so that
parallel conversations overlap their waits as they do with a real model). Default 0.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from chord import Context
from coding_agent.worker.provider_search import offered_tools
from pico3.models import (
    FAUX_MODEL,
    AssistantMessage,
    FauxDeferred,
    FauxProvider,
    FauxResponse,
    FauxState,
    FauxStep,
    FauxToolCall,
    ModelInfo,
    Request,
    StreamEvent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    faux_response,
    faux_thinking,
    faux_tool_call,
)

__all__ = [
    "DEMO_NOTES_FILE",
    "ConversationScript",
    "Script",
    "ScriptConversation",
    "ScriptFile",
    "ScriptModel",
    "ScriptStep",
    "ScriptToolCall",
    "ScriptedProvider",
    "demo_provider",
    "demo_steps",
    "echo_request",
    "finished_assistant_messages",
    "load_script",
    "script_steps",
]

DEMO_NOTES_FILE = "faux-demo-notes.md"
"""The file the demo writes and edits (in the project folder, after approval)."""

_PLACEHOLDER = "Topic: (to be decided)"


def finished_assistant_messages(request: Request) -> int:
    """How many assistant messages of ``request`` ended normally (not aborted, not failed)."""
    return sum(
        1
        for message in request.messages
        if isinstance(message, AssistantMessage) and message.stop_reason not in ("error", "aborted")
    )


def _with_call_ids(response: FauxResponse, step: int, prefix: str = "") -> FauxResponse:
    """Give unnamed tool calls ids derived from the step, so ids never repeat in a transcript
    (``prefix`` names the conversation script, so they never repeat across them either)."""
    blocks = tuple(
        FauxToolCall(block.name, block.arguments, block.id or f"faux_{prefix}{step}_{number}")
        if isinstance(block, FauxToolCall)
        else block
        for number, block in enumerate(response.content)
    )
    return FauxResponse(
        blocks,
        stop_reason=response.stop_reason,
        error=response.error,
        retryable=response.retryable,
        retry_after=response.retry_after,
        usage=response.usage,
    )


class ConversationScript(msgspec.Struct, frozen=True):
    """The steps played to the conversations whose system prompt or first user message
    contains ``when`` (and, when ``model`` is given, whose requests are for that model id)."""

    when: str
    steps: Sequence[FauxStep]
    model: str = ""


class Script(msgspec.Struct, frozen=True):
    """A whole script: ``steps`` for every conversation no :class:`ConversationScript` claims."""

    steps: Sequence[FauxStep]
    conversations: Sequence[ConversationScript] = ()
    latency: float = 0.0
    """Seconds each answer waits before it starts (see the module docstring)."""
    models: Sequence[ModelInfo] = ()
    """Faux models the script adds beside ``faux-1`` (see the module docstring)."""


def _first_user_text(request: Request) -> str:
    for message in request.messages:
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return message.content
            return "".join(getattr(block, "text", "") for block in message.content)
    return ""


class ScriptedProvider:
    """A faux provider answering step ``n`` to a transcript with ``n`` finished answers.

    ``steps`` are :class:`~pico3.models.FauxResponse` values or callables of the request that
    return one (deferred answers are not supported), or a :class:`Script` that also scripts
    some conversations apart (``conversations``: the first whose ``when`` occurs in the
    request's system prompt or first user message plays its own steps).
    ``fallback`` answers every request past the script (default: a note that it ended).
    Streaming is the :class:`~pico3.models.FauxProvider`'s: word by word, no wall-clock pacing;
    ``latency`` (or the :class:`Script`'s) delays the start of every answer by that many seconds.
    """

    def __init__(
        self,
        steps: Sequence[FauxStep] | Script,
        *,
        conversations: Sequence[ConversationScript] = (),
        fallback: FauxStep | None = None,
        name: str = "faux",
        models: Sequence[ModelInfo] = (FAUX_MODEL,),
        chunk_chars: int = 16,
        latency: float = 0.0,
    ) -> None:
        if isinstance(steps, Script):
            conversations = [*steps.conversations, *conversations]
            latency = latency or steps.latency
            steps = steps.steps
        self._latency = latency
        self._steps = list(steps)
        self._conversations = [(c.when, c.model, list(c.steps)) for c in conversations]
        self._fallback: FauxStep = fallback if fallback is not None else _script_ended
        self._name = name
        self._models = tuple(models)
        self._chunk = chunk_chars
        self.state = FauxState()

    @property
    def name(self) -> str:
        """The provider name models are configured with (``faux``)."""
        return self._name

    def models(self) -> Sequence[ModelInfo]:
        """The faux models."""
        return self._models

    def model(self, model_id: str) -> ModelInfo:
        """Metadata of ``model_id`` (a default-sized model when unknown)."""
        return self._player().model(model_id)

    def _player(self, steps: Sequence[FauxStep] = ()) -> FauxProvider:
        return FauxProvider(steps, name=self._name, models=self._models, chunk_chars=self._chunk)

    def stream(self, request: Request, ctx: Context) -> AsyncIterator[StreamEvent]:
        """Stream the step this transcript is at."""
        request = offered_tools(request, serves=False)  # it cannot run the provider's search
        self.state.record(request)
        index = finished_assistant_messages(request)
        prefix, steps = self._script(request)
        step = steps[index] if index < len(steps) else self._fallback
        response = (
            step if isinstance(step, (FauxResponse, FauxDeferred)) else step(request, self.state)
        )
        if not isinstance(response, FauxResponse):
            # A deferred answer is fetched later from the provider that handed it out; this
            # provider makes a fresh player per request, so it plays only immediate answers.
            raise TypeError(f"step {index}: ScriptedProvider plays FauxResponse steps only")
        played = self._player([_with_call_ids(response, index, prefix)]).stream(request, ctx)
        return self._after_latency(played) if self._latency > 0 else played

    async def _after_latency(
        self, played: AsyncIterator[StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        await anyio.sleep(self._latency)
        async for event in played:
            yield event

    def _script(self, request: Request) -> tuple[str, Sequence[FauxStep]]:
        """The call-id prefix and the steps of the script that plays ``request``."""
        if self._conversations:
            system = "\n".join(request.system)
            first = _first_user_text(request)
            for number, (when, model, steps) in enumerate(self._conversations):
                if (when in system or when in first) and model in ("", request.model):
                    return f"c{number}_", steps
        return "", self._steps


def _script_ended(request: Request, state: FauxState) -> FauxResponse:
    return faux_response("(The faux script has no more answers.)")


# -- the built-in demo ----------------------------------------------------------------------------
def _last_tool_text(request: Request) -> str:
    for message in reversed(request.messages):
        if isinstance(message, ToolResultMessage):
            return "\n".join(getattr(block, "text", "") for block in message.content)
    return ""


def _last_user_text(request: Request) -> str:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return message.content
            return " ".join(getattr(block, "text", "") for block in message.content)
    return ""


_PREFERRED = ("README.md", "README.rst", "README.txt", "README", "pyproject.toml", "package.json")


def _pick_file(listing: str) -> str | None:
    names = [line.strip() for line in listing.splitlines() if line.strip()]
    # Not a folder ("x/"), a note ("[…]") or the empty folder's "(empty directory)".
    files = [name for name in names if not name.endswith("/") and name[0] not in "[("]
    for preferred in _PREFERRED:
        if preferred in files:
            return preferred
    return files[0] if files else None


def _read_step(request: Request, state: FauxState) -> FauxResponse:
    chosen = _pick_file(_last_tool_text(request))
    if chosen is None:
        return faux_response(
            "This folder is empty (a new project?), so there is no file to read yet. In a "
            "project I would read its README; here is a search for files instead, which "
            "finds nothing in an empty folder.",
            faux_tool_call("find", {"pattern": "*"}),
        )
    return faux_response(
        f"Let me read `{chosen}` to see what this project is about.",
        faux_tool_call("read", {"path": chosen, "limit": 40}),
    )


def _ask_step(request: Request, state: FauxState) -> FauxResponse:
    return faux_response(
        "Before I change anything, a question for you.",
        faux_tool_call(
            "question",
            {
                "question": "What should the demo notes be about?",
                "options": ["Testing", "Documentation", "Refactoring"],
                "allowText": True,
            },
        ),
    )


def _write_step(request: Request, state: FauxState) -> FauxResponse:
    return faux_response(
        f"I'll create `{DEMO_NOTES_FILE}` (you will be asked to approve the write).",
        faux_tool_call(
            "write",
            {
                "path": DEMO_NOTES_FILE,
                "content": f"# Notes from the faux demo\n\n{_PLACEHOLDER}\n",
            },
        ),
    )


_ANSWER = re.compile(r"User answered: (.+)", re.DOTALL)


def _edit_step(request: Request, state: FauxState) -> FauxResponse:
    # The question's answer is two tool results back (question, then write).
    topic = "whatever you like"
    for message in reversed(request.messages):
        if isinstance(message, ToolResultMessage) and message.tool_name == "question":
            text = "\n".join(getattr(block, "text", "") for block in message.content)
            found = _ANSWER.search(text)
            if found:
                topic = found.group(1).strip()
            break
    return faux_response(
        "Now an edit with your answer; the diff is shown for approval.",
        faux_tool_call(
            "edit",
            {
                "path": DEMO_NOTES_FILE,
                "edits": [{"oldText": _PLACEHOLDER, "newText": f"Topic: {topic}"}],
            },
        ),
    )


def _bash_step(request: Request, state: FauxState) -> FauxResponse:
    return faux_response(
        "Finally, a shell command (approval again).",
        faux_tool_call("bash", {"command": f"ls -1 && wc -l {DEMO_NOTES_FILE}"}),
    )


def _summary_step(request: Request, state: FauxState) -> FauxResponse:
    ran = {
        message.tool_name
        for message in request.messages
        if isinstance(message, ToolResultMessage) and not message.is_error
    }
    looked = (
        "I listed and read files"
        if "read" in ran
        else "I listed this folder (empty, so there was nothing to read) and searched it"
    )
    changed = [name for name in ("write", "edit", "bash") if name in ran]
    if changed == ["write", "edit", "bash"]:
        outcome = f"wrote and edited `{DEMO_NOTES_FILE}` with your approval, and ran a command."
    elif changed:
        outcome = f"proposed changes and a command; you let {', '.join(changed)} run."
    else:
        outcome = "proposed a write, an edit and a command, which were not approved."
    return faux_response(
        faux_thinking("The tour is complete; summarise it."),
        f"That was the offline demo of the faux model. {looked}, asked you a question, "
        f"{outcome}\n\n"
        "To work with a real model, set `ANTHROPIC_API_KEY` or `OPENAI_API_KEY` (or "
        "`OPENAI_BASE_URL` for a local server) and start a new session, or pass "
        "`--model provider/id`.",
    )


def _after_demo(request: Request, state: FauxState) -> FauxResponse:
    said = _last_user_text(request).strip() or "(nothing)"
    return faux_response(
        f"(faux model) You said: {said}\n\nI am the offline demo model and only play the demo "
        "tour. Set an API key or pass `--model provider/id` to talk to a real model."
    )


def demo_steps() -> list[FauxStep]:
    """The built-in tour: ls, read, question, write, edit, bash, summary."""
    return [
        faux_response(
            "Hi! I'm the offline faux model. Let me show you around, starting with what is "
            "in this folder.",
            faux_tool_call("ls", {"path": "."}),
        ),
        _read_step,
        _ask_step,
        _write_step,
        _edit_step,
        _bash_step,
        _summary_step,
    ]


def demo_provider(models: Sequence[ModelInfo] = (FAUX_MODEL,)) -> ScriptedProvider:
    """The faux provider with the built-in tour, then a short echo for every later prompt
    (serving ``models``: ``faux-1`` and any the config adds)."""
    return ScriptedProvider(demo_steps(), fallback=_after_demo, models=models)


# -- JSON scripts ---------------------------------------------------------------------------------
class ScriptToolCall(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A scripted tool call."""

    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class ScriptStep(msgspec.Struct, forbid_unknown_fields=True, frozen=True, rename="camel"):
    """One scripted answer: optional thinking, text, tool calls, or an error to fail with."""

    text: str | None = None
    thinking: str | None = None
    tool_calls: list[ScriptToolCall] = msgspec.field(default_factory=list)
    error: str | None = None
    echo: bool = False
    """Answer with the request's messages, one line each (:func:`echo_request`): a test sees
    what the model was sent."""


class ScriptConversation(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A conversation's own script in a JSON script file."""

    when: str
    steps: list[ScriptStep]
    model: str = ""


class ScriptModel(msgspec.Struct, forbid_unknown_fields=True, frozen=True, rename="camel"):
    """A faux model a JSON script adds (``--model faux/ID`` is refused unless it is known)."""

    id: str
    context_window: int = FAUX_MODEL.context_window
    max_output: int = FAUX_MODEL.max_output
    reasoning: bool = False
    images: bool = False

    def info(self) -> ModelInfo:
        """The model's metadata (unpriced, as every faux model)."""
        return msgspec.structs.replace(
            FAUX_MODEL,
            id=self.id,
            context_window=self.context_window,
            max_output=self.max_output,
            supports_thinking=self.reasoning,
            supports_images=self.images,
        )


class ScriptFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The object form of a JSON script file."""

    steps: list[ScriptStep] = msgspec.field(default_factory=list)
    conversations: list[ScriptConversation] = msgspec.field(default_factory=list)
    latency: float = 0.0
    models: list[ScriptModel] = msgspec.field(default_factory=list)


def echo_request(request: Request, state: FauxState) -> FauxResponse:
    """A script's ``{"echo": true}`` step: the answer lists the messages the model was sent,
    a line each (``user: TEXT``, ``assistant: TEXT``, ``thinking: TEXT``, ``call NAME ARGS``,
    ``result NAME: TEXT``), the text of each on one line."""
    del state
    lines: list[str] = []

    def flat(text: str) -> str:
        return " ".join(text.split())

    for message in request.messages:
        if isinstance(message, UserMessage):
            content = message.content
            parts = (
                [content]
                if isinstance(content, str)
                else [
                    b.text if isinstance(b, TextContent) else f"[image {b.mime_type}]"
                    for b in content
                ]
            )
            lines.append("user: " + flat(" ".join(parts)))
        elif isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, TextContent):
                    lines.append("assistant: " + flat(block.text))
                elif isinstance(block, ThinkingContent):
                    lines.append("thinking: " + flat(block.thinking))
                elif isinstance(block, ToolCall):
                    arguments = msgspec.json.encode(block.arguments).decode()
                    lines.append(f"call {block.name} {arguments}")
        elif isinstance(message, ToolResultMessage):
            text = " ".join(b.text for b in message.content if isinstance(b, TextContent))
            lines.append(f"result {message.tool_name}: {flat(text)}")
    return faux_response("\n".join(lines))


def script_steps(steps: Sequence[ScriptStep]) -> list[FauxStep]:
    """Faux responses for parsed script steps."""
    responses: list[FauxStep] = []
    for step in steps:
        if step.echo:
            responses.append(echo_request)
            continue
        blocks: list[Any] = []
        if step.thinking:
            blocks.append(faux_thinking(step.thinking))
        if step.text:
            blocks.append(step.text)
        blocks.extend(faux_tool_call(call.name, call.arguments) for call in step.tool_calls)
        response = faux_response(*blocks)
        if step.error is not None:
            response = FauxResponse(response.content, error=step.error)
        responses.append(response)
    return responses


def load_script(path: str | os.PathLike[str]) -> Script:
    """Read a JSON script file (a list of :class:`ScriptStep` objects, or a :class:`ScriptFile`
    object with conversation scripts); errors name the path."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise ValueError(
            f"{os.fspath(path)}: cannot read the faux script: {error.strerror}"
        ) from None
    try:
        parsed = msgspec.json.decode(raw, type=list[ScriptStep] | ScriptFile)
    except msgspec.DecodeError as error:
        raise ValueError(f"{os.fspath(path)}: invalid faux script: {error}") from None
    if isinstance(parsed, list):
        return Script(script_steps(parsed))
    for number, conversation in enumerate(parsed.conversations):
        if not conversation.when:
            raise ValueError(
                f"{os.fspath(path)}: invalid faux script: conversations[{number}].when is empty "
                "(give a text its system prompt or first message contains)"
            )
    if not 0 <= parsed.latency <= 600:
        raise ValueError(
            f"{os.fspath(path)}: invalid faux script: latency is {parsed.latency!r} "
            "(give the seconds each answer waits, from 0 to 600)"
        )
    for number, model in enumerate(parsed.models):
        if not model.id.strip():
            raise ValueError(
                f"{os.fspath(path)}: invalid faux script: models[{number}].id is empty "
                "(give the id --model faux/ID names)"
            )
    return Script(
        script_steps(parsed.steps),
        [ConversationScript(c.when, script_steps(c.steps), c.model) for c in parsed.conversations],
        parsed.latency,
        tuple(model.info() for model in parsed.models),
    )
