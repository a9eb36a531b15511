"""The committed reference: sentences and sentence-transformers' own embeddings of them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

REFERENCE_FILE = Path(__file__).resolve().parents[3] / "tests" / "data" / "minilm_reference.json"
COSINE_FLOOR = 0.9999
MAX_ABS_DIFF = 1e-4


def load_reference() -> tuple[list[str], np.ndarray, dict[str, object]]:
    data = json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))
    return data["sentences"], np.array(data["embeddings"], dtype=np.float32), data


def assert_matches(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape
    assert got.dtype == np.float32
    cosine = (got * expected).sum(axis=1) / (
        np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1)
    )
    assert cosine.min() >= COSINE_FLOOR, cosine
    assert np.abs(got - expected).max() <= MAX_ABS_DIFF
