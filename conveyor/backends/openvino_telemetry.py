"""Keep OpenVINO's usage telemetry off in Conveyor's processes.

``import openvino`` sends a usage event to Intel's telemetry service unless the user opted
out (openvino_telemetry's ``opt_in_out --opt_out``): it forks a process that reaches the
internet. A server must not phone home as a side effect of loading a model, nor fork from
a process whose gRPC and engine threads are running (the child of such a fork can crash).
OpenVINO falls back to a stub that sends nothing when its telemetry package cannot be
imported, so this module makes it unimportable before openvino is first imported.
``CONVEYOR_OPENVINO_TELEMETRY=1`` leaves OpenVINO's telemetry as its own settings say.
"""

from __future__ import annotations

import os
import sys

ENV = "CONVEYOR_OPENVINO_TELEMETRY"


def keep_telemetry_off() -> None:
    """Before ``import openvino``: its telemetry package reads as not installed (a no-op if
    it was imported already, or if the environment asks to keep it)."""
    if os.environ.get(ENV) != "1":
        sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]
