"""Keyed dialogs: ask the user through a keyed service and get a checked, typed answer.

A feature that needs a person's answer — allow this tool call? which option? fill in this
form? — asks through a *keyed dialog service*: the process that asks (the session worker)
spawns one instance per open question under a key; every presentation that observes the
service (a TUI, possibly in another process, possibly attached later) shows a dialog for each
live instance and calls the instance's answer method; the first answer that passes the check
resolves the wait; closing the instance dismisses the dialog everywhere. This module is the
session side of that pattern, :func:`chord.textual.show_dialogs` the TUI side, and
:func:`dialog_key` the usual key.

**The contract** (a feature's ``contract.py``, which both processes import) names the service
and the shapes: a ``request`` replicated state, set once when the dialog opens, and one answer
method (``submit`` unless you choose another name, e.g. ``decide``)::

    class ConfirmDialog(Protocol):
        @property
        def request(self) -> ReplicatedState: ...        # {"question": str}
        async def submit(self, answer: bool, ctx: Context) -> None: ...

    ConfirmDialogs = define_service("my.confirm-dialog", ConfirmDialog)

    def check_answer(value: object, request: object) -> bool:
        if not isinstance(value, bool):
            raise RemoteServiceError("service_invalid_value", f"expected true or false, got {value!r}")
        return value

**The session side** provides the service in ``setup`` with :func:`provide_dialogs` and asks
while active, from a tool, a hook or a service method::

    @define_facet("@my/session")
    def session_facet(env: FacetEnvironment) -> None:
        dialogs = provide_dialogs(env, ConfirmDialogs, check_answer)
        ...
        async def execute(args, api, ctx):                          # a pico3 tool
            key = dialog_key(api.conversation_id, api.call_id)
            yes = await dialogs.ask(key, {"question": "Go on?"}, ctx)

:meth:`Dialogs.ask` spawns the instance (its ``request`` a replicated state of the request,
so a presentation that connects later still sees it), waits, and closes the instance in a
``finally`` whatever ends the wait:

* an answer: ``check(answer, request)`` runs first and may raise (a
  :class:`~chord.RemoteServiceError` ``service_invalid_value`` naming the field is the custom:
  the answer comes from another process); a refused answer resolves nothing and the dialog
  stays open. The first accepted answer wins; later ones are accepted and ignored;
* ``ctx`` cancelled (the call aborted, the session suspending): ``ask`` raises
  :class:`~chord.ContextCancelled` (or the abort reason) and the dialog is dismissed;
* nobody attached: nothing happens. The instance stays open and ``ask`` keeps waiting, for a
  presentation to attach and answer or for ``ctx`` to be cancelled; there is no timeout and no
  default answer, so a question is never answered on the user's behalf.

``ask`` records nothing. An answer that must survive a crash or a reload is recorded by the
caller, durably and first writer wins — in pico3, ``await api.memo(name, answer, ctx)`` on the
tool's slot, read back with ``await api.memo(name, ctx)`` before asking again — so a dialog
answered before a crash is never asked twice.

:class:`Dialogs` also works without a facet environment (a test, a harness extension): give it
anything with ``spawn(key, implementation) -> close`` and a function that makes the request's
state (``env.replicated_state``, or ``lambda value: value`` in a test).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, Generic, Protocol, TypeVar

import anyio

from chord.context import Context, cancel_scope
from chord.facets.environment import FacetEnvironment
from chord.services import Service

__all__ = ["DialogSpawner", "Dialogs", "dialog_key", "provide_dialogs"]

RequestT = TypeVar("RequestT")
AnswerT = TypeVar("AnswerT")


def dialog_key(conversation_id: int, call_id: str, *more: int | str) -> str:
    """The instance key of the dialog that belongs to one tool call: ``"<conversationId>:<callId>"``.

    ``conversation_id`` is the harness's conversation id (a non-negative int), ``call_id`` the
    model's id for the call (a non-empty str); ``more`` tells several dialogs of one call apart
    (``dialog_key(1, "toolu_01", 2)`` is ``"1:toolu_01:2"``, the call's second question). A key
    names one open dialog: a second ``ask`` under a live key is refused. A dialog that belongs
    to no call takes any other unique non-empty string.
    """
    if type(conversation_id) is not int or conversation_id < 0:
        raise ValueError(f"conversation id must be a non-negative int, got {conversation_id!r}")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"call id must be a non-empty str, got {call_id!r}")
    for part in more:
        if not ((type(part) is int and part >= 0) or (isinstance(part, str) and part)):
            raise ValueError(
                f"a key part must be a non-negative int or a non-empty str, got {part!r}"
            )
    return ":".join(str(part) for part in (conversation_id, call_id, *more))


class DialogSpawner(Protocol):
    """What :class:`Dialogs` spawns instances with: a :class:`~chord.ServiceSpawner`."""

    def spawn(self, key: str, implementation: Any) -> Callable[[], None]: ...


class _Open(Generic[RequestT, AnswerT]):
    """One open dialog's answer: checked, then the first one resolves the wait."""

    def __init__(self, request: RequestT, check: Callable[[Any, RequestT], AnswerT]) -> None:
        self._request = request
        self._check = check
        self._answered = anyio.Event()
        self._answer: list[AnswerT] = []

    async def answer(self, value: Any, ctx: Context) -> None:
        del ctx
        checked = self._check(value, self._request)  # raises before anything is resolved
        if not self._answer:
            self._answer.append(checked)
            self._answered.set()

    async def wait(self, ctx: Context) -> AnswerT:
        with cancel_scope(ctx):
            await self._answered.wait()
        return self._answer[0]


class Dialogs(Generic[RequestT, AnswerT]):
    """The asking side of one keyed dialog service (see the module docstring).

    ``spawner`` spawns the instances (``env.provide_many(service)``), ``state`` makes each
    one's ``request`` (``env.replicated_state``), ``check(answer, request)`` returns the typed
    answer or raises, and ``answer`` is the name of the method presentations call.
    """

    def __init__(
        self,
        spawner: DialogSpawner,
        state: Callable[[Any], Any],
        check: Callable[[Any, RequestT], AnswerT],
        *,
        answer: str = "submit",
    ) -> None:
        if not answer.isidentifier() or answer.startswith("_") or answer == "request":
            raise ValueError(
                f"the answer method's name must be a public identifier other than 'request', "
                f"got {answer!r}"
            )
        self.spawner = spawner
        self.answer = answer
        self._state = state
        self._check = check

    async def ask(self, key: str, request: RequestT, ctx: Context) -> AnswerT:
        """Open the dialog ``key`` showing ``request`` and return its first accepted answer.

        Raises when ``ctx`` is cancelled first; the dialog is closed (dismissed in every
        presentation) however the wait ends. ``request`` must be JSON (the replicated state
        gets a copy of a dict)."""
        pending = _Open(request, self._check)
        shown = dict(request) if isinstance(request, dict) else request  # pyright: ignore[reportUnknownArgumentType]
        instance = SimpleNamespace(request=self._state(shown), **{self.answer: pending.answer})
        close = self.spawner.spawn(key, instance)
        try:
            return await pending.wait(ctx)
        finally:
            close()


def provide_dialogs(
    env: FacetEnvironment,
    service: Service[Any],
    check: Callable[[Any, RequestT], AnswerT],
    *,
    answer: str = "submit",
) -> Dialogs[RequestT, AnswerT]:
    """Provide the keyed ``service`` from this facet (call it in ``setup``) and return the
    :class:`Dialogs` that asks through it once the facet is active."""
    return Dialogs(env.provide_many(service), env.replicated_state, check, answer=answer)
