"""benchmarks.frontend_profile and benchmarks.peers.run_all: how py-spy's collapsed stacks
are read and bucketed, and how the issue's ratios are taken from one round; and
benchmarks.frontends' conveyor bench generator counts the requests a real server answered
and the CPU it spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.frontend_profile import UNATTRIBUTED, bucket_of, read_raw, self_time
from benchmarks.frontends import throughput_bench
from benchmarks.peers.run_all import ratios
from conveyor.testing import run_server
from tests.models import RepoBuilder

LOOP = "<module> (conveyor:8);Runner.run (asyncio/runners.py:118)"
RAW = "\n".join(
    [
        f"{LOOP};HTTPProtocol._handle (conveyor/server/http/connection.py:280);"
        "V2Routes.begin_infer (conveyor/server/http/routes.py:372);"
        "decode_request (conveyor/protocol/infer.py:65);split (conveyor/protocol/binary.py:54) 7",
        f"{LOOP};HTTPProtocol._handle (conveyor/server/http/connection.py:280);"
        "Engine.submit (conveyor/engine/engine.py:219);"
        "RequestQueue.put (conveyor/engine/scheduler.py:77);Condition.notify (threading.py:382) 3",
        f"{LOOP} 5",
        "Thread.run (threading.py:982);ThreadInstances._loop (conveyor/engine/instances.py:117);"
        "ModelVersion._execute (conveyor/engine/model.py:359);"
        "OnnxRuntimeModel.run (conveyor/backends/onnxruntime.py:97) 4",
        " 2",
    ]
)


def test_a_stack_goes_to_the_first_bucket_that_names_one_of_its_frames(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text(RAW + "\n")
    stacks = read_raw(raw)
    assert [count for _, count in stacks] == [7, 3, 5, 4, 2]
    buckets = [bucket_of(frames) for frames, _ in stacks]
    assert buckets[0].startswith("decode request")
    # The queue's notify is a wakeup even though it happens inside the submit.
    assert buckets[1].startswith("wakeups")
    assert buckets[2].startswith("event loop itself")
    assert buckets[3].startswith("model run")
    assert buckets[4] == UNATTRIBUTED
    # Self time is the leaf frame, its lines merged, file kept.
    top = dict(self_time(stacks, 10))
    assert top["split (conveyor/protocol/binary.py)"] == 7
    assert top["Runner.run (asyncio/runners.py)"] == 5


def _row(server: str, transport: str, rate: float, core: float) -> dict[str, object]:
    return {"server": server, "model": "tiny", "transport": transport, "concurrency": 16,
            "infer_per_s": rate, "errors": 0, "server_core": core}  # fmt: skip


def test_ratios_by_rate_and_by_server_cpu() -> None:
    result = {
        "rows": [
            _row("conveyor", "http-binary", 8000, 1.0),
            _row("conveyor", "http-json", 4000, 1.0),
            _row("conveyor", "grpc", 6000, 0.5),
            _row("mlserver", "http-json", 1000, 0.5),
            _row("kserve", "http-binary", 1600, 1.0),
            _row("kserve", "grpc", 2000, 1.0),
        ],
        "inprocess": {
            "tiny": [{"concurrency": 16, "infer_per_s": 20000, "generator_cpu": 1.0, "errors": 0}]
        },
    }
    got = {name: (by_rate, by_cpu) for name, by_rate, by_cpu, _ in ratios(result, "tiny", 16)}
    assert got["HTTP binary / in-process"] == ("40%", "40%")
    # gRPC got half the core: 6,000/s is 12,000 per CPU-second.
    assert got["gRPC / in-process"] == ("30%", "60%")
    assert got["HTTP JSON / HTTP binary"] == ("50%", "50%")
    # Best peer over HTTP: KServe by rate (1,600/s), MLServer per CPU-second (2,000).
    assert got["HTTP (best of binary, JSON) / best peer HTTP"] == ("5.0x", "4.0x")
    assert got["gRPC / best peer gRPC"] == ("3.0x", "6.0x")


def test_a_peer_that_failed_gives_no_ratio() -> None:
    failed = _row("kserve", "grpc", 2000, 1.0) | {"errors": 3}
    result = {"rows": [_row("conveyor", "grpc", 6000, 1.0), failed], "inprocess": {}}
    got = {name: by_rate for name, by_rate, _, _ in ratios(result, "tiny", 16)}
    assert got["gRPC / best peer gRPC"] == "-"
    assert got["gRPC / in-process"] == "-"


@pytest.mark.timeout(120)
def test_the_bench_generator_counts_what_the_server_answered(tmp_path: Path) -> None:
    RepoBuilder(tmp_path).tiny()
    with run_server(tmp_path) as server:
        answered, per_process, elapsed = throughput_bench(server, 2, 0.5)
    assert answered > 0
    assert elapsed >= 0.5
    assert len(per_process) == 1 and per_process[0] > 0  # one process: its CPU was read
