"""Builders for throw-away model repositories, shared by every test directory."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from conveyor.repository.config import InstanceKind

# A Python model whose latency is its input: INPUT0 (FP32 [1]) seconds of time.sleep, which
# releases the GIL. OUTPUT0 echoes the input; OUTPUT1 is [start, end] (time.monotonic).
SLEEP_MODEL = textwrap.dedent(
    """
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
)

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


INSTANCE_KINDS = tuple(kind.value for kind in InstanceKind)

# Runs a test once per instance kind: its ``repo`` then writes python models with that kind.
both_kinds = pytest.mark.parametrize("instance_kind", INSTANCE_KINDS)


# A Python model that appends each request's TAG to runs.log in its version folder before
# sleeping INPUT0 seconds: tests read the log to prove a request never ran.
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


class RepoBuilder:
    """Writes models into ``path`` in Triton's layout.

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

    def sleep_model(self, name: str = "sleep", instances: int = 1, queue: int = 64) -> Path:
        return self.python(name, SLEEP_MODEL, SLEEP_CONFIG.format(instances=instances, queue=queue))


@pytest.fixture
def instance_kind() -> str:
    """The kind of instance ``repo`` gives python models; ``@both_kinds`` overrides it."""
    return "thread"


@pytest.fixture
def repo(tmp_path: Path, instance_kind: str) -> RepoBuilder:
    return RepoBuilder(tmp_path / "models", instance_kind)
