"""Where the load generator runs: in this process, or in several generator processes.

One Python process tops out at some thousands of requests per second (its event loop is
the limit), so ``--processes N`` splits every point between N generator processes, each
with its own event loop and connections, started once and reused for every point of a
sweep. They are spawned (not forked): the parent may already hold gRPC channels, which do
not survive a fork. Parent and generators talk in the typed messages of ``messages``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import traceback
from collections.abc import Callable, Mapping, MutableSequence
from multiprocessing.connection import Connection

import numpy as np

from conveyor.bench.loadgen import Point, WorkerResult, new_event_loop, run_point
from conveyor.bench.messages import (
    FromGenerator,
    GeneratorFailed,
    PointDone,
    Ready,
    RunPoint,
    Stop,
    ToGenerator,
)
from conveyor.bench.schedule import split_concurrency
from conveyor.bench.targets.base import Client, TargetSpec
from conveyor.bench.targets.pick import make_client

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
            run_point(
                self._client, point, start_ns, slots=point.concurrency or 0, progress=self.progress
            )
        )
        return [result]

    def close(self) -> None:
        self._loop.run_until_complete(self._client.close())
        self._loop.close()


def _generator_main(
    conn: Connection,
    spec: TargetSpec,
    inputs: Mapping[str, np.ndarray],
    index: int,
    workers: int,
    progress: MutableSequence[int],
) -> None:
    loop = new_event_loop()
    try:
        client = make_client(spec, inputs)
    except Exception:
        conn.send(GeneratorFailed(None, traceback.format_exc()))
        return
    conn.send(Ready(index))
    try:
        while True:
            message: ToGenerator = conn.recv()
            if isinstance(message, Stop):
                break
            try:
                result = loop.run_until_complete(
                    run_point(
                        client,
                        message.point,
                        message.start_ns,
                        slots=message.slots,
                        worker=index,
                        workers=workers,
                        progress=progress,
                    )
                )
                conn.send(PointDone(message.id, result))
            except Exception:
                conn.send(GeneratorFailed(message.id, traceback.format_exc()))
    finally:
        loop.run_until_complete(client.close())
        loop.close()


class GeneratorProcesses:
    """``processes`` spawned generator processes, each driving its share of every point."""

    def __init__(self, spec: TargetSpec, inputs: Mapping[str, np.ndarray], processes: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.progress: MutableSequence[int] = context.Array("q", processes, lock=False)
        self._conns: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._next_id = 0
        for index in range(processes):
            parent, child = context.Pipe()
            proc = context.Process(
                target=_generator_main,
                args=(child, spec, dict(inputs), index, processes, self.progress),
                daemon=True,
                name=f"conveyor-bench-{index}",
            )
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        try:
            for conn in self._conns:
                self._receive(conn, _START_TIMEOUT_S, Ready)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _receive(conn: Connection, timeout: float, expected: type) -> FromGenerator:
        if not conn.poll(timeout):
            raise TimeoutError(f"a generator process did not answer within {timeout:.0f} s")
        message: FromGenerator = conn.recv()
        if isinstance(message, GeneratorFailed):
            raise RuntimeError(f"a generator process failed:\n{message.traceback}")
        if not isinstance(message, expected):
            raise RuntimeError(
                f"a generator process sent {message!r}, expected {expected.__name__}"
            )
        return message

    def run(self, point: Point, start_ns: int) -> list[WorkerResult]:
        for i in range(len(self.progress)):
            self.progress[i] = 0
        self._next_id += 1
        run_id = self._next_id
        for conn, slots in zip(self._conns, _slots(point, len(self._conns)), strict=True):
            conn.send(RunPoint(run_id, point, start_ns, slots))
        limit = point.warmup_s + point.duration_s + point.drain_s + 30.0
        results = []
        for conn in self._conns:
            done = self._receive(conn, limit, PointDone)
            assert isinstance(done, PointDone)
            if done.id != run_id:
                raise RuntimeError(f"a generator answered point {done.id} when {run_id} ran")
            results.append(done.result)
        return results

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError):  # a generator that died already
                conn.send(Stop())
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
