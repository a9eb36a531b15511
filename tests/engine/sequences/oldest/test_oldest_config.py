"""The oldest strategy read from config.toml and config.pbtxt, and its mistakes named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conveyor.errors import RepositoryError
from conveyor.repository.config import parse_config
from conveyor.repository.pbtxt import read_pbtxt
from conveyor.repository.sequences import OldestStrategy

TENSORS = {
    "backend": "python",
    "max_batch_size": 4,
    "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1]}],
    "outputs": [{"name": "OUTPUT", "datatype": "INT32", "shape": [1]}],
}


def test_config_toml_oldest() -> None:
    raw = {
        **TENSORS,
        "sequence_batching": {
            "oldest": {
                "max_candidate_sequences": 16,
                "preferred_batch_sizes": [4, 2],
                "max_queue_delay_us": 100,
            }
        },
    }
    batching = parse_config("m", raw).sequence_batching
    assert batching is not None
    assert batching.oldest == OldestStrategy(16, (2, 4), 100)
    assert batching.slots_per_instance(4) == 16


@pytest.mark.parametrize(
    ("oldest", "words"),
    [
        ({"max_candidate_sequences": -1}, ["max_candidate_sequences", ">= 0"]),
        ({"preferred_batch_sizes": [8]}, ["preferred_batch_sizes", "exceeds max_batch_size 4"]),
        ({"preferred_batch_sizes": 2}, ["preferred_batch_sizes", "list"]),
        ({"max_queue_delay_us": "1"}, ["max_queue_delay_us", ">= 0"]),
        ({"minimum_slot_utilization": 1}, ["unknown key", "minimum_slot_utilization"]),
    ],
)
def test_config_toml_oldest_mistakes(oldest: dict[str, Any], words: list[str]) -> None:
    raw = {**TENSORS, "sequence_batching": {"oldest": oldest}}
    with pytest.raises(RepositoryError) as error:
        parse_config("m", raw)
    assert all(word in str(error.value) for word in words), str(error.value)


def read(tmp_path: Path, oldest: str) -> Any:
    path = tmp_path / "m" / "config.pbtxt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        'backend: "python"\nmax_batch_size: 4\n'
        'input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        f"sequence_batching {{ oldest {{ {oldest} }} }}\n"
    )
    return read_pbtxt(path, "m", backend="python", no_backend=lambda: RepositoryError("none"))


def test_config_pbtxt_oldest(tmp_path: Path) -> None:
    text = "max_candidate_sequences: 8 preferred_batch_size: [4, 2]"
    text += " max_queue_delay_microseconds: 50"
    batching = read(tmp_path, text).config.sequence_batching
    assert batching.oldest == OldestStrategy(8, (2, 4), 50)


def test_config_pbtxt_oldest_preferred_past_max_batch_size(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match=r"oldest\.preferred_batch_size.*exceeds"):
        read(tmp_path, "preferred_batch_size: [ 8 ]")
