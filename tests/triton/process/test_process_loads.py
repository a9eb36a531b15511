"""Triton models on process instances, in-process through the Engine: what the load and a
batch's per-request errors do when the model runs in worker processes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conveyor import Engine, ModelUnavailable
from tests.models import RepoBuilder

ODD_FAILS = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        if args["model_name"] == "broken":
            raise RuntimeError("no weights here")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if int(x.flat[0]) % 2:
                error = pb_utils.TritonError("odd", pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 10)]))
        return responses
"""

CONFIG = """
backend = "python"
instance_kind = "process"
instances = 2
max_batch_size = 8
[dynamic_batching]
max_queue_delay_us = 20000
[[inputs]]
name = "X"
datatype = "INT32"
shape = [1]
[[outputs]]
name = "Y"
datatype = "INT32"
shape = [1]
"""


def test_a_batch_on_process_instances_fails_only_its_erring_requests(tmp_path: Path):
    builder = RepoBuilder(tmp_path / "models")
    builder.python("odd_fails", ODD_FAILS, CONFIG)
    with Engine.from_repository(builder.path) as engine:
        futures = [engine.submit("odd_fails", {"X": np.array([[i]], np.int32)}) for i in range(6)]
        for i, future in enumerate(futures):
            if i % 2:
                with pytest.raises(Exception, match="odd"):
                    future.result(timeout=30)
            else:
                assert future.result(timeout=30)["Y"].tolist() == [[i * 10]]


def test_initialize_failing_in_a_worker_fails_the_load_with_its_message(tmp_path: Path):
    builder = RepoBuilder(tmp_path / "models")
    builder.python("broken", ODD_FAILS, CONFIG)
    with (
        Engine.from_repository(builder.path) as engine,
        pytest.raises(ModelUnavailable, match="no weights here"),
    ):
        engine.submit("broken", {"X": np.array([[0]], np.int32)})


def test_config_pbtxt_asks_for_process_instances_with_a_parameter(tmp_path: Path):
    from conveyor.repository.config import InstanceKind
    from conveyor.repository.pbtxt import read_pbtxt

    folder = tmp_path / "m"
    folder.mkdir()
    pbtxt = folder / "config.pbtxt"
    pbtxt.write_text(
        'backend: "python"\n'
        'input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
        'output [ { name: "Y", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
        'parameters { key: "instance_kind" value: { string_value: "process" } }\n'
        'parameters { key: "other" value: { string_value: "kept" } }\n'
    )
    config = read_pbtxt(pbtxt, "m", backend=None, no_backend=AssertionError).config
    assert config.instance_kind is InstanceKind.PROCESS
    assert dict(config.backend_options) == {"other": "kept"}
    pbtxt.write_text(pbtxt.read_text().replace('"process"', '"fork"'))
    with pytest.raises(Exception, match="instance_kind must be one of thread, process"):
        read_pbtxt(pbtxt, "m", backend=None, no_backend=AssertionError)
