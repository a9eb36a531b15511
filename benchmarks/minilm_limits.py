"""The figures MiniLM served through Conveyor is held to: the raw encoder's limit, and
sentence-transformers' ``encode()``, both on the server's core.

- **raw limit**: the ONNX encoder alone (an onnxruntime ``InferenceSession`` or an OpenVINO
  ``CompiledModel`` in f32 as served, one thread, no Conveyor) in a loop over perfectly
  batched input: B copies of one text, tokenized beforehand, so no padding and no tokenizer.
  B is the batch the engine can form at concurrency B (1, 16, 64); the best B is the limit.
- **sentence-transformers**: ``SentenceTransformer(<weights folder>).encode(texts,
  batch_size=B)`` in a subprocess of another interpreter (``benchmarks/minilm_st.py``), one
  torch thread, tokenizing included, as Conveyor's ensemble does.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.common import pinned
from conveyor.examples.minilm import weights_dir
from conveyor.examples.minilm.install import ENCODER_FILE
from conveyor.examples.minilm.repository import openvino_available

BATCH_SIZES = (1, 16, 64)
ST_SCRIPT = Path(__file__).with_name("minilm_st.py")

Feeds = dict[str, np.ndarray]


@functools.cache
def tokenizer() -> object:
    """all-MiniLM-L6-v2's tokenizer set up as the served ``minilm_tokenizer`` sets it up:
    tokenizer.json ships fixed padding to 128, which the model (like sentence-transformers)
    replaces with truncation at 256 and padding to the longest text."""
    from tokenizers import Tokenizer

    loaded = Tokenizer.from_file(str(weights_dir() / "tokenizer.json"))
    loaded.no_padding()
    loaded.enable_truncation(max_length=256)
    return loaded


def token_count(text: str) -> int:
    return len(tokenizer().encode(text).ids)  # type: ignore[attr-defined]


def batched_feeds(text: str, batch_size: int) -> Feeds:
    encoding = tokenizer().encode(text)  # type: ignore[attr-defined]
    return {
        "input_ids": np.array([encoding.ids] * batch_size, np.int64),
        "attention_mask": np.array([encoding.attention_mask] * batch_size, np.int64),
    }


def raw_limits(texts: dict[str, str], seconds: float, cores: set[int] | None) -> dict[str, float]:
    """``raw|<runtime>|<texts>|<B>`` sentences/s, each runtime in a process of its own:
    OpenVINO's worker threads outlive their loop and would share the core with whatever
    runs next in the same process (the onnxruntime loop ran several times slower)."""
    rates: dict[str, float] = {}
    runtimes = ["onnxruntime", *(["openvino"] if openvino_available() else [])]
    spawn = multiprocessing.get_context("spawn")
    for runtime in runtimes:
        with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as child:
            rates.update(child.submit(_raw_limit, runtime, texts, seconds, cores).result())
    return rates


def _raw_limit(
    runtime: str, texts: dict[str, str], seconds: float, cores: set[int] | None
) -> dict[str, float]:
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)  # before the runtime starts its threads: they inherit it
    run = _raw_runner(runtime, str(weights_dir() / ENCODER_FILE))
    rates = {}
    for length, text in texts.items():
        for batch_size in BATCH_SIZES:
            feeds = batched_feeds(text, batch_size)
            run(feeds)  # warm up: the first call of a shape allocates
            calls = 0
            started = time.perf_counter()
            while calls < 2 or time.perf_counter() - started < seconds:
                run(feeds)
                calls += 1
            elapsed = time.perf_counter() - started
            rates[f"raw|{runtime}|{length}|{batch_size}"] = calls * batch_size / elapsed
    return rates


def _raw_runner(runtime: str, model_file: str) -> Callable[[Feeds], object]:
    if runtime == "onnxruntime":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            model_file, options, providers=["CPUExecutionProvider"]
        )
        return lambda feeds: session.run(None, feeds)
    from conveyor.backends.openvino_telemetry import keep_telemetry_off

    keep_telemetry_off()
    import openvino

    # f32 as the served encoder runs (its [openvino] precision_hint default): on a CPU with
    # bf16 units OpenVINO's own default is bf16, about twice as fast and off in the third
    # digit, which would hold the served model to a limit it must not take.
    properties = {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32"}
    compiled = openvino.Core().compile_model(model_file, "CPU", properties)
    request = compiled.create_infer_request()
    return lambda feeds: request.infer(feeds)


def sentence_transformers_rates(
    python: str | None, texts: dict[str, str], seconds: float, cores: set[int] | None
) -> tuple[dict[str, float], str]:
    """``st|torch|<texts>|<B>`` sentences/s, and what happened (versions, or why skipped)."""
    if not python:
        return {}, "skipped: no --st-python given (an interpreter with sentence-transformers)"
    probe = subprocess.run(
        [python, "-c", "import sentence_transformers, torch"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if probe.returncode != 0:
        tail = probe.stderr.strip().splitlines()[-1:] or ["no message"]
        return {}, f"skipped: {python} cannot import sentence_transformers ({tail[0]})"
    job = {
        "model": str(weights_dir()),
        "seconds": seconds,
        "cases": [
            {"key": f"st|torch|{length}|{size}", "text": text, "batch_size": size}
            for length, text in texts.items()
            for size in BATCH_SIZES
        ],
    }
    env_threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with pinned(cores):  # the child inherits the core at its start (taskset's effect)
        done = subprocess.run(
            [python, str(ST_SCRIPT)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, **env_threads},
        )
    if done.returncode != 0:
        return {}, f"failed: {done.stderr.strip()[-400:]}"
    answer = json.loads(done.stdout)
    versions = ", ".join(f"{name} {version}" for name, version in answer["versions"].items())
    return answer["rates"], versions
