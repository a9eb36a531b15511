"""The engine with output destinations, in process: onnxruntime computes an output into its
destination once it knows the output's shape, and only for a request that runs alone;
everything else answers as before. These fail if outputs stop landing in place."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conveyor import Engine, InferenceRequest
from tests.models import RepoBuilder
from tests.server.shm.iobinding.iobinding_models import FILL_VALUE, iobinding_repository

ECHO_MODEL = """
class Model:
    def infer(self, inputs):
        return {"OUTPUT0": inputs["INPUT0"] * 1}
"""

ECHO_CONFIG = """
backend = "python"
[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [-1]
[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [-1]
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    root = iobinding_repository(tmp_path_factory.mktemp("iobinding-engine"))
    RepoBuilder(Path(root)).python("echo", ECHO_MODEL, ECHO_CONFIG)
    with Engine.from_repository(root) as running:
        yield running


def run(engine: Engine, model: str, inputs: dict[str, np.ndarray], room: np.ndarray) -> np.ndarray:
    future = engine.submit_request(InferenceRequest(model, inputs), destinations={"OUTPUT0": room})
    return future.result(timeout=30)["OUTPUT0"]


def test_identity_lands_in_place_once_its_shape_is_known(engine: Engine) -> None:
    room = np.zeros(4096 * 4, np.uint8)
    data = np.arange(4096, dtype=np.float32)
    first = run(engine, "identity", {"INPUT0": data}, room)
    assert not np.shares_memory(first, room)  # shape not known yet: run as before
    for seed in (2.0, 3.0):
        output = run(engine, "identity", {"INPUT0": data * seed}, room)
        assert np.shares_memory(output, room)
        assert output.ctypes.data == room.ctypes.data
        np.testing.assert_array_equal(output, data * seed)
        np.testing.assert_array_equal(room.view(np.float32), data * seed)


def test_a_new_input_shape_is_learnt_first(engine: Engine) -> None:
    room = np.zeros(4096 * 4, np.uint8)
    for length in (100, 4096, 100):
        run(engine, "identity", {"INPUT0": np.ones(length, np.float32)}, room)
    data = np.arange(333, dtype=np.float32)
    assert not np.shares_memory(run(engine, "identity", {"INPUT0": data}, room), room)
    output = run(engine, "identity", {"INPUT0": data}, room)
    assert np.shares_memory(output, room)
    np.testing.assert_array_equal(output, data)


def test_a_changed_output_shape_runs_again_unbound(engine: Engine) -> None:
    room = np.zeros(16 * 4, np.uint8)
    for length, in_place in ((4, False), (4, True), (6, False), (6, True), (3, False)):
        output = run(engine, "fill", {"LENGTH": np.array([length], np.int64)}, room)
        assert output.tolist() == [FILL_VALUE] * length
        assert np.shares_memory(output, room) == in_place, length


def test_too_little_room_or_an_overlap_with_an_input_is_not_bound(engine: Engine) -> None:
    data = np.arange(64, dtype=np.float32)
    roomy = np.zeros(64 * 4, np.uint8)
    run(engine, "identity", {"INPUT0": data}, roomy)  # the shape is known from here on
    small = np.zeros(64 * 4 - 1, np.uint8)
    output = run(engine, "identity", {"INPUT0": data}, small)
    assert not np.shares_memory(output, small)
    np.testing.assert_array_equal(output, data)
    source = data.copy()
    output = run(engine, "identity", {"INPUT0": source}, source.view(np.uint8))
    assert not np.shares_memory(output, source)  # the model would read what it overwrote
    np.testing.assert_array_equal(output, data)


def test_batched_requests_and_other_backends_ignore_destinations(engine: Engine) -> None:
    rooms = [np.zeros(8 * 4, np.uint8) for _ in range(4)]
    rows = [np.full((1, 8), float(i), np.float32) for i in range(4)]
    for _ in range(2):  # the second round would be bound if it ran alone
        futures = [
            engine.submit_request(
                InferenceRequest("scale", {"INPUT0": row}), destinations={"OUTPUT0": room}
            )
            for row, room in zip(rows, rooms, strict=True)
        ]
        for row, room, future in zip(rows, rooms, futures, strict=True):
            output = future.result(timeout=30)["OUTPUT0"]
            np.testing.assert_array_equal(output, row * 2)
            assert not np.shares_memory(output, room)
    room = np.zeros(16, np.uint8)
    for _ in range(2):
        output = run(engine, "echo", {"INPUT0": np.ones(4, np.float32)}, room)
        assert output.tolist() == [1.0] * 4
        assert not np.shares_memory(output, room)


def test_string_outputs_are_never_bound(engine: Engine) -> None:
    words = np.array([b"one", b"two"], dtype=object)
    room = np.zeros(64, np.uint8)
    for _ in range(2):
        output = run(engine, "strings", {"INPUT0": words}, room)
        assert output.tolist() == [b"one", b"two"]


def test_one_output_bound_and_another_not(engine: Engine) -> None:
    data = np.arange(16, dtype=np.float32)
    for wanted in (["OUTPUT0", "OUTPUT1"], ["OUTPUT1", "OUTPUT0"], ["OUTPUT1"]):
        room = np.zeros(64, np.uint8)
        for _ in range(2):
            future = engine.submit_request(
                InferenceRequest("pair", {"INPUT0": data}, outputs=wanted),
                destinations={"OUTPUT1": room},
            )
            results = future.result(timeout=30)
        assert list(results) == wanted
        assert np.shares_memory(results["OUTPUT1"], room)
        np.testing.assert_array_equal(results["OUTPUT1"], data)
        if "OUTPUT0" in wanted:
            assert not np.shares_memory(results["OUTPUT0"], room)
            np.testing.assert_array_equal(results["OUTPUT0"], data * 2)
    rooms = [np.zeros(64, np.uint8), np.zeros(64, np.uint8)]
    for _ in range(2):
        future = engine.submit_request(
            InferenceRequest("pair", {"INPUT0": data}),
            destinations={"OUTPUT0": rooms[0], "OUTPUT1": rooms[1]},
        )
        results = future.result(timeout=30)
    np.testing.assert_array_equal(rooms[0].view(np.float32), data * 2)
    np.testing.assert_array_equal(rooms[1].view(np.float32), data)
    shared = np.zeros(64, np.uint8)  # both outputs pointed at the same room: one is bound
    for _ in range(2):
        future = engine.submit_request(
            InferenceRequest("pair", {"INPUT0": data}),
            destinations={"OUTPUT0": shared, "OUTPUT1": shared},
        )
        results = future.result(timeout=30)
    np.testing.assert_array_equal(results["OUTPUT0"], data * 2)
    np.testing.assert_array_equal(results["OUTPUT1"], data)
