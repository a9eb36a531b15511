"""Ensembles in-process: ``engine.submit`` on the ensemble's name, no server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conveyor import Engine
from conveyor.errors import ModelError, ModelNotReady
from tests.cycles import left_in_cycles
from tests.engine.ensembles.models import STEP_MODELS, build_repository


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with Engine.from_repository(build_repository(tmp_path_factory.mktemp("ensembles"))) as e:
        yield e


def success(engine: Engine, model: str) -> int:
    return sum(s.success.count for s in engine.statistics(model))


@pytest.mark.parametrize("ensemble", ["ensemble_pbtxt", "ensemble_toml"])
def test_submit_runs_the_graph(engine: Engine, ensemble: str) -> None:
    raw = np.arange(32, dtype=np.float32).reshape(2, 16)
    before = {m: success(engine, m) for m in (*STEP_MODELS, ensemble)}
    future = engine.submit(ensemble, {"RAW": raw, "DELAY": np.array([0.2], np.float32)})
    result = future.result(timeout=30)
    np.testing.assert_array_equal(result["RESULT"], raw * 2 - 2)
    (start_a, end_a), (start_b, end_b) = result["SPAN_A"], result["SPAN_B"]
    assert max(start_a, start_b) < min(end_a, end_b)
    assert {m: success(engine, m) - n for m, n in before.items()} == dict.fromkeys(before, 1)
    assert (future.model_name, future.model_version) == (ensemble, "1")


def test_only_the_requested_outputs_are_returned(engine: Engine) -> None:
    raw = np.ones((1, 16), np.float32)
    future = engine.submit(
        "ensemble_toml", {"RAW": raw, "DELAY": np.zeros(1, np.float32)}, outputs=["SPAN_B"]
    )
    assert set(future.result(timeout=30)) == {"SPAN_B"}


def test_tensors_pass_between_steps_without_copies(engine: Engine) -> None:
    # echo_1 and echo_2 return their input array itself: the ensemble's answer is the caller's
    # own memory only if no step boundary copied it.
    tensor = np.ones((2, 3), np.float32)
    result = engine.submit("relay", {"INPUT0": tensor}).result(timeout=30)
    assert np.shares_memory(result["OUTPUT0"], tensor)


def test_a_failing_step_names_itself_and_is_counted(engine: Engine) -> None:
    fails_before = sum(s.fail.count for s in engine.statistics("failing_pipeline"))
    future = engine.submit("failing_pipeline", {"RAW": np.ones((1, 16), np.float32)})
    with pytest.raises(ModelError, match=r"step 1 \(model 'broken_step'\) failed"):
        future.result(timeout=30)
    assert sum(s.fail.count for s in engine.statistics("failing_pipeline")) == fails_before + 1


def test_the_ensemble_loads_its_steps_first_and_follows_their_readiness(tmp_path: Path) -> None:
    # Explicit model control with only the ensemble named: its step models load with it.
    repository = build_repository(tmp_path)
    with Engine.from_repository(
        repository, model_control="explicit", startup_models=["ensemble_toml"]
    ) as engine:
        assert set(engine.model_names()) == {"ensemble_toml", *STEP_MODELS}
        assert engine.model("ensemble_toml").ready
        engine.unload_model("tiny")
        assert not engine.model("ensemble_toml").ready
        future_inputs = {"RAW": np.ones((1, 16), np.float32), "DELAY": np.zeros(1, np.float32)}
        future = engine.submit("ensemble_toml", future_inputs)
        with pytest.raises(ModelNotReady, match=r"step 2 \(model 'tiny'\) failed"):
            future.result(timeout=30)
        engine.load_model("tiny")
        assert engine.model("ensemble_toml").ready
        assert engine.submit("ensemble_toml", future_inputs).result(timeout=30)


def test_close_finishes_the_ensemble_requests_in_flight(tmp_path: Path) -> None:
    engine = Engine.from_repository(build_repository(tmp_path))
    future = engine.submit("sleep_chain", {"DELAY": np.array([0.2], np.float32)})
    engine.close()  # while sleep_a runs: sleep_b's step is submitted during the drain
    assert future.result(timeout=0)["SPAN"].shape == (2,)


def test_an_answered_request_leaves_nothing_in_cycles(engine: Engine) -> None:
    # An ensemble's run holds its request's future, whose done callbacks held the run: every
    # request, answered or failed, stayed (with its tensors) until the collector ran.
    def requests() -> None:
        relayed = engine.submit("relay", {"INPUT0": np.ones((2, 3), np.float32)})
        assert relayed.result(timeout=30)["OUTPUT0"].shape == (2, 3)
        failed = engine.submit("failing_pipeline", {"RAW": np.ones((1, 16), np.float32)})
        # Read, not raised: raised here, the error's traceback would hold this frame, which
        # holds the future, which holds the error (the caller's cycle, not the engine's).
        assert isinstance(failed.exception(timeout=30), ModelError)

    left = left_in_cycles(requests)
    assert not {"_Run", "InferFuture", "ModelError", "ValueError", "frame"} & left, left
