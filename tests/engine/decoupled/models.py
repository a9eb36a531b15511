"""Decoupled test models: native generators and a Triton response sender."""

from __future__ import annotations

from pathlib import Path

import conveyor.examples
from tests.models import RepoBuilder

# Sends IN[0] responses, each OUT = its index, DELAY_MS apart; records how far it got.
REPEAT = """
import time
import numpy as np

class Model:
    def load(self, config):
        self.progress = self.version_dir / "progress"

    def infer(self, inputs):
        count = int(inputs["COUNT"][0])
        delay = float(inputs["DELAY_MS"][0]) / 1000
        try:
            for index in range(count):
                self.progress.write_text(str(index))
                yield {"OUT": np.array([index], np.int32)}
                time.sleep(delay)
        except GeneratorExit:
            self.progress.write_text(f"closed at {index}")
            raise
"""

REPEAT_CONFIG = """
backend = "python"
decoupled = true
instances = 2

[[inputs]]
name = "COUNT"
datatype = "INT32"
shape = [1]

[[inputs]]
name = "DELAY_MS"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "OUT"
datatype = "INT32"
shape = [1]
"""

ASYNC_REPEAT = """
import asyncio
import numpy as np

class Model:
    async def infer(self, inputs):
        for index in range(int(inputs["COUNT"][0])):
            await asyncio.sleep(float(inputs["DELAY_MS"][0]) / 1000)
            yield {"OUT": np.array([index], np.int32)}
"""

# Triton's repeat example, reduced: one response per element of IN, DELAY ms apart, sent
# from a thread after execute returned, then an empty response flagged final.
TRITON_REPEAT = """
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
            sender = request.get_response_sender()
            threading.Thread(target=self.send, args=(sender, values, delay)).start()
        return None

    def send(self, sender, values, delay):
        for value, wait in zip(values, delay):
            time.sleep(int(wait) / 1000)
            out = pb_utils.Tensor("OUT", np.array([value], np.int32))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""

TRITON_REPEAT_PBTXT = """
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "DELAY" data_type: TYPE_UINT32 dims: [ -1 ] }
]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def build(root: Path) -> Path:
    """A repository with the decoupled test models: repeat, async_repeat, triton_repeat."""
    builder = RepoBuilder(root)
    builder.python("repeat", REPEAT, REPEAT_CONFIG)
    builder.python("async_repeat", ASYNC_REPEAT, REPEAT_CONFIG)
    folder = root / "triton_repeat" / "1"
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(TRITON_REPEAT)
    (root / "triton_repeat" / "config.pbtxt").write_text(TRITON_REPEAT_PBTXT)
    builder.tiny()
    return root


# The example repository's decoupled chargen model, copied into test repositories.
CHARGEN = Path(conveyor.examples.__file__).parent / "repository" / "chargen"
