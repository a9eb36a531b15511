"""A model.py imports the modules beside it, and two models' same-named helpers never mix."""

from __future__ import annotations

import sys

import numpy as np

from conveyor import Engine
from tests.models import both_kinds

MODEL = """
from helpers import VALUE
from helpers_pkg.inner import scale
from . import helpers as relative

import numpy as np

class Model:
    def infer(self, inputs):
        assert relative.VALUE == VALUE
        return {"Y": (inputs["X"] + VALUE) * scale()}
"""

CONFIG = """
instances = 2
[[inputs]]
name = "X"
datatype = "FP32"
shape = [1]
[[outputs]]
name = "Y"
datatype = "FP32"
shape = [1]
"""


def write_model(repo, name: str, value: float, factor: float) -> None:  # type: ignore[no-untyped-def]
    folder = repo.python(name, MODEL, CONFIG) / "1"
    (folder / "helpers.py").write_text(f"VALUE = {value}\n")
    (folder / "helpers_pkg").mkdir()
    (folder / "helpers_pkg" / "__init__.py").write_text("")
    (folder / "helpers_pkg" / "inner.py").write_text(f"def scale():\n    return {factor}\n")


@both_kinds
def test_each_model_imports_its_own_helpers(repo):
    write_model(repo, "first", 1.0, 10.0)
    write_model(repo, "second", 2.0, 100.0)
    x = {"X": np.zeros(1, np.float32)}
    with Engine.from_repository(repo.path) as engine:
        assert engine.model_names() == ["first", "second"]
        futures = [engine.submit(name, x) for name in ("first", "second") for _ in range(4)]
        results = [float(f.result(30)["Y"][0]) for f in futures]
    assert results == [10.0] * 4 + [200.0] * 4
    # The bare names are not left behind for an unrelated ``import helpers`` to pick up.
    assert "helpers" not in sys.modules
    assert "helpers_pkg" not in sys.modules


def test_a_same_named_module_already_imported_is_hidden_while_loading_and_restored(repo):
    write_model(repo, "first", 3.0, 1.0)
    stand_in = type(sys)("helpers")
    sys.modules["helpers"] = stand_in
    try:
        with Engine.from_repository(repo.path) as engine:
            y = engine.submit("first", {"X": np.zeros(1, np.float32)}).result(30)["Y"]
        assert float(y[0]) == 3.0
        assert sys.modules["helpers"] is stand_in
    finally:
        del sys.modules["helpers"]
