"""Engine.stream: responses as a decoupled model produces them, cancellation, backpressure."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conveyor import Engine
from conveyor.errors import ModelError, Unsupported
from tests.engine.decoupled.models import build
from tests.polling import wait_until


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("streaming"))


@pytest.fixture(scope="module")
def engine(repository: Path) -> Iterator[Engine]:
    with Engine.from_repository(repository) as engine:
        yield engine


def repeat_inputs(count: int, delay_ms: int) -> dict[str, np.ndarray]:
    return {
        "COUNT": np.array([count], np.int32),
        "DELAY_MS": np.array([delay_ms], np.int32),
    }


@pytest.mark.parametrize("model", ["repeat", "async_repeat"])
def test_responses_arrive_while_later_ones_are_produced(engine: Engine, model: str):
    arrivals = []
    for outputs in engine.stream(model, repeat_inputs(4, 150)):
        arrivals.append((time.monotonic(), int(outputs["OUT"][0])))
    assert [value for _, value in arrivals] == [0, 1, 2, 3]
    # The first arrived well before the last was produced: they were not collected first.
    assert arrivals[-1][0] - arrivals[0][0] >= 0.3


def test_a_triton_response_sender_streams(engine: Engine):
    inputs = {"IN": np.arange(3, dtype=np.int32), "DELAY": np.full(3, 100, np.uint32)}
    stamps = [(time.monotonic(), int(o["OUT"][0])) for o in engine.stream("triton_repeat", inputs)]
    assert [value for _, value in stamps] == [0, 1, 2]
    assert stamps[-1][0] - stamps[0][0] >= 0.15


def test_async_iteration(engine: Engine):
    async def collect() -> list[int]:
        return [int(o["OUT"][0]) async for o in engine.stream("repeat", repeat_inputs(3, 10))]

    assert asyncio.run(collect()) == [0, 1, 2]


def test_submit_to_a_decoupled_model_is_refused(engine: Engine):
    with pytest.raises(Unsupported, match="decoupled transaction policy"):
        engine.submit("repeat", repeat_inputs(1, 0))


def test_a_model_that_is_not_decoupled_streams_its_one_answer(engine: Engine):
    answers = list(engine.stream("tiny", {"INPUT0": np.ones((1, 16), np.float32)}))
    assert len(answers) == 1 and answers[0]["OUTPUT0"].shape == (1, 16)


def test_closing_the_stream_stops_the_generator(engine: Engine, repository: Path):
    progress = repository / "repeat" / "1" / "progress"
    stream = engine.stream("repeat", repeat_inputs(1000, 20))
    assert int(next(stream)["OUT"][0]) == 0
    stream.close()
    wait_until(lambda: progress.read_text().startswith("closed at"), timeout=10)
    stopped_at = int(progress.read_text().split()[-1])
    assert stopped_at < 1000 - 1
    time.sleep(0.1)
    assert progress.read_text() == f"closed at {stopped_at}"  # and it stays stopped


def test_a_slow_consumer_holds_the_model_back(engine: Engine, repository: Path):
    progress = repository / "repeat" / "1" / "progress"
    with engine.stream("repeat", repeat_inputs(100, 0), buffer=2) as stream:
        first = next(stream)
        assert int(first["OUT"][0]) == 0
        time.sleep(0.3)  # not reading: the model may run only the buffer's length ahead
        produced = int(progress.read_text())
        assert produced <= 1 + 2 + 1  # read one, two buffered, one waiting to be put
        rest = [int(o["OUT"][0]) for o in stream]
    assert rest == list(range(1, 100))


def test_config_pbtxt_decoupled_is_served_as_decoupled(engine: Engine):
    # triton_repeat's config.pbtxt says model_transaction_policy { decoupled: true }.
    assert engine.model("triton_repeat").config.decoupled


def test_a_model_that_is_not_decoupled_and_drops_its_response_sender_fails_clearly(
    tmp_path: Path,
):
    source = (
        "import triton_python_backend_utils as pb_utils\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        requests[0].get_response_sender()\n"
    )
    folder = tmp_path / "plain" / "1"
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(source)
    (tmp_path / "plain" / "config.pbtxt").write_text(
        'backend: "python"\n'
        'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
    )
    with Engine.from_repository(tmp_path) as plain:
        future = plain.submit("plain", {"IN": np.array([1], np.int32)})
        # Triton would wait forever; the sender is freed unanswered, so the request fails.
        with pytest.raises(ModelError, match="neither a response in the list"):
            future.result(timeout=10)
