"""Short, bounded runs of the generator against a real ``conveyor serve`` process."""

import pytest

from conveyor.bench import BenchSpec, Point, TargetSpec, read_json, run_bench
from conveyor.bench.targets.base import RequestFailed
from conveyor.cli import main
from conveyor.testing import run_server

SHORT = dict(warmup_s=0.1, duration_s=0.4, drain_s=10.0)


@pytest.fixture(scope="module")
def server():
    with run_server() as running:
        yield running


def _target(server, transport, model="tiny"):
    if transport.startswith("grpc"):
        return TargetSpec(server.grpc_url, model, streaming=transport == "grpc-stream")
    return TargetSpec(server.http_url, model, encoding=transport)


@pytest.mark.parametrize("transport", ["binary", "json", "grpc", "grpc-stream"])
def test_closed_loop_with_the_server_split(server, transport):
    report = run_bench(BenchSpec(_target(server, transport, "mlp")),
                       [Point(concurrency=4, **SHORT)], progress=False)
    (point,) = report.points
    assert point.errors == 0, point.error_samples
    assert point.requests > 20
    split = point.server
    assert split is not None, "the statistics extension was not read"
    # Counters are read at the window's edges, so they match the measured requests roughly.
    assert split["requests"] == pytest.approx(point.requests, rel=0.3, abs=10)
    assert split["compute_infer_us"] > 0 and split["queue_us"] >= 0
    assert split["avg_batch"] >= 1.0


@pytest.mark.parametrize("transport", ["binary", "grpc", "grpc-stream"])
def test_a_4_mib_tensor_travels(server, transport):
    report = run_bench(BenchSpec(_target(server, transport, "identity"),
                                 shapes={"INPUT0": (1024 * 1024,)}),
                       [Point(concurrency=2, **SHORT)], progress=False)
    (point,) = report.points
    assert point.errors == 0, point.error_samples
    assert point.requests > 0
    assert report.shapes == {"INPUT0": [1024 * 1024]}


def test_open_loop_over_http(server):
    report = run_bench(BenchSpec(_target(server, "binary")),
                       [Point(rate=200, warmup_s=0.0, duration_s=0.5, drain_s=10.0)],
                       progress=False)
    (point,) = report.points
    assert point.errors == 0 and point.latency_ms["count"] == 100


def test_cli_with_two_worker_processes(server, tmp_path, bench_cli):
    out = tmp_path / "r.json"
    done = bench_cli("tiny", "--url", server.grpc_url, "-c", "4", "-d", "0.4", "--warmup", "0.1",
                   "-p", "2", "-q", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "tiny via grpc" in done.stdout
    (point,) = read_json(out).points
    assert point.processes == 2 and point.errors == 0 and point.requests > 20


def test_an_unknown_model_is_a_clear_error(server, capsys):
    with pytest.raises(RequestFailed, match="nope"):
        run_bench(BenchSpec(_target(server, "binary", "nope")), [Point(concurrency=1)],
                  progress=False)
    for url in (server.http_url, server.grpc_url):
        assert main(["bench", "nope", "--url", url, "-q"]) == 1
        assert "nope" in capsys.readouterr().err
