"""Protobuf messages <-> the engine's arguments and results. No inference logic, no I/O.

Inputs arrive one of two ways, never both in one request:

- raw: ``raw_input_contents[i]`` holds input ``i``'s row-major little-endian bytes (BYTES:
  4-byte little-endian length + bytes per element). Decoded with ``numpy.frombuffer``: the
  array is a read-only view of the message's buffer, no copy and no per-element work.
- typed: ``inputs[i].contents.<type>_contents``, one repeated field per datatype. Accepted
  for compatibility; it costs a Python object per element.

Outputs always go out raw, because tritonclient's ``as_numpy()`` reads only
``raw_output_contents``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from conveyor.errors import InvalidInput
from conveyor.futures import response_parameters
from conveyor.protocol import binary, bytes_codec
from conveyor.protocol import shared_memory as shm
from conveyor.protocol import triton_words as triton
from conveyor.protocol.datatypes import (
    BYTES,
    DATATYPES,
    check_shape,
    datatype_of,
    element_count,
    numpy_dtype,
)
from conveyor.protocol.grpc import wire
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.parameters import (
    DEFAULT_OPTIONS,
    check_tensor_parameters,
    classification_count,
    request_options,
)
from conveyor.protocol.request import DecodedRequest, from_options

# The one typed field that carries each datatype (FP16 and BF16 have none: raw only).
TYPED_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    BYTES: "bytes_contents",
}

# The width protobuf stores each typed field at.
FIELD_DTYPE: dict[str, np.dtype[Any]] = {
    "bool_contents": np.dtype(np.bool_),
    "int_contents": np.dtype(np.int32),
    "int64_contents": np.dtype(np.int64),
    "uint_contents": np.dtype(np.uint32),
    "uint64_contents": np.dtype(np.uint64),
    "fp32_contents": np.dtype(np.float32),
    "fp64_contents": np.dtype(np.float64),
}

# Fixed-size datatypes on the wire are little-endian whatever the host is.
# Little-endian dtype per fixed-size datatype; BF16 joins on first use (ml_dtypes is imported
# only then, see datatypes.py).
_WIRE_DTYPE = {
    name: numpy_dtype(name).newbyteorder("<") for name in DATATYPES if name not in (BYTES, "BF16")
}


# ModelStreamInferResponse.infer_response
STREAM_RESPONSE_FIELD = pb.ModelStreamInferResponse.DESCRIPTOR.fields_by_name[
    "infer_response"
].number


@dataclasses.dataclass(slots=True)
class InferCall(DecodedRequest):
    """One ModelInferRequest: the request for the engine, and how to answer it."""

    # What the answer echoes, in the wire's terms.
    @property
    def model(self) -> str:
        return self.request.model

    @property
    def version(self) -> str | None:
        version = self.request.version
        return None if version is None else str(version)

    @property
    def request_id(self) -> str:
        return self.request.id or ""


def infer_call(
    request: pb.ModelInferRequest, raw: Sequence[bytes | memoryview] | None = None
) -> InferCall:
    """Read and check a request; InvalidInput (or Unsupported) says what was expected.

    ``raw``: the request's raw_input_contents when they were split off the message by
    :func:`conveyor.protocol.grpc.wire.split_raw` (default: the message's own field).
    """
    if not request.model_name:
        raise InvalidInput("model_name is empty; name the model to run")
    options = (
        request_options(parameter_values(request.parameters))
        if request.parameters
        else DEFAULT_OPTIONS
    )
    in_regions = shm.SharedMemoryUse()
    outputs = None
    classifications: dict[str, int] = {}
    if request.outputs:
        outputs = []
        for output in request.outputs:
            if output.name in outputs:
                raise InvalidInput(
                    triton.first(
                        triton.output_repeated(output.name),
                        f"requested output {output.name!r} is requested more than once",
                    )
                )
            if output.parameters:
                where = f"output {output.name!r}"
                values = parameter_values(output.parameters)
                check_tensor_parameters(values, where, output=True)
                count = classification_count(values, where)
                if count is not None:
                    classifications[output.name] = count
                located = shm.location(values, where)
                if located is not None:
                    in_regions.outputs[output.name] = located
            outputs.append(output.name)
    engine_request = from_options(
        request.model_name,
        request.model_version or None,
        decode_inputs(request, raw, in_regions),
        outputs,
        request.id or None,
        options,
    )
    return InferCall(engine_request, classifications or None, in_regions)


def decode_inputs(
    request: pb.ModelInferRequest,
    raw: Sequence[bytes | memoryview] | None = None,
    in_regions: shm.SharedMemoryUse | None = None,
) -> dict[str, np.ndarray]:
    """The request's inputs; with ``in_regions``, those whose parameters place them in a
    shared-memory region go there instead and take no raw_input_contents buffer (as
    Triton's clients send them)."""
    tensors = request.inputs
    model = request.model_name
    if raw is None:
        raw = request.raw_input_contents
    decoded: dict[str, np.ndarray] = {}
    index = -1  # the raw buffer of the last input sent on the wire
    for tensor in tensors:
        name = tensor.name
        if name in decoded or (in_regions is not None and name in in_regions.inputs):
            raise InvalidInput(
                triton.first(
                    triton.input_repeated(name),
                    f"input {name!r} appears more than once in the request",
                )
            )
        shape = check_shape(tuple(tensor.shape), f"input {name!r}")
        if tensor.parameters:
            values = parameter_values(tensor.parameters)
            check_tensor_parameters(values, f"input {name!r}")
            located = shm.location(values, f"input {name!r}") if in_regions is not None else None
            if located is not None:
                if tensor.HasField("contents"):
                    raise InvalidInput(
                        triton.first(
                            triton.contents_with_shared_memory(model, name),
                            f"input {name!r} is in shared memory and also has contents; send one",
                        )
                    )
                assert in_regions is not None
                in_regions.inputs[name] = shm.InputInRegion(located, tensor.datatype, shape)
                continue
        index += 1
        if raw:
            if index >= len(raw):
                ours = _raw_count_mismatch(tensors, raw, in_regions).message
                raise InvalidInput(triton.first(triton.no_input_data(model, name), ours))
            if tensor.HasField("contents"):
                raise InvalidInput(
                    triton.first(
                        triton.contents_with_raw(model, name),
                        f"input {name!r} has typed contents but the request also uses "
                        "raw_input_contents; send every input one way: all raw or all typed",
                    )
                )
            # Read the repeated field once: each access copies the bytes out of the message.
            where = f"input {name!r} (raw_input_contents[{index}])"
            decoded[name] = raw_tensor(
                raw[index], tensor.datatype, shape, where, triton_names=(model, name)
            )
        else:
            decoded[name] = typed_tensor(tensor, shape, model=model)
    if raw and index + 1 != len(raw):
        raise _raw_count_mismatch(tensors, raw, in_regions)
    return decoded


def _raw_count_mismatch(
    tensors: Sequence[Any], raw: Sequence[Any], in_regions: shm.SharedMemoryUse | None
) -> InvalidInput:
    in_memory = len(in_regions.inputs) if in_regions is not None else 0
    sent = f"{len(tensors) - in_memory} inputs outside shared memory" if in_memory else ""
    return InvalidInput(
        f"the request has {sent or f'{len(tensors)} inputs'} but {len(raw)} raw_input_contents "
        "buffers; expected one buffer per input sent on the wire, in the order of 'inputs'"
    )


def raw_tensor(
    buffer: bytes | memoryview,
    datatype: str,
    shape: tuple[int, ...],
    where: str,
    *,
    triton_names: tuple[str, str] | None = None,
) -> np.ndarray:
    """One tensor from its raw bytes, as a read-only view of ``buffer`` (no copy).

    ``where`` names the tensor in errors, e.g. "input 'INPUT0' (raw_input_contents[0])";
    ``triton_names`` (model, input): a wrong byte size begins with Triton's words for it.
    """
    count = element_count(shape)
    if datatype == BYTES:
        try:
            return bytes_codec.decode(buffer, count).reshape(shape)
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
    dtype = _WIRE_DTYPE.get(datatype)
    if dtype is None:
        # BF16's first use, or InvalidInput listing the known datatypes.
        dtype = _WIRE_DTYPE[datatype] = numpy_dtype(datatype).newbyteorder("<")
    expected = count * dtype.itemsize
    if len(buffer) != expected:
        ours = (
            f"{where} has {len(buffer)} bytes but shape {list(shape)} of {datatype} "
            f"({dtype.itemsize} bytes each) needs {expected}"
        )
        if triton_names is not None:
            ours = triton.first(triton.input_byte_size(*triton_names, expected, len(buffer)), ours)
        raise InvalidInput(ours)
    array = np.frombuffer(buffer, dtype).reshape(shape)
    # A bytes object's data is 16-byte aligned in CPython, but a tensor split off a big
    # message starts wherever the message put it: copy it once into aligned memory then,
    # rather than hand numpy and onnxruntime an unaligned array (slow paths, or a copy anyway).
    return array if array.flags.aligned else array.copy()


def typed_tensor(
    tensor: Any, shape: tuple[int, ...], what: str = "input", model: str | None = None
) -> np.ndarray:
    """One tensor from its typed ``contents`` (an InferInputTensor or InferOutputTensor);
    ``model``: the request's, for Triton's words when an input has no data at all."""
    name, datatype = tensor.name, tensor.datatype
    dtype = numpy_dtype(datatype)
    field = TYPED_FIELD.get(datatype)
    count = element_count(shape)
    present = [descriptor.name for descriptor, _ in tensor.contents.ListFields()]
    if field is None:
        raise InvalidInput(
            f"{what} {name!r}: {datatype} has no typed contents field; it travels only in "
            "raw contents"
        )
    wrong = [other for other in present if other != field]
    if wrong:
        raise InvalidInput(f"{what} {name!r} is {datatype}: expected {field}, got {wrong[0]}")
    values = getattr(tensor.contents, field)
    if len(values) != count:
        ours = (
            f"{what} {name!r}: shape {list(shape)} needs {count} elements but {field} has "
            f"{len(values)}" + ("" if present else " (no contents and no raw_input_contents)")
        )
        if not present and model is not None:
            ours = triton.first(triton.no_input_data(model, name), ours)
        raise InvalidInput(ours)
    if datatype == BYTES:
        array = np.empty(count, dtype=object)
        array[:] = list(values)
        return array.reshape(shape)
    # Read at the field's own width (int_contents is 32-bit for INT8/16 too), never letting
    # numpy guess: some protobuf releases hand it UINT64 values as float64.
    wide = np.fromiter(values, dtype=FIELD_DTYPE[field], count=count)
    array = wide.astype(dtype)
    if dtype.kind in "iu" and count and not np.array_equal(array, wide):
        bad = wide[array != wide][0]
        raise InvalidInput(f"{what} {name!r}: {field} holds {bad}, outside {datatype}'s range")
    return array.reshape(shape)


def parameter_values(parameters: Mapping[str, pb.InferParameter]) -> dict[str, Any]:
    """A protobuf parameter map as plain values (None for a parameter with no value)."""
    values: dict[str, Any] = {}
    for key, parameter in parameters.items():
        choice = parameter.WhichOneof("parameter_choice")
        values[key] = None if choice is None else getattr(parameter, choice)
    return values


def infer_response_parts(
    model: str,
    version: str,
    request_id: str,
    outputs: Mapping[str, np.ndarray],
    in_regions: Mapping[str, shm.Location] | None = None,
    *,
    stream: bool = False,
) -> list[Any]:
    """The engine's outputs as a serialized ModelInferResponse, in pieces (see
    :func:`wire.raw_parts`): every tensor in raw_output_contents, not copied (but those
    written into shared memory: see :func:`response_parts`). ``stream``: as a
    ModelStreamInferResponse, marked as its request's final response (as Triton marks every
    streamed answer of a model that is not decoupled)."""
    response, buffers = response_parts(model, version, request_id, outputs, in_regions)
    if not stream:
        return wire.raw_parts(response, wire.RAW_OUTPUT_FIELD, buffers)
    response.parameters[FINAL_PARAMETER].bool_param = True
    return wire.raw_parts(response, wire.RAW_OUTPUT_FIELD, buffers, within=STREAM_RESPONSE_FIELD)


def response_parts(
    model: str,
    version: str,
    request_id: str,
    outputs: Mapping[str, np.ndarray],
    in_regions: Mapping[str, shm.Location] | None = None,
) -> tuple[pb.ModelInferResponse, list[Any]]:
    """The response without its raw contents, and each output's wire bytes, in order.

    Outputs written into shared memory (``in_regions``) are answered as Triton does: with
    name, datatype and shape, and an empty raw_output_contents entry, so the i-th output
    still pairs with the i-th buffer.
    """
    response = pb.ModelInferResponse(model_name=model, model_version=version, id=request_id)
    for key, value in response_parameters(outputs).items():
        set_parameter(response.parameters, key, value, unsigned=False)
    add_output = response.outputs.add
    buffers: list[Any] = []
    for name, array in outputs.items():
        datatype = datatype_of(array.dtype)
        add_output(name=name, datatype=datatype, shape=array.shape)
        in_region = in_regions is not None and name in in_regions
        buffers.append(b"" if in_region else binary.tensor_bytes(array, datatype))
    return response, buffers


# Set on every response of ModelStreamInfer, as Triton's stream handler does: true on a
# request's last response (a model that is not decoupled answers with one, the last).
FINAL_PARAMETER = "triton_final_response"


# -- the client's side: numpy -> request, response -> numpy -------------------------------


def add_inputs(
    request: pb.ModelInferRequest, inputs: Mapping[str, Any], *, raw: bool = True
) -> list[Any]:
    """Describe ``inputs`` in ``request``; return their raw wire bytes, in order.

    With ``raw`` False the elements go into typed contents fields instead (and none are
    returned). Send the raw ones with :func:`wire.join_raw` (or put them in the message's
    raw_input_contents).
    """
    add_input = request.inputs.add
    buffers = []
    for name, value in inputs.items():
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        datatype = datatype_of(array.dtype)
        tensor = add_input(name=name, datatype=datatype, shape=array.shape)
        if raw:
            buffers.append(binary.tensor_bytes(array, datatype))
            continue
        field = TYPED_FIELD.get(datatype)
        if field is None:
            raise InvalidInput(
                f"input {name!r}: {datatype} has no typed contents field; send it raw"
            )
        values = array.reshape(-1).tolist()
        if datatype == BYTES:
            values = [bytes_codec.as_bytes(v) for v in values]
        getattr(tensor.contents, field).extend(values)
    return buffers


def set_parameter(
    parameters: Any, key: str, value: bool | int | float | str, *, unsigned: bool = True
) -> None:
    """``parameters[key] = value`` in a protobuf InferParameter map, in the matching kind.

    A request's non-negative ints go as ``uint64_param``, as tritonclient sends priority
    and timeout; ``unsigned=False`` (a model's response parameters) sends every int as
    ``int64_param``, as Triton does."""
    parameter = parameters[key]
    if isinstance(value, bool):
        parameter.bool_param = value
    elif isinstance(value, int):
        if unsigned and value >= 0:
            parameter.uint64_param = value
        else:
            parameter.int64_param = value
    elif isinstance(value, float):
        parameter.double_param = value
    else:
        parameter.string_param = value


def decode_outputs(
    response: pb.ModelInferResponse,
    raw: Sequence[bytes | memoryview] | None = None,
    in_regions: Collection[str] = (),
) -> dict[str, np.ndarray]:
    """A response's outputs as arrays (raw contents; typed contents as a fallback).

    ``in_regions``: outputs the request asked to have written into shared memory; their
    bytes are in the caller's region, and they are left out here."""
    if raw is None:
        raw = response.raw_output_contents
    outputs: dict[str, np.ndarray] = {}
    for index, tensor in enumerate(response.outputs):
        shape = tuple(tensor.shape)
        if tensor.name in in_regions:
            continue
        if index < len(raw):
            where = f"output {tensor.name!r} (raw_output_contents[{index}])"
            outputs[tensor.name] = raw_tensor(raw[index], tensor.datatype, shape, where)
        else:
            outputs[tensor.name] = typed_tensor(tensor, shape, "output")
    return outputs
