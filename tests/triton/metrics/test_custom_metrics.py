"""Custom metrics (pb_utils.MetricFamily) on /metrics, from thread and process instances."""

from __future__ import annotations

import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from conveyor.testing import RunningServer, run_server
from conveyor.triton import pb_utils
from tests.polling import wait_until

COUNTING = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"]}
        self.families = [
            pb_utils.MetricFamily(
                name="demo_requests", description="requests served",
                kind=pb_utils.MetricFamily.COUNTER,
            ),
            pb_utils.MetricFamily(
                name="demo_last_x", description="the last X", kind=pb_utils.MetricFamily.GAUGE
            ),
            pb_utils.MetricFamily(
                name="demo_x", description="X seen", kind=pb_utils.MetricFamily.HISTOGRAM
            ),
        ]
        counter, gauge, histogram = self.families
        self.requests = counter.Metric(labels=labels)
        self.last_x = gauge.Metric(labels=labels)
        self.xs = histogram.Metric(labels=labels, buckets=[1.0, 2.5, 10.0])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            self.requests.increment(1)
            self.last_x.set(float(x[0]))
            self.xs.observe(float(x[0]))
            count = np.array([self.requests.value()], np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", count)]))
        return responses
"""

CONFIG = """
backend = "python"
instance_kind = "{kind}"
[[inputs]]
name = "X"
datatype = "FP32"
shape = [1]
[[outputs]]
name = "SEEN"
datatype = "FP32"
shape = [1]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repository = tmp_path_factory.mktemp("custom-metrics")
    for kind in ("thread", "process"):
        folder = Path(repository, f"counting_{kind}", "1")
        folder.mkdir(parents=True)
        (folder / "model.py").write_text(textwrap.dedent(COUNTING))
        (folder.parent / "config.toml").write_text(CONFIG.format(kind=kind))
    with run_server(repository) as running:
        yield running


def _scrape(server: RunningServer) -> str:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        return reply.read().decode()


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_models_counter_gauge_and_histogram_appear_on_metrics(server: RunningServer, kind: str):
    model = f"counting_{kind}"
    client = httpclient.InferenceServerClient(server.http_url.split("://")[1])
    try:
        for value in (0.5, 2.0, 7.0):
            x = httpclient.InferInput("X", [1], "FP32")
            x.set_data_from_numpy(np.array([value], np.float32))
            client.infer(model, [x])
    finally:
        client.close()
    label = f'{{model="{model}"}}'
    expected = [
        "# TYPE demo_requests counter",
        f"demo_requests{label} 3.0",
        "# TYPE demo_last_x gauge",
        f"demo_last_x{label} 7.0",
        "# TYPE demo_x histogram",
        f'demo_x_bucket{{le="1",model="{model}"}} 1',
        f'demo_x_bucket{{le="2.5",model="{model}"}} 2',
        f'demo_x_bucket{{le="+Inf",model="{model}"}} 3',
        f"demo_x_sum{label} 9.5",
        f"demo_x_count{label} 3",
    ]
    wait_until(lambda: all(line in _scrape(server) for line in expected), timeout=10)
    text = _scrape(server)
    assert "nv_inference_count" in text  # beside Conveyor's own


def test_the_metric_api_refuses_what_triton_refuses():
    counter = pb_utils.MetricFamily("api_counter", "c", pb_utils.MetricFamily.COUNTER)
    metric = counter.Metric(labels={"a": "1"})
    same = counter.Metric(labels={"a": "1"})
    metric.increment(2.5)
    assert same.value() == 2.5
    with pytest.raises(pb_utils.TritonModelException, match="negative"):
        metric.increment(-1)
    with pytest.raises(pb_utils.TritonModelException, match="gauges only"):
        metric.set(1)
    with pytest.raises(pb_utils.TritonModelException, match="histograms only"):
        metric.observe(1)
    with pytest.raises(pb_utils.TritonModelException, match="exists as a counter"):
        pb_utils.MetricFamily("api_counter", "c", pb_utils.MetricFamily.GAUGE)
    histogram = pb_utils.MetricFamily("api_histogram", "h", pb_utils.MetricFamily.HISTOGRAM)
    with pytest.raises(pb_utils.TritonModelException, match="buckets are required"):
        histogram.Metric(labels={})
    with pytest.raises(pb_utils.TritonModelException, match="strictly increasing"):
        histogram.Metric(labels={}, buckets=[1, 1, 2])
    with pytest.raises(pb_utils.TritonModelException, match="value\\(\\) is for counters"):
        histogram.Metric(labels={}, buckets=[]).value()
    del counter
    with pytest.raises(pb_utils.TritonModelException, match="has been deleted"):
        metric.increment(1)


def test_a_process_models_families_leave_with_the_model(tmp_path: Path):
    from conveyor import Engine
    from conveyor.backends.custom_metrics import CUSTOM_METRICS

    folder = tmp_path / "models" / "leaving" / "1"
    folder.mkdir(parents=True)
    source = COUNTING.replace('"demo_', '"leaving_')
    (folder / "model.py").write_text(textwrap.dedent(source))
    (folder.parent / "config.toml").write_text(CONFIG.format(kind="process"))

    def families() -> set[str]:
        return {f.name for f in CUSTOM_METRICS.snapshot() if f.name.startswith("leaving_")}

    with Engine.from_repository(tmp_path / "models") as engine:
        engine.submit("leaving", {"X": np.ones(1, np.float32)}).result(timeout=30)
        assert families() == {"leaving_requests", "leaving_last_x", "leaving_x"}
    assert families() == set()
