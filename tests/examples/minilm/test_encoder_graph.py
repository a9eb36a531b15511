"""The encoder graph in-process: its interface, and onnxruntime on it against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from tokenizers import Tokenizer

from conveyor.examples.minilm.install import ENCODER_FILE
from tests.examples.minilm.reference import assert_matches, load_reference


def test_graph_declares_dynamic_int64_inputs_and_the_embedding(minilm_weights: Path) -> None:
    model = onnx.load(str(minilm_weights / ENCODER_FILE), load_external_data=False)

    def described(values: list[onnx.ValueInfoProto]) -> list[tuple[str, int, list[object]]]:
        return [
            (
                v.name,
                v.type.tensor_type.elem_type,
                [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim],
            )
            for v in values
        ]

    int64, fp32 = onnx.TensorProto.INT64, onnx.TensorProto.FLOAT
    assert described(list(model.graph.input)) == [
        ("input_ids", int64, ["batch", "sequence"]),
        ("attention_mask", int64, ["batch", "sequence"]),
    ]
    assert described(list(model.graph.output)) == [("EMBEDDING", fp32, ["batch", 384])]


def test_onnxruntime_on_the_graph_matches_the_reference(minilm_weights: Path) -> None:
    sentences, expected, _ = load_reference()
    tokenizer = Tokenizer.from_file(str(minilm_weights / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    encodings = tokenizer.encode_batch(sentences)
    session = onnxruntime.InferenceSession(
        str(minilm_weights / ENCODER_FILE), providers=["CPUExecutionProvider"]
    )
    feeds = {
        "input_ids": np.array([e.ids for e in encodings], np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], np.int64),
    }
    assert_matches(session.run(["EMBEDDING"], feeds)[0], expected)
