"""Instance threads: each one takes work from its model's queue and runs it.

Threads over one shared loaded model are the default: onnxruntime and most numpy code
release the GIL while they compute, so N threads use N cores with one copy of the weights.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from conveyor.backends.base import LoadedModel
from conveyor.engine.request import Request

TakeWork = Callable[[], list[Request] | None]
Execute = Callable[[LoadedModel, list[Request]], None]


class ThreadInstances:
    """``count`` threads; thread i runs ``models[i % len(models)]``.

    ``models`` holds one shared object for a thread-safe model, or one per instance.
    """

    def __init__(
        self,
        name: str,
        models: Sequence[LoadedModel],
        count: int,
        take: TakeWork,
        execute: Execute,
    ) -> None:
        self._take = take
        self._execute = execute
        self._threads = [
            threading.Thread(
                target=self._loop,
                args=(models[i % len(models)],),
                name=f"conveyor-{name}-{i}",
                daemon=True,
            )
            for i in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def _loop(self, model: LoadedModel) -> None:
        while (work := self._take()) is not None:
            self._execute(model, work)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every thread to finish its last request; True if all did in time."""
        for thread in self._threads:
            thread.join(timeout)
        return not any(thread.is_alive() for thread in self._threads)
