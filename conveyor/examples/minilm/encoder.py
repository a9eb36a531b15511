"""all-MiniLM-L6-v2's encoder as an ONNX graph, built with ``onnx.helper`` from its safetensors.

The graph is BERT as Hugging Face's ``BertModel`` computes it (absolute position embeddings,
token-type embeddings of type 0, post-LayerNorm blocks, GELU in its erf form), followed by
what sentence-transformers adds to it for this model: mean pooling over the attention mask and
L2 normalisation. Inputs ``input_ids`` and ``attention_mask`` are INT64 [batch, sequence]
(both dimensions dynamic); the output ``EMBEDDING`` is FP32 [batch, hidden].
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conveyor.examples.onnx_models import save_checked

OPSET = 17  # LayerNormalization is a standard op from 17
_IR_VERSION = 8
# The additive bias that masks padding out of the attention softmax: exp(-10000) is 0 in FP32.
_MASKED = -10000.0


@dataclass(frozen=True)
class BertShape:
    """The few numbers of config.json the graph needs."""

    layers: int
    hidden: int
    heads: int
    layer_norm_eps: float

    @classmethod
    def from_config(cls, path: Path) -> BertShape:
        config = json.loads(path.read_text())
        if config.get("hidden_act") != "gelu":
            raise ValueError(f"{path}: hidden_act {config.get('hidden_act')!r}; expected 'gelu'")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: position_embedding_type must be 'absolute'")
        return cls(
            layers=int(config["num_hidden_layers"]),
            hidden=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            layer_norm_eps=float(config["layer_norm_eps"]),
        )


class _Graph:
    """Collects nodes and initializers; every helper returns the name of its output."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, key: str, transpose: bool = False) -> str:
        value = self.weights[key]
        # torch's Linear keeps [out, in]; MatMul wants [in, out]: transpose once, here.
        return self.const(key, np.ascontiguousarray(value.T) if transpose else value)

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, **attrs: Any) -> str:
        out = self.fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        product = self.op("MatMul", [x, self.weight(f"{prefix}.weight", transpose=True)])
        return self.op("Add", [product, self.weight(f"{prefix}.bias")])

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        scale, bias = self.weight(f"{prefix}.weight"), self.weight(f"{prefix}.bias")
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def _gelu(g: _Graph, x: str) -> str:
    """0.5 * x * (1 + erf(x / sqrt(2))): BERT's exact GELU, not the tanh approximation."""
    scaled = g.op("Mul", [x, "inv_sqrt2"])
    one_plus = g.op("Add", [g.op("Erf", [scaled]), "one"])
    return g.op("Mul", [g.op("Mul", [x, one_plus]), "half"])


def _attention(g: _Graph, x: str, mask_bias: str, prefix: str, shape: BertShape) -> str:
    head_size = shape.hidden // shape.heads
    split = g.const(f"{prefix}.split_shape", np.array([0, 0, shape.heads, head_size], np.int64))

    def heads(name: str) -> str:  # [B, S, H] -> [B, heads, S, head_size]
        projected = g.linear(x, f"{prefix}.self.{name}")
        return g.op("Transpose", [g.op("Reshape", [projected, split])], perm=[0, 2, 1, 3])

    query, key, value = heads("query"), heads("key"), heads("value")
    key_t = g.op("Transpose", [key], perm=[0, 1, 3, 2])
    scores = g.op("Mul", [g.op("MatMul", [query, key_t]), f"{prefix}.scale"])
    g.const(f"{prefix}.scale", np.array(1.0 / math.sqrt(head_size), np.float32))
    probs = g.op("Softmax", [g.op("Add", [scores, mask_bias])], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, value])], perm=[0, 2, 1, 3])
    merged = g.op("Reshape", [context, "merge_shape"])
    attended = g.linear(merged, f"{prefix}.output.dense")
    return g.layer_norm(
        g.op("Add", [attended, x]), f"{prefix}.output.LayerNorm", shape.layer_norm_eps
    )


def _layer(g: _Graph, x: str, mask_bias: str, index: int, shape: BertShape) -> str:
    prefix = f"encoder.layer.{index}"
    attended = _attention(g, x, mask_bias, f"{prefix}.attention", shape)
    inner = _gelu(g, g.linear(attended, f"{prefix}.intermediate.dense"))
    out = g.linear(inner, f"{prefix}.output.dense")
    return g.layer_norm(
        g.op("Add", [out, attended]), f"{prefix}.output.LayerNorm", shape.layer_norm_eps
    )


def build_graph(weights: dict[str, np.ndarray], shape: BertShape) -> onnx.ModelProto:
    """The encoder + mean pooling + L2 normalisation as one ONNX model."""
    g = _Graph(weights)
    g.const("one", np.array(1.0, np.float32))
    g.const("half", np.array(0.5, np.float32))
    g.const("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), np.float32))
    g.const("masked", np.array(_MASKED, np.float32))
    g.const("tiny", np.array(1e-9, np.float32))
    g.const("norm_floor", np.array(1e-12, np.float32))
    g.const("merge_shape", np.array([0, 0, shape.hidden], np.int64))
    g.const("axes_1", np.array([1], np.int64))
    g.const("axes_12", np.array([1, 2], np.int64))
    g.const("axes_last", np.array([-1], np.int64))
    g.const("zero_i", np.array(0, np.int64))
    g.const("one_i", np.array(1, np.int64))
    g.const("seq_index", np.array([1], np.int64))

    # Embeddings: word + position (0..S-1) + token type 0, then LayerNorm.
    words = g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"])
    length = g.op("Squeeze", [g.op("Gather", [g.op("Shape", ["input_ids"]), "seq_index"])])
    positions = g.op("Range", ["zero_i", length, "one_i"])
    position_rows = g.op("Gather", [g.weight("embeddings.position_embeddings.weight"), positions])
    type_zero = g.const(
        "token_type_zero", weights["embeddings.token_type_embeddings.weight"][0].copy()
    )
    summed = g.op("Add", [g.op("Add", [words, position_rows]), type_zero])
    x = g.layer_norm(summed, "embeddings.LayerNorm", shape.layer_norm_eps)

    # (1 - mask) * -10000 as [B, 1, 1, S], added to every head's scores.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    inverted = g.op("Sub", ["one", mask])
    mask_bias = g.op("Unsqueeze", [g.op("Mul", [inverted, "masked"]), "axes_12"])

    for index in range(shape.layers):
        x = _layer(g, x, mask_bias, index, shape)

    # Mean pooling over the tokens the mask keeps (sentence-transformers' Pooling).
    mask_3d = g.op("Unsqueeze", [mask, "axes_last"])
    summed_tokens = g.op("ReduceSum", [g.op("Mul", [x, mask_3d]), "axes_1"], keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [mask_3d, "axes_1"], keepdims=0), "tiny"])
    pooled = g.op("Div", [summed_tokens, counts])
    # L2 normalisation (sentence-transformers' Normalize: torch's F.normalize, eps 1e-12).
    norm = g.op("Sqrt", [g.op("ReduceSum", [g.op("Mul", [pooled, pooled]), "axes_last"])])
    g.nodes.append(
        helper.make_node("Div", [pooled, g.op("Max", [norm, "norm_floor"])], ["EMBEDDING"])
    )

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info(
                "attention_mask", TensorProto.INT64, ["batch", "sequence"]
            ),
        ],
        [helper.make_tensor_value_info("EMBEDDING", TensorProto.FLOAT, ["batch", shape.hidden])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = _IR_VERSION
    return model


def build_encoder(weights_dir: Path, path: Path) -> Path:
    """Write the encoder built from ``weights_dir`` (model.safetensors, config.json) to ``path``."""
    from safetensors.numpy import load_file

    shape = BertShape.from_config(weights_dir / "config.json")
    model = build_graph(load_file(str(weights_dir / "model.safetensors")), shape)
    return save_checked(model, path)
