"""Short, bounded runs of the generator against a real ``conveyor serve`` process."""

import pytest

from conveyor.bench import BenchSpec, Point, TargetSpec, read_json, run_bench
from conveyor.bench.targets.base import RequestFailed
from conveyor.cli import main
from conveyor.testing import run_server

pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part

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
    report = run_bench(
        BenchSpec(_target(server, transport, "mlp")),
        [Point(concurrency=4, **SHORT)],
        progress=False,
    )
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
    report = run_bench(
        BenchSpec(_target(server, transport, "identity"), shapes={"INPUT0": (1024 * 1024,)}),
        [Point(concurrency=2, **SHORT)],
        progress=False,
    )
    (point,) = report.points
    assert point.errors == 0, point.error_samples
    assert point.requests > 0
    assert report.shapes == {"INPUT0": [1024 * 1024]}


def test_open_loop_over_http(server):
    report = run_bench(
        BenchSpec(_target(server, "binary")),
        [Point(rate=200, warmup_s=0.0, duration_s=0.5, drain_s=10.0)],
        progress=False,
    )
    (point,) = report.points
    assert point.errors == 0 and point.latency_ms["count"] == 100


def test_cli_with_two_worker_processes(server, tmp_path, bench_cli):
    out = tmp_path / "r.json"
    done = bench_cli(
        "tiny",
        "--url",
        server.grpc_url,
        "-c",
        "4",
        "-d",
        "0.4",
        "--warmup",
        "0.1",
        "-p",
        "2",
        "-q",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert "tiny via grpc" in done.stdout
    (point,) = read_json(out).points
    assert point.processes == 2 and point.errors == 0 and point.requests > 20


def test_an_unknown_model_is_a_clear_error(server, capsys):
    with pytest.raises(RequestFailed, match="nope"):
        run_bench(
            BenchSpec(_target(server, "binary", "nope")), [Point(concurrency=1)], progress=False
        )
    for url in (server.http_url, server.grpc_url):
        assert main(["bench", "nope", "--url", url, "-q"]) == 1
        assert "nope" in capsys.readouterr().err


def test_open_loop_generator_sleeps_between_sends_and_reports_its_cpu(server):
    # 500 req/s leaves the generator idle most of the time: by default it sleeps until each
    # send instead of spinning, so its CPU (process time / wall time) is well below a core,
    # and the timers' granularity keeps the send lag within about one schedule gap.
    rate = 500
    report = run_bench(
        BenchSpec(_target(server, "binary")),
        [Point(rate=rate, warmup_s=0.2, duration_s=2.0, drain_s=10.0)],
        progress=False,
    )
    (point,) = report.points
    assert point.errors == 0, point.error_samples
    assert point.generator_cpu < 0.5, point.generator_cpu
    gap_ms = 1000 / rate
    assert point.send_lag_ms is not None
    assert point.send_lag_ms["p50"] < gap_ms, point.send_lag_ms


def test_spinning_is_an_option_that_costs_cpu(server):
    # The busy-wait is there for who asks for it: it keeps the generator on the CPU.
    def cpu(spin_s: float) -> float:
        report = run_bench(
            BenchSpec(_target(server, "binary")),
            [Point(rate=200, warmup_s=0.1, duration_s=1.0, spin_s=spin_s)],
            progress=False,
        )
        return report.points[0].generator_cpu

    assert cpu(0.004) > cpu(0.0)
