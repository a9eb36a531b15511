"""The generator's own ceiling: how fast it can go when the server costs (almost) nothing.

``conveyor bench ceiling`` starts canned V2 servers in a child process (pinned to core 0
where there are two cores; the generator stays on the other): an HTTP server that answers
every request with one prebuilt binary response (asyncio + httptools, no framework, no
inference), and a gRPC server that does the same with a prebuilt ModelInferResponse. It
then drives the ``tiny`` request through them, and through the engine in-process, and
reports infer/s and the generator's CPU use. ``infer/s per generator core`` (throughput
divided by the CPU the generator burned) is its ceiling even where the canned server, not
the generator, saturated first.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import sys
from collections.abc import Sequence

import orjson

from conveyor.bench.inputs import InputSpec, ModelSpec
from conveyor.bench.loadgen import Point, new_event_loop
from conveyor.bench.report import Report
from conveyor.bench.runner import BenchSpec, run_bench
from conveyor.bench.targets.base import TargetSpec
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc.methods import METHODS, SERVICE_NAME

TINY = ModelSpec("tiny", (InputSpec("INPUT0", "FP32", (-1, 16)),), ("OUTPUT0",), 0)
_OUTPUT = bytes(64)  # one FP32 [1, 16] tensor


def _http_response() -> bytes:
    header = orjson.dumps(
        {
            "model_name": "tiny",
            "model_version": "1",
            "outputs": [
                {
                    "name": "OUTPUT0",
                    "datatype": "FP32",
                    "shape": [1, 16],
                    "parameters": {"binary_data_size": len(_OUTPUT)},
                }
            ],
        }
    )
    body = header + _OUTPUT
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _grpc_response() -> pb.ModelInferResponse:
    return pb.ModelInferResponse(
        model_name="tiny",
        model_version="1",
        outputs=[
            pb.ModelInferResponse.InferOutputTensor(name="OUTPUT0", datatype="FP32", shape=(1, 16))
        ],
        raw_output_contents=[_OUTPUT],
    )


class _CannedHttp(asyncio.Protocol):
    response = _http_response()
    not_found = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"

    def connection_made(self, transport) -> None:
        import httptools

        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        post = self.parser.get_method() == b"POST"  # only inference; no metadata, no stats
        self.transport.write(self.response if post else self.not_found)


async def _serve(http_sock: socket.socket, grpc_port: int, ready) -> None:
    import grpc

    loop = asyncio.get_running_loop()
    http = await loop.create_server(_CannedHttp, sock=http_sock)
    response = _grpc_response()
    answer = response.SerializeToString()
    stream_method = METHODS["ModelStreamInfer"]

    async def infer(request: bytes, context) -> bytes:
        return answer

    async def stream(requests, context):
        async for request in requests:  # echo each id back, as ModelStreamInfer does
            response.id = request.id
            yield pb.ModelStreamInferResponse(infer_response=response)

    handler = grpc.method_handlers_generic_handler(
        SERVICE_NAME,
        {
            "ModelInfer": grpc.unary_unary_rpc_method_handler(infer),
            "ModelStreamInfer": grpc.stream_stream_rpc_method_handler(
                stream,
                request_deserializer=stream_method.request.FromString,
                response_serializer=stream_method.response.SerializeToString,
            ),
        },
    )
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()
    ready.set()
    async with http:
        await asyncio.Event().wait()


def _canned_main(http_sock: socket.socket, grpc_port: int, ready, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    loop = new_event_loop()
    loop.run_until_complete(_serve(http_sock, grpc_port, ready))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pin_plan() -> tuple[int | None, set[int] | None]:
    """(server core, generator cores): split the cores we may use, when there are two or more."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None, None
    return cores[0], set(cores[1:])


def measure(
    duration_s: float = 3.0,
    concurrency: Sequence[int] = (1, 16),
    processes: Sequence[int] = (1,),
    progress: bool = True,
) -> list[Report]:
    server_cpu, generator_cpus = _pin_plan()
    context = multiprocessing.get_context("spawn")
    http_sock = socket.socket()
    http_sock.bind(("127.0.0.1", 0))
    http_sock.listen(1024)
    http_port = http_sock.getsockname()[1]
    grpc_port = _free_port()
    ready = context.Event()
    canned = context.Process(
        target=_canned_main, args=(http_sock, grpc_port, ready, server_cpu), daemon=True
    )
    canned.start()
    http_sock.close()
    before = os.sched_getaffinity(0) if generator_cpus else None
    reports = []
    try:
        if not ready.wait(30):
            raise RuntimeError("the canned servers did not start")
        if generator_cpus:
            os.sched_setaffinity(0, generator_cpus)
        points = [Point(concurrency=c, warmup_s=0.5, duration_s=duration_s) for c in concurrency]
        targets = [
            (TargetSpec(f"http://127.0.0.1:{http_port}", "tiny"), "canned http-binary"),
            (TargetSpec(f"grpc://127.0.0.1:{grpc_port}", "tiny"), "canned grpc"),
            (
                TargetSpec(f"grpc://127.0.0.1:{grpc_port}", "tiny", streaming=True),
                "canned grpc-stream",
            ),
        ]
        for spec, label in targets:
            for n in processes:
                bench = BenchSpec(spec, processes=n, model_spec=TINY, label=f"{label} x{n} proc")
                reports.append(run_bench(bench, points, progress=progress, command="ceiling"))
        reports.append(
            run_bench(
                BenchSpec(TargetSpec("inprocess", "tiny"), label="inprocess"),
                points,
                progress=progress,
                command="ceiling",
            )
        )
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
        canned.terminate()
        canned.join(timeout=10)
    return reports


def format_ceiling(reports: Sequence[Report]) -> str:
    rows = [
        (
            "target",
            "point",
            "infer/s",
            "p50 ms",
            "p99 ms",
            "errors",
            "gen cpu",
            "infer/s per gen core",
        )
    ]
    for report in reports:
        for p in report.points:
            per_core = p.infer_per_s / p.generator_cpu if p.generator_cpu > 0 else 0.0
            rows.append(
                (
                    report.label,
                    p.x_label,
                    f"{p.infer_per_s:,.0f}",
                    f"{p.latency_ms['p50'] or 0:.3f}",
                    f"{p.latency_ms['p99'] or 0:.3f}",
                    str(p.errors),
                    f"{p.generator_cpu:.2f}",
                    f"{per_core:,.0f}",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="conveyor bench ceiling", description=__doc__.split("\n\n")[0])
    p.add_argument("-d", "--duration", type=float, default=3.0)
    p.add_argument("-c", "--concurrency", default="1,16")
    p.add_argument(
        "-p",
        "--processes",
        default="1,2",
        help="generator processes to try, e.g. 1,2 (default %(default)s)",
    )
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    reports = measure(
        args.duration,
        [int(c) for c in args.concurrency.split(",")],
        [int(n) for n in args.processes.split(",")],
        progress=not args.quiet,
    )
    print(format_ceiling(reports))
    sys.stdout.flush()
    return 0
