"""The fast input check accepts exactly what the full check accepts, and refuses the same
inputs with the same messages: a table of requests, each checked both ways."""

from __future__ import annotations

import types

import numpy as np
import pytest

from conveyor import Engine, InvalidInput
from conveyor.engine.inputs import InputCheck
from conveyor.repository.config import TensorSpec

BATCHED = InputCheck(
    "batched",
    [
        TensorSpec("A", "FP32", (16,)),
        TensorSpec("B", "INT32", (-1, 2)),
        TensorSpec("C", "FP64", (3,), optional=True),
    ],
    max_batch_size=8,
)
UNBATCHED = InputCheck("plain", [TensorSpec("X", "FP32", (2, 3))], max_batch_size=0)
WITH_BYTES = InputCheck(
    "text", [TensorSpec("T", "BYTES", (-1,)), TensorSpec("N", "INT64", (1,))], max_batch_size=4
)
SCALAR = InputCheck("scalar", [TensorSpec("S", "INT8", ())], max_batch_size=0)


class Subclass(np.ndarray):
    pass


def a(rows: int = 1, dtype: type = np.float32) -> np.ndarray:
    return np.zeros((rows, 16), dtype)


def b(rows: int = 1, width: int = 5) -> np.ndarray:
    return np.ones((rows, width, 2), np.int32)


wide = np.zeros((2, 32), np.float32)
CASES = {
    "both required": (BATCHED, {"A": a(2), "B": b(2)}),
    "inputs in another order": (BATCHED, {"B": b(3), "A": a(3)}),
    "optional one too": (BATCHED, {"A": a(), "B": b(), "C": np.zeros((1, 3))}),
    "max batch": (BATCHED, {"A": a(8), "B": b(8)}),
    "wrong dtype": (BATCHED, {"A": a(dtype=np.float64), "B": b()}),
    "big-endian FP32": (BATCHED, {"A": a().astype(">f4"), "B": b()}),
    "wrong rank": (BATCHED, {"A": np.zeros((1, 16, 1), np.float32), "B": b()}),
    "wrong dims": (BATCHED, {"A": a()[:, :8].copy(), "B": b()}),
    "wrong wildcard rank": (BATCHED, {"A": a(), "B": np.ones((1, 5), np.int32)}),
    "wrong dim next to a wildcard": (BATCHED, {"A": a(), "B": np.ones((1, 5, 3), np.int32)}),
    "non-contiguous": (BATCHED, {"A": wide[:, ::2], "B": b(2)}),
    "Fortran order": (BATCHED, {"A": np.asfortranarray(a(3)), "B": b(3)}),
    "batch sizes disagree": (BATCHED, {"A": a(2), "B": b(3)}),
    "batch size 0": (BATCHED, {"A": a(0), "B": b(0)}),
    "batch size past max": (BATCHED, {"A": a(9), "B": b(9)}),
    "no batch dimension": (BATCHED, {"A": np.zeros((), np.float32), "B": b()}),
    "missing input": (BATCHED, {"A": a()}),
    "unknown input": (BATCHED, {"A": a(), "B": b(), "D": a()}),
    "misspelt input": (BATCHED, {"A": a(), "b": b()}),
    "nothing": (BATCHED, {}),
    "a list is converted": (BATCHED, {"A": [[0.5] * 16], "B": b()}),
    "a scalar is not an array": (UNBATCHED, {"X": 1.0}),
    "an ndarray subclass": (BATCHED, {"A": a().view(Subclass), "B": b()}),
    "a read-only mapping": (BATCHED, types.MappingProxyType({"A": a(), "B": b()})),
    "unbatched": (UNBATCHED, {"X": np.zeros((2, 3), np.float32)}),
    "unbatched with a batch dimension": (UNBATCHED, {"X": np.zeros((1, 2, 3), np.float32)}),
    "unbatched transposed": (UNBATCHED, {"X": np.zeros((3, 2), np.float32).T}),
    "unbatched wrong dtype": (UNBATCHED, {"X": np.zeros((2, 3), np.int32)}),
    "scalar": (SCALAR, {"S": np.array(3, np.int8)}),
    "scalar given a vector": (SCALAR, {"S": np.array([3], np.int8)}),
    "BYTES objects": (WITH_BYTES, {"T": np.array([[b"x", b"yz"]], object), "N": np.ones((1, 1))}),
    "BYTES right": (
        WITH_BYTES,
        {"T": np.array([[b"x", b"yz"]], object), "N": np.ones((1, 1), np.int64)},
    ),
    "BYTES from str": (WITH_BYTES, {"T": np.array([["x", "é"]]), "N": np.ones((1, 1), np.int64)}),
    "BYTES given numbers": (WITH_BYTES, {"T": np.ones((1, 2)), "N": np.ones((1, 1), np.int64)}),
    "BYTES with a number inside": (
        WITH_BYTES,
        {"T": np.array([[b"x", 3]], object), "N": np.ones((1, 1), np.int64)},
    ),
}


def outcome(check, inputs):
    """What a check made of ``inputs``: its arrays and batch size, or its refusal."""
    try:
        arrays, batch_size = check(inputs)
    except InvalidInput as exc:
        return ("refused", exc.message)
    return ("accepted", batch_size, list(arrays), arrays)


@pytest.mark.parametrize("case", list(CASES))
def test_fast_and_full_checks_agree(case):
    input_check, inputs = CASES[case]
    fast = outcome(input_check.check, inputs)
    full = outcome(input_check.check_fully, inputs)
    assert fast[:-1] == full[:-1] if fast[0] == "accepted" else fast == full
    if fast[0] == "accepted":
        for name, array in fast[-1].items():
            expected = full[-1][name]
            assert array.dtype == expected.dtype and array.shape == expected.shape
            np.testing.assert_array_equal(array, expected)
            if isinstance(inputs[name], np.ndarray) and array.dtype != object:
                assert array is inputs[name]  # never copied, either way


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("wrong dtype", "input 'A' has datatype FP64; expected FP32"),
        ("big-endian FP32", "input 'A' has datatype"),
        ("wrong rank", "input 'A' has shape [1, 16, 1]; expected [-1, 16]"),
        ("wrong dims", "input 'A' has shape [1, 8]; expected [-1, 16]"),
        ("wrong dim next to a wildcard", "input 'B' has shape [1, 5, 3]; expected [-1, -1, 2]"),
        ("batch sizes disagree", "has batch size 3 but other inputs have 2"),
        ("batch size 0", "has batch size 0; expected 1 to 8 (max_batch_size)"),
        ("batch size past max", "has batch size 9; expected 1 to 8 (max_batch_size)"),
        ("no batch dimension", "input 'A' has shape []; expected [-1, 16]"),
        ("missing input", "missing input 'B'"),
        ("unknown input", "has no input 'D'"),
        ("nothing", "missing input 'A'"),
        ("unbatched with a batch dimension", "has shape [1, 2, 3]; expected [2, 3]"),
        ("scalar given a vector", "has shape [1]; expected []"),
        ("BYTES objects", "input 'N' has datatype FP64; expected INT64"),
        ("BYTES given numbers", "'T' is BYTES, but got datatype FP64"),
        ("BYTES with a number inside", "'T' is BYTES, but an element is int"),
    ],
)
def test_refusals_name_what_was_wrong(case, words):
    input_check, inputs = CASES[case]
    with pytest.raises(InvalidInput) as refused:
        input_check.check(inputs)
    assert words in refused.value.message


def test_accepted_request_is_a_copy_of_the_callers_dict():
    inputs = {"A": a(), "B": b()}
    arrays, batch_size = BATCHED.check(inputs)
    assert batch_size == 1 and arrays == inputs and arrays is not inputs


def test_the_engine_answers_fast_path_requests_and_refuses_the_rest():
    with Engine.from_repository() as engine:
        x = np.arange(32, dtype=np.float32).reshape(2, 16)[:1]
        np.testing.assert_array_equal(
            engine.submit("tiny", {"INPUT0": x}).result(5)["OUTPUT0"], x + 1
        )
        strided = np.arange(32, dtype=np.float32).reshape(1, 32)[:, ::2]
        np.testing.assert_array_equal(
            engine.submit("tiny", {"INPUT0": strided}).result(5)["OUTPUT0"], strided + 1
        )
        with pytest.raises(InvalidInput, match="has datatype FP64; expected FP32"):
            engine.submit("tiny", {"INPUT0": np.zeros((1, 16))})
        with pytest.raises(InvalidInput, match=r"has shape \[1, 8\]; expected \[-1, 16\]"):
            engine.submit("tiny", {"INPUT0": np.zeros((1, 8), np.float32)})
