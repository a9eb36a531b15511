"""trace_mode opentelemetry end to end: a real server process exports spans over OTLP/HTTP
to a receiver started here; the client's traceparent (HTTP header, gRPC metadata) is
continued; the spans carry the model, version, batch size and request id."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import run_server
from tests.polling import wait_until
from tests.server.tracing.otlp_receiver import otlp_receiver

TRACE_IDS = {"http": "0af7651916cd43dd8448eb211c80319c", "grpc": "4bf92f3577b34da6a3ce929d0e0e4736"}
PARENT = "b7ad6b7169203331"


def infer(client: Any, module: Any, request_id: str, traceparent: str) -> None:
    tensor = module.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 16), np.float32))
    client.infer("tiny", [tensor], request_id=request_id, headers={"traceparent": traceparent})


def attributes(span: Any) -> dict[str, Any]:
    values = {}
    for a in span.attributes:
        kind = a.value.WhichOneof("value")
        values[a.key] = getattr(a.value, kind)
    return values


def test_spans_reach_an_otlp_receiver_continuing_the_client_trace(repository: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        env = dict(
            os.environ, OTEL_SERVICE_NAME="conveyor-under-test", OTEL_BSP_SCHEDULE_DELAY="50"
        )
        config = [
            "mode=opentelemetry",
            "level=TIMESTAMPS",
            "rate=1",
            f"opentelemetry,url={endpoint}",
        ]
        args = [arg for entry in config for arg in ("--trace-config", entry)]
        with run_server(repository, extra_args=args, env=env) as server:
            http = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
            grpc = grpcclient.InferenceServerClient(server.grpc_url.removeprefix("grpc://"))
            try:
                for protocol, client, module in (
                    ("http", http, httpclient),
                    ("grpc", grpc, grpcclient),
                ):
                    traceparent = f"00-{TRACE_IDS[protocol]}-{PARENT}-01"
                    infer(client, module, f"via-{protocol}", traceparent)

                def roots() -> list[Any]:
                    return [s for _, s in received.snapshot() if s.name == "infer"]

                wait_until(lambda: len(roots()) == 2, timeout=20, what="two infer spans")
            finally:
                http.close()
                grpc.close()
                del http, grpc
                gc.collect()
            assert server.stop() == 0
    spans = received.snapshot()
    assert {resource["service.name"] for resource, _ in spans} == {"conveyor-under-test"}
    for protocol, trace_id in TRACE_IDS.items():
        in_trace = [s for _, s in spans if s.trace_id.hex() == trace_id]
        named = {s.name: s for s in in_trace}
        assert {"infer", "decode", "queue", "compute", "encode"} <= set(named), protocol
        root = named["infer"]
        assert root.parent_span_id.hex() == PARENT  # the client's span is the parent
        assert attributes(root) | {"trace_id": 0} == {
            "model_name": "tiny",
            "model_version": "1",
            "request_id": f"via-{protocol}",
            "protocol": protocol,
            "batch_size": 1,
            "trace_id": 0,
        }
        assert named["queue"].parent_span_id == root.span_id
        assert named["compute_infer"].parent_span_id == named["compute"].span_id
