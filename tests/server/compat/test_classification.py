"""Triton's classification extension over HTTP and gRPC, with tritonclient's own
``InferRequestedOutput(class_count=k)``: the top-k as BYTES ``score:index[:label]``, labels
from the output's ``label_filename``, rows per batch item when the model batches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tests.server.compat.models import LABELS
from tests.server.compat.triton_util import bad_request_status, client_module

SCORES = np.array([0.1, 0.7, 0.2, 0.05], np.float32)


def classify(
    client: Any, protocol: str, model: str, x: np.ndarray, output: str, k: int, **kw: Any
) -> np.ndarray:
    module = client_module(protocol)
    tensor = module.InferInput("INPUT0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    requested = module.InferRequestedOutput(output, class_count=k, **kw)
    result = client.infer(model, [tensor], outputs=[requested])
    classes = result.as_numpy(output)
    answered = result.get_output(output)
    assert (answered["datatype"] if protocol == "http" else answered.datatype) == "BYTES"
    # JSON BYTES come back as str, binary ones as bytes: compare as text.
    return np.vectorize(lambda v: v.decode() if isinstance(v, bytes) else v, otypes=[object])(
        classes
    )


def test_top_k_with_labels(client: Any, protocol: str) -> None:
    classes = classify(client, protocol, "scores", SCORES, "OUTPUT0", 2)
    assert classes.tolist() == ["0.700000:1:dog", "0.200000:2:bird"]


def test_top_k_without_labels_and_integer_scores(client: Any, protocol: str) -> None:
    assert classify(client, protocol, "scores", SCORES, "OUTPUT1", 3).tolist() == [
        "0.700000:1",
        "0.200000:2",
        "0.100000:0",
    ]
    # Integers are written as integers (Triton's std::to_string).
    assert classify(client, protocol, "scores", SCORES, "OUTPUT2", 1).tolist() == ["70:1"]


def test_json_output_classes_over_http(client: Any, protocol: str) -> None:
    if protocol != "http":
        pytest.skip("binary_data is an HTTP choice")
    classes = classify(client, protocol, "scores", SCORES, "OUTPUT0", 1, binary_data=False)
    assert classes.tolist() == ["0.700000:1:dog"]


def test_batched_rows_are_ranked_one_by_one(client: Any, protocol: str) -> None:
    x = np.stack([SCORES, SCORES[::-1].copy()])
    classes = classify(client, protocol, "scores_batched", x, "OUTPUT0", 2)
    assert classes.shape == (2, 2)
    assert classes.tolist() == [
        ["0.700000:1:dog", "0.200000:2:bird"],
        ["0.700000:2:bird", "0.200000:1:dog"],
    ]


def test_k_past_the_class_count_is_clamped_as_triton_does(client: Any, protocol: str) -> None:
    classes = classify(client, protocol, "scores", SCORES, "OUTPUT0", 10)
    assert [c.split(":")[2] for c in classes] == ["dog", "bird", "cat", "fish"]
    assert sorted(c.split(":")[2] for c in classes) == sorted(LABELS)


def test_other_outputs_are_untouched(client: Any, protocol: str) -> None:
    module = client_module(protocol)
    tensor = module.InferInput("INPUT0", [4], "FP32")
    tensor.set_data_from_numpy(SCORES)
    result = client.infer(
        "scores",
        [tensor],
        outputs=[module.InferRequestedOutput("OUTPUT0", class_count=1),
                 module.InferRequestedOutput("OUTPUT1")],
    )  # fmt: skip
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), SCORES)


@pytest.mark.parametrize(
    ("model", "output", "k", "expected"),
    [
        ("scores", "OUTPUT0", -1, "'classification' must be an integer >= 1"),
        ("words", "OUTPUT0", 1, "classification needs a numeric output"),
    ],
)
def test_bad_classification_requests_are_400(
    client: Any, protocol: str, model: str, output: str, k: int, expected: str
) -> None:
    module = client_module(protocol)
    datatype = "BYTES" if model == "words" else "FP32"
    tensor = module.InferInput("INPUT0", [1, 1] if model == "words" else [4], datatype)
    data = np.array([[b"x"]], object) if model == "words" else SCORES
    tensor.set_data_from_numpy(data)
    requested = module.InferRequestedOutput(output, class_count=k)
    with pytest.raises(InferenceServerException) as caught:
        client.infer(model, [tensor], outputs=[requested])
    assert expected in caught.value.message()
    assert caught.value.status() == bad_request_status(protocol)
