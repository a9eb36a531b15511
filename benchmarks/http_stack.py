"""Which HTTP stack should the V2 front end run on? Measure it.

Serves the built-in ``tiny`` model through the same V2 routes on several stacks, with the
server pinned to core 0 and perf_analyzer (binary tensors, batch 1) pinned to core 1, and
prints infer/s and latency for each:

    python -m benchmarks.http_stack                     # every variant, concurrency 16
    python -m benchmarks.http_stack --variants uvicorn-httptools-uvloop,aiohttp-uvloop

perf_analyzer comes with tritonclient wheels (see docs/benchmarks.md); set PERF_ANALYZER to
its path if it is not on PATH, and LD_LIBRARY_PATH to where libcudart.so.12 lives. It
uses perf_analyzer, not ``conveyor bench``, so every stack is driven by a client none of
them was written for; there is no fallback when perf_analyzer is missing. The uvicorn
variants run the embeddable ASGI app (``conveyor/server/http/asgi.py``) on stock uvicorn,
which Conveyor no longer depends on: ``pip install uvicorn`` to measure them.

Internal: ``--serve VARIANT --port N`` runs one server (the script starts these itself).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from benchmarks.common import child_env

VARIANTS = (
    "httptools-uvloop",
    "httptools-asyncio",
    "uvicorn-httptools-uvloop",
    "uvicorn-httptools-asyncio",
    "uvicorn-h11-uvloop",
    "aiohttp-uvloop",
)


# -- the servers under test -----------------------------------------------------------------


def serve(variant: str, port: int, model: str) -> None:
    from conveyor import __version__
    from conveyor.engine import Engine
    from conveyor.server.dataplane import DataPlane
    from conveyor.server.http.routes import V2Routes
    from conveyor.server.metrics import LatencyHistograms

    engine = Engine.from_repository(None, model_control="explicit", startup_models=[model])
    data = DataPlane(version=__version__, histograms=LatencyHistograms())
    data.engine = engine
    routes = V2Routes(data)
    loop_factory = None
    if variant.endswith("uvloop"):
        import uvloop

        loop_factory = uvloop.new_event_loop
    if variant.startswith("uvicorn"):
        _uvicorn(variant, routes, port)  # uvicorn runs its own loop and handles SIGTERM
        engine.close(5)
        return
    start = {"aiohttp": _aiohttp, "httptools": _httptools}[variant.split("-")[0]]

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        close = await start(variant, routes, port)
        await stop.wait()
        await close()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main())
    engine.close(5)


async def _httptools(variant: str, routes, port: int):  # type: ignore[no-untyped-def]
    from conveyor.server.http.listener import HTTPToolsFrontEnd

    front_end = HTTPToolsFrontEnd(routes, "127.0.0.1", port, max_body_bytes=64 << 20)
    await front_end.start()
    return lambda: front_end.stop(1)


def _uvicorn(variant: str, routes, port: int) -> None:  # type: ignore[no-untyped-def]
    import uvicorn

    from conveyor.server.http.asgi import ASGIApp

    _, protocol, loop = variant.split("-")
    uvicorn.run(
        ASGIApp(routes, max_body_bytes=64 << 20),
        host="127.0.0.1",
        port=port,
        http=protocol,
        loop=loop,
        lifespan="off",
        access_log=False,
        log_config=None,
        server_header=False,
    )


async def _aiohttp(variant: str, routes, port: int):  # type: ignore[no-untyped-def]
    from aiohttp import web

    from conveyor.server.http.errors import error_response

    async def handle(request: web.Request) -> web.Response:
        length = request.headers.get("Inference-Header-Content-Length")
        try:
            status, body, headers = await routes.handle(
                request.method,
                request.path,
                request.read,
                length.encode() if length is not None else None,
            )
        except Exception as exc:
            status, body = error_response(exc)
            headers = [(b"content-type", b"application/json")]
        return web.Response(
            status=status, body=body, headers={k.decode(): v.decode() for k, v in headers}
        )

    app = web.Application(client_max_size=64 << 20)
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner.cleanup


# -- the measurement ------------------------------------------------------------------------


def measure(variant: str, args: argparse.Namespace, perf_analyzer: str) -> tuple[float, float]:
    from conveyor.testing import free_port, wait_ready

    port = free_port()
    server = subprocess.Popen(
        ["taskset", "-c", args.server_core, sys.executable, "-m", "benchmarks.http_stack",
         "--serve", variant, "--port", str(port), "--model", args.model],
        env=child_env(),  # the checkout's root on the path, for ``-m benchmarks...``
    )  # fmt: skip
    try:
        wait_ready(f"http://127.0.0.1:{port}", 60, server)
        command = [
            "taskset", "-c", args.load_core, perf_analyzer,
            "-m", args.model, "-u", f"127.0.0.1:{port}", "-i", "http", "-b", "1",
            "--shape", f"INPUT0:{args.shape}",
            "--concurrency-range", str(args.concurrency),
            "--measurement-interval", str(args.interval_ms), "--max-trials", "5",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        out = done.stdout + done.stderr
        found = re.search(r"throughput: ([\d.]+) infer/sec, latency (\d+) usec", out)
        if found is None:
            raise RuntimeError(f"perf_analyzer said:\n{out}")
        return float(found.group(1)), float(found.group(2))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--shape", default="1,16")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--interval-ms", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=1, help="runs per variant (best kept)")
    parser.add_argument("--server-core", default="0")
    parser.add_argument("--load-core", default="1")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.model)
        return 0
    perf_analyzer = os.environ.get("PERF_ANALYZER") or shutil.which("perf_analyzer")
    if perf_analyzer is None:
        print("perf_analyzer not found: set PERF_ANALYZER (docs/benchmarks.md)", file=sys.stderr)
        return 2
    print(f"model {args.model}, binary tensors, batch 1, concurrency {args.concurrency}, "
          f"server on core {args.server_core}, perf_analyzer on core {args.load_core}")  # fmt: skip
    print(f"{'stack':<28} {'infer/s':>10} {'avg latency us':>15}")
    variants = args.variants.split(",")
    runs: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    # Interleaved rounds, best kept: other load on the machine hits every variant alike.
    for _ in range(args.repeat):
        for variant in variants:
            runs[variant].append(measure(variant, args, perf_analyzer))
            time.sleep(0.5)
    for variant in variants:
        rate, latency = max(runs[variant])
        each = " ".join(f"{r:.0f}" for r, _ in runs[variant])
        print(f"{variant:<28} {rate:>10.0f} {latency:>15.0f}   (runs: {each})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
