"""``--fallback-model``: when the model is overloaded or unavailable, go on with another one.

Claude Code's ``claude -p … --fallback-model sonnet`` keeps a script running through an
overloaded model; here the same::

    coding-agent -p "review the diff" --model anthropic/claude-opus-4-7 \\
        --fallback-model anthropic/claude-sonnet-4-6

The run's model requests go through :class:`FallbackProvider`, which stands in for the main
model's provider. A request the main model's provider fails, after its own retries
(:class:`pico3.models.RetryPolicy`: ``Retry-After`` honoured), as overloaded or unavailable
(:func:`unavailable`: HTTP 529 or 503, an ``overloaded_error``) before anything of an answer
streamed is sent again, once, to the fallback model, and every later request of the run goes
there too; ``on_switch`` hears it once (the command line's one stderr line). Any other failure
(a bad key, a rate limit, a request too large, an answer cut off half way) is the main model's
error, as it was. The fallback is run-scoped: the session's model stays what it was, and the next
run starts on it again.

The fallback model is checked as ``--model`` is (:func:`pick_fallback`: an unknown id lists the
models; the same model as the run's is refused), before the session opens.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import msgspec

from chord import Context
from coding_agent.worker.providers.registry import resolve_model
from pico3.models import ErrorEvent, ModelInfo, ModelProvider, Request, StartEvent, StreamEvent

__all__ = ["FallbackProvider", "pick_fallback", "unavailable", "with_fallback"]

_UNAVAILABLE_STATUS = re.compile(r"^\S+ (?:529|503)\b")
"""A provider error's message as the SDK adapters write it: ``anthropic 529 overloaded_error: …``
(:func:`coding_agent.worker.providers._core.classify_stainless`)."""


def unavailable(event: ErrorEvent) -> bool:
    """Whether ``event`` says the model is overloaded or unavailable (HTTP 529 or 503, or an
    overloaded error inside the stream), not that the request or the account is wrong."""
    if event.reason != "error":
        return False  # aborted: the user stopped it
    message = event.error.error_message or ""
    return bool(_UNAVAILABLE_STATUS.match(message)) or "overloaded" in message.lower()


def pick_fallback(
    ref: str,
    main: ModelInfo,
    providers: Sequence[ModelProvider],
    *,
    env: Mapping[str, str] | None,
    config: Mapping[str, Any] | None,
) -> tuple[ModelProvider, ModelInfo]:
    """The provider and model of ``--fallback-model ref``, checked as ``--model`` is (raises
    ``UnknownModel``/``RegistryError``), and ``ValueError`` when it is ``main``. A provider of
    ``providers`` with its name is used (its connections), else the one resolved."""
    faux = next((p.models() for p in providers if p.name == "faux"), ())
    selection = resolve_model(ref, env=env, config=config, faux_extra=faux)
    model = selection.model
    if (model.provider, model.id) == (main.provider, main.id):
        raise ValueError(
            f"--fallback-model {ref} is the model this run uses ({main.provider}/{main.id}): "
            "name another one to fall back on"
        )
    listed = next((p for p in providers if p.name == model.provider), selection.provider)
    return _inner(listed), model


def with_fallback(
    providers: Sequence[ModelProvider],
    main: ModelInfo,
    fallback: tuple[ModelProvider, ModelInfo],
    on_switch: Callable[[str], None],
) -> tuple[ModelProvider, ...]:
    """``providers`` with the main model's provider standing behind a :class:`FallbackProvider`."""
    return tuple(
        FallbackProvider(provider, main.id, fallback, on_switch)
        if provider.name == main.provider
        else provider
        for provider in providers
    )


def _inner(provider: ModelProvider) -> ModelProvider:
    return provider.inner if isinstance(provider, FallbackProvider) else provider


class FallbackProvider:
    """The main model's provider (``inner``), whose requests for ``model_id`` fall back on
    ``fallback`` (see the module docstring); anything else it does is ``inner``'s."""

    def __init__(
        self,
        inner: ModelProvider,
        model_id: str,
        fallback: tuple[ModelProvider, ModelInfo],
        on_switch: Callable[[str], None],
    ) -> None:
        self.inner = inner
        self._model_id = model_id
        self._fallback = fallback
        self._on_switch = on_switch
        self.switched = False

    @property
    def name(self) -> str:
        return self.inner.name

    def models(self) -> Sequence[ModelInfo]:
        return self.inner.models()

    def model(self, model_id: str) -> ModelInfo:
        return self.inner.model(model_id)

    def __getattr__(self, name: str) -> Any:  # serves_search, aclose, fetch_deferred, ...
        return getattr(self.inner, name)

    def stream(self, request: Request, ctx: Context) -> AsyncIterator[StreamEvent]:
        if request.model != self._model_id:
            return self.inner.stream(request, ctx)
        if self.switched:
            return self._on_fallback(request, ctx)
        return self._first(request, ctx)

    def _on_fallback(self, request: Request, ctx: Context) -> AsyncIterator[StreamEvent]:
        provider, model = self._fallback
        return provider.stream(msgspec.structs.replace(request, model=model.id), ctx)

    async def _first(self, request: Request, ctx: Context) -> AsyncIterator[StreamEvent]:
        """The main model's stream, with its start held back until something follows it: an
        error of an unavailable model then is the fallback's stream instead."""
        start: StartEvent | None = None
        async for event in self.inner.stream(request, ctx):
            if isinstance(event, StartEvent) and start is None:
                start = event
                continue
            if isinstance(event, ErrorEvent) and start is not None and unavailable(event):
                model = self._fallback[1]
                self.switched = True
                why = " ".join((event.error.error_message or "").split())  # one line
                self._on_switch(
                    f"{self.inner.name}/{self._model_id} is unavailable ({why}): going on "
                    "with --fallback-model "
                    f"{model.provider}/{model.id}"
                )
                async for again in self._on_fallback(request, ctx):
                    yield again
                return
            if start is not None:
                yield start
                start = None
            yield event
