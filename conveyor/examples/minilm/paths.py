"""Where the MiniLM weights live, and whether they are there."""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.examples.cache import cache_root

INSTALL_COMMAND = "python -m conveyor.examples.minilm install"
# The files the models need from the weights package; all present = installed.
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "sentence_bert_config.json",
)
ENV_VAR = "CONVEYOR_MINILM_DIR"
# The package's own files: what the models written into a repository are made of.
MINILM_SOURCE = Path(__file__).parent


def weights_dir() -> Path:
    """``$CONVEYOR_MINILM_DIR``, or ``<cache>/minilm/all-MiniLM-L6-v2``."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        return Path(configured)
    return cache_root() / "minilm" / "all-MiniLM-L6-v2"


def installed(directory: Path | None = None) -> bool:
    """Whether every file the models need is in ``directory`` (default: :func:`weights_dir`)."""
    folder = directory or weights_dir()
    return all((folder / name).is_file() for name in REQUIRED_FILES)
