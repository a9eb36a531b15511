"""Streaming: time to first response and responses per second of decoupled models.

    python -m benchmarks.streaming [--short] [--duration S] [--concurrency 1,16,64]

Two decoupled Python models, served from a temporary repository by one ``conveyor serve``
pinned to core 0, with this process (the load) on core 1:

- ``burst``: answers each request with ``--responses`` responses (one INT32 each) as fast
  as it can yield them, on four instances: what the streaming paths themselves cost;
- ``chargen``: the built-in generator example (a copy of it), its prompt ``"hi!"`` back one
  character per response, 50 ms apart, on its one instance: a model-bound stream.

Each model is driven by ``--concurrency`` closed-loop streams, each sending its next request
once the last response of the previous one arrived, over gRPC ``ModelStreamInfer`` (one
bidirectional call per stream, raw ``grpc.aio`` with Conveyor's message classes) and over
HTTP ``generate_stream`` (Server-Sent Events, aiohttp), and in-process (``engine.stream``
with ``async for``, in a child process on core 0: the ceiling with no transport). Reported:
requests and responses per second, and the time from sending a request to its first
response (p50, p99). Writes streaming.{json,md,png} into benchmarks/results/ (``--out``).

Internal: ``--inprocess REPOSITORY`` runs the in-process part and prints its JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import RESULTS, child_env, markdown, ms, pin_plan, pinned, rate

CHARGEN_PROMPT = "hi!"

BURST = textwrap.dedent(
    """
    import numpy as np

    class Model:
        thread_safe = True

        def infer(self, inputs):
            for index in range(int(inputs["COUNT"][0])):
                yield {"VALUE": np.array([index], np.int32)}
    """
)

BURST_CONFIG = """
backend = "python"
decoupled = true
instances = 4
max_queue_size = 1024

[[inputs]]
name = "COUNT"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "VALUE"
datatype = "INT32"
shape = [1]
"""

Result = dict[str, Any]
OpenStream = Callable[[], AsyncIterator[None]]  # one request; yields once per response


def build_repository(path: Path) -> Path:
    (path / "burst" / "1").mkdir(parents=True)
    (path / "burst" / "1" / "model.py").write_text(BURST)
    (path / "burst" / "config.toml").write_text(BURST_CONFIG)
    examples = Path(common.ROOT) / "conveyor" / "examples" / "repository" / "chargen"
    shutil.copytree(examples, path / "chargen")
    return path


# -- one closed-loop run --------------------------------------------------------------------


async def closed_loop(
    streams: Sequence[OpenStream], duration: float, warmup: float
) -> dict[str, float]:
    """Each stream sends requests back to back for ``warmup + duration``; what arrives in
    the window after the warmup counts (a request: its last response; its time to first
    response: when that arrives in the window). Streams still busy at the end are cancelled,
    so a slow model's queue never runs past the window."""
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    stop = start + duration
    firsts: list[float] = []
    totals = {"requests": 0, "responses": 0}

    def inside(moment: float) -> bool:
        return start <= moment <= stop

    async def run(open_stream: OpenStream) -> None:
        while loop.time() < stop:
            sent = loop.time()
            first = True
            async for _ in open_stream():
                now = loop.time()
                if inside(now):
                    totals["responses"] += 1
                    if first:
                        firsts.append(now - sent)
                first = False
            if inside(loop.time()):
                totals["requests"] += 1

    tasks = [asyncio.ensure_future(run(stream)) for stream in streams]
    done, pending = await asyncio.wait(tasks, timeout=stop - loop.time())
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        task.result()  # a failed stream fails the run
    firsts.sort()

    def percentile(p: float) -> float:
        return firsts[min(len(firsts) - 1, int(p * len(firsts)))] * 1000 if firsts else 0.0

    return {
        "requests_per_s": totals["requests"] / duration,
        "responses_per_s": totals["responses"] / duration,
        "ttft_p50_ms": percentile(0.5),
        "ttft_p99_ms": percentile(0.99),
    }


def inputs_of(model: str, responses: int) -> dict[str, Any]:
    return {"COUNT": responses} if model == "burst" else {"text_input": CHARGEN_PROMPT}


# -- gRPC ModelStreamInfer ------------------------------------------------------------------


def grpc_request(model: str, responses: int) -> bytes:
    from conveyor.protocol.grpc._generated import grpc_service_pb2 as pb

    request = pb.ModelInferRequest(model_name=model)
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    tensor = request.inputs.add()
    tensor.shape.append(1)
    if model == "burst":
        tensor.name, tensor.datatype = "COUNT", "INT32"
        tensor.contents.int_contents.append(responses)
    else:
        tensor.name, tensor.datatype = "text_input", "BYTES"
        tensor.contents.bytes_contents.append(CHARGEN_PROMPT.encode())
    return request.SerializeToString()


async def over_grpc(
    channel: Any, model: str, responses: int, count: int, args: argparse.Namespace
) -> dict[str, float]:
    """``count`` ModelStreamInfer calls, each a closed loop of requests; cancelled after."""
    from conveyor.protocol.grpc.methods import METHODS

    method = METHODS["ModelStreamInfer"]
    request = grpc_request(model, responses)
    calls: list[Any] = []

    def stream() -> OpenStream:
        call = channel.stream_stream(
            method.path,
            request_serializer=lambda data: data,
            response_deserializer=method.response.FromString,
        )()
        calls.append(call)

        async def one() -> AsyncIterator[None]:
            await call.write(request)
            while True:
                answer = await call.read()
                if answer.error_message:
                    raise RuntimeError(answer.error_message)
                final = answer.infer_response.parameters.get("triton_final_response")
                if final is not None and final.bool_param:
                    return
                yield None

        return one

    try:
        return await closed_loop([stream() for _ in range(count)], args.duration, args.warmup)
    finally:
        for call in calls:
            call.cancel()


# -- HTTP generate_stream (SSE) -------------------------------------------------------------


def http_streams(
    session: Any, url: str, model: str, responses: int, count: int
) -> list[OpenStream]:
    body = json.dumps(inputs_of(model, responses)).encode()
    target = f"{url}/v2/models/{model}/generate_stream"

    async def one() -> AsyncIterator[None]:
        async with session.post(target, data=body) as answer:
            answer.raise_for_status()
            async for line in answer.content:
                if line.startswith(b"data:"):
                    if b'"error"' in line:
                        raise RuntimeError(line.decode())
                    yield None

    return [one] * count


# -- in-process engine.stream (a child process on the server's core) ----------------------


def inprocess(repository: str, args: argparse.Namespace) -> list[Result]:
    import numpy as np

    from conveyor import Engine

    async def main(engine: Any) -> list[Result]:
        results = []
        for model in ("burst", "chargen"):
            if model == "burst":
                arrays = {"COUNT": np.array([args.responses], np.int32)}
            else:
                arrays = {"text_input": np.array([CHARGEN_PROMPT.encode()], dtype=object)}

            async def one(
                model: str = model, arrays: dict[str, Any] = arrays
            ) -> AsyncIterator[None]:
                async for _ in engine.stream(model, arrays):
                    yield None

            for concurrency in args.concurrency:
                measured = await closed_loop([one] * concurrency, args.duration, args.warmup)
                results.append(row("in-process", model, concurrency, measured))
        return results

    with Engine.from_repository(repository) as engine:
        return asyncio.run(main(engine))


def run_inprocess(
    repository: Path, args: argparse.Namespace, cpus: set[int] | None
) -> list[Result]:
    command = [
        sys.executable, "-m", "benchmarks.streaming", "--inprocess", str(repository),
        "--duration", str(args.duration), "--warmup", str(args.warmup),
        "--responses", str(args.responses),
        "--concurrency", ",".join(map(str, args.concurrency)),
    ]  # fmt: skip
    with pinned(cpus):
        done = subprocess.run(command, env=child_env(), capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"the in-process run failed:\n{done.stderr}")
    results: list[Result] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


# -- the whole run --------------------------------------------------------------------------


def row(transport: str, model: str, concurrency: int, measured: dict[str, float]) -> Result:
    return {"transport": transport, "model": model, "concurrency": concurrency, **measured}


async def over_the_wire(http_url: str, grpc_url: str, args: argparse.Namespace) -> list[Result]:
    import aiohttp
    import grpc

    results = []
    connector = aiohttp.TCPConnector(limit=0)
    channel = grpc.aio.insecure_channel(grpc_url.removeprefix("grpc://"))
    async with aiohttp.ClientSession(connector=connector) as session, channel:
        for model in ("burst", "chargen"):
            for concurrency in args.concurrency:
                measured = await over_grpc(channel, model, args.responses, concurrency, args)
                results.append(row("gRPC ModelStreamInfer", model, concurrency, measured))
                streams = http_streams(session, http_url, model, args.responses, concurrency)
                measured = await closed_loop(streams, args.duration, args.warmup)
                results.append(row("HTTP generate_stream", model, concurrency, measured))
    return results


def table(results: Sequence[Result], responses: int) -> str:
    rows = [["model", "path", "streams", "requests/s", "responses/s", "TTFT p50 ms", "TTFT p99 ms"]]
    for r in sorted(results, key=lambda r: (r["model"], r["transport"], r["concurrency"])):
        name = f"burst ({responses} responses)" if r["model"] == "burst" else "chargen"
        rows.append(
            [
                name,
                r["transport"],
                str(r["concurrency"]),
                rate(r["requests_per_s"]),
                rate(r["responses_per_s"]),
                ms(r["ttft_p50_ms"]),
                ms(r["ttft_p99_ms"]),
            ]
        )
    return markdown(rows, align_left=3)


def plot(results: Sequence[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    burst = [r for r in results if r["model"] == "burst"]
    figure, (left, right) = pyplot.subplots(1, 2, figsize=(10, 4))
    for transport in sorted({r["transport"] for r in burst}):
        mine = sorted(
            (r for r in burst if r["transport"] == transport), key=lambda r: r["concurrency"]
        )
        levels = [r["concurrency"] for r in mine]
        left.plot(levels, [r["responses_per_s"] for r in mine], marker="o", label=transport)
        right.plot(levels, [r["ttft_p50_ms"] for r in mine], marker="o", label=transport)
    for axis, title in (
        (left, "burst: responses/s"),
        (right, "burst: time to first response p50 (ms)"),
    ):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrent streams")
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
    right.set_yscale("log")
    left.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.streaming", description=__doc__)
    parser.add_argument(
        "--short", action="store_true", help="a smoke test: 0.5 s windows, 1 and 16 streams"
    )
    parser.add_argument("--duration", type=float, default=3.0, help="seconds measured per point")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--responses", type=int, default=32, help="responses per burst request")
    parser.add_argument(
        "--concurrency", type=lambda text: [int(c) for c in text.split(",")], default=[1, 16, 64]
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="where the JSON, table and plot go"
    )
    parser.add_argument("--inprocess", metavar="REPOSITORY", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.short:
        args.duration, args.warmup = 0.5, 0.2
        if args.concurrency == [1, 16, 64]:
            args.concurrency = [1, 16]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    if args.inprocess:
        print(json.dumps(inprocess(args.inprocess, args)))
        return
    server_cpus, load_cpus = pin_plan()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        repository = build_repository(Path(tmp))
        served = common.serve(server_cpus, repository=str(repository))
        with served as (http_url, grpc_url), pinned(load_cpus):
            results = asyncio.run(over_the_wire(http_url, grpc_url, args))
        results += run_inprocess(repository, args, server_cpus)
    text = table(results, args.responses)
    note = f"{common.machine_line()}; {args.duration} s per point, {common.today()}"
    (out / "streaming.json").write_text(json.dumps({"machine": note, "results": results}, indent=1))
    (out / "streaming.md").write_text(f"{text}\n\n{note}\n")
    plot(results, out / "streaming.png")
    print(text)
    print(note)


if __name__ == "__main__":
    main()
