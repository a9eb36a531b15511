"""benchmarks.frontends: the requests it counts come from the server's own statistics, with
several rounds the median one is kept and ratios are taken round by round, and each layout
is the server's own options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from benchmarks.frontends import (
    answered_so_far,
    layout_arguments,
    median_round,
    perf_analyzer_load,
    plot,
    ratios_to_first,
)
from conveyor.cli import build_parser
from conveyor.server.settings import from_arguments
from conveyor.testing import run_server
from tests.models import RepoBuilder


def test_answered_requests_are_read_from_the_statistics(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).tiny()
    with run_server(tmp_path) as server:
        before = answered_so_far(server)
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            given = httpclient.InferInput("INPUT0", [1, 16], "FP32")
            given.set_data_from_numpy(np.ones((1, 16), np.float32))
            for _ in range(3):
                client.infer("tiny", [given])
        finally:
            client.close()
        assert answered_so_far(server) - before == 3


def test_the_median_round_is_kept() -> None:
    rounds = [{"infer_per_cpu_s": rate, "round": i} for i, rate in enumerate([5.0, 3.0, 4.0])]
    kept = median_round(rounds)
    assert kept["round"] == 2 and kept["rounds_infer_per_cpu_s"] == [5, 3, 4]


def test_ratios_are_taken_round_by_round_then_the_median() -> None:
    rounds = {
        "1": [{"infer_per_cpu_s": v} for v in (100.0, 200.0, 100.0)],
        "2": [{"infer_per_cpu_s": v} for v in (90.0, 120.0, 80.0)],
    }
    # Per round: 0.9, 0.6, 0.8. Ratio of the medians would say 90 / 100.
    assert ratios_to_first(rounds) == {"1": 1.0, "2": 0.8}


@pytest.mark.parametrize(
    ("layout", "workers", "separate", "front_ends"),
    [("1", 1, False, 1), ("1p", 1, True, 1), ("3", 3, False, 3)],
)
def test_a_layout_is_the_servers_own_options(
    layout: str, workers: int, separate: bool, front_ends: int
) -> None:
    options, count = layout_arguments(layout)
    settings = from_arguments(build_parser().parse_args(["serve", *options]))
    assert (settings.workers, settings.front_end_process, count) == (workers, separate, front_ends)


@pytest.mark.parametrize("layout", ["0", "2p", "x"])
def test_an_unknown_layout_is_refused_naming_it(layout: str) -> None:
    with pytest.raises(ValueError, match=repr(layout)):
        layout_arguments(layout)


def test_the_offered_load_is_a_rate_when_one_is_given() -> None:
    assert perf_analyzer_load(16, None) == ["--concurrency-range", "16"]
    assert perf_analyzer_load(16, 3000.0) == ["--request-rate-range", "3000"]


def test_the_plot_has_a_panel_per_run(tmp_path: Path) -> None:
    matplotlib_image = pytest.importorskip("matplotlib.image")
    result = {"workers": "1", "offered": "1500/s", "infer_per_cpu_s": 3000.0,
              "rounds_infer_per_cpu_s": [2900, 3000, 3100], "per_cpu_vs_first": 1.0,
              "infer_per_s": 1500.0}  # fmt: skip
    two = {**result, "workers": "2", "offered": "3000/s", "per_cpu_vs_first": 1.1}
    out = tmp_path / "frontends.png"
    plot([{"results": [result, two]}], out)
    one_panel = matplotlib_image.imread(out).shape
    plot([{"results": [result, two]}, {"results": [result]}], out)
    assert matplotlib_image.imread(out).shape[1] > 1.5 * one_panel[1]
