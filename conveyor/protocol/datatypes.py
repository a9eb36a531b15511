"""The V2 datatype table: names on the wire <-> numpy dtypes, and element sizes.

BYTES tensors are numpy object arrays whose elements are ``bytes``. BF16 is carried as
``ml_dtypes.bfloat16`` (the dtype onnxruntime and JAX use), so it round-trips bit-exactly;
ml_dtypes is imported the first time BF16 is needed, because importing it takes ~0.5 s
(every ``import conveyor``: the CLI, the client, each process model's zygote).
"""

from __future__ import annotations

import numpy as np

from conveyor.errors import InvalidInput

BYTES = "BYTES"

_NUMPY_OF: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    # "BF16" is added by _load_bf16() when first needed.
    BYTES: np.dtype(object),
}

_DATATYPE_OF: dict[np.dtype, str] = {dtype: name for name, dtype in _NUMPY_OF.items()}
# Strings given as numpy unicode/bytes arrays are BYTES too.
DATATYPES: tuple[str, ...] = (*(name for name in _NUMPY_OF if name != BYTES), "BF16", BYTES)
_KNOWN = frozenset(DATATYPES)


def _load_bf16() -> np.dtype:
    import ml_dtypes

    dtype = np.dtype(ml_dtypes.bfloat16)
    _DATATYPE_OF[dtype] = "BF16"
    _NUMPY_OF["BF16"] = dtype
    return dtype


def is_datatype(name: str) -> bool:
    return name in _KNOWN


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype that carries V2 ``datatype``; InvalidInput names the known ones."""
    try:
        return _NUMPY_OF[datatype]
    except (KeyError, TypeError):
        if datatype == "BF16":
            return _load_bf16()
        raise InvalidInput(
            f"unknown datatype {datatype!r}; expected one of {', '.join(DATATYPES)}"
        ) from None


def datatype_of(dtype: np.dtype) -> str:
    """The V2 datatype name for a numpy dtype (unicode and bytes strings are BYTES)."""
    dtype = np.dtype(dtype)
    if dtype.kind in ("U", "S", "O"):
        return BYTES
    try:
        return _DATATYPE_OF[dtype.newbyteorder("=")]
    except KeyError:
        if dtype.name == "bfloat16":  # an ml_dtypes array: someone has imported it already
            _load_bf16()
            return "BF16"
        raise InvalidInput(f"numpy dtype {dtype} has no V2 datatype") from None


def element_size(datatype: str) -> int | None:
    """Bytes per element for fixed-size datatypes; None for BYTES (variable length)."""
    if datatype == BYTES:
        return None
    return numpy_dtype(datatype).itemsize


# No tensor may have more elements than this, counting a 0 dimension as 1: numpy refuses
# shapes whose size in bytes overflows 64 bits even when another dimension is 0.
MAX_ELEMENTS = 2**59


def check_shape(shape: tuple[int, ...], where: str) -> tuple[int, ...]:
    """``shape`` if every dimension is >= 0 and the tensor could exist; else InvalidInput."""
    product = 1
    for dim in shape:
        if dim < 0:
            raise InvalidInput(f"{where}: shape {list(shape)} has a negative dimension")
        product *= max(dim, 1)
    if product > MAX_ELEMENTS:
        raise InvalidInput(
            f"{where}: shape {list(shape)} is impossibly large (over {MAX_ELEMENTS} elements)"
        )
    return shape


def element_count(shape: list[int] | tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
