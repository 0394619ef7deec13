"""The process-local keyed registry: keyed services that never leave their process.

A ``local=True`` keyed service (``provide_many`` + ``observe``) is not published through the
remote provider, so its instances may carry any Python object: callables, maps, open handles.
This registry is its directory. For each service it keeps the live instances by key, hands out
:class:`~chord.services.InstanceAddress` generations (1 for a key's first spawn, +1 each time a
closed key is spawned again), and runs the observers:

* one handler call per (observer, live instance), with a fresh context from
  ``with_cancel(BACKGROUND)``;
* the handler is called *at once*, inside ``spawn`` (or ``observe`` for the instances already
  live): there is no hydration to wait for in-process. A handler that returns an awaitable has it
  run as a task in the host's task group;
* closing the instance (or stopping the observation, or disposing the registry) aborts that
  context and cancels the task's scope. Errors are reported to ``on_error`` unless the context
  was already aborted, which is ordinary cleanup.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import anyio.abc

from chord.context import BACKGROUND, Context, with_cancel
from chord.services import InstanceAddress, Service

__all__ = ["LocalKeyedRegistry", "check_implementation"]

KeyedHandler = Callable[[Any, Context], "Awaitable[None] | None"]


def check_implementation(value: object, what: str) -> None:
    """Raise ``TypeError`` unless ``value`` can be a service implementation (an object).

    ``None``, primitives, lists, tuples and classes are rejected; mappings, namespaces and class instances
    are accepted.
    """
    if value is None or isinstance(
        value, (bool, int, float, complex, str, bytes, list, tuple, type)
    ):
        raise TypeError(f"{what} implementation must be an object, got {type(value).__name__}")


class _Instance:
    __slots__ = ("address", "target")

    def __init__(self, address: InstanceAddress, target: object) -> None:
        self.address = address
        self.target = target


class _Task:
    """One observer's handler run for one instance."""

    __slots__ = ("awaitable", "cancel_context", "cancelled", "scope")

    def __init__(self, cancel_context: Callable[..., None]) -> None:
        self.cancel_context = cancel_context
        self.cancelled = False
        self.scope: anyio.CancelScope | None = None
        self.awaitable: Awaitable[Any] | None = None

    def cancel(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        self.cancel_context("instance closed")
        if self.scope is not None:
            self.scope.cancel()
        elif inspect.iscoroutine(self.awaitable):
            # Never started: close it so it is not reported as "never awaited".
            self.awaitable.close()


class _Observer:
    __slots__ = ("closed", "handler", "tasks")

    def __init__(self, handler: KeyedHandler) -> None:
        self.handler = handler
        self.tasks: dict[_Instance, _Task] = {}
        self.closed = False


class _Directory:
    __slots__ = ("generations", "instances", "observers")

    def __init__(self) -> None:
        self.generations: dict[str, int] = {}
        self.instances: dict[str, _Instance] = {}
        self.observers: list[_Observer] = []


class LocalKeyedRegistry:
    """Live instances and observers of the local keyed services of one host generation."""

    def __init__(
        self,
        services: Sequence[Service[Any]],
        *,
        task_group: anyio.abc.TaskGroup,
        on_error: Callable[[BaseException], None],
    ) -> None:
        ids = [service.id for service in services]
        if len(set(ids)) != len(ids):
            raise TypeError("Local keyed service registry has duplicate IDs")
        self._directories = {service_id: _Directory() for service_id in ids}
        self._task_group = task_group
        self._on_error = on_error
        self._disposed = False

    # -- provider side --------------------------------------------------------------------------
    def spawn(self, service: Service[Any], key: str, implementation: object) -> Callable[[], None]:
        """Add a live instance under ``key``; returns its idempotent close function."""
        self._assert_open()
        if not isinstance(key, str) or not key:
            raise TypeError(f"Local service {service.id} instance key must be a non-empty string")
        check_implementation(implementation, f"Local service {service.id}")
        directory = self._directory(service.id)
        if key in directory.instances:
            raise RuntimeError(
                f"Local service {service.id} already has a live instance with key {key}"
            )
        generation = directory.generations.get(key, 0) + 1
        directory.generations[key] = generation
        instance = _Instance(InstanceAddress(key, generation), implementation)
        directory.instances[key] = instance
        for observer in list(directory.observers):
            self._start(observer, instance)

        def close() -> None:
            if directory.instances.get(key) is not instance:
                return
            del directory.instances[key]
            for observer in directory.observers:
                task = observer.tasks.pop(instance, None)
                if task is not None:
                    task.cancel()

        return close

    def live(self, service: Service[Any]) -> list[InstanceAddress]:
        """The addresses of the live instances of ``service``, sorted by key."""
        directory = self._directory(service.id)
        return sorted(instance.address for instance in directory.instances.values())

    # -- consumer side --------------------------------------------------------------------------
    def observe(self, service: Service[Any], handler: KeyedHandler) -> Callable[[], None]:
        """Run ``handler(instance, ctx)`` for every live and future instance; returns stop."""
        self._assert_open()
        directory = self._directory(service.id)
        observer = _Observer(handler)
        directory.observers.append(observer)
        for instance in list(directory.instances.values()):
            self._start(observer, instance)

        def stop() -> None:
            if observer.closed:
                return
            observer.closed = True
            if observer in directory.observers:
                directory.observers.remove(observer)
            self._cancel_all(observer)

        return stop

    def dispose(self) -> None:
        """Abort every observation task and forget every instance. Idempotent."""
        if self._disposed:
            return
        self._disposed = True
        for directory in self._directories.values():
            for observer in directory.observers:
                observer.closed = True
                self._cancel_all(observer)
            directory.observers.clear()
            directory.instances.clear()

    # -- internals ------------------------------------------------------------------------------
    @staticmethod
    def _cancel_all(observer: _Observer) -> None:
        tasks = list(observer.tasks.values())
        observer.tasks.clear()
        for task in tasks:
            task.cancel()

    def _start(self, observer: _Observer, instance: _Instance) -> None:
        if observer.closed or instance in observer.tasks:
            return
        ctx, cancel = with_cancel(BACKGROUND)
        task = _Task(cancel)
        observer.tasks[instance] = task
        try:
            result = observer.handler(instance.target, ctx)
        except Exception as error:
            if not ctx.cancelled:
                self._on_error(error)
            return
        if result is None or not inspect.isawaitable(result):
            return
        task.awaitable = result
        if task.cancelled:
            if inspect.iscoroutine(result):
                result.close()
            return
        self._task_group.start_soon(self._run, task, result, ctx)

    async def _run(self, task: _Task, awaitable: Awaitable[Any], ctx: Context) -> None:
        if task.cancelled:
            return
        with anyio.CancelScope() as scope:
            task.scope = scope
            try:
                await awaitable
            except Exception as error:
                if not ctx.cancelled:
                    self._on_error(error)

    def _directory(self, service_id: str) -> _Directory:
        directory = self._directories.get(service_id)
        if directory is None:
            raise RuntimeError(f"Local keyed service {service_id} is not registered")
        return directory

    def _assert_open(self) -> None:
        if self._disposed:
            raise RuntimeError("Local keyed service registry is disposed")
