"""The control side of a remote server (HTTP or gRPC), through ``conveyor.client``.

Metadata, config and statistics are a handful of calls between measurements, so they go
through the project's own client, which already speaks both transports and returns the
HTTP JSON shapes for either. Config and statistics are optional: a V2 server without
Triton's extensions (MLServer) answers them with an error, and the bench then reports no
batch size and no server-side split instead of failing.
"""

from __future__ import annotations

from conveyor.bench.inputs import ModelSpec
from conveyor.bench.server_stats import StatsTotals
from conveyor.bench.targets.base import Control, RequestFailed, TargetSpec
from conveyor.client import Client


class RemoteControl(Control):
    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec
        self._client = Client(spec.url, call_timeout=spec.timeout_s)
        self._version = spec.version or None

    def describe(self) -> ModelSpec:
        try:
            metadata = self._client.model_metadata(self.spec.model, self._version)
        except Exception as exc:  # whatever the transport raised, name the model and server
            raise RequestFailed(f"{self.spec.url}: model {self.spec.model!r}: {exc}") from None
        return ModelSpec.from_metadata(metadata, self._max_batch_size())

    def _max_batch_size(self) -> int | None:
        try:
            config = self._client.model_config(self.spec.model, self._version)
        except Exception:  # no config extension (MLServer): the batch size is unknown
            return None
        # Triton's HTTP answer nests the config under "config" in some versions.
        value = config.get("max_batch_size", config.get("config", {}).get("max_batch_size"))
        return int(value) if value is not None else None

    def statistics(self) -> StatsTotals | None:
        try:
            body = self._client.statistics(self.spec.model, self._version)
        except Exception:  # no usable statistics: report none
            return None
        return StatsTotals.from_json(body, self.spec.model, self.spec.version)

    def close(self) -> None:
        self._client.close()
