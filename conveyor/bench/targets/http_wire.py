"""V2 inference request bodies over HTTP: the binary tensor extension and plain JSON.

The body is built once per run and sent unchanged on every request, so the generator's
cost per request is a socket write and a response parse, never a tensor encode.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import orjson

from conveyor.protocol.datatypes import BYTES, datatype_of


def _datatype(array: np.ndarray, declared: Mapping[str, str] | None, name: str) -> str:
    if declared and name in declared:
        return declared[name]
    return BYTES if array.dtype == object else datatype_of(array.dtype)


def bytes_elements(array: np.ndarray) -> bytes:
    """BYTES tensor contents: each element as a 4-byte little-endian length and its bytes."""
    parts = []
    for item in array.ravel():
        value = item if isinstance(item, bytes) else str(item).encode()
        parts.append(len(value).to_bytes(4, "little"))
        parts.append(value)
    return b"".join(parts)


def raw_contents(array: np.ndarray, datatype: str) -> bytes:
    if datatype == BYTES:
        return bytes_elements(array)
    return np.ascontiguousarray(array).tobytes()


def binary_body(
    inputs: Mapping[str, np.ndarray], declared: Mapping[str, str] | None = None
) -> tuple[bytes, int]:
    """(body, JSON header length) for the binary tensor extension; every output binary too."""
    tensors = []
    blobs = []
    for name, array in inputs.items():
        datatype = _datatype(array, declared, name)
        blob = raw_contents(array, datatype)
        blobs.append(blob)
        tensors.append(
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": datatype,
                "parameters": {"binary_data_size": len(blob)},
            }
        )
    header = orjson.dumps({"inputs": tensors, "parameters": {"binary_data_output": True}})
    return header + b"".join(blobs), len(header)


def json_body(inputs: Mapping[str, np.ndarray], declared: Mapping[str, str] | None = None) -> bytes:
    """A plain-JSON V2 request: flat ``data`` lists, BYTES as UTF-8 strings."""
    tensors = []
    for name, array in inputs.items():
        datatype = _datatype(array, declared, name)
        if datatype == BYTES:
            data = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                    for v in array.ravel()]
        else:
            data = array.ravel().tolist()
        tensors.append(
            {"name": name, "shape": list(array.shape), "datatype": datatype, "data": data}
        )
    return orjson.dumps({"inputs": tensors})
