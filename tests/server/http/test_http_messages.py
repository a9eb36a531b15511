"""The words of common request mistakes, as an HTTP client reads them from a real server."""

from __future__ import annotations

import json

from conveyor.testing import RunningServer
from tests.server.http.http_util import request

FP32_16 = {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16], "data": [0.0] * 16}


def error_of(server: RunningServer, model: str, body: object) -> tuple[int, str]:
    status, _, data = request(
        server.http_url, "POST", f"/v2/models/{model}/infer", json.dumps(body).encode()
    )
    return status, json.loads(data)["error"]


def test_a_misspelt_input_names_what_was_sent_and_what_is_expected(server) -> None:
    status, message = error_of(server, "tiny", {"inputs": [{**FP32_16, "name": "INPUT_0"}]})
    assert status == 400
    # Triton's words first (its clients match on them), then which input was expected.
    assert message == (
        "unexpected inference input 'INPUT_0' for model 'tiny': "
        "model 'tiny' has no input 'INPUT_0'; its inputs are INPUT0 (missing input 'INPUT0')"
    )


def test_an_extra_input_lists_what_the_request_sent(server) -> None:
    body = {"inputs": [FP32_16, {**FP32_16, "name": "EXTRA"}]}
    status, message = error_of(server, "tiny", body)
    assert status == 400
    assert message == (
        "unexpected inference input 'EXTRA' for model 'tiny': "
        "model 'tiny' has no input 'EXTRA'; its inputs are INPUT0 (the request sent INPUT0, EXTRA)"
    )


def test_a_wrong_datatype_is_named_in_v2_terms(server) -> None:
    body = {"inputs": [{**FP32_16, "datatype": "INT32", "data": [0] * 16}]}
    status, message = error_of(server, "tiny", body)
    assert status == 400
    assert message == (
        "inference input 'INPUT0' data-type is 'INT32', but model 'tiny' expects 'FP32': "
        "model 'tiny': input 'INPUT0' has datatype INT32; expected FP32"
    )
    assert "int32" not in message and "float32" not in message
