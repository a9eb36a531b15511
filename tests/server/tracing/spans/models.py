"""The models the span tests trace: ``tiny`` (ONNX +1), ``batch4`` (a python model that
batches dynamically and dispatches once 4 requests are in a batch), ``repeat`` (decoupled,
COUNT responses) and ``pipeline`` (an ensemble: ``double`` then ``tiny``)."""

from __future__ import annotations

from pathlib import Path

from tests.engine.decoupled.models import REPEAT, REPEAT_CONFIG
from tests.engine.ensembles.models import ROW_CONFIG, SCALE_MODEL
from tests.models import RepoBuilder

PLUS_ONE = """
class Model:
    def infer(self, inputs):
        return {"OUTPUT0": inputs["INPUT0"] + 1}
"""

# A batch is dispatched once it holds 4 requests (the preferred size), or after 2 s.
BATCH4_CONFIG = """
backend = "python"
instances = 1
max_batch_size = 4
[dynamic_batching]
max_queue_delay_us = 2000000
preferred_batch_sizes = [4]
[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [3]
[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [3]
"""

PIPELINE = """
backend = "ensemble"

[[inputs]]
name = "RAW"
datatype = "FP32"
shape = [1, 16]

[[outputs]]
name = "RESULT"
datatype = "FP32"
shape = [1, 16]

[[steps]]
model = "double"
input_map = { INPUT0 = "RAW" }
output_map = { OUTPUT0 = "doubled" }

[[steps]]
model = "tiny"
input_map = { INPUT0 = "doubled" }
output_map = { OUTPUT0 = "RESULT" }
"""


def build(root: Path) -> Path:
    builder = RepoBuilder(root)
    builder.tiny("tiny")
    builder.python("batch4", PLUS_ONE, BATCH4_CONFIG)
    builder.python("repeat", REPEAT, REPEAT_CONFIG)
    builder.python("double", SCALE_MODEL.format(operation="* 2"), ROW_CONFIG)
    (root / "pipeline").mkdir()
    (root / "pipeline" / "config.toml").write_text(PIPELINE)
    return root
