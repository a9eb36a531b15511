"""The models of the Triton-compatibility tests, written into a repository in milliseconds.

- ``scores``: Python, no batching, INPUT0 FP32 [-1] -> OUTPUT0 (a copy, labelled by
  ``labels.txt``), OUTPUT1 (a copy, no labels), OUTPUT2 (INT32): classification targets.
- ``scores_batched``: the same with max_batch_size 8 over rows of 4.
- ``words``: Python, BYTES echo: an output classification must refuse.
- ``tiny``: ONNX Add (+1), version 1 only: the version messages.
- ``broken``: its load raises: the failed-load message (loaded only when a test asks).
- ``pair``: Python, INPUT0 and INPUT1 required, OPTIONAL optional: the input-count words.
- ``sleepy``: Python, sleeps INPUT0 seconds, one instance, max_queue_size 2: the queue words.
"""

from __future__ import annotations

from pathlib import Path

from conveyor.examples import onnx_models
from tests.models import ECHO_CONFIG, ECHO_MODEL, SLEEP_CONFIG, SLEEP_MODEL, RepoBuilder

LABELS = ("cat", "dog", "bird", "fish")

SCORES_MODEL = """
import numpy as np

class Model:
    def infer(self, inputs):
        x = inputs["INPUT0"]
        return {"OUTPUT0": x.copy(), "OUTPUT1": x.copy(), "OUTPUT2": (x * 100).astype(np.int32)}
"""

SCORES_CONFIG = """
backend = "python"
instances = 1
max_batch_size = {max_batch_size}

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [{dim}]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [{dim}]
label_filename = "labels.txt"

[[outputs]]
name = "OUTPUT1"
datatype = "FP32"
shape = [{dim}]

[[outputs]]
name = "OUTPUT2"
datatype = "INT32"
shape = [{dim}]
"""

WHY = "this model never loads"
BROKEN_MODEL = f"""
class Model:
    def load(self, config):
        raise RuntimeError("{WHY}")

    def infer(self, inputs):
        return {{}}
"""

PAIR_MODEL = """
class Model:
    def infer(self, inputs):
        return {"SUM": inputs["INPUT0"] + inputs["INPUT1"]}
"""

PAIR_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [-1]

[[inputs]]
name = "INPUT1"
datatype = "FP32"
shape = [-1]

[[inputs]]
name = "OPTIONAL"
datatype = "FP32"
shape = [-1]
optional = true

[[outputs]]
name = "SUM"
datatype = "FP32"
shape = [-1]
"""

# Loaded at start; ``broken`` is in the repository but loaded only on request.
LOADED = ("scores", "scores_batched", "words", "tiny", "pair", "sleepy")


def build_repository(root: Path) -> Path:
    repo = RepoBuilder(root)
    repo.python("scores", SCORES_MODEL, SCORES_CONFIG.format(max_batch_size=0, dim=-1))
    repo.python("scores_batched", SCORES_MODEL, SCORES_CONFIG.format(max_batch_size=8, dim=4))
    for name in ("scores", "scores_batched"):
        (root / name / "labels.txt").write_text("\n".join(LABELS) + "\n")
    repo.python("words", ECHO_MODEL, ECHO_CONFIG.format(datatype="BYTES"))
    repo.python("broken", BROKEN_MODEL, ECHO_CONFIG.format(datatype="FP32"))
    onnx_models.tiny(root / "tiny" / "1" / "model.onnx")
    repo.python("pair", PAIR_MODEL, PAIR_CONFIG)
    repo.python("sleepy", SLEEP_MODEL, SLEEP_CONFIG.format(instances=1, queue=2))
    return root
