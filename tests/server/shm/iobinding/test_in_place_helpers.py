"""The pure pieces: whether an output already lies at its destination, and the bounded
memory of output shapes."""

from __future__ import annotations

import numpy as np

from conveyor.backends.onnxruntime_binding import OutputShapes, signature
from conveyor.server.shared_memory import already_written


def test_an_output_viewing_its_destination_is_already_written() -> None:
    room = np.zeros(64, np.uint8)
    output = np.frombuffer(room, np.float32, 8).reshape(2, 4)
    assert already_written(output, room)
    assert not already_written(output.copy(), room)  # same bytes, elsewhere
    assert not already_written(np.frombuffer(room[4:], np.float32, 8), room)  # moved along
    assert not already_written(output.T, room)  # not contiguous: the bytes differ
    assert not already_written(np.frombuffer(room, np.float32, 0), room)  # nothing


def test_output_shapes_are_kept_per_input_signature_and_bounded() -> None:
    shapes = OutputShapes(limit=2)
    small = signature({"INPUT0": np.zeros(4, np.float32)})
    large = signature({"INPUT0": np.zeros(8, np.float32)})
    other_type = signature({"INPUT0": np.zeros(4, np.float64)})
    assert len({small, large, other_type}) == 3
    shapes.remember(small, {"OUTPUT0": np.zeros(4, np.float32)})
    shapes.remember(large, {"OUTPUT0": np.zeros(8, np.float32)})
    assert shapes.get(small) == {"OUTPUT0": (4,)}
    shapes.remember(other_type, {"OUTPUT0": np.zeros(3, np.float32)})
    assert len(shapes) == 2
    assert shapes.get(small) is None  # the oldest is forgotten first
    assert shapes.get(other_type) == {"OUTPUT0": (3,)}
    shapes.remember(large, {"OUTPUT0": np.zeros(5, np.float32)})  # a shape that changed
    assert shapes.get(large) == {"OUTPUT0": (5,)}
