"""The no-op ceiling of Conveyor's own gRPC transport: a canned service on it, driven like
``conveyor bench ceiling`` drives grpcio's canned server.

The canned server runs in a child process (pinned to the server core, as the rest of the
suite) and answers ModelInfer with one prebuilt ModelInferResponse (``tiny``'s; for a request
naming ``identity``, one with a 4 MiB tensor) and each ModelStreamInfer message with
``tiny``'s response carrying the request's id, through the transport of
``conveyor.server.grpc.h2`` with no servicer, data plane or engine behind it. It also answers
the server metadata, model metadata and model configuration perf_analyzer asks for first,
so perf_analyzer can drive it too (``benchmarks.large_grpc_ceiling``). It lives here,
not in ``conveyor.bench``, because the bench package never imports the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np

from benchmarks.common import free_port, pinned
from conveyor.bench import BenchSpec, Point, Report, TargetSpec, run_bench
from conveyor.bench.ceiling import TINY
from conveyor.bench.inputs import InputSpec, ModelSpec
from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb
from conveyor.protocol.grpc._generated import model_config_pb2
from conveyor.protocol.grpc.methods import METHODS

LABELS = ("canned grpc (conveyor h2)", "canned grpc-stream (conveyor h2)")
IDENTITY_LABEL = "canned grpc 4 MiB (conveyor h2)"
IDENTITY = ModelSpec("identity", (InputSpec("INPUT0", "FP32", (-1,)),), ("OUTPUT0",), 0)
IDENTITY_ELEMENTS = 1024 * 1024  # 4 MiB of FP32


def _response(model: str = "tiny", shape: tuple[int, ...] = (1, 16)) -> pb.ModelInferResponse:
    output = pb.ModelInferResponse.InferOutputTensor(name="OUTPUT0", datatype="FP32", shape=shape)
    size = 4 * int(np.prod(shape))
    return pb.ModelInferResponse(
        model_name=model, model_version="1", outputs=[output], raw_output_contents=[bytes(size)]
    )


async def _serve(port: int, ready: Any) -> None:
    from conveyor.server.grpc.h2.server import GrpcService, start_h2_server
    from conveyor.server.grpc.service import Bound

    response = _response()
    answer = response.SerializeToString()
    large = _response("identity", (IDENTITY_ELEMENTS,)).SerializeToString()
    described = {model: _description(model).SerializeToString() for model in ("tiny", "identity")}
    configured = {model: _config(model).SerializeToString() for model in ("tiny", "identity")}
    server = pb.ServerMetadataResponse(name="canned", version="0").SerializeToString()

    async def infer(request: bytes, context: Any) -> bytes:
        # ModelInferRequest's field 1 is model_name: "identity" asks for the 4 MiB answer.
        return large if request[2:10] == b"identity" else answer

    async def stream(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for request in requests:  # echo each id back, as ModelStreamInfer does
            response.id = request.id
            yield pb.ModelStreamInferResponse(infer_response=response).SerializeToString()

    # What perf_analyzer asks before it starts: the server's and the model's metadata and
    # the model's configuration (requests name the model: field 1 again).
    async def server_metadata(request: bytes, context: Any) -> bytes:
        return server

    async def model_metadata(request: bytes, context: Any) -> bytes:
        return described["identity" if request[2:10] == b"identity" else "tiny"]

    async def model_config(request: bytes, context: Any) -> bytes:
        return configured["identity" if request[2:10] == b"identity" else "tiny"]

    def unary(function: Any) -> Bound:
        return Bound(function, bytes, bytes, streaming=False)

    methods = {
        "ModelInfer": unary(infer),
        "ModelStreamInfer": Bound(
            stream, METHODS["ModelStreamInfer"].request.FromString, bytes, streaming=True
        ),
        "ServerMetadata": unary(server_metadata),
        "ModelMetadata": unary(model_metadata),
        "ModelConfig": unary(model_config),
    }
    await start_h2_server(GrpcService(methods, 64 << 20, None), "127.0.0.1", port)
    ready.set()
    await asyncio.Event().wait()


def _description(model: str) -> pb.ModelMetadataResponse:
    shape = [-1] if model == "identity" else [-1, 16]
    tensor = pb.ModelMetadataResponse.TensorMetadata
    return pb.ModelMetadataResponse(
        name=model,
        versions=["1"],
        platform="onnxruntime_onnx",
        inputs=[tensor(name="INPUT0", datatype="FP32", shape=shape)],
        outputs=[tensor(name="OUTPUT0", datatype="FP32", shape=shape)],
    )


def _config(model: str) -> pb.ModelConfigResponse:
    # tiny batches (its first dimension is the batch); identity takes any length unbatched.
    batch, dims = (0, [-1]) if model == "identity" else (64, [16])
    fp32 = model_config_pb2.TYPE_FP32
    return pb.ModelConfigResponse(
        config=model_config_pb2.ModelConfig(
            name=model,
            max_batch_size=batch,
            input=[model_config_pb2.ModelInput(name="INPUT0", data_type=fp32, dims=dims)],
            output=[model_config_pb2.ModelOutput(name="OUTPUT0", data_type=fp32, dims=dims)],
        )
    )


def _main(port: int, ready: Any) -> None:
    from conveyor.bench.loadgen import new_event_loop

    new_event_loop().run_until_complete(_serve(port, ready))


@contextlib.contextmanager
def canned_server(cpus: set[int] | None) -> Iterator[int]:
    """The canned server in a child process pinned to ``cpus``; its port."""
    port = free_port()
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    with pinned(cpus):  # the child inherits the pinning when it starts
        server = context.Process(target=_main, args=(port, ready), daemon=True)
        server.start()
    try:
        if not ready.wait(30):
            raise RuntimeError("the canned gRPC server did not start")
        yield port
    finally:
        server.terminate()
        server.join(timeout=10)
        if os.name == "posix" and server.is_alive():
            server.kill()


def measure(
    duration: float, concurrency: int, cpus: tuple[set[int] | None, set[int] | None]
) -> list[Report]:
    """Unary and one-stream ``tiny`` at ``concurrency``, and the 4 MiB identity at 4, against
    the canned server; server on ``cpus[0]``."""
    server_cpus, generator_cpus = cpus
    with canned_server(server_cpus) as port:
        reports = []
        with pinned(generator_cpus):
            for streaming, label in zip((False, True), LABELS, strict=True):
                spec = TargetSpec(f"grpc://127.0.0.1:{port}", "tiny", streaming=streaming)
                point = Point(concurrency=concurrency, warmup_s=0.5, duration_s=duration)
                bench = BenchSpec(spec, model_spec=TINY, label=f"{label} x1 proc")
                reports.append(run_bench(bench, [point], progress=False, command="ceiling"))
            spec = TargetSpec(f"grpc://127.0.0.1:{port}", "identity")
            point = Point(concurrency=4, warmup_s=0.5, duration_s=duration)
            bench = BenchSpec(
                spec,
                model_spec=IDENTITY,
                shapes={"INPUT0": (IDENTITY_ELEMENTS,)},
                label=f"{IDENTITY_LABEL} x1 proc",
            )
            reports.append(run_bench(bench, [point], progress=False, command="ceiling"))
        return reports
