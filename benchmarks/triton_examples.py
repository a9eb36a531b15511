"""Run Triton's own Python client examples, unchanged, against a Conveyor server.

The examples live in Triton's client repository (``src/python/examples``) and are not part
of Conveyor; point this script at a folder holding them::

    python -m benchmarks.triton_examples /path/to/client/src/python/examples

It writes the model repository the examples expect into a temporary folder (Triton's
``qa``/docs models rebuilt here: ONNX graphs made with ``onnx.helper`` and Triton-Python
``model.py`` files with ``config.pbtxt``), starts ``conveyor serve`` on free ports, runs
every example with ``-u`` pointing at that server, and prints a pass/fail table (and
writes it to ``benchmarks/results/triton_examples.json``).

Some examples need a different server: the model-control ones count the models of the
repository and load/unload them (a server in explicit mode over a repository of exactly
the size they expect), and ``memory_growth_test.py`` has Triton's default ports written in
(run only with ``--default-ports``, when 8000 and 8001 are free).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:  # run as `python -m benchmarks.x` from a checkout
    sys.path.insert(0, str(ROOT))

from benchmarks.common import last_lines, ports_free  # noqa: E402
from conveyor.testing import RunningServer, run_server  # noqa: E402

EXAMPLE_TIMEOUT_S = 120.0

# --------------------------------------------------------------------------- models


def _save_onnx(graph: onnx.GraphProto, path: Path) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())


def _add_sub_onnx(path: Path, elem: int) -> None:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 over [batch, 16]."""
    tensors = [
        helper.make_tensor_value_info(name, elem, ["batch", 16]) for name in ("INPUT0", "INPUT1")
    ]
    outputs = [
        helper.make_tensor_value_info(name, elem, ["batch", 16]) for name in ("OUTPUT0", "OUTPUT1")
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
        ],
        "add_sub",
        tensors,
        outputs,
    )
    _save_onnx(graph, path)


def _add_sub_model(root: Path, name: str, onnx_type: int, triton_type: str) -> None:
    _add_sub_onnx(root / name / "1" / "model.onnx", onnx_type)
    _write(
        root / name / "config.pbtxt",
        f"""
        name: "{name}"
        platform: "onnxruntime_onnx"
        max_batch_size: 8
        input [
          {{ name: "INPUT0", data_type: {triton_type}, dims: [ 16 ] }},
          {{ name: "INPUT1", data_type: {triton_type}, dims: [ 16 ] }}
        ]
        output [
          {{ name: "OUTPUT0", data_type: {triton_type}, dims: [ 16 ] }},
          {{ name: "OUTPUT1", data_type: {triton_type}, dims: [ 16 ] }}
        ]
        """,
    )


SIMPLE_STRING_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    # Numbers travel as strings: OUTPUT0 is their sum, OUTPUT1 their difference.
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            ints_a = np.vectorize(int)(a).astype(np.int64)
            ints_b = np.vectorize(int)(b).astype(np.int64)
            as_bytes = np.vectorize(lambda v: str(v).encode(), otypes=[object])
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("OUTPUT0", as_bytes(ints_a + ints_b)),
                        pb_utils.Tensor("OUTPUT1", as_bytes(ints_a - ints_b)),
                    ]
                )
            )
        return responses
"""

IDENTITY_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor(
                        "OUTPUT0",
                        pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy(),
                    )
                ]
            )
            for request in requests
        ]
"""

# Triton's qa "sequence" backend: OUTPUT is INPUT, plus 1 on the sequence's first request.
SEQUENCE_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUTPUT", value + start)]
                )
            )
        return responses
"""

# Triton's qa "dyna_sequence" backend: as above, and the last request of a sequence adds
# its correlation id.
DYNA_SEQUENCE_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy()
            end = pb_utils.get_input_tensor_by_name(request, "END").as_numpy()
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy()
            out = value + start + end * corrid.astype(np.int32)
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", out)])
            )
        return responses
"""

# The string-id variant accumulates per sequence; the last request adds the id (a number
# sent as a string).
STRING_DYNA_SEQUENCE_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            value = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().ravel()[0])
            start = pb_utils.get_input_tensor_by_name(request, "START").as_numpy().ravel()[0]
            end = pb_utils.get_input_tensor_by_name(request, "END").as_numpy().ravel()[0]
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().ravel()[0]
            key = corrid.decode() if isinstance(corrid, bytes) else str(corrid)
            total = value if start else self.sums.get(key, 0) + value
            self.sums[key] = total
            out = total + (int(key) if end else 0)
            if end:
                del self.sums[key]
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUTPUT", np.array([[out]], np.int32))]
                )
            )
        return responses
"""

# Triton's "repeat" backend: one response per element of IN, DELAY[i] ms apart, then the
# final flag.
REPEAT_PY = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            sender = request.get_response_sender()
            for index, (value, delay) in enumerate(zip(values, delays)):
                time.sleep(float(delay) / 1000.0)
                sender.send(
                    pb_utils.InferenceResponse(
                        output_tensors=[
                            pb_utils.Tensor("OUT", np.array([value], np.int32)),
                            pb_utils.Tensor("IDX", np.array([index], np.uint32)),
                        ]
                    )
                )
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

# Decodes an encoded image (any format PIL reads) into the classifier's FP32 HWC input.
PREPROCESS_PY = """
import io
import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            encoded = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            images = []
            for item in encoded.reshape(encoded.shape[0], -1)[:, 0]:
                image = Image.open(io.BytesIO(bytes(item))).convert("RGB").resize((299, 299))
                images.append(np.asarray(image, np.float32) / 127.5 - 1.0)
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUTPUT", np.stack(images))]
                )
            )
        return responses
"""


def _python_model(root: Path, name: str, source: str, config: str) -> None:
    _write(root / name / "1" / "model.py", source)
    _write(root / name / "config.pbtxt", f'name: "{name}"\nbackend: "python"\n' + config)


def _sequence_config(corrid_type: str | None) -> str:
    controls = [
        ("START", "CONTROL_SEQUENCE_START", "int32_false_true: [ 0, 1 ]"),
        ("END", "CONTROL_SEQUENCE_END", "int32_false_true: [ 0, 1 ]"),
        ("READY", "CONTROL_SEQUENCE_READY", "int32_false_true: [ 0, 1 ]"),
    ]
    if corrid_type is not None:
        controls.append(("CORRID", "CONTROL_SEQUENCE_CORRID", f"data_type: {corrid_type}"))
    control_text = ",\n".join(
        f'    {{ name: "{n}", control [ {{ kind: {k}, {v} }} ] }}' for n, k, v in controls
    )
    return (
        "max_batch_size: 8\n"
        "sequence_batching {\n  max_sequence_idle_microseconds: 5000000\n"
        f"  control_input [\n{control_text}\n  ]\n}}\n"
        'input [ { name: "INPUT", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
        'output [ { name: "OUTPUT", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
    )


def _classifier_onnx(path: Path, shape: Sequence[int], classes: int, channel_axis: int) -> None:
    """A stand-in classifier with the real model's tensor names and shapes: the mean of
    each colour channel times a fixed random matrix (no trained weights; the examples
    only check the protocol, not which class wins)."""
    batched = shape[0] == -1
    spatial = [a for a in range(int(batched), len(shape)) if a != channel_axis]
    weights = np.random.default_rng(0).standard_normal((3, classes)).astype(np.float32)
    in_dims: list[int | str] = ["batch" if d == -1 else d for d in shape]
    if batched:
        nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=spatial, keepdims=0)]
        out_dims: list[int | str] = ["batch", classes]
        nodes.append(helper.make_node("MatMul", ["m", "w"], ["y"]))
        inits = [numpy_helper.from_array(weights, "w")]
    else:
        nodes = [
            helper.make_node("ReduceMean", ["x"], ["m"], axes=spatial, keepdims=0),
            helper.make_node("Unsqueeze", ["m", "zero"], ["m1"]),
            helper.make_node("MatMul", ["m1", "w"], ["m2"]),
            helper.make_node("Reshape", ["m2", "shape"], ["y"]),
        ]
        out_dims = [1, classes, 1, 1]
        inits = [
            numpy_helper.from_array(weights, "w"),
            numpy_helper.from_array(np.array([0], np.int64), "zero"),
            numpy_helper.from_array(np.array([1, classes, 1, 1], np.int64), "shape"),
        ]
    graph = helper.make_graph(
        nodes,
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)],
        initializer=inits,
    )
    _save_onnx(graph, path)


def _rename_io(path: Path, input_name: str, output_name: str) -> None:
    model = onnx.load(str(path))
    renames = {"x": input_name, "y": output_name}
    for node in model.graph.node:
        node.input[:] = [renames.get(n, n) for n in node.input]
        node.output[:] = [renames.get(n, n) for n in node.output]
    for value in [*model.graph.input, *model.graph.output]:
        value.name = renames.get(value.name, value.name)
    onnx.save(model, str(path))


def _labels(path: Path, count: int) -> None:
    path.write_text("".join(f"CLASS_{i}\n" for i in range(count)))


def build_repository(root: Path) -> None:
    """Every model the examples name, under ``root``."""
    _add_sub_model(root, "simple", TensorProto.INT32, "TYPE_INT32")
    _add_sub_model(root, "simple_int8", TensorProto.INT8, "TYPE_INT8")
    two_strings = """
        max_batch_size: 8
        input [
          { name: "INPUT0", data_type: TYPE_STRING, dims: [ 16 ] },
          { name: "INPUT1", data_type: TYPE_STRING, dims: [ 16 ] }
        ]
        output [
          { name: "OUTPUT0", data_type: TYPE_STRING, dims: [ 16 ] },
          { name: "OUTPUT1", data_type: TYPE_STRING, dims: [ 16 ] }
        ]
        """
    _python_model(root, "simple_string", SIMPLE_STRING_PY, textwrap.dedent(two_strings))
    identity = """
        max_batch_size: 8
        input [ { name: "INPUT0", data_type: TYPE_STRING, dims: [ -1 ] } ]
        output [ { name: "OUTPUT0", data_type: TYPE_STRING, dims: [ -1 ] } ]
        """
    _python_model(root, "simple_identity", IDENTITY_PY, textwrap.dedent(identity))
    int_identity = identity.replace("TYPE_STRING", "TYPE_INT32")
    _python_model(root, "custom_identity_int32", IDENTITY_PY, textwrap.dedent(int_identity))
    _python_model(root, "simple_sequence", SEQUENCE_PY, _sequence_config(None))
    _python_model(root, "simple_dyna_sequence", DYNA_SEQUENCE_PY, _sequence_config("TYPE_UINT64"))
    _python_model(
        root,
        "simple_string_dyna_sequence",
        STRING_DYNA_SEQUENCE_PY,
        _sequence_config("TYPE_STRING"),
    )
    repeat = """
        max_batch_size: 0
        model_transaction_policy { decoupled: true }
        input [
          { name: "IN", data_type: TYPE_INT32, dims: [ -1 ] },
          { name: "DELAY", data_type: TYPE_UINT32, dims: [ -1 ] },
          { name: "WAIT", data_type: TYPE_UINT32, dims: [ 1 ] }
        ]
        output [
          { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] },
          { name: "IDX", data_type: TYPE_UINT32, dims: [ 1 ] }
        ]
        """
    _python_model(root, "repeat_int32", REPEAT_PY, textwrap.dedent(repeat))

    # densenet_onnx as in Triton's docs repository (fetched there from a model hub):
    # data_0 FP32 [3, 224, 224] NCHW -> fc6_1 [1000] (the model gives [1, 1000, 1, 1]).
    densenet = root / "densenet_onnx"
    _classifier_onnx(densenet / "1" / "model.onnx", [3, 224, 224], 1000, channel_axis=0)
    _rename_io(densenet / "1" / "model.onnx", "data_0", "fc6_1")
    _labels(densenet / "densenet_labels.txt", 1000)
    _write(
        densenet / "config.pbtxt",
        """
        name: "densenet_onnx"
        platform: "onnxruntime_onnx"
        max_batch_size: 0
        input [ { name: "data_0", data_type: TYPE_FP32, format: FORMAT_NCHW,
                  dims: [ 3, 224, 224 ] } ]
        output [ { name: "fc6_1", data_type: TYPE_FP32, dims: [ 1000 ],
                   reshape { shape: [ 1, 1000, 1, 1 ] },
                   label_filename: "densenet_labels.txt" } ]
        """,
    )

    # preprocess_inception_ensemble: encoded image -> preprocess (Python) -> classifier. Its
    # output has no label file: classification answers carry inception_onnx's labels.
    inception = root / "inception_onnx"
    _classifier_onnx(inception / "1" / "model.onnx", [-1, 299, 299, 3], 1001, channel_axis=3)
    _rename_io(inception / "1" / "model.onnx", "input", "InceptionV3/Predictions/Softmax")
    _labels(inception / "inception_labels.txt", 1001)
    _write(
        inception / "config.pbtxt",
        """
        name: "inception_onnx"
        platform: "onnxruntime_onnx"
        max_batch_size: 8
        input [ { name: "input", data_type: TYPE_FP32, format: FORMAT_NHWC,
                  dims: [ 299, 299, 3 ] } ]
        output [ { name: "InceptionV3/Predictions/Softmax", data_type: TYPE_FP32,
                   dims: [ 1001 ], label_filename: "inception_labels.txt" } ]
        """,
    )
    preprocess = """
        max_batch_size: 8
        input [ { name: "INPUT", data_type: TYPE_STRING, dims: [ 1 ] } ]
        output [ { name: "OUTPUT", data_type: TYPE_FP32, dims: [ 299, 299, 3 ] } ]
        """
    _python_model(root, "preprocess_inception", PREPROCESS_PY, textwrap.dedent(preprocess))
    ensemble = root / "preprocess_inception_ensemble"
    (ensemble / "1").mkdir(parents=True, exist_ok=True)
    _write(
        ensemble / "config.pbtxt",
        """
        name: "preprocess_inception_ensemble"
        platform: "ensemble"
        max_batch_size: 8
        input [ { name: "INPUT", data_type: TYPE_STRING, dims: [ 1 ] } ]
        output [ { name: "OUTPUT", data_type: TYPE_FP32, dims: [ 1001 ] } ]
        ensemble_scheduling {
          step [
            {
              model_name: "preprocess_inception"
              model_version: -1
              input_map { key: "INPUT", value: "INPUT" }
              output_map { key: "OUTPUT", value: "preprocessed_image" }
            },
            {
              model_name: "inception_onnx"
              model_version: -1
              input_map { key: "input", value: "preprocessed_image" }
              output_map { key: "InceptionV3/Predictions/Softmax", value: "OUTPUT" }
            }
          ]
        }
        """,
    )


def build_model_control_repository(root: Path, size: int) -> None:
    """``simple`` and ``size - 1`` other models: the model-control examples check the count."""
    _add_sub_model(root, "simple", TensorProto.INT32, "TYPE_INT32")
    identity = textwrap.dedent(
        """
        max_batch_size: 8
        input [ { name: "INPUT0", data_type: TYPE_INT32, dims: [ -1 ] } ]
        output [ { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ -1 ] } ]
        """
    )
    for index in range(size - 1):
        _python_model(root, f"identity_{index}", IDENTITY_PY, identity)


def write_image(path: Path) -> None:
    from PIL import Image

    pixels = np.random.default_rng(0).integers(0, 255, (240, 320, 3), np.uint8)
    Image.fromarray(pixels).save(path)


# --------------------------------------------------------------------------- examples


@dataclasses.dataclass(frozen=True)
class Example:
    file: str
    args: tuple[str, ...] = ()  # after -u; {image} is the test image
    protocol: str = "grpc"  # which port -u names
    server: str = "main"  # main | control7 | control8 | default_ports
    known: str = ""  # why it cannot pass (a feature Conveyor lacks, or the client's own)


CUDA = (
    "CUDA shared memory: the example needs a GPU and the cuda-python package; Conveyor "
    "runs on the CPU and offers system shared memory only"
)
SERVER_NAME = (
    "checks that the server metadata's name is 'triton'; Conveyor names itself 'conveyor' "
    "(every other check of the example passes)"
)
OVERLONG_NAME_STATUS = (
    "expects INTERNAL for a file name longer than 255 bytes in a load request, where the "
    "example's own comment says INVALID_ARGUMENT is the right code; Conveyor answers "
    "INVALID_ARGUMENT with the message the example checks (every other check passes)"
)
ATTRDICT = (
    "client side: the example's HTTP path imports the attrdict package, which does not "
    "import on Python 3.10 or later (the same example over gRPC passes)"
)
DENSENET = ("-m", "densenet_onnx", "-c", "3", "-s", "INCEPTION")

EXAMPLES = [
    Example("ensemble_image_client.py", ("{image}",), "http"),
    Example("grpc_client.py"),
    Example("grpc_explicit_byte_content_client.py"),
    Example("grpc_explicit_int8_content_client.py"),
    Example("grpc_explicit_int_content_client.py"),
    Example("grpc_image_client.py", (*DENSENET, "{image}")),
    Example("image_client.py", (*DENSENET, "{image}"), "http", known=ATTRDICT),
    Example("memory_growth_test.py", ("-r", "10"), "none", "default_ports"),
    Example("reuse_infer_objects_client.py", (), "http"),
    Example("simple_grpc_aio_infer_client.py"),
    Example("simple_grpc_aio_sequence_stream_infer_client.py"),
    Example("simple_grpc_async_infer_client.py"),
    Example("simple_grpc_cudashm_client.py", known=CUDA),
    Example("simple_grpc_custom_args_client.py"),
    Example("simple_grpc_custom_repeat.py"),
    Example("simple_grpc_health_metadata.py", known=SERVER_NAME),
    Example("simple_grpc_infer_client.py"),
    Example("simple_grpc_keepalive_client.py"),
    Example("simple_grpc_model_control.py", server="control8", known=OVERLONG_NAME_STATUS),
    Example("simple_grpc_sequence_stream_infer_client.py"),
    Example("simple_grpc_sequence_sync_infer_client.py"),
    Example("simple_grpc_shm_client.py"),
    Example("simple_grpc_shm_string_client.py"),
    Example("simple_grpc_string_infer_client.py"),
    Example("simple_http_aio_infer_client.py", (), "http"),
    Example("simple_http_async_infer_client.py", (), "http"),
    Example("simple_http_cudashm_client.py", (), "http", known=CUDA),
    Example("simple_http_health_metadata.py", (), "http", known=SERVER_NAME),
    Example("simple_http_infer_client.py", (), "http"),
    Example("simple_http_model_control.py", (), "http", "control7"),
    Example("simple_http_sequence_sync_infer_client.py", (), "http"),
    Example("simple_http_shm_client.py", (), "http"),
    Example("simple_http_shm_string_client.py", (), "http"),
    Example("simple_http_string_infer_client.py", (), "http"),
]

# Extra runs of the same files with other options the examples offer.
VARIANTS = [
    Example("image_client.py", (*DENSENET, "-i", "grpc", "{image}"), "grpc"),
    Example("image_client.py", (*DENSENET, "-i", "grpc", "--streaming", "{image}"), "grpc"),
    Example("image_client.py", (*DENSENET, "-i", "grpc", "-a", "{image}"), "grpc"),
    Example("image_client.py", (*DENSENET, "-a", "{image}"), "http", known=ATTRDICT),
    Example("ensemble_image_client.py", ("-i", "grpc", "{image}"), "grpc"),
    Example("memory_growth_test.py", ("-i", "grpc", "-r", "10"), "none", "default_ports"),
    Example("simple_grpc_sequence_sync_infer_client.py", ("-d",)),
    Example("simple_grpc_sequence_stream_infer_client.py", ("-d",)),
    Example("simple_grpc_aio_sequence_stream_infer_client.py", ("-d",)),
    Example("simple_http_sequence_sync_infer_client.py", ("-d",), "http"),
]


@dataclasses.dataclass
class Outcome:
    example: str
    args: str
    passed: bool
    seconds: float
    reason: str  # why it failed: the known missing feature, else the example's last lines
    output: str = ""  # the example's last lines when it failed, to check the reason against


def run_example(
    folder: Path, example: Example, server: RunningServer | None, image: Path
) -> Outcome:
    shown = " ".join(a.replace("{image}", "IMAGE") for a in example.args)
    args = [a.replace("{image}", str(image)) for a in example.args]
    if server is not None and example.protocol != "none":
        port = server.http_port if example.protocol == "http" else server.grpc_port
        args = ["-u", f"127.0.0.1:{port}", *args]
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, str(folder / example.file), *args],
            capture_output=True,
            text=True,
            timeout=EXAMPLE_TIMEOUT_S,
            cwd=folder,
        )
    except subprocess.TimeoutExpired:
        return Outcome(example.file, shown, False, EXAMPLE_TIMEOUT_S, "timed out")
    seconds = time.monotonic() - start
    # Several examples print an error and exit 0; a failure is a non-zero exit, a
    # traceback, or an error line.
    text = done.stdout + done.stderr
    failed = done.returncode != 0 or "Traceback" in text or "error" in done.stdout.lower()
    output = last_lines(text) if failed else ""
    reason = (example.known or output) if failed else ""
    return Outcome(example.file, shown, not failed, seconds, reason, output)


@contextlib.contextmanager
def _server(repository: Path, extra: Sequence[str] = (), **ports: int) -> Iterator[RunningServer]:
    with run_server(repository, extra_args=list(extra), ready_timeout=120.0, **ports) as server:
        yield server


def run_all(
    folder: Path, names: Sequence[str] | None, variants: bool, default_ports: bool
) -> list[Outcome]:
    """Every chosen example, in the order of EXAMPLES then VARIANTS."""
    chosen = [*EXAMPLES, *(VARIANTS if variants else [])]
    if names:
        chosen = [e for e in chosen if e.file in names or e.file.removesuffix(".py") in names]
    done: dict[int, Outcome] = {}

    def record(index: int, outcome: Outcome) -> None:
        done[index] = outcome
        print(_row(outcome), flush=True)

    with tempfile.TemporaryDirectory(prefix="triton-examples-") as scratch:
        work = Path(scratch)
        image = work / "image.png"
        write_image(image)
        repository = work / "models"
        build_repository(repository)
        todo = list(enumerate(chosen))
        for index, example in todo:
            if not (folder / example.file).is_file():
                record(index, Outcome(example.file, "", False, 0.0, "not in the examples folder"))
        todo = [(i, e) for i, e in todo if i not in done]
        main = [(i, e) for i, e in todo if e.server == "main"]
        if main:
            with _server(repository) as server:
                for index, example in main:
                    record(index, run_example(folder, example, server, image))
                # An example can pass while the server logged a failure it should not have.
                logged = [
                    line
                    for line in server.output().splitlines()
                    if "ERROR" in line or "Traceback" in line
                ]
                if logged:
                    print("server logged errors:\n  " + "\n  ".join(logged[:20]), flush=True)
        for index, example in todo:
            if example.server.startswith("control"):
                # A fresh server per run: the example loads and unloads models.
                control = work / example.server
                if not control.exists():
                    build_model_control_repository(control, int(example.server[-1]))
                with _server(control, ["--model-control", "explicit"]) as server:
                    record(index, run_example(folder, example, server, image))
            elif example.server == "default_ports":
                if default_ports and ports_free(8000, 8001, 8002):
                    ports = {"http_port": 8000, "grpc_port": 8001, "metrics_port": 8002}
                    with _server(repository, **ports):
                        record(index, run_example(folder, example, None, image))
                else:
                    why = "skipped: needs Triton's ports 8000/8001 (written into the example); "
                    why += "they are busy" if default_ports else "run with --default-ports"
                    shown = " ".join(example.args)
                    record(index, Outcome(example.file, shown, False, 0.0, why))
    return [done[i] for i in sorted(done)]


def _row(outcome: Outcome) -> str:
    status = "pass" if outcome.passed else "FAIL"
    name = f"{outcome.example} {outcome.args}".strip()
    return f"{status:4}  {outcome.seconds:5.1f}s  {name:55}  {outcome.reason}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path, help="Triton client's src/python/examples")
    parser.add_argument("--only", nargs="*", help="run only these example files")
    parser.add_argument(
        "--variants", action="store_true", help="also run the examples' other options"
    )
    parser.add_argument(
        "--default-ports",
        action="store_true",
        help="run memory_growth_test.py on ports 8000/8001 (if free)",
    )
    options = parser.parse_args(argv)
    outcomes = run_all(options.examples, options.only, options.variants, options.default_ports)
    print("\n| example | result | why it fails |\n|---|---|---|")
    for outcome in outcomes:
        name = f"`{outcome.example}` {outcome.args}".strip()
        print(f"| {name} | {'pass' if outcome.passed else 'fail'} | {outcome.reason} |")
    passed = sum(o.passed for o in outcomes)
    print(f"\n{passed} of {len(outcomes)} passed")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "triton_examples.json").write_text(
        json.dumps([dataclasses.asdict(o) for o in outcomes], indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
