"""Inference over HTTP: every datatype as JSON and binary, with tritonclient.

Conveyor's own HTTP client is tested in tests/client/test_http_client.py.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient

from conveyor.protocol.datatypes import DATATYPES
from conveyor.testing import RunningServer
from tests.server.http.http_util import request
from tests.tensors import sample

# tritonclient sends BF16 only in binary, from ml_dtypes.bfloat16 arrays.
JSON_DATATYPES = [d for d in DATATYPES if d != "BF16"]


def triton_input(datatype: str, value: np.ndarray, binary: bool) -> httpclient.InferInput:
    infer_input = httpclient.InferInput("INPUT0", list(value.shape), datatype)
    infer_input.set_data_from_numpy(value, binary_data=binary)
    return infer_input


@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_datatype_in_binary(triton, datatype: str) -> None:
    value = sample(datatype)
    result = triton.infer(f"echo_{datatype}", [triton_input(datatype, value, True)])
    for name in ("OUTPUT0", "OUTPUT1"):
        got = result.as_numpy(name)
        assert got.shape == value.shape
        assert got.tolist() == value.tolist()
        assert result.get_output(name)["datatype"] == datatype


@pytest.mark.parametrize("datatype", JSON_DATATYPES)
def test_every_datatype_in_json(triton, datatype: str) -> None:
    value = sample(datatype, utf8=True)
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)]
    result = triton.infer(
        f"echo_{datatype}", [triton_input(datatype, value, False)], outputs=outputs
    )
    assert "data" in result.get_output("OUTPUT0")
    got = result.as_numpy("OUTPUT0")
    if datatype == "BYTES":  # JSON BYTES come back as str
        assert got.tolist() == [[v.decode() for v in row] for row in value.tolist()]
    else:
        assert got.tolist() == value.tolist()
    assert result.as_numpy("OUTPUT1") is None  # not requested


def test_bf16_in_json_over_raw_http(server: RunningServer) -> None:
    body = {
        "inputs": [{"name": "INPUT0", "datatype": "BF16", "shape": [1, 2], "data": [1.5, -3.0]}],
        "outputs": [{"name": "OUTPUT0"}],
    }
    status, _, data = request(
        server.http_url, "POST", "/v2/models/echo_BF16/infer", json.dumps(body).encode()
    )
    assert status == 200
    assert json.loads(data)["outputs"][0]["data"] == [1.5, -3.0]


def test_requested_output_subsets_and_mixed_encodings(triton) -> None:
    value = sample("INT32")
    infer_input = triton_input("INT32", value, True)
    only_second = triton.infer(
        "echo_INT32", [infer_input], outputs=[httpclient.InferRequestedOutput("OUTPUT1")]
    )
    assert [o["name"] for o in only_second.get_response()["outputs"]] == ["OUTPUT1"]
    mixed = triton.infer(
        "echo_INT32",
        [infer_input],
        outputs=[
            httpclient.InferRequestedOutput("OUTPUT0", binary_data=False),
            httpclient.InferRequestedOutput("OUTPUT1", binary_data=True),
        ],
        request_id="mixed-1",
    )
    response = mixed.get_response()
    assert response["id"] == "mixed-1"
    assert response["model_name"] == "echo_INT32" and response["model_version"] == "1"
    assert response["outputs"][0]["data"] == value.ravel().tolist()
    assert response["outputs"][1]["parameters"]["binary_data_size"] == value.nbytes
    assert mixed.as_numpy("OUTPUT1").tolist() == value.tolist()


def test_json_and_binary_inputs_in_one_request(server: RunningServer) -> None:
    raw = np.arange(16, dtype=np.float32).reshape(1, 16)
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, 16],
                    "parameters": {"binary_data_size": raw.nbytes},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": False}}],
        }
    ).encode()
    status, headers, data = request(
        server.http_url,
        "POST",
        "/v2/models/tiny/infer",
        header + raw.tobytes(),
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 200, data
    assert "inference-header-content-length" not in headers  # every output was JSON
    assert json.loads(data)["outputs"][0]["data"] == (raw + 1).ravel().tolist()


@pytest.mark.parametrize("request_compression", [None, "gzip", "deflate"])
@pytest.mark.parametrize("response_compression", [None, "gzip", "deflate"])
def test_compression(triton, request_compression, response_compression) -> None:
    value = np.arange(16, dtype=np.float32).reshape(1, 16)
    result = triton.infer(
        "tiny",
        [triton_input("FP32", value, True)],
        request_compression_algorithm=request_compression,
        response_compression_algorithm=response_compression,
    )
    assert result.as_numpy("OUTPUT0").tolist() == (value + 1).tolist()


def test_concurrent_async_infer(triton) -> None:
    values = [np.full((1, 16), i, np.float32) for i in range(20)]
    pending = [triton.async_infer("tiny", [triton_input("FP32", v, True)]) for v in values]
    for value, call in zip(values, pending, strict=True):
        assert call.get_result(timeout=30).as_numpy("OUTPUT0").tolist() == (value + 1).tolist()


def test_tritonclient_aio(host_port: str) -> None:
    async def main() -> list[np.ndarray]:
        async with aioclient.InferenceServerClient(host_port) as client:
            assert await client.is_server_ready()
            assert (await client.get_model_metadata("tiny"))["name"] == "tiny"
            inputs = []
            for i in range(8):
                infer_input = aioclient.InferInput("INPUT0", [1, 16], "FP32")
                infer_input.set_data_from_numpy(np.full((1, 16), i, np.float32))
                inputs.append(infer_input)
            results = await asyncio.gather(*(client.infer("tiny", [x]) for x in inputs))
            json_input = aioclient.InferInput("INPUT0", [1, 3], "BYTES")
            json_input.set_data_from_numpy(np.array([[b"a", b"", b"c"]], object), False)
            text = await client.infer("echo_BYTES", [json_input])
            assert text.as_numpy("OUTPUT0").tolist() == [[b"a", b"", b"c"]]
            return [r.as_numpy("OUTPUT0") for r in results]

    outputs = asyncio.run(main())
    assert [o[0, 0] for o in outputs] == [i + 1 for i in range(8)]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_large_infer_responses_are_compressed_when_asked(server: RunningServer, encoding) -> None:
    import gzip
    import zlib

    value = np.zeros((1, 4096), np.float32)
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, 4096],
                    "parameters": {"binary_data_size": value.nbytes},
                }
            ],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    body = header + value.tobytes()
    compress = gzip.compress if encoding == "gzip" else zlib.compress
    status, headers, data = request(
        server.http_url,
        "POST",
        "/v2/models/echo_FP32/infer",
        compress(body),
        {
            "Inference-Header-Content-Length": str(len(header)),
            "Content-Encoding": encoding,
            "Accept-Encoding": f"{encoding};q=0.9, br;q=0",
        },
    )
    assert status == 200, data
    assert headers["content-encoding"] == encoding
    plain = gzip.decompress(data) if encoding == "gzip" else zlib.decompress(data)
    assert len(plain) > 2 * value.nbytes > len(data)
    # Other routes are never compressed (tritonclient.http.aio could not read them).
    status, headers, _ = request(
        server.http_url, "GET", "/v2/models/stats", headers={"Accept-Encoding": encoding}
    )
    assert status == 200 and "content-encoding" not in headers
