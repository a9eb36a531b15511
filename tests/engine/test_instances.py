"""Instances share one loaded model when the backend is thread-safe, and copy it when not."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conveyor import Engine
from conveyor.examples import onnx_models

pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part

MEASURE = textwrap.dedent(
    """
    import json, sys, threading
    import numpy as np, psutil
    from conveyor import Engine, as_completed

    repo, model, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Engine.from_repository(repo) as engine:
        # Keep every instance busy at once, twice over, so each has run the model.
        x = {"INPUT0": np.ones((1, 5120), np.float32)}
        futures = [engine.submit(model, x) for _ in range(2 * count)]
        for f in as_completed(futures, timeout=120):
            f.result()
        rss = psutil.Process().memory_info().rss
        threads = threading.active_count()
    print(json.dumps({"rss": rss, "threads": threads}))
    """
)


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory):
    """One 100 MiB MatMul model file, served as ``big1`` (1 instance) and ``big8`` (8)."""
    root = tmp_path_factory.mktemp("big")
    model_file = onnx_models.matmul(root / "weights" / "model.onnx", 5120)
    assert model_file.stat().st_size >= 100 * 1024 * 1024
    for count in (1, 8):
        (root / "repo" / f"big{count}" / "1").mkdir(parents=True)
        (root / "repo" / f"big{count}" / "1" / "model.onnx").symlink_to(model_file)
        (root / "repo" / f"big{count}" / "config.toml").write_text(
            f'backend = "onnxruntime"\ninstances = {count}\n'
        )
    return root / "repo"


def measure(repo, model: str, count: int) -> dict[str, int]:
    alone = repo.parent / f"only-{model}"  # a repository holding just this model
    alone.mkdir(exist_ok=True)
    if not (alone / model).exists():
        (alone / model).symlink_to(repo / model)
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(alone), model, str(count)],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_eight_instances_use_the_memory_of_one(big_repo):
    one = measure(big_repo, "big1", 1)
    eight = measure(big_repo, "big8", 8)
    assert eight["threads"] >= one["threads"] + 7  # eight instance threads really ran
    assert eight["rss"] <= 1.10 * one["rss"], (one, eight)


SELF_COUNTING = """
import numpy as np

class Model:
    thread_safe = {thread_safe}

    def load(self, config):
        with open(self.version_dir / "loads.txt", "a") as f:
            f.write("loaded\\n")
        self.identity = id(self)

    def infer(self, inputs):
        return {{"OUTPUT0": np.array([self.identity], dtype=np.int64)}}
"""

CONFIG = """
backend = "python"
instances = 3
[[inputs]]
name = "INPUT0"
datatype = "INT64"
shape = [1]
[[outputs]]
name = "OUTPUT0"
datatype = "INT64"
shape = [1]
"""


@pytest.mark.parametrize(("thread_safe", "copies"), [(True, 1), (False, 3)])
def test_python_models_are_copied_per_instance_only_when_not_thread_safe(repo, thread_safe, copies):
    folder = repo.python("counted", SELF_COUNTING.format(thread_safe=thread_safe), CONFIG)
    with Engine.from_repository(repo.path) as engine:
        futures = [engine.submit("counted", {"INPUT0": np.zeros(1, np.int64)}) for _ in range(30)]
        seen = {int(f.result(10)["OUTPUT0"][0]) for f in futures}
    assert (folder / "1" / "loads.txt").read_text().count("loaded") == copies
    assert len(seen) <= copies


def test_onnx_model_is_loaded_once_for_all_instances(repo):
    repo.onnx("tiny", onnx_models.tiny, "instances = 4\n")
    with Engine.from_repository(repo.path) as engine:
        futures = [
            engine.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)}) for _ in range(50)
        ]
        assert all(f.result(10)["OUTPUT0"][0, 0] == 1.0 for f in futures)
        statistics = engine.statistics("tiny")[0]
    assert statistics.execution_count == 50


def test_default_instances_match_the_cores():
    import os

    from conveyor.repository.config import default_instances

    assert default_instances() == len(os.sched_getaffinity(0))
