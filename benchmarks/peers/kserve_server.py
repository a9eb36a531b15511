"""KServe's Python ``ModelServer`` serving ONNX files with onnxruntime (for the comparison only).

Runs inside KServe's own virtual environment (it imports ``kserve``), never in Conveyor's:

    python -m venv /tmp/peersvenv
    /tmp/peersvenv/bin/pip install kserve==0.21.0 onnxruntime
    /tmp/peersvenv/bin/python benchmarks/peers/kserve_server.py REPOSITORY \\
        --http_port 8080 --grpc_port 8081

``REPOSITORY`` holds one folder per model with its ``model.onnx`` (the folder's name is the
model's). Each model is a ``kserve.Model`` with one ``InferenceSession`` (one intra-op
thread, as every server compared is configured) run directly in ``predict``, on the event
loop, as KServe's own runtimes do; its V2 REST routes and its V2 gRPC server (on by default)
serve it. KServe's own options (``--http_port``, ``--grpc_port``, ``--workers``, ...) are
read by ``kserve`` itself from the command line.

Changes from KServe's defaults, so that no server compared writes a line per request:
``enable_latency_logging`` off, and the ``uvicorn.access``, ``kserve`` and ``kserve.trace``
loggers at WARNING (its gRPC interceptor logs every call at INFO, its REST routes every
call's times). And it listens
on loopback only: KServe binds HTTP to 0.0.0.0 and gRPC to [::] with no option to change it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import kserve
import numpy as np
import onnxruntime as ort
from kserve import InferOutput, InferRequest, InferResponse
from kserve.protocol.grpc import server as grpc_server
from kserve.protocol.rest import server as rest_server


class OnnxModel(kserve.Model):  # type: ignore[misc]
    def __init__(self, name: str, path: Path) -> None:
        super().__init__(name)
        self._path = path
        self.load()

    def load(self) -> bool:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(self._path), options, providers=["CPUExecutionProvider"]
        )
        self._output_names = [o.name for o in self._session.get_outputs()]
        self.ready = True
        return True

    # The model's V2 metadata: load generators (conveyor bench, perf_analyzer) read the
    # inputs' names, types and shapes from it; KServe's default is empty lists.
    def get_input_types(self) -> list[dict[str, Any]]:
        return [_metadata(node) for node in self._session.get_inputs()]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [_metadata(node) for node in self._session.get_outputs()]

    def predict(
        self, payload: InferRequest, headers: Any = None, response_headers: Any = None
    ) -> InferResponse:
        feeds = {tensor.name: tensor.as_numpy() for tensor in payload.inputs}
        results = self._session.run(self._output_names, feeds)
        outputs = []
        for name, value in zip(self._output_names, results, strict=True):
            output = InferOutput(name, list(value.shape), "FP32")
            # binary_data: raw contents over gRPC (what tritonclient and conveyor bench read),
            # and the binary extension over REST when the request asked for it.
            output.set_data_from_numpy(np.asarray(value, np.float32), binary_data=True)
            outputs.append(output)
        # response_id must be a string (None fails KServe's pydantic model).
        return InferResponse(
            response_id=payload.id or "", model_name=self.name, infer_outputs=outputs
        )


def _metadata(node: Any) -> dict[str, Any]:
    """V2 metadata of an onnxruntime input or output: every tensor here is FP32; a named or
    unknown dimension is -1 (variable)."""
    if node.type != "tensor(float)":
        raise ValueError(f"{node.name}: only FP32 tensors are served here, not {node.type}")
    shape = [d if isinstance(d, int) else -1 for d in node.shape]
    return {"name": node.name, "datatype": "FP32", "shape": shape}


def _loopback_only() -> None:
    """Bind KServe's REST and gRPC servers to 127.0.0.1 (it hard-codes every interface)."""
    config = rest_server.uvicorn.Config

    def loopback_config(*args: Any, **kwargs: Any) -> Any:
        kwargs["host"] = "127.0.0.1"
        return config(*args, **kwargs)

    rest_server.uvicorn.Config = loopback_config  # the module's own reference
    server_class = grpc_server.aio.server

    def loopback_server(*args: Any, **kwargs: Any) -> Any:
        server = server_class(*args, **kwargs)
        add = server.add_insecure_port
        server.add_insecure_port = lambda address: add(address.replace("[::]", "127.0.0.1"))
        return server

    grpc_server.aio.server = loopback_server


def main() -> None:
    repository = Path(sys.argv[1])
    models = [
        OnnxModel(folder.name, folder / "model.onnx")
        for folder in sorted(repository.iterdir())
        if (folder / "model.onnx").exists()
    ]
    if not models:
        raise SystemExit(f"no <model>/model.onnx in {repository}: give a folder of models")
    _loopback_only()
    server = kserve.ModelServer(enable_latency_logging=False)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    # Its gRPC interceptor logs every call's method at INFO, its REST routes every call's
    # wall and CPU time (kserve.trace, a logger of its own that does not propagate).
    logging.getLogger("kserve").setLevel(logging.WARNING)
    logging.getLogger("kserve.trace").setLevel(logging.WARNING)
    server.start(models)


if __name__ == "__main__":
    main()
