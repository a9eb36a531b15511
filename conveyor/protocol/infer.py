"""A V2 inference request and response as a JSON header plus an optional binary tail.

Both directions live here so the server and the client read and write one format with
one set of rules:

- server: :func:`decode_request` (body -> :class:`DecodedInfer`: the request and how to
  answer it) and :func:`encode_response` (engine outputs -> body);
- client: :func:`encode_request` and :func:`decode_response`.

Which outputs travel in binary follows Triton: an output's own ``binary_data`` parameter
wins; otherwise the request's ``binary_data_output`` (default false) decides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from conveyor.errors import InvalidInput
from conveyor.futures import response_parameters
from conveyor.protocol import binary, json_codec
from conveyor.protocol import shared_memory as shm
from conveyor.protocol import triton_words as triton
from conveyor.protocol.datatypes import DATATYPES, datatype_of, is_datatype
from conveyor.protocol.parameters import (
    check_tensor_parameters,
    classification_count,
    flag,
    request_options,
)
from conveyor.protocol.request import DecodedRequest, from_options


@dataclasses.dataclass(slots=True)
class DecodedInfer(DecodedRequest):
    """A decoded body: the request for the engine, and how to answer it."""

    binary_outputs: dict[str, bool] | None = None  # per requested output; None: the default
    binary_data_output: bool = False  # the request's default for its outputs

    @property
    def id(self) -> str | None:
        return self.request.id

    def wants_binary(self, name: str) -> bool:
        if self.binary_outputs is not None:
            chosen = self.binary_outputs.get(name)
            if chosen is not None:
                return chosen
        return self.binary_data_output


def decode_request(
    body: binary.BytesLike,
    header_length: int | None,
    model: str | None = None,
    version: str | None = None,
) -> DecodedInfer:
    """Parse a request body (``header_length`` from the transport; None: all JSON) for
    ``model`` (named in the errors Triton words with it) and ``version`` (from the path)."""
    header_bytes, tail = binary.split(body, header_length)
    header = json_codec.loads(header_bytes)
    if not isinstance(header, dict):
        raise InvalidInput("the request must be a JSON object with an 'inputs' list")
    request_id = header.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidInput(f"request 'id' must be a string, got {request_id!r}")
    options = request_options(header.get("parameters"))
    in_regions = shm.SharedMemoryUse()
    inputs = _decode_tensors(header.get("inputs"), tail, "inputs", "input", in_regions, model)
    outputs, binary_outputs, classifications = _requested_outputs(header.get("outputs"), in_regions)
    return DecodedInfer(
        from_options(model or "", version, inputs, outputs, request_id, options),
        classifications or None,
        in_regions,
        binary_outputs,
        options.binary_data_output,
    )


def _decode_tensors(
    raw: Any,
    tail: binary.BytesLike,
    field: str,
    noun: str,
    in_regions: shm.SharedMemoryUse | None = None,
    model: str | None = None,
) -> dict[str, np.ndarray]:
    """The tensors of ``raw``; with ``in_regions``, those whose parameters place them in a
    shared-memory region go there instead (their bytes are read by the data plane)."""
    if not isinstance(raw, list):
        raise InvalidInput(f"'{field}' must be a list of tensors, got {_kind(raw)}")
    reader = binary.TailReader(tail)
    tensors: dict[str, np.ndarray] = {}
    for index, tensor in enumerate(raw):
        name, datatype, parameters = json_codec.tensor_fields(tensor, f"{field}[{index}]")
        where = f"{noun} {name!r}"
        if name in tensors or (in_regions is not None and name in in_regions.inputs):
            raise InvalidInput(
                triton.first(
                    triton.input_repeated(name), f"{where} appears more than once in '{field}'"
                )
            )
        if not is_datatype(datatype):
            raise InvalidInput(
                f"{where}: unknown datatype {datatype!r}; expected one of {', '.join(DATATYPES)}"
            )
        shape = json_codec.parse_shape(tensor.get("shape"), where)
        if parameters:
            check_tensor_parameters(parameters, where)
            if in_regions is not None:
                located = shm.location(parameters, where)
                if located is not None:
                    if "data" in tensor or "binary_data_size" in parameters:
                        raise InvalidInput(
                            f"{where} is in shared memory and also carries data; send one"
                        )
                    in_regions.inputs[name] = shm.InputInRegion(located, datatype, shape)
                    continue
        size = parameters.get("binary_data_size") if parameters else None
        if size is not None:
            if type(size) is not int or size < 0:
                raise InvalidInput(f"{where}: binary_data_size must be an integer >= 0")
            if "data" in tensor:
                raise InvalidInput(f"{where} has both 'data' and binary_data_size; send one")
            offset = reader.take(size, where)
            names = None if model is None else (model, name)
            tensors[name] = binary.tensor(
                reader.tail, offset, size, datatype, shape, where, triton_names=names
            )
        elif "data" in tensor:
            tensors[name] = json_codec.decode_data(tensor["data"], datatype, shape, where)
        else:
            raise InvalidInput(f"{where} has no 'data' and no binary_data_size parameter")
    reader.finish()
    return tensors


def _requested_outputs(
    raw: Any, in_regions: shm.SharedMemoryUse
) -> tuple[list[str] | None, dict[str, bool] | None, dict[str, int] | None]:
    if raw is None:
        return None, None, None
    if not isinstance(raw, list):
        raise InvalidInput(f"'outputs' must be a list of objects, got {_kind(raw)}")
    names: list[str] = []
    chosen: dict[str, bool] = {}
    classifications: dict[str, int] = {}
    for index, output in enumerate(raw):
        if not isinstance(output, dict) or not isinstance(output.get("name"), str):
            raise InvalidInput(f"outputs[{index}] must be an object with a string 'name'")
        name = output["name"]
        where = f"requested output {name!r}"
        if name in chosen or name in names:
            raise InvalidInput(
                triton.first(triton.output_repeated(name), f"{where} is requested more than once")
            )
        parameters = output.get("parameters")
        if parameters is not None:
            if not isinstance(parameters, dict):
                raise InvalidInput(f"{where}: 'parameters' must be an object")
            check_tensor_parameters(parameters, where, output=True)
            located = shm.location(parameters, where)
            if located is not None:
                in_regions.outputs[name] = located
            if "binary_data" in parameters:
                chosen[name] = flag(parameters, "binary_data", f"{where} parameter")
            count = classification_count(parameters, where)
            if count is not None:
                classifications[name] = count
        names.append(name)
    return names, chosen, classifications


def encode_response(
    model_name: str, model_version: str, request: DecodedInfer, results: Mapping[str, np.ndarray]
) -> tuple[bytes, int | None]:
    """The response body and, when it has a binary tail, the JSON header's length."""
    header, buffers = encode_response_parts(model_name, model_version, request, results)
    if not buffers:
        return header, None
    return binary.join(header, buffers)


def encode_response_parts(
    model_name: str, model_version: str, request: DecodedInfer, results: Mapping[str, np.ndarray]
) -> tuple[bytes, list[binary.Chunk]]:
    """The response's JSON header and its binary tail's buffers, not joined.

    A transport that can write several buffers (HTTP: head, header, each tensor) sends the
    tensors straight from the engine's arrays, with no join copy.
    """
    outputs: list[dict[str, Any]] = []
    buffers: list[binary.Chunk] = []
    in_regions = request.shared_memory.outputs
    for name, array in results.items():
        datatype = datatype_of(array.dtype)
        entry: dict[str, Any] = {"name": name, "datatype": datatype, "shape": array.shape}
        if name in in_regions:
            # Written into the region by the data plane: answered with name, datatype and
            # shape only, as Triton does (its C++ client reads any output 'parameters' as
            # binary data and fails without 'binary_data_size').
            pass
        else:
            _carry(entry, array, datatype, request.wants_binary(name), buffers, "output")
        outputs.append(entry)
    response: dict[str, Any] = {"model_name": model_name, "model_version": model_version}
    if request.id is not None:
        response["id"] = request.id
    parameters = response_parameters(results)
    if parameters:  # set by the model on its response; JSON bool, number, string as Triton
        response["parameters"] = dict(parameters)
    response["outputs"] = outputs
    return json_codec.dumps(response), buffers


def _carry(
    entry: dict[str, Any],
    array: np.ndarray,
    datatype: str,
    as_binary: bool,
    buffers: list[binary.Chunk],
    kind: str,
) -> None:
    """Put ``array`` into its tensor ``entry``: as binary data (its bytes appended to
    ``buffers``, its size in the entry's parameters) or as JSON ``data``. ``kind``: input
    or output, for an error naming the tensor."""
    if as_binary:
        chunk = binary.tensor_bytes(array, datatype)
        entry["parameters"] = {"binary_data_size": len(chunk)}
        buffers.append(chunk)
    else:
        entry["data"] = json_codec.encode_data(array, datatype, f"{kind} {entry['name']!r}")


# ---- the client's side ----------------------------------------------------------------


def encode_request(
    inputs: Mapping[str, np.ndarray],
    *,
    outputs: Sequence[str] | None = None,
    request_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    binary_data: bool = True,
    in_regions: Mapping[str, shm.InputInRegion] | None = None,
    out_regions: Mapping[str, shm.Location] | None = None,
) -> tuple[bytes, int | None]:
    """A request body from numpy inputs; binary tensors in and out unless told otherwise.

    ``in_regions``: more inputs, already in registered shared-memory regions (sent as
    their location only). ``out_regions``: requested outputs the server is to write into
    a region (each must also be named in ``outputs``).
    """
    tensors: list[dict[str, Any]] = []
    buffers: list[binary.Chunk] = []
    for name, value in inputs.items():
        array = np.asarray(value)
        datatype = datatype_of(array.dtype)
        entry: dict[str, Any] = {"name": name, "shape": array.shape, "datatype": datatype}
        _carry(entry, array, datatype, binary_data, buffers, "input")
        tensors.append(entry)
    for name, placed in (in_regions or {}).items():
        tensors.append(
            {
                "name": name,
                "shape": placed.shape,
                "datatype": placed.datatype,
                "parameters": placed.location.parameters(),
            }
        )
    request: dict[str, Any] = {}
    if request_id is not None:
        request["id"] = request_id
    wire_parameters = dict(parameters or {})
    if outputs is not None:
        request["outputs"] = [
            {
                "name": name,
                "parameters": (
                    out_regions[name].parameters()
                    if out_regions and name in out_regions
                    else {"binary_data": binary_data}
                ),
            }
            for name in outputs
        ]
    elif binary_data:
        wire_parameters["binary_data_output"] = True
    if wire_parameters:
        request["parameters"] = wire_parameters
    request["inputs"] = tensors
    header = json_codec.dumps(request)
    if not buffers:
        return header, None
    return binary.join(header, buffers)


def decode_response(
    body: binary.BytesLike, header_length: int | None, in_regions: Collection[str] = ()
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The response's JSON header and its outputs as arrays (binary ones are views of body).

    ``in_regions``: outputs the request asked to have written into shared memory; they come
    without data and are left out (see :func:`outputs_in_regions`)."""
    header_bytes, tail = binary.split(body, header_length)
    header = json_codec.loads(header_bytes, "response body")
    if not isinstance(header, dict):
        raise InvalidInput("the response is not a JSON object")
    outputs = header.get("outputs", [])
    if in_regions and isinstance(outputs, list):
        outputs = [entry for entry in outputs if _name(entry) not in in_regions]
    return header, _decode_tensors(outputs, tail, "outputs", "output")


def outputs_in_regions(
    header: Mapping[str, Any], in_regions: Collection[str]
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Name -> (datatype, shape) of the response's outputs among ``in_regions`` (their bytes
    are in the caller's region, not in the body)."""
    found: dict[str, tuple[str, tuple[int, ...]]] = {}
    outputs = header.get("outputs")
    for entry in outputs if isinstance(outputs, list) else []:
        if _name(entry) in in_regions:
            name, datatype, _ = json_codec.tensor_fields(entry, "output")
            found[name] = (datatype, json_codec.parse_shape(entry.get("shape"), repr(name)))
    return found


def _name(entry: Any) -> Any:
    return entry.get("name") if isinstance(entry, dict) else None


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
