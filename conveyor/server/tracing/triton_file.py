"""Triton's JSON trace file: one array, one object per traced request.

Each object is ``{"id", "model_name", "model_version", "request_id", "timestamps":
[{"name": "QUEUE_START", "ns": ...}, ...]}``, the timestamps in the order they happened.
Each step of a traced ensemble request is an object of its own after it, as Triton writes
them: its own ``id``, ``parent_id`` the ensemble request's, and the step's REQUEST_START
(submitted by the ensemble), queue and compute timestamps and REQUEST_END (answered).
Traces are kept in memory and appended every ``log_frequency`` traces (0: only at
shutdown); after every write the file is a whole JSON array, so it can be read while the
server runs.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from conveyor.server.tracing.trace import step_timestamps

if TYPE_CHECKING:
    from conveyor.futures import RequestTimeline
    from conveyor.server.tracing.trace import RequestTrace


def trace_object(trace: RequestTrace) -> dict[str, Any]:
    return {
        "id": trace.id,
        "model_name": trace.model,
        "model_version": _version_number(trace.version),
        "request_id": trace.request_id,
        "timestamps": [{"name": name, "ns": ns} for name, ns in trace.timestamps()],
    }


def trace_objects(trace: RequestTrace, ids: Iterator[int]) -> list[dict[str, Any]]:
    """The request's object, then one per ensemble step (depth first), each step with a
    new id from ``ids`` and its ensemble request's as ``parent_id``."""
    objects = [trace_object(trace)]
    _add_steps(objects, trace.timeline, trace.id, trace.request_id, ids)
    return objects


def _add_steps(
    objects: list[dict[str, Any]],
    timeline: RequestTimeline,
    parent: int,
    request_id: str,
    ids: Iterator[int],
) -> None:
    for step in timeline.steps:
        step_id = next(ids)
        ends = [("REQUEST_START", step.submitted), *step_timestamps(step)]
        ends.append(("REQUEST_END", step.finished))
        objects.append(
            {
                "id": step_id,
                "parent_id": parent,
                "model_name": step.model,
                "model_version": _version_number(step.version),
                "request_id": request_id,
                "timestamps": [{"name": name, "ns": ns} for name, ns in ends if ns],
            }
        )
        _add_steps(objects, step, step_id, request_id, ids)


def _version_number(version: str) -> int:
    return int(version) if version.isdigit() else -1


class TritonTraceFile:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._file: io.TextIOWrapper | None = None
        self._written = 0

    def record(self, trace: RequestTrace, log_frequency: int, ids: Iterator[int]) -> None:
        """Keep the trace (and its ensemble steps, numbered from ``ids``) for the file."""
        with self._lock:
            self._pending.extend(trace_objects(trace, ids))
            if log_frequency and len(self._pending) >= log_frequency:
                self._write()

    def _write(self) -> None:
        if not self._pending:
            return
        if self._file is None:
            self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 (kept open)
            self._file.write("[\n")
        else:
            self._file.seek(self._file.tell() - 2)  # back over the closing "\n]"
            self._file.write(",\n")
        self._file.write(",\n".join(json.dumps(entry) for entry in self._pending))
        self._file.write("\n]")
        self._file.truncate()
        self._file.flush()
        self._written += len(self._pending)
        self._pending.clear()

    def close(self) -> None:
        with self._lock:
            self._write()
            if self._file is not None:
                self._file.close()
                self._file = None
