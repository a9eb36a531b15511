"""A tiny embedding model for the OpenAI tests: texts in, 8 floats per text out.

Each text's vector is a function of its bytes only (so a text embeds the same alone or in
a batch), and a mask of ones per whitespace-separated word stands for a tokenizer's."""

from __future__ import annotations

from pathlib import Path

MODEL = """
import time

import numpy as np


class Model:
    thread_safe = True

    def infer(self, inputs):
        texts = [bytes(value) for value in inputs["TEXT"].reshape(-1)]
        if texts[0].startswith(b"sleep "):  # holds the one instance, for the cancel test
            time.sleep(float(texts[0].split()[1]))
        rows = []
        for text in texts:
            codes = np.frombuffer(text, dtype=np.uint8).astype(np.float32)
            rows.append([np.float32(k + 1) * codes[k::8].sum() / 7.0 for k in range(8)])
        words = [len(text.split()) for text in texts]
        mask = np.zeros((len(texts), max(words, default=0)), dtype=np.int64)
        for row, count in enumerate(words):
            mask[row, :count] = 1
        return {"EMBEDDING": np.array(rows, dtype=np.float32), "MASK": mask}
"""

CONFIG = """
backend = "python"
max_batch_size = 0
instances = 1

[[inputs]]
name = "TEXT"
datatype = "BYTES"
shape = [-1]

[[outputs]]
name = "EMBEDDING"
datatype = "FP32"
shape = [-1, 8]

[[outputs]]
name = "MASK"
datatype = "INT64"
shape = [-1, -1]
"""

OPENAI = """
[openai]
input = "TEXT"
output = "EMBEDDING"
token_mask = "MASK"
truncatable = true
max_inputs = 4
max_chars = 100
"""


# Token ids in (padded rows and their mask, as an encoder takes them), 8 floats out: each
# row's vector is a function of its unmasked ids only, so padding does not change it.
IDS_MODEL = """
import numpy as np


class Model:
    thread_safe = True

    def infer(self, inputs):
        rows = []
        for ids, mask in zip(inputs["IDS"], inputs["IDS_MASK"]):
            real = ids[mask == 1].astype(np.float32)
            rows.append([np.float32(k + 1) * real[k::8].sum() / 3.0 for k in range(8)])
        return {"EMBEDDING": np.array(rows, dtype=np.float32)}
"""

IDS_CONFIG = """
backend = "python"
max_batch_size = 0

[[inputs]]
name = "IDS"
datatype = "INT64"
shape = [-1, -1]

[[inputs]]
name = "IDS_MASK"
datatype = "INT64"
shape = [-1, -1]

[[outputs]]
name = "EMBEDDING"
datatype = "FP32"
shape = [-1, 8]

[openai]
token_ids = "IDS"
token_ids_mask = "IDS_MASK"
output = "EMBEDDING"
max_inputs = 4
"""


def write_repository(root: Path) -> Path:
    """``toy`` (declares [openai]), ``plain`` (the same model, not declared) and ``ids``
    (takes token ids, declares [openai] with token_ids)."""
    for name, config, model in (
        ("toy", CONFIG + OPENAI, MODEL),
        ("plain", CONFIG, MODEL),
        ("ids", IDS_CONFIG, IDS_MODEL),
    ):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.toml").write_text(config)
        (root / name / "1" / "model.py").write_text(model)
    return root
