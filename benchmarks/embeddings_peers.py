"""MiniLM on OpenAI's ``/v1/embeddings``: Conveyor beside Infinity, the raw encoder and
sentence-transformers, in one run with one load generator.

    python -m conveyor.examples.minilm install     # once: the weights
    python -m benchmarks.embeddings_peers --peers-python /tmp/peers-venv/bin/python \\
        [--rounds 3] [--seconds 3] [--plot docs/img/embeddings-peers.png]

``--peers-python``: an interpreter of a venv of its own with ``torch==2.13.0`` (CPU),
``sentence-transformers`` and ``infinity-emb``; its ``infinity_emb`` serves the same
weights folder. Every server and in-process loop runs on the first core (``taskset``'s
effect), the aiohttp load generator on the other. Short (≈ 10 word pieces) and long
(≈ 200) texts, one per request, at concurrency 1, 16, 64. The raw limit is the ONNX
encoder in onnxruntime, one thread, on B copies of the tokenized text (B = 1, 16, 64);
sentence-transformers is ``encode(batch_size=B)``. Each round measures every target once,
the order of the two servers alternating between rounds, so a neighbour's load on a
shared machine lands on both; the table gives the median of the rounds and each round's
ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from benchmarks.common import free_port, markdown, pin_plan, pinned
from benchmarks.embeddings import embedding, load
from benchmarks.minilm import CONCURRENCY, served
from benchmarks.minilm_limits import raw_limits, sentence_transformers_rates, token_count
from conveyor.bench.plot import INSTALL_HINT
from conveyor.examples.minilm import INSTALL_COMMAND, installed, weights_dir
from conveyor.examples.minilm.repository import write_models

SHORT = "The quick brown fox jumps over the lazy dog."
_SENTENCE = (
    "Conveyor batches requests of different lengths by padding them to the longest, "
    "and each request gets back its own rows of the answer."
)
_WORDS = _SENTENCE.split(" ")


def long_text(tokens: int = 200) -> str:
    """Words repeated until the tokenizer makes about ``tokens`` word pieces of them."""
    words: list[str] = []
    while token_count(" ".join(words)) < tokens:
        words.append(_WORDS[len(words) % len(_WORDS)])
    return " ".join(words)


@contextmanager
def infinity(python: str, cores: set[int] | None) -> Iterator[str]:
    """``infinity_emb v2`` of ``python``'s venv on the weights folder, ready to answer."""
    port = free_port()
    command = [
        str(Path(python).with_name("infinity_emb")),
        "v2",
        "--model-id",
        str(weights_dir()),
        "--served-model-name",
        "minilm",
        "--engine",
        "torch",
        "--device",
        "cpu",
        "--url-prefix",
        "/v1",
        "--batch-size",
        "64",
        "--port",
        str(port),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryFile() as log:
        with pinned(cores):
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            yield _ready(process, f"127.0.0.1:{port}", log)
        finally:
            process.terminate()
            process.wait(timeout=30)


def _ready(process: subprocess.Popen[bytes], url: str, log: IO[bytes]) -> str:
    """``url`` once the Infinity ``process`` answers an embeddings request (its log tail
    if it exits or takes more than five minutes)."""
    deadline = time.monotonic() + 300
    while True:
        try:
            embedding(url, "ready?")
            return url
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                tail = log.read().decode(errors="replace")[-2000:]
                raise SystemExit(f"Infinity did not start: {tail}") from None
            time.sleep(1)


def http_round(
    targets: dict[str, str], texts: dict[str, str], seconds: float, flip: bool
) -> dict[str, tuple[float, float, float]]:
    """``<target>|<length>|<c>`` -> (texts/s, p50 s, p99 s)."""
    results = {}
    order = list(targets.items())
    if flip:
        order.reverse()
    for length, text in texts.items():
        body = json.dumps({"model": "minilm", "input": text, "encoding_format": "float"})
        for concurrency in CONCURRENCY:
            for name, url in order:
                asyncio.run(load(url, "/v1/embeddings", body.encode(), 4, 0.5))  # warm
                answers, elapsed = asyncio.run(
                    load(url, "/v1/embeddings", body.encode(), concurrency, seconds)
                )
                times = sorted(answers)
                results[f"{name}|{length}|{concurrency}"] = (
                    len(times) / elapsed,
                    times[len(times) // 2],
                    times[int(len(times) * 0.99)],
                )
                print(name, length, concurrency, f"{len(times) / elapsed:.0f}/s", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description="MiniLM on OpenAI's /v1/embeddings: Conveyor beside Infinity, the raw "
        "encoder and sentence-transformers, in one run with one load generator.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--peers-python",
        required=True,
        help="the python of a venv with torch, sentence-transformers and infinity-emb "
        "(see docs/embeddings.md)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every target")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds a point is measured")
    parser.add_argument(
        "--plot", type=Path, help="write a PNG of the rates here (needs matplotlib: .[bench])"
    )
    args = parser.parse_args()
    if not installed():
        raise SystemExit(f"the MiniLM weights are not installed: {INSTALL_COMMAND}")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise SystemExit(INSTALL_HINT)  # said now, not after minutes of measuring
    texts = {"short": SHORT, "long": long_text()}
    tokens = {length: token_count(text) for length, text in texts.items()}
    server, generator = pin_plan()
    rounds: list[dict[str, tuple[float, float, float]]] = []
    raw: list[dict[str, float]] = []
    st: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as root:
        write_models(weights_dir(), Path(root))
        with (
            served(Path(root), server) as conveyor,
            infinity(args.peers_python, server) as peer,
        ):
            targets = {"Conveyor": conveyor, "Infinity": peer}
            gaps = {
                length: float(abs(embedding(conveyor, text) - embedding(peer, text)).max())
                for length, text in texts.items()
            }
            with pinned(generator):
                for index in range(args.rounds):
                    rounds.append(http_round(targets, texts, args.seconds, index % 2 == 1))
                    raw.append(raw_limits(texts, args.seconds, server))
                    st.append(
                        sentence_transformers_rates(args.peers_python, texts, args.seconds, server)[
                            0
                        ]
                    )
    print(report(rounds, raw, st, tokens, gaps))
    if args.plot:
        plot(rounds, raw, st, args.plot)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(
    rounds: list[dict[str, tuple[float, float, float]]],
    raw: list[dict[str, float]],
    st: list[dict[str, float]],
    tokens: dict[str, int],
    gaps: dict[str, float],
) -> str:
    rows = [["text", "target", "c / batch", "texts/s", "p50 ms", "p99 ms"]]
    for length in tokens:
        for concurrency in CONCURRENCY:
            for name in ("Conveyor", "Infinity"):
                key = f"{name}|{length}|{concurrency}"
                rate = _median([r[key][0] for r in rounds])
                p50 = _median([r[key][1] for r in rounds]) * 1e3
                p99 = _median([r[key][2] for r in rounds]) * 1e3
                label = f"{name} /v1/embeddings"
                rows.append(
                    [length, label, str(concurrency), f"{rate:.0f}", f"{p50:.1f}", f"{p99:.1f}"]
                )
            for label, runs, prefix in (
                ("raw encoder (onnxruntime)", raw, "raw|onnxruntime"),
                ("sentence-transformers", st, "st|torch"),
            ):
                values = [r[f"{prefix}|{length}|{concurrency}"] for r in runs if r]
                if values:
                    rows.append([length, label, str(concurrency), f"{_median(values):.0f}", "", ""])
    lines = [markdown(rows), ""]
    for length, count in tokens.items():
        lines.append(
            f"{length}: {count} word pieces; max |Conveyor - Infinity| = {gaps[length]:.1e}"
        )
    for length in tokens:
        for index, (r, limits) in enumerate(zip(rounds, raw, strict=True)):
            ours = r[f"Conveyor|{length}|16"][0]
            best = max(limits[f"raw|onnxruntime|{length}|{b}"] for b in CONCURRENCY)
            lines.append(
                f"round {index + 1} {length} c16: Conveyor/Infinity "
                f"{ours / r[f'Infinity|{length}|16'][0]:.2f}, Conveyor/raw best {ours / best:.2f}"
            )
    return "\n".join(lines)


def plot(
    rounds: list[dict[str, tuple[float, float, float]]],
    raw: list[dict[str, float]],
    st: list[dict[str, float]],
    path: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, panels = plt.subplots(1, 2, figsize=(10, 3.8))
    for panel, length in zip(panels, ("short", "long"), strict=True):
        for name, style in (("Conveyor", "C0-o"), ("Infinity", "C1-s")):
            values = [_median([r[f"{name}|{length}|{c}"][0] for r in rounds]) for c in CONCURRENCY]
            panel.plot(CONCURRENCY, values, style, label=f"{name} /v1/embeddings")
        for label, style, runs, prefix in (
            ("raw encoder, batch B", "k--", raw, "raw|onnxruntime"),
            ("sentence-transformers, batch B", "C2-^", st, "st|torch"),
        ):
            if all(runs):
                values = [_median([r[f"{prefix}|{length}|{c}"] for r in runs]) for c in CONCURRENCY]
                panel.plot(CONCURRENCY, values, style, label=label)
        panel.set_xscale("log", base=2)
        panel.set_xticks(list(CONCURRENCY), [str(c) for c in CONCURRENCY])
        panel.set_title(f"{length} texts, one server core")
        panel.set_xlabel("concurrency (raw, sentence-transformers: batch size)")
        panel.set_ylabel("texts/s")
    panels[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
