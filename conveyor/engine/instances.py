"""Instance threads: each one takes work from its model's queue and runs it.

Threads over one shared loaded model are the default: onnxruntime and most numpy code
release the GIL while they compute, so N threads use N cores with one copy of the weights.

A thread cannot be stopped from outside. With an execution timeout, a watchdog fails the
requests of an execution that overruns it and takes that instance out of service until the
execution returns; when every instance is out, the model is not ready.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from conveyor.backends.base import LoadedModel
from conveyor.engine.request import Request

TakeWork = Callable[[], list[Request] | None]
Execute = Callable[[LoadedModel, list[Request]], None]
# Called by the watchdog with the instance index and the batch that overran its timeout.
Overrun = Callable[[int, list[Request]], None]

log = logging.getLogger("conveyor.engine")


class Instances(Protocol):
    """A model version's instances, whichever kind: what the model version asks of them.

    Both kinds take work from the model's queue with ``take`` and run it with ``execute``;
    :class:`ThreadInstances` here, ``ProcessInstances`` in ``engine/processes``.
    """

    @property
    def count(self) -> int: ...

    @property
    def all_stuck(self) -> bool:
        """True while every instance is out of service in an execution past its timeout."""
        ...

    def join(self, timeout: float | None = None) -> bool:
        """Finish the requests taken (within ``timeout``), then stop; True if all finished."""
        ...

    def alive(self) -> bool:
        """True while an instance may still be inside the model (so it must not be closed)."""
        ...


class _Instance:
    """What one instance thread is running, as the watchdog sees it."""

    __slots__ = ("batch", "index", "model", "started", "stuck")

    def __init__(self, index: int, model: LoadedModel) -> None:
        self.index = index
        self.model = model
        self.batch: list[Request] | None = None
        self.started = 0.0
        self.stuck = False


class ThreadInstances:
    """``count`` threads; thread i runs ``models[i % len(models)]``.

    ``models`` holds one shared object for a thread-safe model, or one per instance.
    With ``execution_timeout`` (seconds), an execution running longer has ``on_overrun``
    called for it once, from a watchdog thread, and its instance counts as stuck until the
    execution returns. While all are stuck, the watchdog calls ``on_all_stuck`` each tick.
    """

    def __init__(
        self,
        name: str,
        models: Sequence[LoadedModel],
        count: int,
        take: TakeWork,
        execute: Execute,
        *,
        execution_timeout: float | None = None,
        on_overrun: Overrun | None = None,
        on_all_stuck: Callable[[], None] | None = None,
    ) -> None:
        self._name = name
        self._take = take
        self._execute = execute
        self._timeout = execution_timeout
        self._on_overrun = on_overrun
        self._on_all_stuck = on_all_stuck
        self._lock = threading.Lock()  # guards each _Instance's batch/started/stuck
        self._instances = [_Instance(i, models[i % len(models)]) for i in range(count)]
        self.all_stuck = False  # read without the lock on the submit path; written under it
        self._threads = [
            threading.Thread(
                target=self._loop, args=(instance,), name=f"conveyor-{name}-{i}", daemon=True
            )
            for i, instance in enumerate(self._instances)
        ]
        self._stop_watching = threading.Event()
        self._watchdog: threading.Thread | None = None
        if execution_timeout is not None:
            self._watchdog = threading.Thread(
                target=self._watch, name=f"conveyor-{name}-watchdog", daemon=True
            )
            self._watchdog.start()
        for thread in self._threads:
            thread.start()

    def _loop(self, instance: _Instance) -> None:
        timed = self._timeout is not None
        while (work := self._take()) is not None:
            if not timed:
                self._execute(instance.model, work)
                # Not held while waiting for the next batch: its inputs may be views of a
                # client's shared-memory region, which is unmapped once nothing views it.
                del work
                continue
            with self._lock:
                instance.batch, instance.started = work, time.monotonic()
            try:
                self._execute(instance.model, work)
            finally:
                with self._lock:
                    recovered = instance.stuck
                    instance.batch, instance.stuck = None, False
                    self.all_stuck = False
                del work
                if recovered:
                    log.warning(
                        "%s: instance %d returned from its overrun execution after %.1f s; "
                        "it serves again",
                        self._name,
                        instance.index,
                        time.monotonic() - instance.started,
                    )

    def _watch(self) -> None:
        assert self._timeout is not None and self._on_overrun is not None
        # Check often enough that an overrun is noticed within a tenth of the timeout.
        period = min(max(self._timeout / 10, 0.005), 1.0)
        while not self._stop_watching.wait(period):
            now = time.monotonic()
            overrun: list[tuple[int, list[Request]]] = []
            with self._lock:
                for instance in self._instances:
                    if (
                        instance.batch is not None
                        and not instance.stuck
                        and now - instance.started > self._timeout
                    ):
                        instance.stuck = True
                        overrun.append((instance.index, instance.batch))
                if overrun:
                    self.all_stuck = all(instance.stuck for instance in self._instances)
            for index, batch in overrun:
                self._on_overrun(index, batch)
            if self.all_stuck and self._on_all_stuck is not None:
                # Every tick, not once: a request may slip in just as the last one sticks.
                self._on_all_stuck()

    @property
    def count(self) -> int:
        return len(self._instances)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every thread to finish its last request; True if all did in time.

        A stuck thread is not waited for (its requests were already failed, and it may
        never return): it counts as finished, though ``alive()`` still sees it.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for instance, thread in zip(self._instances, self._threads, strict=True):
            while thread.is_alive() and not instance.stuck:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                # In slices when a watchdog may declare it stuck meanwhile.
                thread.join(left if self._timeout is None else min(left or 0.05, 0.05))
        self._stop_watching.set()
        return all(
            not thread.is_alive() or instance.stuck
            for instance, thread in zip(self._instances, self._threads, strict=True)
        )

    def alive(self) -> bool:
        """True while any thread still runs (a stuck one may, long after ``join``)."""
        return any(thread.is_alive() for thread in self._threads)
