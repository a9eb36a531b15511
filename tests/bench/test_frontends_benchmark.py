"""benchmarks.frontends: the requests it counts come from the server's own statistics, and
with several rounds the median one is kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from benchmarks.frontends import answered_so_far, median_round
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
