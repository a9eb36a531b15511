"""config.pbtxt read in-process: what is refused or warned (by model and field), the GPU
opt-in, and the behaviour of priority levels and the queue policy on a real engine."""

from __future__ import annotations

import logging
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from conveyor import Engine
from conveyor.errors import DeadlineExceeded, RepositoryError
from conveyor.examples import onnx_models
from conveyor.repository.layout import Repository
from conveyor.server.settings import add_arguments, from_arguments


def write_onnx(root: Path, name: str, pbtxt: str) -> Path:
    onnx_models.tiny(root / name / "1" / "model.onnx")
    (root / name / "config.pbtxt").write_text(textwrap.dedent(pbtxt))
    return root


def source_error(root: Path, name: str) -> str:
    with pytest.raises(RepositoryError) as caught:
        Repository(root).source(name)
    return caught.value.message


@pytest.mark.parametrize(
    ("pbtxt", "words"),
    [
        ('name: "other"', ["name", "'other' does not match the model's folder 'm'"]),
        ('backend: "ensemble"', ["backend", "'ensemble' is not supported; Conveyor serves"]),
        ('platform: "tensorrt_plan"', ["platform", "'tensorrt_plan' is not supported"]),
        ('ensemble_scheduling { step [ { model_name: "a" } ] }', ["ensemble_scheduling"]),
        (
            "max_batch_size: 4\ndynamic_batching { priority_levels: 2 default_priority_level: 3 }",
            ["dynamic_batching.default_priority_level", "between 1 and priority_levels 2"],
        ),
        (
            "max_batch_size: 4\n"
            "dynamic_batching { default_queue_policy { timeout_action: DELAY } }",
            ["dynamic_batching.default_queue_policy.timeout_action", "DELAY"],
        ),
        (
            'max_batch_size: 4\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -2 ] } ]',
            ["input[0].dims (INPUT0)", "got -2"],
        ),
        ('input [ { name: "INPUT0" dims: [ 16 ] } ]', ["input[0].data_type (INPUT0)"]),
        ("version_policy { latest { num_versions: 0 } }", ["version_policy.latest.num_versions"]),
        (
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] '
            'label_filename: "nope.txt" } ]',
            ["output[0].label_filename (OUTPUT0)", "m/nope.txt does not exist"],
        ),
        (
            'sequence_batching { iterative_sequence: true state [ { input_name: "S_IN" '
            'output_name: "S_OUT" data_type: TYPE_FP32 dims: [ 1 ] } ] }',
            ["sequence_batching.state", "not supported with iterative_sequence"],
        ),
    ],
)
def test_a_refused_or_wrong_field_is_named(tmp_path: Path, pbtxt: str, words: list[str]) -> None:
    message = source_error(write_onnx(tmp_path, "m", pbtxt), "m")
    assert message.startswith("model 'm': "), message
    for word in words:
        assert word in message, message


def test_a_parse_error_names_file_line_and_column(tmp_path: Path) -> None:
    root = write_onnx(tmp_path, "m", 'platform: "onnxruntime_onnx"\nmax_batch_sise: 4\n')
    message = source_error(root, "m")
    assert "model 'm': m/config.pbtxt line 2 column 1" in message, message
    assert "max_batch_sise" in message


def test_both_config_files_is_an_error_naming_both(tmp_path: Path) -> None:
    root = write_onnx(tmp_path, "m", 'platform: "onnxruntime_onnx"\n')
    (root / "m" / "config.toml").write_text('backend = "onnxruntime"\n')
    message = source_error(root, "m")
    assert "m/config.toml" in message and "m/config.pbtxt" in message


def test_each_warned_field_is_warned_once(tmp_path: Path) -> None:
    root = write_onnx(
        tmp_path,
        "m",
        """
        platform: "onnxruntime_onnx"
        response_cache { enable: true }
        optimization { graph { level: 1 } }
        metric_tags { key: "team" value: "a" }
        instance_group [ { count: 2 kind: KIND_CPU rate_limiter { priority: 1 } } ]
        """,
    )
    source = Repository(root).source("m")
    assert source.config.instances == 2
    fields = [w.split("field ")[1].split(" has no effect")[0] for w in source.warnings]
    assert sorted(fields) == [
        "instance_group[0].rate_limiter",
        "metric_tags",
        "optimization",
        "response_cache",
    ]
    assert all(w.startswith("model 'm': config.pbtxt field ") for w in source.warnings)


def test_instance_counts_are_summed_over_groups(tmp_path: Path) -> None:
    root = write_onnx(
        tmp_path,
        "m",
        "instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_MODEL }, { count: 3 } ]",
    )
    assert Repository(root).source("m").config.instances == 6


def test_gpu_groups_run_on_the_cpu_only_when_opted_in(tmp_path: Path, caplog) -> None:
    root = write_onnx(tmp_path, "m", "instance_group [ { count: 2 kind: KIND_GPU } ]")
    assert "KIND_GPU" in source_error(root, "m")
    with (
        caplog.at_level(logging.WARNING, "conveyor"),
        Engine.from_repository(root, gpu_instances_on_cpu=True) as engine,
    ):
        config = engine.model("m").config
        assert config.instances == 2
        assert [g.kind for g in config.instance_groups] == ["KIND_CPU"]
        out = engine.submit("m", {"INPUT0": np.zeros((1, 16), np.float32)}).result(10)
        np.testing.assert_array_equal(out["OUTPUT0"], np.ones((1, 16), np.float32))
    assert any(
        "KIND_GPU runs its 2 instance(s) on the CPU" in r.getMessage() for r in caplog.records
    )


def test_the_gpu_opt_in_is_a_server_option() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert from_arguments(parser.parse_args(["--gpu-instances-on-cpu"])).gpu_instances_on_cpu
    assert not from_arguments(parser.parse_args([])).gpu_instances_on_cpu


# A Python model with one instance that holds every execution while <version>/gate exists,
# and numbers its executions, so a test decides when the queue is served and sees the order.
GATED_MODEL = """
import itertools, time
import numpy as np

class Model:
    thread_safe = False
    order = itertools.count()

    def infer(self, inputs):
        (self.version_dir / "started").touch()
        while (self.version_dir / "gate").exists():
            time.sleep(0.005)
        n = inputs["X"].shape[0]
        return {"ORDER": np.full((n, 1), next(self.order), np.int64)}
"""

GATED_PBTXT = """
backend: "python"
max_batch_size: 1
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "ORDER" data_type: TYPE_INT64 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
dynamic_batching {{
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy {{
    default_timeout_microseconds: {timeout_us}
    allow_timeout_override: {override}
  }}
}}
"""


def gated(root: Path, name: str, timeout_us: int = 0, override: str = "true") -> Path:
    folder = root / name / "1"
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(GATED_MODEL)
    (root / name / "config.pbtxt").write_text(
        GATED_PBTXT.format(timeout_us=timeout_us, override=override)
    )
    return folder


def hold(engine: Engine, model: str, folder: Path):
    """Submit one request that holds the only instance until the gate file is removed."""
    (folder / "gate").touch()
    blocker = engine.submit(model, {"X": np.zeros((1, 1), np.float32)})
    for _ in range(1000):
        if (folder / "started").exists():
            return blocker
        time.sleep(0.01)
    raise AssertionError("the gated model never started")


def test_priority_levels_run_level_1_first_and_0_at_the_default(tmp_path: Path) -> None:
    folder = gated(tmp_path, "g")
    x = np.zeros((1, 1), np.float32)
    with Engine.from_repository(tmp_path) as engine:
        blocker = hold(engine, "g", folder)
        low = engine.submit("g", {"X": x}, priority=3)
        default = engine.submit("g", {"X": x}, priority=0)  # level 2
        too_high = engine.submit("g", {"X": x}, priority=9)  # past the last level: level 2
        high = engine.submit("g", {"X": x}, priority=1)
        (folder / "gate").unlink()
        order = {
            name: int(future.result(10)["ORDER"][0, 0])
            for name, future in [
                ("blocker", blocker), ("low", low), ("default", default),
                ("too_high", too_high), ("high", high),
            ]
        }  # fmt: skip
    assert sorted(order, key=order.__getitem__) == ["blocker", "high", "default", "too_high", "low"]


@pytest.mark.parametrize(("override", "survives"), [("false", False), ("true", True)])
def test_the_queue_policy_timeout_applies_unless_overridden(
    tmp_path: Path, override: str, survives: bool
) -> None:
    folder = gated(tmp_path, "g", timeout_us=100_000, override=override)
    with Engine.from_repository(tmp_path) as engine:
        blocker = hold(engine, "g", folder)
        own_timeout = engine.submit("g", {"X": np.zeros((1, 1), np.float32)}, timeout=60)
        no_timeout = engine.submit("g", {"X": np.zeros((1, 1), np.float32)})
        time.sleep(0.3)  # past the 0.1 s default timeout, well within the request's own 60 s
        (folder / "gate").unlink()
        blocker.result(10)
        with pytest.raises(DeadlineExceeded):
            no_timeout.result(10)
        if survives:
            own_timeout.result(10)
        else:
            with pytest.raises(DeadlineExceeded):
                own_timeout.result(10)
