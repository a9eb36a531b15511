"""The test models and the one repository builder every test uses.

Each model is a few lines of Python (or a tiny ONNX graph), written in milliseconds:

- ``sleep_model``: sleeps INPUT0 (FP32 [1]) seconds with the GIL released; OUTPUT0 echoes
  the input, OUTPUT1 is [start, end] (time.monotonic) so tests can see what ran when.
- ``run_logging_model``: one instance; appends each request's TAG to ``runs.log`` in its
  version folder, then sleeps INPUT0 seconds, so a test can prove which requests ran, in
  which order (``RunLog`` reads the log).
- ``echo_model``: INPUT0 [-1, -1] of one datatype -> OUTPUT0 and OUTPUT1 (both a copy).
- ``every_datatype_echo``: one optional input IN_<T> [-1, -1] per datatype T -> OUT_<T>.
- ``failing_model``: raises on every request.
- ``tiny``: ONNX Add (+1) over FP32 [-1, 16]; ``batched``: the same with max_batch_size 8,
  dynamic batching and preferred batch sizes 4 and 8.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from conveyor.examples import onnx_models
from conveyor.protocol.datatypes import DATATYPES
from conveyor.repository.config import InstanceKind
from tests.polling import wait_until

SLEEP_MODEL = """
import time
import numpy as np

class Model:
    def infer(self, inputs):
        start = time.monotonic()
        time.sleep(float(inputs["INPUT0"].ravel()[0]))
        return {
            "OUTPUT0": inputs["INPUT0"].copy(),
            "OUTPUT1": np.array([start, time.monotonic()], dtype=np.float64),
        }
"""

SLEEP_CONFIG = """
backend = "python"
instances = {instances}
max_queue_size = {queue}

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "OUTPUT1"
datatype = "FP64"
shape = [2]
"""

RUN_LOGGING_MODEL = """
import time

class Model:
    thread_safe = False

    def infer(self, inputs):
        tag = inputs["TAG"].ravel()[0]
        with open(self.version_dir / "runs.log", "ab") as log:
            log.write(tag + b"\\n")
        time.sleep(float(inputs["INPUT0"].ravel()[0]))
        return {"OUTPUT0": inputs["TAG"].copy()}
"""

RUN_LOGGING_CONFIG = """
backend = "python"
instances = 1
max_queue_size = {queue}

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [1]

[[inputs]]
name = "TAG"
datatype = "BYTES"
shape = [1]

[[outputs]]
name = "OUTPUT0"
datatype = "BYTES"
shape = [1]
"""

ECHO_MODEL = """
class Model:
    def infer(self, inputs):
        x = inputs["INPUT0"]
        return {"OUTPUT0": x, "OUTPUT1": x.copy()}
"""

ECHO_CONFIG = """
backend = "python"
instances = 1

[[inputs]]
name = "INPUT0"
datatype = "{datatype}"
shape = [-1, -1]

[[outputs]]
name = "OUTPUT0"
datatype = "{datatype}"
shape = [-1, -1]

[[outputs]]
name = "OUTPUT1"
datatype = "{datatype}"
shape = [-1, -1]
"""

EVERY_DATATYPE_ECHO_MODEL = """
class Model:
    def infer(self, inputs):
        return {"OUT_" + name[3:]: array for name, array in inputs.items()}
"""

EVERY_DATATYPE_ECHO_CONFIG = 'backend = "python"\ninstances = 1\n' + "".join(
    f'[[inputs]]\nname = "IN_{t}"\ndatatype = "{t}"\nshape = [-1, -1]\noptional = true\n'
    f'[[outputs]]\nname = "OUT_{t}"\ndatatype = "{t}"\nshape = [-1, -1]\n'
    for t in DATATYPES
)

FAILING_MODEL = """
class Model:
    def infer(self, inputs):
        raise RuntimeError("this model always fails")
"""

FAILING_CONFIG = """
backend = "python"
[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [-1]
[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [-1]
"""

BATCHED_CONFIG = """
backend = "onnxruntime"
max_batch_size = 8
[dynamic_batching]
max_queue_delay_us = 100
preferred_batch_sizes = [4, 8]
"""

INSTANCE_KINDS = tuple(kind.value for kind in InstanceKind)

# Runs a test once per instance kind: its ``repo`` then writes python models with that kind.
both_kinds = pytest.mark.parametrize("instance_kind", INSTANCE_KINDS)


class RepoBuilder:
    """Writes models into ``path`` in Triton's layout (``<name>/<version>/model.*``).

    Python models get ``instance_kind`` unless their config names one itself.
    """

    def __init__(self, path: Path, instance_kind: str = "thread") -> None:
        self.path = path
        self.instance_kind = instance_kind
        path.mkdir(parents=True, exist_ok=True)

    def onnx(
        self,
        name: str,
        build: Callable[[Path], Path],
        config: str | None = None,
        version: int = 1,
    ) -> Path:
        build(self.path / name / str(version) / "model.onnx")
        if config is not None:
            (self.path / name / "config.toml").write_text(textwrap.dedent(config))
        return self.path / name

    def python(self, name: str, source: str, config: str, version: int = 1) -> Path:
        folder = self.path / name / str(version)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.py").write_text(textwrap.dedent(source))
        config = textwrap.dedent(config)
        if self.instance_kind != "thread" and "instance_kind" not in config:
            config = f'instance_kind = "{self.instance_kind}"\n{config}'  # top-level keys first
        (self.path / name / "config.toml").write_text(config)
        return self.path / name

    def tiny(self, name: str = "tiny") -> Path:
        return self.onnx(name, onnx_models.tiny)

    def batched(self, name: str = "batched") -> Path:
        return self.onnx(name, onnx_models.tiny, BATCHED_CONFIG)

    def sleep_model(self, name: str = "sleep", instances: int = 1, queue: int = 64) -> Path:
        return self.python(name, SLEEP_MODEL, SLEEP_CONFIG.format(instances=instances, queue=queue))

    def run_logging_model(self, name: str = "runs", queue: int = 8) -> Path:
        return self.python(name, RUN_LOGGING_MODEL, RUN_LOGGING_CONFIG.format(queue=queue))

    def echo_model(self, name: str, datatype: str = "FP32") -> Path:
        return self.python(name, ECHO_MODEL, ECHO_CONFIG.format(datatype=datatype))

    def every_datatype_echo(self, name: str = "echo") -> Path:
        return self.python(name, EVERY_DATATYPE_ECHO_MODEL, EVERY_DATATYPE_ECHO_CONFIG)

    def failing_model(self, name: str = "broken") -> Path:
        return self.python(name, FAILING_MODEL, FAILING_CONFIG)


class RunLog:
    """The tags a ``run_logging_model`` ran, in order (it appends each before it sleeps)."""

    def __init__(self, repository: Path, model: str = "runs") -> None:
        self.path = repository / model / "1" / "runs.log"

    def clear(self) -> None:
        self.path.write_bytes(b"")

    def tags(self) -> list[str]:
        if not self.path.exists():
            return []
        return self.path.read_bytes().decode().split()

    def wait_for(self, tag: str, timeout: float = 10.0) -> None:
        wait_until(
            lambda: tag in self.tags(), timeout, lambda: f"{tag!r} running (ran: {self.tags()})"
        )
