"""receive, batch formation and send spans of unary requests over HTTP and gRPC, nested under
the request's ``infer`` span, with the model, version, batch size and request id."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conveyor.testing import RunningServer
from tests.server.tracing.otlp_receiver import Received
from tests.server.tracing.spans.span_util import spans_of

MODULES = {"http": httpclient, "grpc": grpcclient}


def infer_tiny(client: Any, module: Any, request_id: str) -> None:
    tensor = module.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 16), np.float32))
    client.infer("tiny", [tensor], request_id=request_id)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_request_has_receive_decode_queue_compute_encode_send_in_order(
    exported: tuple[RunningServer, Received], clients: dict[str, Any], protocol: str
) -> None:
    request_id = f"unary-{protocol}"
    infer_tiny(clients[protocol], MODULES[protocol], request_id)
    [request] = spans_of(exported[1], 1, lambda s: s.attributes["request_id"] == request_id)
    root = request.root
    assert root.attributes["model_name"] == "tiny"
    assert root.attributes["model_version"] == "1"
    assert root.attributes["batch_size"] == 1
    assert root.attributes["protocol"] == protocol
    assert not root.error
    children = request.children()
    steps = ["receive", "decode", "queue", "compute", "encode", "send"]
    assert set(children) == set(steps)  # tiny does not batch: no batch formation
    for earlier, later in itertools.pairwise(steps):
        assert children[earlier].end <= children[later].start, (earlier, later)
    assert children["receive"].start == root.start  # the request begins with its first byte
    assert children["send"].end == root.end  # and ends with the send
    front = {"http": "HTTP", "grpc": "GRPC"}[protocol]
    read = "HTTP_RECV" if protocol == "http" else "GRPC_WAITREAD"
    for event in (f"{read}_START", f"{read}_END", f"{front}_SEND_START", f"{front}_SEND_END"):
        assert event in root.events, event


def test_batch_formation_carries_the_batch_size_of_concurrent_requests(
    exported: tuple[RunningServer, Received], clients: dict[str, Any]
) -> None:
    client = clients["http"]

    def one(index: int) -> None:
        tensor = httpclient.InferInput("INPUT0", [1, 3], "FP32")
        tensor.set_data_from_numpy(np.full((1, 3), index, np.float32))
        result = client.infer("batch4", [tensor], request_id=f"batched-{index}")
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 3), index + 1))

    # batch4 dispatches a batch once it holds 4 requests: these four run as one.
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(4)))
    requests = spans_of(
        exported[1], 4, lambda s: str(s.attributes["request_id"]).startswith("batched-")
    )
    for request in requests:
        children = request.children()
        assert request.root.attributes["batch_size"] == 4
        formation = children["batch_formation"]
        assert formation.attributes["batch_size"] == 4
        # queued, then taken into the batch being formed, then dispatched to compute
        assert children["queue"].end == formation.start
        assert formation.end == children["compute"].start
        assert children["compute"].attributes["batch_size"] == 4
    # One batch: every request's compute is the same execution.
    assert len({request.children()["compute"].start for request in requests}) == 1
