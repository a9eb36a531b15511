"""The pure parts of the gRPC front end: message <-> numpy, parameters, status codes."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from conveyor.errors import ErrorKind, InvalidInput, Unsupported
from conveyor.protocol.grpc import converters
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.server.grpc.errors import status_code


def request_with(data: np.ndarray, datatype: str = "FP32") -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="m")
    request.inputs.add(name="x", datatype=datatype, shape=data.shape)
    request.raw_input_contents.append(data.tobytes())
    return request


def test_raw_input_is_a_read_only_view_of_the_message_buffer() -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    decoded = converters.decode_inputs(request_with(data))["x"]
    assert np.array_equal(decoded, data)
    assert not decoded.flags.owndata  # a view of the message's bytes, not a copy
    assert not decoded.flags.writeable
    assert decoded.flags.aligned


def test_zero_element_tensors() -> None:
    decoded = converters.decode_inputs(request_with(np.zeros((0, 4), np.float32)))["x"]
    assert decoded.shape == (0, 4)


def test_negative_dimension_is_refused() -> None:
    request = request_with(np.zeros(4, np.float32))
    request.inputs[0].shape[:] = [-1, 4]
    with pytest.raises(InvalidInput, match="negative"):
        converters.decode_inputs(request)


def test_duplicate_input_is_refused() -> None:
    request = request_with(np.zeros(4, np.float32))
    request.inputs.add(name="x", datatype="FP32", shape=[4])
    request.raw_input_contents.append(bytes(16))
    with pytest.raises(InvalidInput, match="more than once"):
        converters.decode_inputs(request)


def test_missing_typed_contents_says_so() -> None:
    request = pb.ModelInferRequest(model_name="m")
    request.inputs.add(name="x", datatype="FP32", shape=[2])
    with pytest.raises(InvalidInput, match="no contents and no raw_input_contents"):
        converters.decode_inputs(request)


@pytest.mark.parametrize(
    ("parameter", "value", "priority", "timeout"),
    [
        ("priority", ("uint64_param", 1), 0, None),
        ("priority", ("uint64_param", 3), -2, None),
        ("priority", ("int64_param", 2), -1, None),
        ("timeout", ("int64_param", 1500), 0, 0.0015),
        ("timeout", ("uint64_param", 0), 0, None),
    ],
)
def test_priority_and_timeout_in_engine_units(
    parameter: str, value: tuple[str, int], priority: int, timeout: float | None
) -> None:
    request = request_with(np.zeros(1, np.float32))
    setattr(request.parameters[parameter], value[0], value[1])
    call = converters.infer_call(request)
    assert call.request.priority == priority
    assert call.request.timeout == timeout


def test_requested_output_parameters_are_checked() -> None:
    # Classification is implemented for requested outputs (refused for inputs), so the
    # check uses a parameter of an extension that is not; and a bad count is refused.
    request = request_with(np.zeros(1, np.float32))
    output = request.outputs.add(name="y")
    output.parameters["classification"].int64_param = 3
    assert converters.infer_call(request).classifications == {"y": 3}
    output.parameters["classification"].int64_param = 0
    with pytest.raises(InvalidInput, match="'classification' must be an integer >= 1"):
        converters.infer_call(request)
    output.parameters["classification"].int64_param = 3
    request.inputs[0].parameters["classification"].int64_param = 3
    with pytest.raises(Unsupported, match="classification"):
        converters.infer_call(request)


def test_response_is_raw_and_round_trips() -> None:
    outputs = {
        "a": np.arange(6, dtype=np.int16).reshape(2, 3),
        "b": np.array([b"x", b"yz"], dtype=object),
        "c": np.array(["é"], dtype=np.str_),  # unicode arrays travel as BYTES (UTF-8)
    }
    response = pb.ModelInferResponse.FromString(
        b"".join(converters.infer_response_parts("m", "1", "id", outputs))
    )
    assert [o.datatype for o in response.outputs] == ["INT16", "BYTES", "BYTES"]
    assert len(response.raw_output_contents) == 3
    decoded = converters.decode_outputs(
        pb.ModelInferResponse.FromString(response.SerializeToString())
    )
    assert np.array_equal(decoded["a"], outputs["a"])
    assert decoded["b"].tolist() == [b"x", b"yz"]
    assert decoded["c"].tolist() == ["é".encode()]


def test_non_contiguous_outputs_are_sent_in_row_major_order() -> None:
    array = np.arange(12, dtype=np.float64).reshape(3, 4).T
    response = pb.ModelInferResponse.FromString(
        b"".join(converters.infer_response_parts("m", "1", "", {"t": array}))
    )
    assert (
        np.frombuffer(response.raw_output_contents[0], np.float64).tolist()
        == array.ravel().tolist()
    )


def test_every_error_kind_has_a_status() -> None:
    for kind in ErrorKind:
        code = status_code(kind)
        assert isinstance(code, grpc.StatusCode)
    assert status_code(ErrorKind.UNAVAILABLE) == grpc.StatusCode.UNAVAILABLE  # queue full too
    assert status_code(ErrorKind.NOT_FOUND) == grpc.StatusCode.NOT_FOUND


def test_set_parameter_picks_the_kind() -> None:
    request = pb.ModelInferRequest()
    for key, value in {"b": True, "u": 5, "i": -5, "d": 0.5, "s": "x"}.items():
        converters.set_parameter(request.parameters, key, value)
    kinds = {k: v.WhichOneof("parameter_choice") for k, v in request.parameters.items()}
    assert kinds == {
        "b": "bool_param",
        "u": "uint64_param",
        "i": "int64_param",
        "d": "double_param",
        "s": "string_param",
    }
