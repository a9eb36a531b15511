"""Triton QA models that take no inputs and run ``unittest.main("model")`` in execute:
``import model`` gives each model its own model.py, as Triton's one-model stub does, and
sys.argv holds no server flags for unittest to read as test names."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from conveyor import Engine, ModelError
from conveyor.testing import run_server

# OUTPUT0 is what ``import model`` found: this file's WHO, and whether unittest.main ran
# this file's test case and it passed.
SOURCE = """
import unittest

import numpy as np
import triton_python_backend_utils as pb_utils

WHO = {who}


class ModelTest(unittest.TestCase):
    def test_who(self):
        import model

        self.assertEqual(model.WHO, {who})


class TritonPythonModel:
    def initialize(self, args):
        import model

        self.at_load = model.WHO

    {async_}def execute(self, requests):
        import model

        test = unittest.main("model", exit=False, argv=["model"])
        ran = test.result.testsRun == 1 and test.result.wasSuccessful()
        out = np.array([model.WHO, self.at_load, int(ran)], np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out)]) for _ in requests]
"""

CONFIG = """
backend: "python"
max_batch_size: 0
output [ { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ 3 ] } ]
"""


def test_each_model_imports_its_own_model_py_and_needs_no_inputs(tmp_path: Path):
    for who, async_ in ((1, ""), (2, "async ")):
        folder = tmp_path / f"m{who}"
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.py").write_text(SOURCE.format(who=who, async_=async_))
        (folder / "config.pbtxt").write_text(f'name: "m{who}"\n' + CONFIG)
    with Engine.from_repository(tmp_path) as engine:
        for _ in range(2):  # alternating: neither keeps the other's module
            for who in (1, 2):
                out = engine.submit(f"m{who}", {}).result(timeout=30)["OUTPUT0"]
                assert out.tolist() == [who, who, 1]
                assert out.dtype == np.int32


ARGV = """
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        if sys.argv[1:2] == ["exit"]:
            sys.exit(3)
        out = np.array([len(sys.argv)], np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out)]) for _ in requests]
"""


def test_models_of_conveyor_serve_see_no_server_flags_and_may_not_exit_it(tmp_path: Path):
    (tmp_path / "argv" / "1").mkdir(parents=True)
    (tmp_path / "argv" / "1" / "model.py").write_text(ARGV)
    (tmp_path / "argv" / "config.pbtxt").write_text(
        'backend: "python"\noutput [ { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
    )
    with run_server(tmp_path) as server:
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            # unittest.main() in a model parses sys.argv: only the program name is there.
            assert client.infer("argv", []).as_numpy("OUTPUT0").tolist() == [1]
        finally:
            client.close()
    with Engine.from_repository(tmp_path) as engine:
        saved = sys.argv[:]
        sys.argv[1:] = ["exit"]
        try:
            with pytest.raises(ModelError, match=r"SystemExit\(3\)"):
                engine.submit("argv", {}).result(timeout=10)
            sys.argv[1:] = []
            # The instance thread lived on.
            assert engine.submit("argv", {}).result(timeout=10)["OUTPUT0"].tolist() == [1]
        finally:
            sys.argv[:] = saved
