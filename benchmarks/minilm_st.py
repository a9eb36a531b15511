"""sentence-transformers' own ``encode()`` on the MiniLM weights: what a user would run instead.

Run by ``benchmarks/minilm.py`` with another interpreter (``--st-python``), one that has torch
and sentence-transformers, which Conveyor's environment does not. It imports only those and
the standard library, reads a JSON job on stdin and prints sentences/s as JSON on stdout:

    {"model": "<weights folder>", "seconds": 1.0,
     "cases": [{"key": "st|torch|short|16", "text": "...", "batch_size": 16}, ...]}

The model is built from the installed weights folder (``modules.json``, ``1_Pooling``, the
safetensors), never from a hub; one torch thread, on the core the parent pinned it to.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> int:
    job = json.load(sys.stdin)
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    model = SentenceTransformer(job["model"], device="cpu")
    rates: dict[str, float] = {}
    for case in job["cases"]:
        texts = [case["text"]] * case["batch_size"]
        model.encode(texts, batch_size=case["batch_size"])  # warm up: the first call allocates
        calls = 0
        started = time.perf_counter()
        # At least two calls, so a long batch that takes longer than the cell still counts.
        while calls < 2 or time.perf_counter() - started < job["seconds"]:
            model.encode(texts, batch_size=case["batch_size"])
            calls += 1
        rates[case["key"]] = calls * len(texts) / (time.perf_counter() - started)
    versions = {"torch": torch.__version__}
    import sentence_transformers

    versions["sentence_transformers"] = sentence_transformers.__version__
    json.dump({"rates": rates, "versions": versions}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
