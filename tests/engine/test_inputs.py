"""Every bad request is refused on the caller's thread with a message naming what was wrong."""

from __future__ import annotations

import numpy as np
import pytest

import conveyor
from conveyor import Engine
from tests.models import both_kinds


@pytest.fixture(scope="module")
def examples():
    with Engine.from_repository() as engine:
        yield engine


def tiny_input(rows: int = 1) -> dict[str, np.ndarray]:
    return {"INPUT0": np.zeros((rows, 16), np.float32)}


def test_example_models_answer(examples):
    assert examples.submit("tiny", tiny_input()).result(5)["OUTPUT0"].tolist() == [[1.0] * 16]
    out = examples.submit("mlp", {"INPUT0": np.ones((3, 256), np.float32)}).result(5)
    assert out["OUTPUT0"].shape == (3, 16)
    text = np.array([b"abc", b"", "d\u00e9".encode()], dtype=object)
    out = examples.submit("upper", {"INPUT0": text}).result(5)["OUTPUT0"]
    assert out.tolist() == [b"ABC", b"", "D\u00e9".encode()]  # ASCII only: bytes.upper()
    big = np.arange(1 << 20, dtype=np.float32)
    np.testing.assert_array_equal(
        examples.submit("identity", {"INPUT0": big}).result(5)["OUTPUT0"], big
    )


@pytest.mark.parametrize(
    ("model", "inputs", "error", "message"),
    [
        ("nope", tiny_input(), conveyor.ModelNotFound, "'nope' is not in the repository"),
        (
            "tiny",
            {"INPUT9": np.zeros((1, 16), np.float32)},
            conveyor.InvalidInput,
            "missing input 'INPUT0'",
        ),
        (
            "tiny",
            {**tiny_input(), "EXTRA": np.zeros(1)},
            conveyor.InvalidInput,
            "has no input 'EXTRA'; its inputs are INPUT0",
        ),
        (
            "tiny",
            {"INPUT0": np.zeros((1, 16), np.float64)},
            conveyor.InvalidInput,
            r"datatype FP64; expected FP32",
        ),
        (
            "tiny",
            {"INPUT0": np.zeros((1, 15), np.float32)},
            conveyor.InvalidInput,
            r"shape \[1, 15\]; expected \[-1, 16\]",
        ),
        (
            "tiny",
            {"INPUT0": np.zeros(16, np.float32)},
            conveyor.InvalidInput,
            r"shape \[16\]; expected \[-1, 16\]",
        ),
        (
            "mlp",
            {"INPUT0": np.zeros((65, 256), np.float32)},
            conveyor.InvalidInput,
            r"batch size 65; expected 1 to 64",
        ),
        (
            "upper",
            {"INPUT0": np.zeros(2, np.int32)},
            conveyor.InvalidInput,
            "is BYTES, but got datatype INT32",
        ),
    ],
)
def test_bad_inputs_are_refused_with_a_clear_message(examples, model, inputs, error, message):
    with pytest.raises(error, match=message):
        examples.submit(model, inputs)


def test_unknown_output_and_version(examples):
    with pytest.raises(
        conveyor.InvalidInput, match="has no output 'NOPE'; its outputs are OUTPUT0"
    ):
        examples.submit("tiny", tiny_input(), outputs=["NOPE"])
    with pytest.raises(conveyor.ModelNotFound, match="has no version 7; loaded versions are 1"):
        examples.submit("tiny", tiny_input(), version=7)
    with pytest.raises(conveyor.InvalidInput, match="version must be an integer"):
        examples.submit("tiny", tiny_input(), version="latest")


def test_lists_are_converted_to_the_declared_dtype(examples):
    out = examples.submit("tiny", {"INPUT0": [[0] * 16]}, version="1").result(5)
    assert out["OUTPUT0"].dtype == np.float32


@both_kinds
def test_requested_outputs_subset(repo):
    from tests.models import SLEEP_CONFIG, SLEEP_MODEL

    repo.python("sleep", SLEEP_MODEL, SLEEP_CONFIG.format(instances=1, queue=8))
    with Engine.from_repository(repo.path) as engine:
        out = engine.submit("sleep", {"INPUT0": np.zeros(1, np.float32)}, outputs=["OUTPUT1"])
        assert list(out.result(5)) == ["OUTPUT1"]
