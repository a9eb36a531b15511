"""A model's failures reach the server log with file and line, at a bounded rate."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest

import conveyor
from conveyor import Engine
from conveyor.engine.failures import FailureLog
from conveyor.engine.processes.messages import flatten_error
from tests.models import both_kinds

RAISING_MODEL = """
def explode(x):
    raise ValueError(f"cannot take {x.size} values")

class Model:
    def infer(self, inputs):
        return explode(inputs["X"])
"""

CONFIG = """
instances = 1
[[inputs]]
name = "X"
datatype = "FP32"
shape = [1]
[[outputs]]
name = "Y"
datatype = "FP32"
shape = [1]
"""

X = {"X": np.zeros(1, np.float32)}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failures_are_logged_at_most_once_per_interval_with_a_count(caplog):
    clock = FakeClock()
    failures = FailureLog(logging.getLogger("conveyor.test"), "m", interval_s=10, clock=clock)
    with caplog.at_level(logging.ERROR, "conveyor.test"):
        assert failures.failed("first", "Traceback: line 1")
        assert not failures.failed("second", "Traceback: line 2")
        clock.now += 9.9
        assert not failures.failed("third", "Traceback: line 3")
        clock.now += 0.1
        assert failures.failed("fourth", "Traceback: line 4")
        clock.now += 10
        assert failures.failed("fifth")
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "first\nTraceback: line 1",
        "fourth (2 more failures of model 'm' in the last 10 s were not logged)\nTraceback: line 4",
        "fifth",
    ]


def test_a_flattened_worker_error_carries_the_traceback_text():
    try:
        raise KeyError("boom")
    except KeyError as exc:
        flat = flatten_error(exc, "m")
    copy = pickle.loads(pickle.dumps(flat))
    assert isinstance(copy, conveyor.ModelError)
    assert "KeyError: 'boom'" in copy.message
    assert copy.model_traceback is not None
    assert "test_model_failures_logged.py" in copy.model_traceback
    assert 'raise KeyError("boom")' in copy.model_traceback


@both_kinds
def test_a_model_that_raises_logs_its_traceback_once(repo, caplog):
    repo.python("bad", RAISING_MODEL, CONFIG)
    with caplog.at_level(logging.ERROR, "conveyor"), Engine.from_repository(repo.path) as engine:
        for _ in range(3):
            with pytest.raises(conveyor.ModelError, match="ValueError: cannot take 1 values"):
                engine.submit("bad", X).result(30)
    logged = [r.getMessage() for r in caplog.records if "cannot take" in r.getMessage()]
    assert len(logged) == 1, logged  # the other two are counted, within the interval
    (message,) = logged
    assert message.startswith("model 'bad' failed: ValueError: cannot take 1 values\n")
    assert "Traceback (most recent call last)" in message
    assert 'model.py", line 3, in explode' in message
    assert 'model.py", line 7, in infer' in message


@both_kinds
def test_a_model_that_fails_to_load_logs_file_and_line(repo, caplog):
    source = "import numpy\n\nclass Model:\n    def load(self, config):\n        1 / 0\n"
    repo.python("broken", source + "    def infer(self, inputs):\n        pass\n", CONFIG)
    with caplog.at_level(logging.ERROR, "conveyor"), Engine.from_repository(repo.path) as engine:
        (entry,) = engine.repository_index()
    assert "ZeroDivisionError: division by zero" in entry.reason
    assert "line" not in entry.reason  # clients get the reason; the traceback is for the log
    assert 'model.py", line 5, in load' in caplog.text
    assert "ZeroDivisionError" in caplog.text


def test_an_import_error_in_model_py_logs_file_and_line(repo, caplog):
    repo.python("broken", "x = 1\nimport no_such_module_here\n", CONFIG)
    with caplog.at_level(logging.ERROR, "conveyor"), Engine.from_repository(repo.path):
        pass
    assert "ModuleNotFoundError: No module named 'no_such_module_here'" in caplog.text
    assert 'model.py", line 2, in <module>' in caplog.text
