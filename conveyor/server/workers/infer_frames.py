"""The hot frames: an infer call and its answer, without pickling classes.

Almost every frame between a front end and the engine process is an infer call with plain
numeric tensors, or its outputs. Pickling them as :mod:`messages` dataclasses costs a
Python-level reducer per object and a class lookup per dataclass and array on the way in,
tens of microseconds a request on each side. Here the meta is a tuple of plain values
(strings, numbers, tuples: pickle's C fast path), and each tensor is its dtype string, its
shape and its bytes, in the tuple when small (one copy of a few bytes costs less than a
part of its own) or out of band when large (never copied into the frame).

Anything else (a BYTES or BF16 tensor, a strided one, shared-memory regions,
classifications, an error, a cancelled request) returns None here and travels as a
pickled :class:`~conveyor.server.workers.messages.Call` / ``Reply``: rare enough that
the pickling does not matter.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from conveyor.ipc.frames import IN_BAND_BYTES, Buffer, frame
from conveyor.protocol.request import InferenceRequest, SequenceInfo

INFER_CALL = 1
INFER_REPLY = 2

_PLAIN_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex

# (call id, the request, the caller's wait limit)
InferCall = tuple[int, InferenceRequest, float | None]
# (call id, request id, model, version, outputs)
InferReply = tuple[int, str | None, str | None, str | None, dict[str, np.ndarray]]


def _tensors(arrays: Mapping[str, Any], raws: list[memoryview]) -> tuple[Any, ...] | None:
    """(name, dtype, shape, bytes or None if out of band) per array, or None for one that
    is not a plain C-contiguous numeric array."""
    encoded: list[tuple[str, str, tuple[int, ...], bytes | None]] = []
    for name, array in arrays.items():
        if type(array) is not np.ndarray:
            return None
        dtype = array.dtype
        if dtype.kind not in _PLAIN_KINDS or not array.flags.c_contiguous:
            return None
        if array.nbytes < IN_BAND_BYTES:
            encoded.append((name, dtype.str, array.shape, array.tobytes()))
        else:
            encoded.append((name, dtype.str, array.shape, None))
            raws.append(pickle.PickleBuffer(cast(Any, array)).raw())
    return tuple(encoded)


def _arrays(tensors: tuple[Any, ...], buffers: list[Buffer]) -> dict[str, np.ndarray]:
    arrays = {}
    out_of_band = iter(buffers)
    for name, dtype, shape, data in tensors:
        raw = next(out_of_band) if data is None else data
        arrays[name] = np.ndarray(shape, dtype, raw)  # a view of the bytes, no copy
    return arrays


def call_frame(
    call_id: int, request: InferenceRequest, wait_limit: float | None
) -> list[bytes | memoryview] | None:
    """The frame of an infer call, or None if it must travel pickled."""
    raws: list[memoryview] = []
    tensors = _tensors(request.inputs, raws)
    if tensors is None:
        return None
    sequence = request.sequence
    meta = (
        call_id,
        wait_limit,
        tensors,
        request.model,
        request.version,
        None if request.outputs is None else tuple(request.outputs),
        request.id,
        request.priority,
        request.timeout,
        None if sequence is None else (sequence.id, sequence.start, sequence.end),
        None if request.parameters is None else dict(request.parameters),
    )
    return frame(INFER_CALL, pickle.dumps(meta, protocol=5), raws)


def read_call(meta: Buffer, buffers: list[Buffer]) -> InferCall:
    call_id, wait_limit, tensors, model, version, outputs, *rest = pickle.loads(meta)
    request_id, priority, timeout, sequence, parameters = rest
    request = InferenceRequest(
        model,
        _arrays(tensors, buffers),
        version,
        outputs,
        request_id,
        priority,
        timeout,
        None if sequence is None else SequenceInfo(*sequence),
        parameters,
    )
    return call_id, request, wait_limit


def reply_frame(
    call_id: int,
    served: tuple[str | None, str | None, str | None],
    outputs: Mapping[str, Any],
) -> list[bytes | memoryview] | None:
    """The frame of an infer call's outputs, or None if they must travel pickled."""
    raws: list[memoryview] = []
    tensors = _tensors(outputs, raws)
    if tensors is None:
        return None
    meta = (call_id, *served, tensors)
    return frame(INFER_REPLY, pickle.dumps(meta, protocol=5), raws)


def read_reply(meta: Buffer, buffers: list[Buffer]) -> InferReply:
    call_id, request_id, model, version, tensors = pickle.loads(meta)
    return call_id, request_id, model, version, _arrays(tensors, buffers)
