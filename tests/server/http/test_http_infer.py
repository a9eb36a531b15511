"""Inference over HTTP: every datatype as JSON and binary, with tritonclient and our client."""

from __future__ import annotations

import asyncio
import json

import ml_dtypes
import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient

from conveyor.client import Client, as_completed
from conveyor.protocol.datatypes import DATATYPES, numpy_dtype
from conveyor.testing import RunningServer
from tests.server.http.http_util import request

# tritonclient sends BF16 only in binary, from ml_dtypes.bfloat16 arrays.
JSON_DATATYPES = [d for d in DATATYPES if d != "BF16"]


def sample(datatype: str, utf8: bool = False) -> np.ndarray:
    """A [2, 3] tensor of ``datatype`` with values that survive any encoding exactly."""
    if datatype == "BYTES":
        if utf8:
            values = [b"", "é".encode(), b"abc", b"", b"d", b"ee"]
        else:
            values = [b"", b"\xff\xfe\x00", b"abc", b"", b"\x80", b"ee"]
        return np.array(values, dtype=object).reshape(2, 3)
    if datatype == "BOOL":
        return np.array([[True, False, True], [False, False, True]])
    if datatype == "BF16":
        return np.array([[1, -2, 3.5], [0, 0.25, 100]], dtype=ml_dtypes.bfloat16)
    values = np.array([[0, 1, 2], [3, 4, 5]]) * 7
    if numpy_dtype(datatype).kind in "iu":
        values = values + np.iinfo(numpy_dtype(datatype)).max // 2
    return values.astype(numpy_dtype(datatype))


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


# -- our client ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(server: RunningServer):
    with Client(server.http_url) as ours:
        yield ours


@pytest.mark.parametrize("datatype", DATATYPES)
def test_our_client_every_datatype(client, datatype: str) -> None:
    value = sample(datatype)
    result = client.submit(f"echo_{datatype}", {"INPUT0": value}).result(30)
    assert list(result) == ["OUTPUT0", "OUTPUT1"]
    assert result["OUTPUT0"].dtype == value.dtype
    assert result["OUTPUT0"].tolist() == value.tolist()


def test_our_client_json_mode(server: RunningServer) -> None:
    with Client(server.http_url, binary_data=False) as json_client:
        value = sample("BYTES", utf8=True)
        result = json_client.submit("echo_BYTES", {"INPUT0": value}, outputs=["OUTPUT1"])
        assert result.result(30)["OUTPUT1"].tolist() == value.tolist()


def test_our_client_futures_and_as_completed(client) -> None:
    futures = [
        client.submit("tiny", {"INPUT0": np.full((1, 16), i, np.float32)}, request_id=str(i))
        for i in range(32)
    ]
    seen = set()
    for future in as_completed(futures, timeout=30):
        seen.add(future.request_id)
        assert future.result()["OUTPUT0"][0, 0] == int(future.request_id) + 1
    assert seen == {str(i) for i in range(32)}


def test_our_client_await(client) -> None:
    async def main() -> list[float]:
        outputs = await asyncio.gather(
            *(client.infer("tiny", {"INPUT0": np.full((1, 16), i, np.float32)}) for i in range(8))
        )
        return [o["OUTPUT0"][0, 0] for o in outputs]

    assert asyncio.run(main()) == [i + 1 for i in range(8)]


def test_our_client_metadata_calls(client) -> None:
    assert client.server_live() and client.server_ready()
    assert client.model_ready("tiny") and not client.model_ready("nope")
    assert client.server_metadata()["name"] == "conveyor"
    assert client.model_metadata("tiny", 1)["versions"] == ["1"]
    assert client.model_config("batched")["max_batch_size"] == 8
    assert client.statistics("tiny")["model_stats"][0]["name"] == "tiny"
    assert len(client.statistics()["model_stats"]) > 2


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


def test_closing_our_client_cancels_what_is_in_flight(server: RunningServer) -> None:
    client = Client(server.http_url)
    future = client.submit("sleep", {"INPUT0": np.array([0.5], np.float32)})
    client.close()
    assert future.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        client.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)})


def test_client_is_public_at_the_top_level(server: RunningServer) -> None:
    import conveyor

    with conveyor.Client(server.http_url) as client:
        assert client.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)}).result(10)[
            "OUTPUT0"
        ].tolist() == [[1.0] * 16]
    with pytest.raises(ValueError, match="unsupported URL scheme"):
        conveyor.Client("ftp://x")
