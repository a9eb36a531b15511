"""Joining requests into one execution along the batch dimension, and splitting the result.

Pure functions on numpy arrays: ``np.concatenate`` in, zero-copy slices out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from conveyor.engine.request import Request


def join_inputs(requests: Sequence[Request]) -> dict[str, np.ndarray]:
    """One input dict for the whole batch; a lone request's arrays are used as they are."""
    if len(requests) == 1:
        return requests[0].inputs
    names = requests[0].inputs.keys()
    return {name: np.concatenate([r.inputs[name] for r in requests], axis=0) for name in names}


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
