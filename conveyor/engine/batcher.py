"""Joining requests into one execution along the batch dimension, and splitting the result.

Pure functions on numpy arrays: ``np.concatenate`` in, zero-copy slices out. A ragged input
(``allow_ragged_batch``) may differ in size beyond the batch dimension from request to
request: it is padded with zeros to the largest size in each dimension, so a [2, 7] and a
[1, 12] become one [3, 12] (zeros are [PAD] and "masked" for a tokenizer's ids and mask;
BYTES pads with b"").
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from conveyor.engine.request import Request


def join_inputs(requests: Sequence[Request], ragged: Collection[str] = ()) -> dict[str, np.ndarray]:
    """One input dict for the whole batch; a lone request's arrays are used as they are.

    ``ragged``: the inputs that may differ beyond the batch dimension (padded to fit)."""
    if len(requests) == 1:
        return requests[0].inputs
    names = requests[0].inputs.keys()
    return {
        name: _padded_join([r.inputs[name] for r in requests])
        if name in ragged
        else np.concatenate([r.inputs[name] for r in requests], axis=0)
        for name in names
    }


def _padded_join(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The arrays stacked along axis 0, each zero-padded (at the end) to the largest shape."""
    widest = tuple(max(sizes) for sizes in zip(*(a.shape[1:] for a in arrays), strict=True))
    if all(a.shape[1:] == widest for a in arrays):
        return np.concatenate(arrays, axis=0)
    rows = sum(a.shape[0] for a in arrays)
    joined = np.zeros((rows, *widest), dtype=arrays[0].dtype)
    if joined.dtype == object:  # BYTES: pad with empty strings, not the integer 0
        joined.fill(b"")
    start = 0
    for array in arrays:
        stop = start + array.shape[0]
        joined[(slice(start, stop), *(slice(0, size) for size in array.shape[1:]))] = array
        start = stop
    return joined


def padding_elements(
    requests: Sequence[Request], joined: dict[str, np.ndarray], ragged: Collection[str]
) -> tuple[int, int]:
    """(elements the requests sent, zeros padding added) over the ``ragged`` inputs of one
    execution whose inputs ``join_inputs`` built: the padding waste of a ragged batch."""
    names = [name for name in ragged if name in joined]
    real = sum(r.inputs[name].size for r in requests for name in names)
    return real, sum(joined[name].size for name in names) - real


def split_outputs(
    outputs: dict[str, np.ndarray], requests: Sequence[Request]
) -> list[dict[str, np.ndarray]]:
    """Each request's own slice of every output it asked for, in request order."""
    if len(requests) == 1:
        return [{name: outputs[name] for name in requests[0].outputs}]
    results = []
    start = 0
    for request in requests:
        stop = start + request.batch_size
        results.append({name: outputs[name][start:stop] for name in request.outputs})
        start = stop
    return results


def wanted_outputs(requests: Sequence[Request]) -> tuple[str, ...]:
    """The union of the outputs a batch's requests asked for, in first-seen order."""
    if len(requests) == 1:
        return requests[0].outputs
    return tuple(dict.fromkeys(name for r in requests for name in r.outputs))
