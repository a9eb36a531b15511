"""Where the load generator runs: in this process, or in several worker processes.

One Python process tops out at some thousands of requests per second (its event loop is
the limit), so ``--processes N`` splits every point between N worker processes, each with
its own event loop and connections, started once and reused for every point of a sweep.
Workers are spawned (not forked): the parent may already hold gRPC channels, which do not
survive a fork.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import traceback
from collections.abc import Callable, Mapping, MutableSequence

import numpy as np

from conveyor.bench.inputs import ModelSpec
from conveyor.bench.loadgen import Point, WorkerResult, new_event_loop, run_point
from conveyor.bench.schedule import split_concurrency
from conveyor.bench.targets.base import Client, TargetSpec, make_client

_START_TIMEOUT_S = 60.0


def _slots(point: Point, workers: int) -> list[int]:
    if point.concurrency is None:
        return [0] * workers
    return split_concurrency(point.concurrency, workers)


class LocalRunner:
    """Runs the generator on an event loop in the calling thread (and ``inprocess`` needs it)."""

    def __init__(self, make: Callable[[], Client]) -> None:
        self.progress: MutableSequence[int] = [0]
        self._loop = new_event_loop()
        self._client = make()

    def run(self, point: Point, start_ns: int) -> list[WorkerResult]:
        self.progress[0] = 0
        result = self._loop.run_until_complete(
            run_point(self._client, point, start_ns, slots=point.concurrency or 0,
                      progress=self.progress)
        )
        return [result]

    def close(self) -> None:
        self._loop.run_until_complete(self._client.close())
        self._loop.close()


def _worker_main(conn, spec, model, inputs, index, workers, progress) -> None:
    loop = new_event_loop()
    try:
        client = make_client(spec, model, inputs)
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready", None))
    try:
        while True:
            message = conn.recv()
            if message[0] == "stop":
                break
            _cmd, point, start_ns, slots = message
            try:
                result = loop.run_until_complete(
                    run_point(client, point, start_ns, slots=slots, worker=index,
                              workers=workers, progress=progress)
                )
                conn.send(("result", result))
            except Exception:
                conn.send(("error", traceback.format_exc()))
    finally:
        loop.run_until_complete(client.close())
        loop.close()


class ProcessPool:
    """``processes`` spawned workers, each driving its share of every point."""

    def __init__(self, spec: TargetSpec, model: ModelSpec, inputs: Mapping[str, np.ndarray],
                 processes: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.progress: MutableSequence[int] = context.Array("q", processes, lock=False)
        self._conns = []
        self._procs = []
        for index in range(processes):
            parent, child = context.Pipe()
            proc = context.Process(
                target=_worker_main,
                args=(child, spec, model, dict(inputs), index, processes, self.progress),
                daemon=True,
                name=f"conveyor-bench-{index}",
            )
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        try:
            for conn in self._conns:
                self._receive(conn, _START_TIMEOUT_S, "ready")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _receive(conn, timeout: float, expected: str):
        if not conn.poll(timeout):
            raise TimeoutError(f"a generator worker did not answer within {timeout:.0f} s")
        kind, payload = conn.recv()
        if kind == "error":
            raise RuntimeError(f"a generator worker failed:\n{payload}")
        assert kind == expected, kind
        return payload

    def run(self, point: Point, start_ns: int) -> list[WorkerResult]:
        for i in range(len(self.progress)):
            self.progress[i] = 0
        for conn, slots in zip(self._conns, _slots(point, len(self._conns)), strict=True):
            conn.send(("run", point, start_ns, slots))
        limit = point.warmup_s + point.duration_s + point.drain_s + 30.0
        return [self._receive(conn, limit, "result") for conn in self._conns]

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError):  # a worker that died already
                conn.send(("stop",))
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
