"""Triton's classification extension: an output answered as its top-k classes.

A requested output with the parameter ``classification: k`` is not returned as the model
produced it but as a BYTES tensor of ``"<score>:<index>"`` strings, or
``"<score>:<index>:<label>"`` when the output has a label for that class, the k highest
scores first. With batching the first dimension is the batch and each row is ranked on its
own (shape ``[batch, k]``); without, the whole tensor is one row (shape ``[k]``). Like
Triton, k larger than the number of classes is clamped to it, and scores are written as C's
``%f`` (Triton's ``std::to_string``): floats with six decimals, integers as integers.

Pure functions over numpy arrays; the data plane decides which outputs to classify.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from conveyor.errors import InvalidInput

# Numeric outputs only: a class's score must be ordered and printable as a number.
CLASSIFIABLE_DATATYPES = frozenset(
    {
        "UINT8", "UINT16", "UINT32", "UINT64",
        "INT8", "INT16", "INT32", "INT64",
        "FP16", "FP32", "FP64", "BF16",
    }
)  # fmt: skip


def check_classifiable(output: str, datatype: str) -> None:
    """InvalidInput unless an output of ``datatype`` can be classified."""
    if datatype not in CLASSIFIABLE_DATATYPES:
        raise InvalidInput(
            f"requested output {output!r}: classification needs a numeric output, and "
            f"{output!r} is {datatype}"
        )


def classify(
    array: np.ndarray, count: int, labels: Sequence[str] = (), *, batched: bool = False
) -> np.ndarray:
    """The top ``count`` classes of ``array`` as ``score:index[:label]`` byte strings.

    ``batched``: rank each row of the first dimension on its own -> shape [batch, k];
    otherwise rank every element -> shape [k]. ``k`` is ``count`` clamped to the classes.
    """
    if array.dtype.kind not in "uif" and array.dtype.name != "bfloat16":
        raise InvalidInput(
            f"classification needs a numeric output, got an array of {array.dtype.name}"
        )
    rows = array.reshape(array.shape[0], -1) if batched and array.ndim else array.reshape(1, -1)
    classes = rows.shape[1]
    k = min(count, classes)
    result = np.empty((rows.shape[0], k), dtype=object)
    integer = array.dtype.kind in "ui"
    for row_index, row in enumerate(rows):
        # Highest score first; equal scores keep index order (a stable sort on -score).
        order = np.argsort(-row.astype(np.float64), kind="stable")[:k]
        for rank, index in enumerate(order):
            value = row[index]
            score = f"{int(value)}" if integer else f"{float(value):f}"
            text = f"{score}:{index}"
            if index < len(labels) and labels[index]:
                text = f"{text}:{labels[index]}"
            result[row_index, rank] = text.encode()
    return result if batched and array.ndim else result.reshape(k)
