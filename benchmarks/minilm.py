"""Sentences per second for the built-in ``minilm`` embeddings, three ways and two runtimes.

    python -m conveyor.examples.minilm install     # once: the weights
    python -m benchmarks.minilm [--quick]

- **raw**: the encoder alone, one text per call in a loop (onnxruntime ``InferenceSession.run``
  and OpenVINO ``CompiledModel``), tokenized beforehand: the ceiling for one stream.
- **in-process**: ``Engine.submit`` on the ``minilm`` ensemble (tokenizer, then encoder) from
  N threads, one text per request, closed loop.
- **http**: the same through ``conveyor serve`` and tritonclient (N threads, one client each).

Short texts (about 10 word pieces) and long ones (about 200), at concurrency 1, 16 and 64.
Then ragged batching's gain: texts of mixed lengths at concurrency 16, in-process, the
encoder with ragged dynamic batching (as served) against a twin without batching; the
padding waste is estimated from the texts' lengths and the average batch the engine formed.
Writes benchmarks/results/minilm.json and minilm.md.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, markdown, rate
from conveyor.examples.minilm import INSTALL_COMMAND, installed, weights_dir
from conveyor.examples.minilm.install import ENCODER_FILE
from conveyor.examples.minilm.repository import openvino_available, write_models

SHORT = "The quick brown fox jumps over the lazy dog."
LONG = " ".join(["Conveyor batches requests of different lengths by padding them."] * 18)
CONCURRENCY = (1, 16, 64)
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


def closed_loop(call: Callable[[int], None], concurrency: int, seconds: float) -> float:
    """Calls per second of ``concurrency`` threads each calling ``call`` back to back."""
    stop = time.perf_counter() + seconds
    counts = [0] * concurrency

    def worker(slot: int) -> None:
        while time.perf_counter() < stop:
            call(slot)
            counts[slot] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def raw_rates(seconds: float) -> dict[str, float]:
    """One runtime at a time: OpenVINO's worker threads must not share the cores with the
    onnxruntime loop (together, the onnxruntime loop ran several times slower)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(weights_dir() / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    feeds_by_length = {}
    for length, text in (("short", SHORT), ("long", LONG)):
        encoding = tokenizer.encode(text)
        feeds_by_length[length] = {
            "input_ids": np.array([encoding.ids], np.int64),
            "attention_mask": np.array([encoding.attention_mask], np.int64),
        }
    rates = {}
    for runtime in ("onnxruntime", "openvino"):
        if runtime == "openvino" and not openvino_available():
            continue
        run = _raw_runner(runtime, str(weights_dir() / ENCODER_FILE))
        for length, feeds in feeds_by_length.items():
            for _ in range(3):  # warm up: the first calls allocate
                run(feeds)
            rates[f"raw|{runtime}|{length}|1"] = closed_loop(
                lambda _, run=run, feeds=feeds: run(feeds),
                1,
                seconds,
            )
    return rates


def _raw_runner(runtime: str, model_file: str) -> Callable[[dict[str, np.ndarray]], object]:
    if runtime == "onnxruntime":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            model_file, options, providers=["CPUExecutionProvider"]
        )
        return lambda feeds: session.run(None, feeds)
    import openvino

    compiled = openvino.Core().compile_model(model_file, "CPU", {"INFERENCE_NUM_THREADS": 1})
    request = compiled.create_infer_request()
    return lambda feeds: request.infer(feeds)


def inprocess_rates(repository: Path, seconds: float) -> dict[str, float]:
    from conveyor import Engine

    rates = {}
    with Engine.from_repository(repository) as engine:
        models = {"onnxruntime": "minilm"}
        if openvino_available():
            models["openvino"] = "minilm_openvino"
        for runtime, model in models.items():
            for length, text in (("short", SHORT), ("long", LONG)):
                tensor = {"TEXT": np.array([text.encode()], dtype=object)}
                engine.submit(model, tensor).result(timeout=60)  # warm up
                for concurrency in CONCURRENCY:
                    rates[f"in-process|{runtime}|{length}|{concurrency}"] = closed_loop(
                        lambda _: engine.submit(model, tensor).result(timeout=60),  # noqa: B023
                        concurrency,
                        seconds,
                    )
        rates.update(ragged_gain(engine, seconds))
    return rates


def ragged_gain(engine: object, seconds: float) -> dict[str, float]:
    """Mixed lengths at concurrency 16: ragged batching against no batching."""
    from conveyor import Engine

    assert isinstance(engine, Engine)
    rng = random.Random(0)
    words = LONG.split()
    texts = [" ".join(words[: rng.randint(3, len(words))]) for _ in range(256)]
    tensors = [{"TEXT": np.array([t.encode()], dtype=object)} for t in texts]
    results: dict[str, float] = {}
    for label, model, encoder in (
        ("ragged", "minilm", "minilm_encoder"),
        ("unbatched", "minilm_unbatched", "minilm_encoder_unbatched"),
    ):
        (before,) = engine.statistics(encoder)
        next_text = iter(range(10**9))
        results[f"mixed|{label}|16"] = closed_loop(
            lambda _: engine.submit(model, tensors[next(next_text) % len(tensors)]).result(  # noqa: B023
                timeout=60
            ),
            16,
            seconds,
        )
        (after,) = engine.statistics(encoder)
        inferences = after.inference_count - before.inference_count
        executions = max(1, after.execution_count - before.execution_count)
        results[f"mixed|{label}|average batch"] = inferences / executions
    results["mixed|ragged|padding waste"] = padding_waste(
        texts, results["mixed|ragged|average batch"]
    )
    return results


def padding_waste(texts: list[str], average_batch: float) -> float:
    """The expected share of padded token positions in batches of ``average_batch`` random
    texts (each batch runs at its longest text's length)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(weights_dir() / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    lengths = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    size = max(1, round(average_batch))
    rng = random.Random(1)
    used = padded = 0
    for _ in range(2000):
        batch = rng.sample(lengths, size)
        used += sum(batch)
        padded += max(batch) * size
    return 1.0 - used / padded


@contextmanager
def served(repository: Path) -> Iterator[str]:
    from conveyor.testing import run_server

    with run_server(repository, ready_timeout=300) as server:
        yield server.http_url.removeprefix("http://")


def http_rates(repository: Path, seconds: float) -> dict[str, float]:
    """tritonclient's HTTP client is not shared across threads (it runs on gevent), so one
    client keeps ``concurrency`` requests in flight with ``async_infer``: a closed loop that
    sends the next request as each answer arrives, oldest first."""
    import tritonclient.http as httpclient

    rates = {}
    with served(repository) as url:
        client = httpclient.InferenceServerClient(url, concurrency=max(CONCURRENCY))
        try:
            for length, text in (("short", SHORT), ("long", LONG)):
                tensor = httpclient.InferInput("TEXT", [1], "BYTES")
                tensor.set_data_from_numpy(np.array([text.encode()], dtype=object))
                client.infer("minilm", [tensor])  # warm up
                for concurrency in CONCURRENCY:
                    in_flight = deque(
                        client.async_infer("minilm", [tensor]) for _ in range(concurrency)
                    )
                    done = 0
                    started = time.perf_counter()
                    stop = started + seconds
                    while time.perf_counter() < stop:
                        in_flight.popleft().get_result()
                        done += 1
                        in_flight.append(client.async_infer("minilm", [tensor]))
                    elapsed = time.perf_counter() - started
                    for handle in in_flight:
                        handle.get_result()
                    rates[f"http|onnxruntime|{length}|{concurrency}"] = done / elapsed
        finally:
            client.close()
    return rates


def report(rates: dict[str, float]) -> str:
    rows = [["way", "runtime", "texts", *(f"c={c}" for c in CONCURRENCY)]]
    for way in ("raw", "in-process", "http"):
        for runtime in ("onnxruntime", "openvino"):
            for length in ("short", "long"):
                cells = [rates.get(f"{way}|{runtime}|{length}|{c}") for c in CONCURRENCY]
                if any(cell is not None for cell in cells):
                    shown = [rate(cell) if cell is not None else "" for cell in cells]
                    rows.append([way, runtime, length, *shown])
    table = markdown(rows, align_left=3)
    gain = [["encoder", "texts/s (c=16)", "average batch"]]
    for label in ("unbatched", "ragged"):
        gain.append(
            [
                label,
                rate(rates[f"mixed|{label}|16"]),
                f"{rates[f'mixed|{label}|average batch']:.1f}",
            ]
        )
    waste = rates["mixed|ragged|padding waste"]
    return (
        f"Sentences/s, one text per request:\n\n{table}\n\n"
        f"Mixed lengths (3 to ~200 word pieces), in-process, concurrency 16:\n\n"
        f"{markdown(gain, align_left=1)}\n\n"
        f"Estimated padding waste of the ragged batches: {waste:.0%} of token positions.\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.minilm", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="0.3 s per cell (a smoke test)")
    parser.add_argument("--seconds", type=float, default=1.5, help="seconds per cell")
    args = parser.parse_args(argv)
    if not installed():
        print(f"the MiniLM weights are not installed; run: {INSTALL_COMMAND}")
        return 1
    seconds = 0.3 if args.quick else args.seconds
    root = Path(tempfile.mkdtemp(prefix="conveyor-minilm-bench-"))
    try:
        repository = build_repository(root)
        rates = raw_rates(seconds)
        rates.update(inprocess_rates(repository, seconds))
        rates.update(http_rates(repository, seconds))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = report(rates)
    print(text)
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "minilm.json").write_text(json.dumps(rates, indent=1, sort_keys=True))
        (RESULTS / "minilm.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
