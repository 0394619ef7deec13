"""Tasks: durable, resumable work, and the scheduler that runs it (docs/design/harness.md#tasks).

* :mod:`~pico3.tasks.kinds` — :func:`define_task`, :class:`Next`, :class:`Done`,
  :class:`Completion`, :data:`RETRY`, :class:`TaskInfo`.
* :mod:`~pico3.tasks.runtime` — the ``rt`` handed to handlers.
* :mod:`~pico3.tasks.scheduler` — kick/drain/reserve, aborts, faults, quiescence.
* :mod:`~pico3.tasks.waiters` — wait for a task, an input, or idle.
* :mod:`~pico3.tasks.invocation` — the per-call authority tokens.
* :mod:`~pico3.tasks.clock` — the injectable clock (:class:`ManualClock` for tests).
"""

from pico3.tasks.clock import Clock, ManualClock, SystemClock
from pico3.tasks.invocation import Invocation
from pico3.tasks.kinds import (
    RETRY,
    Completion,
    Done,
    KindRegistry,
    Next,
    Step,
    TaskInfo,
    TaskKind,
    define_task,
)
from pico3.tasks.runtime import DeadlockError, Runtime
from pico3.tasks.scheduler import ContractFault, NotQuiescent, Scheduler, TaskFaulted
from pico3.tasks.waiters import UnknownTask

__all__ = [
    "RETRY",
    "Clock",
    "Completion",
    "ContractFault",
    "DeadlockError",
    "Done",
    "Invocation",
    "KindRegistry",
    "ManualClock",
    "Next",
    "NotQuiescent",
    "Runtime",
    "Scheduler",
    "Step",
    "SystemClock",
    "TaskFaulted",
    "TaskInfo",
    "TaskKind",
    "UnknownTask",
    "define_task",
]
