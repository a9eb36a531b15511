"""Triton's JSON trace file: one array, one object per traced request.

Each object is ``{"id", "model_name", "model_version", "request_id", "timestamps":
[{"name": "QUEUE_START", "ns": ...}, ...]}``, the timestamps in the order they happened.
Traces are kept in memory and appended every ``log_frequency`` traces (0: only at
shutdown); after every write the file is a whole JSON array, so it can be read while the
server runs.
"""

from __future__ import annotations

import io
import json
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conveyor.server.tracing.trace import RequestTrace


def trace_object(trace: RequestTrace) -> dict[str, Any]:
    return {
        "id": trace.id,
        "model_name": trace.model,
        "model_version": int(trace.version) if trace.version.isdigit() else -1,
        "request_id": trace.request_id,
        "timestamps": [{"name": name, "ns": ns} for name, ns in trace.timestamps()],
    }


class TritonTraceFile:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._file: io.TextIOWrapper | None = None
        self._written = 0

    def record(self, trace: RequestTrace, log_frequency: int) -> None:
        with self._lock:
            self._pending.append(trace_object(trace))
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
