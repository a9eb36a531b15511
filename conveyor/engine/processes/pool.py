"""The engine's side of process instances: the zygote handle, worker slots, instance threads.

Scheduling stays in the engine: each process instance is one engine thread that takes work
from the model's queue exactly as a thread instance does, and hands the execution to its
worker process instead of running it. So priorities, deadlines, cancellation, dynamic
batching and completion order are the same code for both kinds; only ``run`` differs.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import mmap
import os
import signal
import socket
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from conveyor.backends import backend_info, backend_names
from conveyor.backends.base import LoadedModel, ModelCaller, RequestData
from conveyor.backends.custom_metrics import CUSTOM_METRICS, Action, KindMismatch, Update
from conveyor.engine.instances import Execute as ExecuteWork
from conveyor.engine.instances import TakeWork, ThreadInstances
from conveyor.engine.processes.messages import (
    Call,
    Execute,
    Executed,
    ExecutedRequests,
    ExecuteRequests,
    Failed,
    Loaded,
    MetricUpdates,
    Ready,
    Reap,
    Reaped,
    RequestShape,
    Returned,
    Spawn,
    Spawned,
    flatten_error,
)
from conveyor.engine.processes.shm import SharedBuffer, attach, read_tensors, unmap, write_tensors
from conveyor.engine.processes.zygote import Zygote, start_zygote
from conveyor.engine.stats import WorkerStatus
from conveyor.errors import ModelError, RepositoryError
from conveyor.ipc.channel import Channel
from conveyor.repository.config import ModelConfig

log = logging.getLogger("conveyor.engine.processes")

_STOP_GRACE_S = 5.0  # how long a closing zygote may take before it is SIGKILLed


class ProcessPool:
    """A model's zygote (which holds the one loaded copy) and the workers forked from it.

    Constructing one forks the zygote and waits until the model has loaded in it (or raises
    RepositoryError with the reason). If the zygote dies later, its workers die with it and
    the next :meth:`spawn` starts a new zygote, which loads the model again.
    """

    def __init__(
        self, config: ModelConfig, version_dir: Path, caller: ModelCaller | None = None
    ) -> None:
        if not backend_info(config.backend).process_instances:
            capable = [b for b in backend_names() if backend_info(b).process_instances]
            raise RepositoryError(
                f'model {config.name!r}: instance_kind "process" is for '
                f"{' and '.join(capable)} models; {config.backend} models run on thread instances"
            )
        self.name = config.name
        self.config = config
        self.caller = caller  # answers the workers' calls to other models
        self.metrics = WorkerMetrics()  # the workers' custom metrics, in the engine's store
        self.separate_requests = False
        self.checks_outputs = True
        self._source = config  # as the repository gave it: what a restarted zygote loads
        self._version_dir = version_dir
        self._lock = threading.Lock()  # one zygote request/reply at a time
        self._ids = itertools.count(1)
        self._closed = False
        self.generation = 0
        self._zygote = self._start()

    def _start(self) -> Zygote:
        zygote = start_zygote(self._source, self._version_dir)
        try:
            reply, _ = zygote.channel.recv()
        except (EOFError, OSError):
            reply = None
        if not isinstance(reply, Loaded):
            zygote.stop(_STOP_GRACE_S)
            if isinstance(reply, Failed):
                error = RepositoryError(reply.error.message)
                error.model_traceback = reply.error.model_traceback
                raise error
            raise RepositoryError(
                f"model {self.name!r}: its zygote process {zygote.describe_exit()} while loading"
            )
        self.config = reply.config
        self.separate_requests = reply.separate_requests
        self.checks_outputs = reply.checks_outputs
        self.generation += 1
        return zygote

    def spawn(self, index: int) -> Worker:
        """Fork worker ``index`` from the zygote (restarting the zygote if it has died), and
        wait until it is ready; ModelError says why it could not start."""
        worker = self._fork(index)
        try:
            reply, fds = answer_calls(worker.channel, self.caller, None, self.metrics)
        except (EOFError, OSError):
            reply, fds = None, []
        for fd in fds:
            os.close(fd)
        if isinstance(reply, Ready):
            return worker
        reason = self.reap(worker)
        worker.close()
        if isinstance(reply, Failed):
            error = ModelError(reply.error.message)
            error.model_traceback = reply.error.model_traceback
            raise error
        raise ModelError(f"model {self.name!r}: its worker process {worker.pid} {reason}")

    def _fork(self, index: int) -> Worker:
        with self._lock:
            for attempt in (1, 2):
                if self._closed:
                    raise ModelError(f"model {self.name!r} is shutting down")
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    request = Spawn(next(self._ids), index)
                    self._zygote.channel.send(request, [theirs.fileno()])
                    reply, _ = self._zygote.channel.recv()
                    if isinstance(reply, Spawned) and reply.id == request.id:
                        return Worker(reply.pid, Channel(ours), self.generation)
                    raise EOFError  # an out-of-step zygote is as good as a dead one
                except (EOFError, OSError):
                    ours.close()
                    if attempt == 2:
                        raise ModelError(
                            f"model {self.name!r}: could not start a worker process"
                        ) from None
                    self._restart_zygote()
                finally:
                    theirs.close()
            raise AssertionError("unreachable")

    def _restart_zygote(self) -> None:
        log.warning(
            "model %r: its zygote process %d died; starting a new one", self.name, self._zygote.pid
        )
        self._zygote.stop(0)
        try:
            self._zygote = self._start()
        except RepositoryError as exc:
            raise ModelError(f"model {self.name!r}: reloading it failed: {exc.message}") from None

    def reap(self, worker: Worker) -> str:
        """Kill ``worker`` if it still runs, collect it, and say how it ended."""
        with self._lock:
            if worker.generation != self.generation or not self._zygote.running():
                return "was stopped when its zygote process died"
            # No pid reuse: the worker is the live zygote's child, and the zygote collects
            # its workers only when asked (below).
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
            try:
                request = Reap(next(self._ids), worker.pid)
                self._zygote.channel.send(request)
                reply, _ = self._zygote.channel.recv()
            except (EOFError, OSError):
                return "was stopped when its zygote process died"
            if isinstance(reply, Reaped) and reply.id == request.id:
                return reply.reason
            return "ended (the zygote's answer was out of step)"

    def close(self) -> None:
        """Stop the zygote; it SIGKILLs and collects any worker still running first."""
        with self._lock:
            self._closed = True
            self._zygote.stop(_STOP_GRACE_S)
        self.metrics.release_all()


def answer_calls(
    channel: Channel,
    caller: ModelCaller | None,
    timeout: float | None,
    metrics: WorkerMetrics,
) -> tuple[object, list[int]]:
    """The worker's next reply; calls to other models are answered, metric updates applied.

    A worker's model code may call other models (Triton's BLS) while it starts or runs an
    execution; this thread waits for it anyway, so it runs the call through the engine.
    """
    while True:
        message, fds = channel.recv(timeout=timeout)
        if isinstance(message, MetricUpdates):
            metrics.apply(message.updates)
        elif isinstance(message, Call):
            channel.send(_answer(message, caller))
        else:
            return message, fds


class WorkerMetrics:
    """Applies a model's workers' custom-metric updates to the engine's store, and keeps
    count of the families they hold there (MetricFamily objects made and not deleted), to
    release them when the model closes: a stopping worker's own deletions never arrive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holds: collections.Counter[str] = collections.Counter()

    def apply(self, updates: Sequence[Update]) -> None:
        for update in updates:
            try:
                CUSTOM_METRICS.apply(update)
            except KindMismatch as exc:  # another model's family took the name first
                log.warning("a worker's custom metric was dropped: %s", exc)
                continue
            if update.action in (Action.HOLD, Action.RELEASE):
                with self._lock:
                    self._holds[update.family] += 1 if update.action is Action.HOLD else -1

    def release_all(self) -> None:
        with self._lock:
            holds, self._holds = self._holds, collections.Counter()
        for family, count in holds.items():
            for _ in range(count):
                CUSTOM_METRICS.apply(Update(family, Action.RELEASE))


def _answer(call: Call, caller: ModelCaller | None) -> Returned | Failed:
    model = call.request.model
    if caller is None:
        return Failed(call.id, ModelError(f"no engine to run model {model!r} here"))
    try:
        return Returned(call.id, dict(caller(call.request).result()))
    except Exception as exc:
        return Failed(call.id, flatten_error(exc, model))


class Worker:
    """One worker process, as its slot sees it."""

    def __init__(self, pid: int, channel: Channel, generation: int) -> None:
        self.pid = pid
        self.channel = channel
        self.generation = generation
        self.inputs = 0  # the generation of the slot's input buffer it has mapped
        self.outputs: mmap.mmap | None = None  # its output buffer, once it has sent one

    def close(self) -> None:
        if self.outputs is not None:
            unmap(self.outputs)
            self.outputs = None
        self.channel.close()


class WorkerSlot(LoadedModel):
    """One process instance: ``run`` ships an execution to its worker and waits for it.

    A worker that dies or overruns the execution timeout fails the execution it held (and
    only that one) with ModelError, and a new worker takes its place before ``run`` returns.
    """

    def __init__(self, pool: ProcessPool, index: int) -> None:
        self.pool = pool
        self.name = pool.name
        self._timeout = pool.config.execution_timeout_s
        self._inputs = SharedBuffer(f"{pool.name}-in-{index}")
        self._ids = itertools.count(1)
        self._closing = False
        self._lock = threading.Lock()  # guards _worker between run() and close()
        self._index = index
        self.separate_requests = pool.separate_requests
        self._worker: Worker | None = pool.spawn(index)
        self.restarts = 0  # workers started to replace one that died, hung or went astray

    def status(self) -> WorkerStatus:
        """This instance's worker as the dashboard shows it."""
        with self._lock:
            worker = self._worker
        return WorkerStatus(
            pid=worker.pid if worker is not None else None,
            alive=worker is not None and not self._closing,
            restarts=self.restarts,
        )

    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        refs = write_tensors(self._inputs, inputs)
        message = Execute(next(self._ids), refs, tuple(outputs), self._inputs.size)
        reply, worker = self._exchange(message)
        assert isinstance(reply, Executed)
        return read_tensors(worker.outputs, reply.outputs, copy=True)

    def run_requests(
        self, requests: Sequence[RequestData]
    ) -> list[dict[str, np.ndarray] | Exception]:
        """The batch goes as one ExecuteRequests; each request's tensors as "<i>/<name>"."""
        flat = {
            f"{i}/{name}": array
            for i, request in enumerate(requests)
            for name, array in request.inputs.items()
        }
        refs = write_tensors(self._inputs, flat)
        shapes = tuple(
            RequestShape(r.outputs, r.request_id, r.sequence, dict(r.parameters)) for r in requests
        )
        message = ExecuteRequests(next(self._ids), shapes, refs, self._inputs.size)
        reply, worker = self._exchange(message)
        assert isinstance(reply, ExecutedRequests)
        produced = read_tensors(worker.outputs, reply.outputs, copy=True)
        outcomes: list[dict[str, np.ndarray] | Exception] = []
        for i, error in enumerate(reply.errors):
            prefix = f"{i}/"
            mine = {k.removeprefix(prefix): a for k, a in produced.items() if k.startswith(prefix)}
            outcomes.append(error if error is not None else mine)
        return outcomes

    def _exchange(
        self, message: Execute | ExecuteRequests
    ) -> tuple[Executed | ExecutedRequests, Worker]:
        """Send one execution to the worker and wait for its reply (Executed...)."""
        worker = self._send(message)
        try:
            reply, fds = answer_calls(
                worker.channel, self.pool.caller, self._timeout, self.pool.metrics
            )
        except TimeoutError:
            self._replace(worker)
            raise ModelError(
                f"model {self.name!r} did not finish within its execution_timeout_s of "
                f"{self._timeout:g} s; its worker process {worker.pid} was killed and replaced"
            ) from None
        except (EOFError, OSError):
            if self._closing:
                self._replace(worker)
                raise ModelError(
                    f"model {self.name!r} was closed while this request was running"
                ) from None
            reason = self._replace(worker)
            raise ModelError(
                f"model {self.name!r}: its worker process {worker.pid} {reason} while running "
                "this request; a new worker process replaces it"
            ) from None
        if isinstance(reply, Failed) and reply.id == message.id:
            raise reply.error
        expected = ExecutedRequests if isinstance(message, ExecuteRequests) else Executed
        if not isinstance(reply, Executed | ExecutedRequests):
            reply = None
        if reply is None or not isinstance(reply, expected) or reply.id != message.id:
            for fd in fds:
                os.close(fd)
            self._replace(worker)
            raise ModelError(f"model {self.name!r}: its worker process answered out of step")
        if fds:
            if worker.outputs is not None:
                unmap(worker.outputs)
            worker.outputs = attach(fds[0], reply.buffer_size)
            for fd in fds[1:]:
                os.close(fd)
        return reply, worker

    def _send(self, message: Execute | ExecuteRequests) -> Worker:
        """Send to a live worker: one found dead before it took the request is replaced."""
        for attempt in (1, 2):
            worker = self._live_worker()
            generation = self._inputs.generation
            fds = [self._inputs.fd] if worker.inputs != generation else []
            try:
                worker.channel.send(message, fds)
            except OSError:
                # It died while idle: the request never reached it, so it is not lost.
                self._replace(worker)
                if attempt == 2:
                    raise ModelError(f"model {self.name!r}: its worker process died") from None
                continue
            worker.inputs = generation
            return worker
        raise AssertionError("unreachable")

    def _live_worker(self) -> Worker:
        with self._lock:
            worker = self._worker
        if worker is not None and worker.channel.readable(0):
            # End of file while idle: it died between requests. Replace it before sending.
            self._replace(worker)
            with self._lock:
                worker = self._worker
        if worker is None:
            with self._lock:
                if self._closing:
                    raise ModelError(f"model {self.name!r} is shutting down")
                self._worker = worker = self.pool.spawn(self._index)
        return worker

    def _replace(self, worker: Worker) -> str:
        """Retire ``worker`` (kill, collect) and start its successor; how the old one ended."""
        reason = self.pool.reap(worker)
        worker.close()
        with self._lock:
            if self._worker is worker:
                self._worker = None
            if self._closing:
                return reason
        log.warning("model %r: worker process %d %s", self.name, worker.pid, reason)
        try:
            successor = self.pool.spawn(self._index)
        except ModelError as exc:
            log.error("%s; the next request will try again", exc.message)
            return reason
        with self._lock:
            self._worker = successor
            self.restarts += 1
        return reason

    def hang_up(self) -> None:
        """Start closing: a run() waiting on the worker wakes up and fails its request."""
        with self._lock:
            self._closing = True
            worker = self._worker
        if worker is not None:
            worker.channel.hang_up()

    def close(self) -> None:
        with self._lock:
            self._closing = True
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()  # the worker reads end of file and exits
        self._inputs.close()


class ProcessInstances:
    """``count`` process instances: the same take/execute shape as :class:`ThreadInstances`.

    Engine thread i takes work from the queue and calls ``execute(slots[i], batch)``; slot i
    runs it in worker process i.
    """

    def __init__(
        self,
        name: str,
        pool: ProcessPool,
        count: int,
        take: TakeWork,
        execute: ExecuteWork,
    ) -> None:
        self.pool = pool
        self.slots: list[WorkerSlot] = []
        try:
            for index in range(count):
                self.slots.append(WorkerSlot(pool, index))
        except ModelError as exc:  # a worker could not start (a Triton initialize() failed)
            self._release()
            error = RepositoryError(exc.message)
            error.model_traceback = exc.model_traceback
            raise error from None
        except BaseException:
            self._release()
            raise
        self._threads = ThreadInstances(name, self.slots, count, take, execute)

    @property
    def count(self) -> int:
        return self._threads.count

    def workers(self) -> tuple[WorkerStatus, ...]:
        return tuple(slot.status() for slot in self.slots)

    @property
    def all_stuck(self) -> bool:
        # Never: a worker past its execution timeout is killed and replaced, not left stuck.
        return False

    def alive(self) -> bool:
        return self._threads.alive()

    def join(self, timeout: float | None = None) -> bool:
        """Finish the requests taken (within ``timeout``), then stop every process."""
        drained = self._threads.join(timeout)
        if not drained:  # fail what is still running rather than leave processes behind
            for slot in self.slots:
                slot.hang_up()
            self._threads.join(_STOP_GRACE_S)
        self._release()
        return drained

    def _release(self) -> None:
        for slot in self.slots:
            slot.close()
        self.pool.close()
