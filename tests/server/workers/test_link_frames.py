"""The link's frames cut out of a byte stream however its reads split it, and the lean
infer frames carry every plain tensor exactly (anything else says it must be pickled)."""

from __future__ import annotations

import numpy as np
import pytest

from conveyor.ipc import frames as wire
from conveyor.protocol.datatypes import DATATYPES
from conveyor.protocol.request import InferenceRequest, SequenceInfo
from conveyor.server.workers import infer_frames
from conveyor.server.workers.messages import Cancel
from tests.tensors import sample


def stream_of(*frames: list[bytes | memoryview]) -> bytes:
    return b"".join(bytes(part) for parts in frames for part in parts)


def test_a_frame_split_at_every_byte_arrives_whole_once() -> None:
    big = np.arange(1 << 14, dtype=np.float32)  # out of band
    parts = infer_frames.reply_frame(3, ("r", "m", "1"), {"big": big, "small": big[:4].copy()})
    assert parts is not None
    data = stream_of(parts, wire.frame_parts(Cancel(9)))
    for step in (1, 7, 4096):
        reader = wire.FrameReader()
        frames = []
        for at in range(0, len(data), step):
            frames += reader.feed(data[at : at + step])
        assert [kind for kind, _, _ in frames] == [infer_frames.INFER_REPLY, wire.PICKLED]
        call_id, request_id, model, version, outputs = infer_frames.read_reply(*frames[0][1:])
        assert (call_id, request_id, model, version) == (3, "r", "m", "1")
        np.testing.assert_array_equal(outputs["big"], big)
        np.testing.assert_array_equal(outputs["small"], big[:4])


def test_one_read_may_complete_many_frames() -> None:
    frames = [
        infer_frames.reply_frame(i, (None, "m", "1"), {"y": np.full(2, i)}) for i in range(50)
    ]
    data = stream_of(*(f for f in frames if f is not None))
    got = wire.FrameReader().feed(data)
    assert [infer_frames.read_reply(meta, buffers)[0] for _, meta, buffers in got] == list(
        range(50)
    )


def test_a_corrupt_length_is_refused_before_anything_is_allocated() -> None:
    header = bytes([wire.PICKLED]) + (wire.MAX_META_BYTES + 1).to_bytes(4, "little") + bytes(4)
    with pytest.raises(ConnectionError, match="over the limit"):
        wire.FrameReader().feed(header)


@pytest.mark.parametrize("datatype", DATATYPES)
def test_a_call_keeps_every_plain_tensor_and_refuses_the_rest(datatype: str) -> None:
    array = sample(datatype)
    sent = InferenceRequest(
        "m",
        {"x": array},
        version="2",
        outputs=("y",),
        id="id",
        priority=2,
        timeout=1.5,
        sequence=SequenceInfo("s", start=True),
        parameters={"k": "v"},
    )
    parts = infer_frames.call_frame(5, sent, 0.5)
    if array.dtype.kind not in "biufc":  # BYTES (objects), BF16 (an extension dtype)
        assert parts is None
        return
    assert parts is not None
    [(kind, meta, buffers)] = wire.FrameReader().feed(stream_of(parts))
    assert kind == infer_frames.INFER_CALL
    call_id, got, wait_limit = infer_frames.read_call(meta, buffers)
    assert (call_id, wait_limit) == (5, 0.5)
    assert got._replace(inputs={}) == sent._replace(inputs={})
    received = got.inputs["x"]
    assert received.dtype == array.dtype and received.shape == array.shape
    assert received.tobytes() == array.tobytes()


def test_a_default_request_round_trips_and_strided_tensors_are_refused() -> None:
    sent = InferenceRequest("m", {"x": np.ones(3)})
    parts = infer_frames.call_frame(1, sent, None)
    assert parts is not None
    [(_, meta, buffers)] = wire.FrameReader().feed(stream_of(parts))
    _, got, wait_limit = infer_frames.read_call(meta, buffers)
    assert wait_limit is None
    assert got._replace(inputs={}) == sent._replace(inputs={})
    strided = np.arange(12).reshape(3, 4)[:, ::2]
    assert infer_frames.reply_frame(1, (None, None, None), {"y": strided}) is None
