"""The responses of a decoupled model over ModelStreamInfer, as Triton sends them.

Every response carries its request's id, the parameters the model set on it, and the bool
parameter ``triton_final_response`` (false: more may follow), as Triton's stream handler
sets it on every response it writes. A client that asked with the request parameter
``triton_enable_empty_final_response`` also gets one last response with no outputs that
says true; a client that did not ask gets only the responses that hold outputs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from conveyor.protocol.grpc import wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.converters import FINAL_PARAMETER, STREAM_RESPONSE_FIELD, response_parts

ENABLE_EMPTY_FINAL = "triton_enable_empty_final_response"
FINAL = FINAL_PARAMETER


def wants_final_flag(request: pb.ModelInferRequest) -> bool:
    """True when the request asked for ``triton_final_response`` (and the empty final)."""
    parameter = request.parameters.get(ENABLE_EMPTY_FINAL)
    return parameter is not None and parameter.bool_param


def partial_response_bytes(
    model: str,
    version: str,
    request_id: str,
    outputs: Mapping[str, np.ndarray],
) -> bytes:
    """One (not final) response of a decoupled request, serialized."""
    response, buffers = response_parts(model, version, request_id, outputs)
    response.parameters[FINAL].bool_param = False
    return wire.join_raw(response, wire.RAW_OUTPUT_FIELD, buffers, within=STREAM_RESPONSE_FIELD)


def final_response(model: str, version: str, request_id: str) -> pb.ModelStreamInferResponse:
    """The empty last response of a decoupled request (sent only to clients that asked)."""
    response = pb.ModelInferResponse(model_name=model, model_version=version, id=request_id)
    response.parameters[FINAL].bool_param = True
    return pb.ModelStreamInferResponse(infer_response=response)
