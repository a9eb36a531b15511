"""V2 tensors as JSON: the ``data`` field of an input or output, for every datatype.

``data`` may be flat (row-major) or nested; either way its element count must match the
shape. Values must fit the datatype: a float is not an INT32, a number is not a BOOL, and
an integer out of range is refused instead of wrapped. BYTES elements are JSON strings,
sent as their UTF-8 bytes; a BYTES element that is not UTF-8 can only travel in binary.
FP16 and BF16 are accepted as JSON numbers too, although tritonclient sends BF16 only in
binary.

orjson is the one JSON library (measured against msgspec on the infer hot path: the
same within noise, about 0.5 us to parse a request header; see docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from conveyor.errors import InvalidInput
from conveyor.protocol.datatypes import BYTES, check_shape, element_count, numpy_dtype

_DUMPS_OPTIONS = orjson.OPT_SERIALIZE_NUMPY
_HALF = ("FP16", "BF16")
_NARROW_FLOATS = ("FP16", "BF16", "FP32")  # where a JSON number can overflow to inf


def loads(data: bytes | bytearray | memoryview | str, what: str = "request body") -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"{what} is not valid JSON: {exc}") from None


def dumps(value: Any) -> bytes:
    """Serialize to JSON; numpy arrays (C-contiguous, numeric or bool) go straight through."""
    return orjson.dumps(value, option=_DUMPS_OPTIONS)


def parse_shape(value: Any, where: str) -> tuple[int, ...]:
    """A request tensor's shape: a list of integers >= 0."""
    if not isinstance(value, list) or not all(type(dim) is int and dim >= 0 for dim in value):
        raise InvalidInput(f"{where}: 'shape' must be a list of integers >= 0, got {value!r}")
    return check_shape(tuple(value), where)


def decode_data(data: Any, datatype: str, shape: tuple[int, ...], where: str) -> np.ndarray:
    """The ``data`` of a JSON tensor as an array of ``datatype`` with ``shape``."""
    if not isinstance(data, list):
        raise InvalidInput(f"{where}: 'data' must be a list, got {type(data).__name__}")
    count = element_count(shape)
    if datatype == BYTES:
        return _decode_bytes(data, shape, count, where)
    dtype = numpy_dtype(datatype)
    try:
        parsed = np.array(data)
    except ValueError:
        raise InvalidInput(
            f"{where}: 'data' is a ragged nested list; expected {count} elements for shape "
            f"{list(shape)}"
        ) from None
    if parsed.size != count:
        raise InvalidInput(
            f"{where}: shape {list(shape)} needs {count} elements but 'data' has {parsed.size}"
        )
    if count and dtype.kind in "iu" and parsed.dtype.kind in "fO":
        # numpy reads a list mixing int64 and uint64 magnitudes as float64 (or object):
        # convert exactly from the Python ints instead.
        return _exact_integers(data, datatype, dtype, where).reshape(shape)
    if count:
        _check_values(parsed, datatype, dtype, where)
    if datatype in _NARROW_FLOATS and count:
        return _narrow_floats(parsed, datatype, dtype, where).reshape(shape)
    return parsed.astype(dtype, copy=False).reshape(shape)


def _narrow_floats(parsed: np.ndarray, datatype: str, dtype: np.dtype, where: str) -> np.ndarray:
    """Floats cast to ``dtype``; a finite value too large for it is refused, not made inf."""
    with np.errstate(over="ignore"):
        out = parsed.astype(dtype, copy=False)
    # JSON has no infinities, so an infinite result can only be an overflow.
    if not np.isfinite(out.astype(np.float64, copy=False)).all():
        bad = parsed.reshape(-1)[~np.isfinite(out.reshape(-1).astype(np.float64))][0]
        raise InvalidInput(f"{where}: value {bad} is out of range for {datatype}")
    return out


def _exact_integers(data: list[Any], datatype: str, dtype: np.dtype, where: str) -> np.ndarray:
    flat: list[Any] = []
    _flatten(data, flat)
    if not all(type(value) is int for value in flat):
        raise InvalidInput(f"{where}: {datatype} data must be integers")
    try:
        return np.array(flat, dtype=dtype)
    except OverflowError:
        info = np.iinfo(dtype)
        bad = next(v for v in flat if not info.min <= v <= info.max)
        raise InvalidInput(
            f"{where}: value {bad} is out of range for {datatype} [{info.min}, {info.max}]"
        ) from None


def _check_values(parsed: np.ndarray, datatype: str, dtype: np.dtype, where: str) -> None:
    kind = parsed.dtype.kind
    if dtype.kind == "b":
        if kind != "b":
            raise InvalidInput(f"{where}: {datatype} data must be true/false values")
        return
    if kind not in "iuf" or (dtype.kind in "iu" and kind == "f"):
        expected = "integers" if dtype.kind in "iu" else "numbers"
        raise InvalidInput(f"{where}: {datatype} data must be {expected}")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = parsed.min(), parsed.max()
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise InvalidInput(
                f"{where}: value {bad} is out of range for {datatype} [{info.min}, {info.max}]"
            )


def _decode_bytes(data: list[Any], shape: tuple[int, ...], count: int, where: str) -> np.ndarray:
    flat: list[Any] = []
    _flatten(data, flat)
    if len(flat) != count:
        raise InvalidInput(
            f"{where}: shape {list(shape)} needs {count} elements but 'data' has {len(flat)}"
        )
    out = np.empty(count, dtype=object)
    for index, item in enumerate(flat):
        if not isinstance(item, str):
            raise InvalidInput(
                f"{where}: BYTES element {index} must be a string, got {type(item).__name__}"
                " (non-UTF-8 bytes travel only in binary)"
            )
        out[index] = item.encode()
    return out.reshape(shape)


def _flatten(data: list[Any], out: list[Any]) -> None:
    for item in data:
        if isinstance(item, list):
            _flatten(item, out)
        else:
            out.append(item)


def encode_data(array: np.ndarray, datatype: str, where: str) -> Any:
    """An output's values for the ``data`` field (flat, row-major), ready for :func:`dumps`."""
    if datatype == BYTES:
        items = array.reshape(-1).tolist()
        try:
            return [item.decode() if isinstance(item, bytes) else str(item) for item in items]
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"{where}: a BYTES element is not valid UTF-8 ({exc.reason}); request it in "
                "binary (output parameter binary_data: true)"
            ) from None
    if datatype in _HALF:
        # orjson writes float32, not halves; every FP16/BF16 value is exact in float32.
        array = array.astype(np.float32)
    return np.ascontiguousarray(array).reshape(-1)


def tensor_fields(tensor: Any, where: str) -> tuple[str, str, Mapping[str, Any]]:
    """The name, datatype and parameters of a request tensor object, type-checked."""
    if not isinstance(tensor, dict):
        raise InvalidInput(f"{where} must be an object, got {type(tensor).__name__}")
    name = tensor.get("name")
    if not isinstance(name, str):
        raise InvalidInput(f"{where}: 'name' must be a string, got {name!r}")
    datatype = tensor.get("datatype")
    if not isinstance(datatype, str):
        raise InvalidInput(f"{where} ({name}): 'datatype' must be a string, got {datatype!r}")
    parameters = tensor.get("parameters")
    if parameters is None:
        parameters = {}
    elif not isinstance(parameters, dict):
        raise InvalidInput(f"{where} ({name}): 'parameters' must be an object")
    return name, datatype, parameters
