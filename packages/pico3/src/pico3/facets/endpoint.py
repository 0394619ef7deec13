"""The JSON face of one conversation: what a ``pi.conversation`` instance exposes.

:class:`ConversationEndpoint` is the implementation object the session facet spawns per
conversation. Its public members are exactly the remotable members of
:class:`~pico3.facets.contract.ConversationServiceApi`: the ``view`` replicated state and one
method per :class:`~pico3.harness.ConversationHandle` operation. Arguments arrive as strict JSON
(from the wire or a loopback binding), so every method checks its argument's shape first and
raises a ``ValueError`` naming the field before anything is committed; that includes text that
cannot be stored (a lone surrogate such as ``"\\ud800"``, which the JSON decoder accepts).

A refusal keeps its own stable code on the wire (``docs/wire.md``) instead of ``internal_error``:
every method raises :class:`Refused` (a :class:`chord.wire.RemoteCallError`) with

=====================  ===========================================================================
``invalid_argument``   a bad argument, or a write the harness refused (also a ``ValueError``)
``busy``               ``whenBusy: "reject"`` while a turn runs
``forbidden``          the operation is not allowed now (a task that ended, say)
``not_found``          no such conversation
``storage_failed``     the session's storage failed; the session is fail-stopped
``closed``             the session is closed
``nothing_to_compact`` ``collapse``: everything fits ``keepRecent`` (nothing was written)
``compaction_running`` ``collapse``: a collapse is live already (nothing was written)
``rejected``           any other refusal of the harness
=====================  ===========================================================================
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, cast

from chord.context import Context
from chord.json import copy_json
from chord.state import MutableReplicatedState
from chord.wire import RemoteCallError
from pico3._text import check_storable
from pico3.kernel.errors import Closed, Faulted, Forbidden, KernelError, UnknownConversation
from pico3.session_data.json_shapes import entry_json
from pico3.session_data.section_seed import SectionSeedRejected, check_section_seed
from pico3.turn.collapse import CollapseInProgress, NothingToCollapse
from pico3.turn.placement import ConversationBusy

if TYPE_CHECKING:
    from pico3.harness import ConversationHandle

__all__ = ["ConversationEndpoint", "InvalidArgument", "Refused"]

_WHEN_BUSY = ("followUp", "steer", "reject")


class Refused(RemoteCallError):
    """The harness refused a call; ``code`` says how (see the module docstring)."""


class InvalidArgument(Refused, ValueError):
    """A bad argument or a refused write: code ``invalid_argument``."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_argument", message)


_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (Faulted, "storage_failed"),
    (Closed, "closed"),
    (ConversationBusy, "busy"),
    (Forbidden, "forbidden"),
    (UnknownConversation, "not_found"),
    (NothingToCollapse, "nothing_to_compact"),  # collapse: everything fits keepRecent
    (CollapseInProgress, "compaction_running"),  # collapse: one is live already
    (KernelError, "rejected"),
)

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _coded(
    method: Callable[_P, CoroutineType[Any, Any, _T]],
) -> Callable[_P, CoroutineType[Any, Any, _T]]:
    """Turn the harness's refusals into :class:`Refused` with their code."""

    @functools.wraps(method)
    async def call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await method(*args, **kwargs)
        except Refused:
            raise
        except ValueError as error:
            raise InvalidArgument(str(error)) from error
        except KernelError as error:
            code = next(code for kind, code in _CODES if isinstance(error, kind))
            raise Refused(code, str(error) or type(error).__name__) from error

    return call


class ConversationEndpoint:
    """``pi.conversation`` for one conversation of one harness opening.

    ``settle`` is awaited after a fork so that the new conversation's instance exists when
    ``fork`` returns.
    """

    def __init__(
        self,
        conversation: ConversationHandle,
        view: MutableReplicatedState,
        settle: Callable[[], Awaitable[None]],
        info: MutableReplicatedState,
    ) -> None:
        self._conversation = conversation
        self._settle = settle
        self.view = view
        self.conversation = info

    @_coded
    async def send(self, input: Any, ctx: Context) -> int:
        """Admit a user input ``{content, requestId?, whenBusy?, model?, allow?}``; returns the
        input id."""
        fields = _fields(
            input,
            "input",
            required=("content",),
            optional=("requestId", "whenBusy", "model", "allow"),
        )
        check_storable(fields, "input")
        request_id = fields.get("requestId")
        if request_id is not None and (type(request_id) is not str or not request_id):
            raise ValueError("input.requestId must be a non-empty string")
        when_busy = fields.get("whenBusy", "followUp")
        if when_busy not in _WHEN_BUSY:
            raise ValueError(f"input.whenBusy must be one of {', '.join(_WHEN_BUSY)}")
        handle = await self._conversation.send(
            fields["content"],
            ctx,
            request_id=request_id,
            when_busy=when_busy,
            model=fields.get("model"),
            allow=fields.get("allow"),
        )
        return handle.id

    @_coded
    async def write(self, entry: Any, ctx: Context) -> int:
        """Passive write of ``{kind, model?, data?}``; returns the input id."""
        fields = _fields(entry, "entry", required=("kind",), optional=("model", "data"))
        check_storable(fields, "entry")
        kind = fields["kind"]
        if type(kind) is not str or not kind:
            raise ValueError("entry.kind must be a non-empty string")
        model = fields.get("model")
        if model is not None and type(model) is not list:
            raise ValueError("entry.model must be a list of messages")
        data = fields.get("data")
        if data is not None and type(data) is not dict:
            raise ValueError("entry.data must be an object")
        return await self._conversation.write(kind, ctx, model=model, data=data)

    @_coded
    async def input_abort(
        self, input_id: Any, ctx: Context
    ) -> Literal["aborted", "already_placed", "not_found"]:
        """Withdraw a queued input: ``aborted``, ``already_placed`` or ``not_found``."""
        result = await self._conversation.input_abort(_id(input_id, "input_id"), ctx)
        return cast(Literal["aborted", "already_placed", "not_found"], result)

    @_coded
    async def config_set(self, patch: Any, ctx: Context) -> None:
        """Set config keys in one commit (the harness validates keys and values)."""
        if type(patch) is not dict:
            raise ValueError("patch must be an object of config keys")
        check_storable(patch, "patch")
        await self._conversation.set_config(patch, ctx)

    @_coded
    async def abort(self, ctx: Context) -> None:
        """Conversation abort; returns once every marked task ended."""
        await self._conversation.abort(ctx)

    @_coded
    async def reset(self, handoff: Any, ctx: Context) -> None:
        """``pi.reset`` (``handoff`` null) or ``pi.handoff`` carrying ``handoff``."""
        if handoff is not None and type(handoff) is not str:
            raise ValueError("handoff must be a string or null")
        check_storable(handoff, "handoff")
        await self._conversation.reset(ctx, handoff=handoff)

    @_coded
    async def collapse(self, instructions: Any, ctx: Context) -> int:
        """Start a background manual collapse; returns its task id."""
        if instructions is not None and type(instructions) is not str:
            raise ValueError("instructions must be a string or null")
        check_storable(instructions, "instructions")
        return await self._conversation.collapse(ctx, instructions=instructions)

    @_coded
    async def fork(self, at: Any, spec: Any, ctx: Context) -> int:
        """Fork at an entry id (or ``"start"``) with ``{rewindable?, sticky?, sections?,
        abort?}``; returns the new conversation's id once its ``pi.conversation`` instance
        exists. A bad ``sections`` seed is refused naming the field, before anything aborts."""
        if at != "start":
            at = _id(at, "at")
        fields = _fields(
            spec, "spec", required=(), optional=("rewindable", "sticky", "sections", "abort")
        )
        check_storable(fields, "spec")
        rewindable = fields.get("rewindable")
        if rewindable is not None and type(rewindable) is not dict:
            raise ValueError("spec.rewindable must be an object")
        sticky = fields.get("sticky")
        if sticky is not None and type(sticky) is not dict:
            raise ValueError("spec.sticky must be an object")
        abort = fields.get("abort", False)
        if type(abort) is not bool:
            raise ValueError("spec.abort must be a boolean")
        sections = None
        if "sections" in fields:
            try:
                sections = check_section_seed(fields["sections"])
            except SectionSeedRejected as error:
                raise ValueError(f"spec.{error}") from None
        child = await self._conversation.fork(
            at, ctx, rewindable=rewindable, sticky=sticky, sections=sections, abort=abort
        )
        await self._settle()
        return child.id

    @_coded
    async def entries(self, scan: Any, ctx: Context) -> list[dict[str, Any]]:
        """One newest-first page ``{limit?, before?, kind?}`` of fork-aware history."""
        fields = _fields(scan, "scan", required=(), optional=("limit", "before", "kind"))
        limit = fields.get("limit", 100)
        if type(limit) is not int or limit < 1:
            raise ValueError("scan.limit must be a positive integer")
        before = fields.get("before")
        if before is not None:
            before = _id(before, "scan.before")
        kind = fields.get("kind")
        if kind is not None and type(kind) is not str:
            raise ValueError("scan.kind must be a string")
        page = await self._conversation.entries(ctx, limit=limit, before=before, kind=kind)
        return [copy_json(entry_json(entry)) for entry in page]

    def __repr__(self) -> str:
        return f"<ConversationEndpoint conversation={self._conversation.id}>"


def _fields(
    value: Any, name: str, *, required: tuple[str, ...], optional: tuple[str, ...]
) -> Mapping[str, Any]:
    """Check that ``value`` is an object with exactly the allowed keys; name what is wrong."""
    if type(value) is not dict:
        raise ValueError(f"{name} must be an object")
    unknown = sorted(key for key in value if key not in required and key not in optional)
    if unknown:
        allowed = ", ".join((*required, *optional)) or "none"
        raise ValueError(
            f"{name} has unsupported field(s) {', '.join(unknown)} (allowed: {allowed})"
        )
    missing = [key for key in required if key not in value]
    if missing:
        raise ValueError(f"{name} is missing required field(s) {', '.join(missing)}")
    return value


def _id(value: Any, name: str) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{name} must be a non-negative integer id")
    return value
