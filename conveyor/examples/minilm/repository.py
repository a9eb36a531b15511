"""Write the MiniLM models into a repository folder: two steps and the ensembles over them.

minilm            ensemble: TEXT -> minilm_tokenizer -> minilm_encoder -> EMBEDDING
minilm_encoder    the encoder alone: word-piece ids -> EMBEDDING (OpenAI token-id input)
minilm_openvino   the same with minilm_encoder_openvino (only when OpenVINO is installed)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from conveyor.examples.minilm.encoder import build_encoder
from conveyor.examples.minilm.install import ENCODER_FILE

_TOKENIZER_SOURCE = Path(__file__).with_name("tokenizer_model.py")
HIDDEN = 384

# Both text models take a batch of strings as one request (max_batch_size 0).
_TEXT_INPUT = """\
max_batch_size = 0

[[inputs]]
name = "TEXT"
datatype = "BYTES"
shape = [-1]
"""

_TOKENIZER_CONFIG = (
    """\
# all-MiniLM-L6-v2's tokenizer: TEXT -> word-piece ids and attention mask (padded to the longest).
backend = "python"
"""
    + _TEXT_INPUT
    + """
[[outputs]]
name = "input_ids"
datatype = "INT64"
shape = [-1, -1]

[[outputs]]
name = "attention_mask"
datatype = "INT64"
shape = [-1, -1]
"""
)

# Ragged dynamic batching: requests of different lengths share an execution, padded to the
# longest (padding is masked out, so each text's embedding does not change).
_ENCODER_CONFIG = """\
# all-MiniLM-L6-v2: BERT encoder + mean pooling + L2 normalisation, one ONNX graph.
backend = "{backend}"
max_batch_size = {max_batch_size}

[dynamic_batching]
max_queue_delay_us = 0
# Word pieces per batch, padding included: on one core a batch of long texts runs slower per
# text than a few at a time; short texts still batch by dozens.
max_padded_elements = {max_padded_elements}

[[inputs]]
name = "input_ids"
datatype = "INT64"
shape = [-1]
allow_ragged_batch = true

[[inputs]]
name = "attention_mask"
datatype = "INT64"
shape = [-1]
allow_ragged_batch = true

[[outputs]]
name = "EMBEDDING"
datatype = "FP32"
shape = [{hidden}]

# Served on OpenAI's /v1/embeddings for token-id input (the minilm ensemble takes text).
[openai]
token_ids = "input_ids"
token_ids_mask = "attention_mask"
output = "EMBEDDING"
max_inputs = {max_batch_size}
"""
# The most texts one request (and one batch of requests) may hold.
MAX_TEXTS = 256
# The most word pieces (rows x the longest text's, padding included) one encoder batch holds.
MAX_BATCH_TOKENS = 512

_ENSEMBLE_CONFIG = (
    """\
# Sentence embeddings: tokenizer, then encoder (mean-pooled, L2-normalised).
backend = "ensemble"
"""
    + _TEXT_INPUT
    + """
[[outputs]]
name = "EMBEDDING"
datatype = "FP32"
shape = [-1, {hidden}]

# The tokenizer's mask, so OpenAI's usage counts the real tokens.
[[outputs]]
name = "attention_mask"
datatype = "INT64"
shape = [-1, -1]

# Served on OpenAI's /v1/embeddings too; the encoder already L2-normalises.
[openai]
input = "TEXT"
output = "EMBEDDING"
token_mask = "attention_mask"
max_inputs = {max_texts}

[[steps]]
model = "minilm_tokenizer"
input_map = {{ TEXT = "TEXT" }}
output_map = {{ input_ids = "input_ids", attention_mask = "attention_mask" }}

[[steps]]
model = "{encoder}"
input_map = {{ input_ids = "input_ids", attention_mask = "attention_mask" }}
output_map = {{ EMBEDDING = "EMBEDDING" }}
"""
)


def openvino_available() -> bool:
    return importlib.util.find_spec("openvino") is not None


def missing_packages() -> list[str]:
    """The Python packages the MiniLM models need that are not installed (the minilm extra)."""
    return [
        name for name in ("tokenizers", "safetensors") if importlib.util.find_spec(name) is None
    ]


def write_models(weights: Path, target: Path) -> list[str]:
    """The MiniLM model folders under ``target``, from installed ``weights``; their names."""
    encoder_file = weights / ENCODER_FILE
    if not encoder_file.is_file():
        build_encoder(weights, encoder_file)

    tokenizer_dir = target / "minilm_tokenizer"
    (tokenizer_dir / "1").mkdir(parents=True, exist_ok=True)
    (tokenizer_dir / "config.toml").write_text(_TOKENIZER_CONFIG)
    shutil.copyfile(_TOKENIZER_SOURCE, tokenizer_dir / "1" / "model.py")
    for name in ("tokenizer.json", "sentence_bert_config.json"):
        shutil.copyfile(weights / name, tokenizer_dir / "1" / name)

    encoders = {"minilm": ("minilm_encoder", "onnxruntime")}
    if openvino_available():
        encoders["minilm_openvino"] = ("minilm_encoder_openvino", "openvino")
    for ensemble, (encoder, backend) in encoders.items():
        _link_encoder(encoder_file, target / encoder, backend)
        (target / ensemble).mkdir(parents=True, exist_ok=True)
        (target / ensemble / "config.toml").write_text(
            _ENSEMBLE_CONFIG.format(hidden=HIDDEN, encoder=encoder, max_texts=MAX_TEXTS)
        )
    return ["minilm_tokenizer", *(encoder for encoder, _ in encoders.values()), *encoders]


def _link_encoder(encoder_file: Path, folder: Path, backend: str) -> None:
    """A model folder whose model.onnx is the one built file (a symlink: 90 MB once)."""
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        _ENCODER_CONFIG.format(
            backend=backend,
            max_batch_size=MAX_TEXTS,
            hidden=HIDDEN,
            max_padded_elements=MAX_BATCH_TOKENS,
        )
    )
    link = folder / "1" / "model.onnx"
    if link.is_symlink() or link.exists():
        return
    try:
        os.symlink(encoder_file.resolve(), link)
    except FileExistsError:  # another process wrote the repository at the same time
        return
    except OSError:  # no symlinks here (some filesystems): a copy works the same
        shutil.copyfile(encoder_file, link)
