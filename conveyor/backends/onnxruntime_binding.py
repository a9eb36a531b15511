"""onnxruntime writing outputs straight into the caller's destinations (IOBinding).

A request whose outputs go to a client's shared-memory region would otherwise cost two
copies of every output beyond the model's own work: onnxruntime's new array, then that
array into the region. Bound to the region, onnxruntime computes the output where the
client reads it, and the returned array is a view of the region.

onnxruntime needs an output's shape to bind it, before the run. The shapes come from the
previous run with the same input shapes and types (:class:`OutputShapes`, a small bounded
cache per loaded model version): the first request of a kind runs unbound and teaches the
shapes; the next ones are bound. A model whose output shape changed anyway fails its bound
run (onnxruntime checks the shape it computes against the bound one); the model is a pure
function, so the caller runs it again unbound and learns the new shapes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence

import numpy as np
import onnxruntime as ort

from conveyor.backends.base import Destinations

# Input name -> (shape, dtype), sorted by name: what an output's shape may depend on.
Signature = tuple[tuple[str, tuple[int, ...], str], ...]
Shapes = dict[str, tuple[int, ...]]

# Kinds of requests remembered per model version: enough for a few shapes a client
# alternates between, small enough that a client sending every shape holds little.
MAX_SIGNATURES = 64


def signature(inputs: Mapping[str, np.ndarray]) -> Signature:
    return tuple((name, inputs[name].shape, inputs[name].dtype.str) for name in sorted(inputs))


class OutputShapes:
    """Input signature -> the output shapes its last run produced (oldest forgotten first)."""

    def __init__(self, limit: int = MAX_SIGNATURES) -> None:
        self._limit = limit
        self._shapes: dict[Signature, Shapes] = {}
        self._lock = threading.Lock()

    def get(self, key: Signature) -> Shapes | None:
        return self._shapes.get(key)

    def remember(self, key: Signature, produced: Mapping[str, np.ndarray]) -> None:
        shapes = {name: array.shape for name, array in produced.items()}
        with self._lock:
            self._shapes.pop(key, None)
            while len(self._shapes) >= self._limit:
                del self._shapes[next(iter(self._shapes))]
            self._shapes[key] = shapes

    def __len__(self) -> int:
        return len(self._shapes)


def bindable(
    destinations: Destinations,
    shapes: Shapes,
    dtypes: Mapping[str, np.dtype],
    inputs: Mapping[str, np.ndarray],
) -> dict[str, tuple[np.ndarray, tuple[int, ...]]]:
    """Output name -> (destination, shape) for every output that may be computed in place:
    a fixed-size type, a known shape that fits its destination, an address aligned for its
    type, and no overlap with an input (the model would read what it already overwrote) or
    with another bound output."""
    plan: dict[str, tuple[np.ndarray, tuple[int, ...]]] = {}
    for name, destination in destinations.items():
        dtype = dtypes.get(name)
        shape = shapes.get(name)
        if dtype is None or shape is None:
            continue
        nbytes = math.prod(shape) * dtype.itemsize
        if (
            0 < nbytes <= destination.nbytes
            and destination.ctypes.data % dtype.itemsize == 0
            and not any(np.may_share_memory(destination, array) for array in inputs.values())
            and not any(np.may_share_memory(destination, other) for other, _ in plan.values())
        ):
            plan[name] = (destination, shape)
    return plan


def run_bound(
    session: ort.InferenceSession,
    feed: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    plan: Mapping[str, tuple[np.ndarray, tuple[int, ...]]],
    dtypes: Mapping[str, np.dtype],
    run_options: ort.RunOptions,
) -> dict[str, np.ndarray]:
    """Run with the outputs in ``plan`` bound to their destinations, the rest allocated by
    onnxruntime; the bound ones are returned as views of their destinations."""
    binding = session.io_binding()
    kept = []  # arrays onnxruntime reads from must outlive the run
    for name, array in feed.items():
        flags = array.flags
        if array.dtype != object and array.size and flags.c_contiguous and flags.aligned:
            # By address: onnxruntime reads the caller's buffer (a region, read-only) as is.
            binding.bind_input(name, "cpu", 0, array.dtype, list(array.shape), array.ctypes.data)
        else:
            array = np.ascontiguousarray(array)
            binding.bind_cpu_input(name, array)
        kept.append(array)
    for name in outputs:
        if name in plan:
            destination, shape = plan[name]
            binding.bind_output(name, "cpu", 0, dtypes[name], list(shape), destination.ctypes.data)
        else:
            binding.bind_output(name, "cpu")
    session.run_with_iobinding(binding, run_options)
    del kept
    produced = {}
    for name, (destination, shape) in plan.items():
        count = math.prod(shape)
        produced[name] = np.frombuffer(destination, dtypes[name], count).reshape(shape)
    if len(produced) < len(outputs):  # the ones onnxruntime allocated, in binding order
        values = binding.get_outputs()
        for name, value in zip(outputs, values, strict=True):
            if name not in plan:
                produced[name] = value.numpy()
    return {name: produced[name] for name in outputs}
