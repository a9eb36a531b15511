"""Tensors of every V2 datatype whose values survive any encoding exactly."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from conveyor.protocol.datatypes import numpy_dtype


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
