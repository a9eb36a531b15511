"""A repository of Triton-format models (config.pbtxt), written in milliseconds.

- ``onnx_pbtxt``: ONNX Add (+1) over FP32 [16], versions 1-3 of which ``latest
  { num_versions: 2 }`` serves 2 and 3; two instance groups (1 KIND_CPU + 2 KIND_MODEL);
  dynamic batching with priority levels and a queue policy; a zero_data warmup; a warned
  ``optimization`` field; onnxruntime parameters in Triton's names, and ``execute_delay_ms``
  (Triton's docs' ``simple_dyna_sequence`` carries it), which onnxruntime does not read.
- ``onnx_auto``: only platform and max_batch_size: inputs and outputs come from the file;
  ``version_policy: { all {} }`` over versions 1 and 2.
- ``py_pbtxt``: a Conveyor Python model (``class Model``) with ``backend: "python"``,
  ``specific { versions: [1, 3] }`` of 1-3, reshape on input and output, a TYPE_STRING output
  with a label file, and random_data and input_data_file warmups that it counts in
  warmup.log (so a test sees they ran before the model was ready).
- Models that must fail to load, each for one reason: ``gpu_group`` (KIND_GPU),
  ``sequence`` (iterative sequence_batching with a control input), ``both_files`` (config.toml and
  config.pbtxt), ``broken`` (a parse error on line 3), ``ensemble_model`` (platform "ensemble",
  no steps), ``bad_threads`` (a parameter onnxruntime reads, with a value it cannot take).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from conveyor.examples import onnx_models

ONNX_PBTXT = """
name: "onnx_pbtxt"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 16 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 16 ] } ]
version_policy: { latest { num_versions: 2 } }
instance_group [
  { count: 1, kind: KIND_CPU },
  { name: "extra", count: 2, kind: KIND_MODEL }
]
dynamic_batching {
  preferred_batch_size: [ 4 ]
  max_queue_delay_microseconds: 100
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy {
    max_queue_size: 16
    default_timeout_microseconds: 5000000
    allow_timeout_override: true
  }
}
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
parameters { key: "execute_delay_ms" value: { string_value: "0" } }
optimization { graph { level: 1 } }
model_warmup [
  {
    name: "zeros"
    batch_size: 2
    inputs { key: "INPUT0" value: { data_type: TYPE_FP32, dims: [ 16 ], zero_data: true } }
  }
]
"""

ONNX_AUTO = """
platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy: { all {} }
"""

PY_MODEL = """
import numpy as np

class Model:
    def infer(self, inputs):
        x = inputs["IN"]
        # reshape in config.pbtxt: requests send [B, 4], the model sees [B, 2, 2]
        assert x.shape[1:] == (2, 2), x.shape
        with open(self.version_dir / "warmup.log", "a") as log:
            log.write(f"{x.shape[0]}\\n")
        text = np.array([[b"v%d" % VERSION] for _ in range(x.shape[0])], dtype=object)
        return {"OUT": x * 2, "TEXT": text}
"""

PY_PBTXT = """
name: "py_pbtxt"
backend: "python"
max_batch_size: 4
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 4 ], reshape: { shape: [ 2, 2 ] } } ]
output [
  { name: "OUT", data_type: TYPE_INT32, dims: [ 4 ], reshape: { shape: [ 2, 2 ] } },
  { name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ], label_filename: "labels.txt" }
]
version_policy: { specific { versions: [ 1, 3 ] } }
instance_group [ { count: 1, kind: KIND_AUTO } ]
parameters { key: "greeting" value: { string_value: "hello" } }
model_warmup [
  {
    name: "random"
    batch_size: 3
    inputs { key: "IN" value: { data_type: TYPE_INT32, dims: [ 4 ], random_data: true } }
  },
  {
    name: "from_file"
    batch_size: 1
    count: 2
    inputs { key: "IN" value: { data_type: TYPE_INT32, dims: [ 4 ], input_data_file: "in.bin" } }
  }
]
"""

FAILING = {
    "gpu_group": """
platform: "onnxruntime_onnx"
instance_group [ { count: 1, kind: KIND_GPU, gpus: [ 0 ] } ]
""",
    "sequence": """
platform: "onnxruntime_onnx"
max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 1000
  iterative_sequence: true
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }
  ]
}
""",
    "both_files": """
platform: "onnxruntime_onnx"
""",
    "broken": """
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FLOAT32 } ]
""",
    "ensemble_model": """
platform: "ensemble"
""",
    "bad_threads": """
platform: "onnxruntime_onnx"
parameters { key: "intra_op_thread_count" value: { string_value: "many" } }
""",
}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def build_repository(root: Path) -> Path:
    for version in (1, 2, 3):
        onnx_models.tiny(root / "onnx_pbtxt" / str(version) / "model.onnx")
    write(root / "onnx_pbtxt" / "config.pbtxt", ONNX_PBTXT)
    for version in (1, 2):
        onnx_models.tiny(root / "onnx_auto" / str(version) / "model.onnx")
    write(root / "onnx_auto" / "config.pbtxt", ONNX_AUTO)
    for version in (1, 2, 3):
        write(root / "py_pbtxt" / str(version) / "model.py", f"VERSION = {version}\n{PY_MODEL}")
    write(root / "py_pbtxt" / "config.pbtxt", PY_PBTXT)
    write(root / "py_pbtxt" / "labels.txt", "cat\ndog\n")
    (root / "py_pbtxt" / "warmup").mkdir()
    np.arange(4, dtype=np.int32).tofile(root / "py_pbtxt" / "warmup" / "in.bin")
    for name, config in FAILING.items():
        onnx_models.tiny(root / name / "1" / "model.onnx")
        write(root / name / "config.pbtxt", config)
    write(root / "both_files" / "config.toml", 'backend = "onnxruntime"\n')
    return root
