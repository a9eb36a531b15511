"""Per model-version statistics, kept as counters and read as frozen values.

The shape follows Triton's statistics extension so front ends only translate field names:
per request ``success``/``fail``/``queue``/``compute_*`` durations, and per execution
(batch) ``batch_stats``. Exporters (Prometheus, the stats routes) read ``snapshot()``;
the engine never creates metric objects itself.
"""

from __future__ import annotations

import dataclasses
import threading
import time


@dataclasses.dataclass(frozen=True)
class Duration:
    count: int = 0
    ns: int = 0


@dataclasses.dataclass(frozen=True)
class BatchStats:
    batch_size: int
    compute_input: Duration
    compute_infer: Duration
    compute_output: Duration


@dataclasses.dataclass(frozen=True)
class ModelStatistics:
    name: str
    version: int
    last_inference_ms: int
    inference_count: int
    execution_count: int
    pending: int
    success: Duration
    fail: Duration
    queue: Duration
    compute_input: Duration
    compute_infer: Duration
    compute_output: Duration
    batch_stats: tuple[BatchStats, ...]
    # Ragged inputs (allow_ragged_batch), summed over the model's ragged inputs: the elements
    # requests sent, and the zeros added to pad an execution's requests to its widest one.
    ragged_real_elements: int = 0
    ragged_padding_elements: int = 0


@dataclasses.dataclass(frozen=True)
class WorkerStatus:
    """One process instance's worker: its pid (None between a death and its successor),
    whether it runs, and how many workers were started to replace one that ended."""

    pid: int | None
    alive: bool
    restarts: int


class _Accumulator:
    __slots__ = ("count", "ns")

    def __init__(self) -> None:
        self.count = 0
        self.ns = 0

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns

    def value(self) -> Duration:
        return Duration(self.count, self.ns)


class StatsRecorder:
    """Thread-safe counters for one model version."""

    def __init__(self, name: str, version: int) -> None:
        self.name = name
        self.version = version
        self._lock = threading.Lock()
        self._last_inference_ms = 0
        self._inference_count = 0
        self._execution_count = 0
        self._success = _Accumulator()
        self._fail = _Accumulator()
        self._queue = _Accumulator()
        self._input = _Accumulator()
        self._infer = _Accumulator()
        self._output = _Accumulator()
        self._batches: dict[int, tuple[_Accumulator, _Accumulator, _Accumulator]] = {}
        self._ragged_real = 0
        self._ragged_padding = 0

    def record_execution(
        self,
        queue_ns: list[int],
        total_ns: list[int],
        batch_size: int,
        input_ns: int,
        infer_ns: int,
        output_ns: int,
    ) -> None:
        """One successful execution of ``len(queue_ns)`` requests holding ``batch_size`` items.

        As in Triton, each request of a batch is charged the batch's whole compute time.
        """
        requests = len(queue_ns)
        if len(total_ns) != requests:
            raise ValueError(f"{requests} queue times but {len(total_ns)} total times")
        # Summed before the lock (the same counts and totals as adding them one by one).
        queued, succeeded = sum(queue_ns), sum(total_ns)
        # The accumulators' fields are added to in place: once per request, so no call each.
        queue, success = self._queue, self._success
        compute_input, compute_infer, compute_output = self._input, self._infer, self._output
        with self._lock:
            self._last_inference_ms = time.time_ns() // 1_000_000
            self._inference_count += batch_size
            self._execution_count += 1
            queue.count += requests
            queue.ns += queued
            success.count += requests
            success.ns += succeeded
            compute_input.count += requests
            compute_input.ns += input_ns * requests
            compute_infer.count += requests
            compute_infer.ns += infer_ns * requests
            compute_output.count += requests
            compute_output.ns += output_ns * requests
            per_size = self._batches.get(batch_size)
            if per_size is None:
                per_size = self._batches[batch_size] = (
                    _Accumulator(),
                    _Accumulator(),
                    _Accumulator(),
                )
            per_size[0].add(input_ns)
            per_size[1].add(infer_ns)
            per_size[2].add(output_ns)

    def record_padding(self, real: int, padding: int) -> None:
        """One execution's ragged inputs: ``real`` elements from requests, ``padding`` added."""
        with self._lock:
            self._ragged_real += real
            self._ragged_padding += padding

    def record_failure(self, total_ns: int, count: int = 1) -> None:
        with self._lock:
            self._fail.add(total_ns * count, count)

    def snapshot(self, pending: int) -> ModelStatistics:
        with self._lock:
            return ModelStatistics(
                name=self.name,
                version=self.version,
                last_inference_ms=self._last_inference_ms,
                inference_count=self._inference_count,
                execution_count=self._execution_count,
                pending=pending,
                success=self._success.value(),
                fail=self._fail.value(),
                queue=self._queue.value(),
                compute_input=self._input.value(),
                compute_infer=self._infer.value(),
                compute_output=self._output.value(),
                batch_stats=tuple(
                    BatchStats(size, a.value(), b.value(), c.value())
                    for size, (a, b, c) in sorted(self._batches.items())
                ),
                ragged_real_elements=self._ragged_real,
                ragged_padding_elements=self._ragged_padding,
            )
