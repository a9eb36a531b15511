"""``decoupled`` in config.toml and config.pbtxt: read, checked, and shown in the config."""

from __future__ import annotations

import pytest

from conveyor.errors import RepositoryError
from conveyor.repository.config import parse_config
from conveyor.repository.triton_json import model_config

TENSORS = {
    "inputs": [{"name": "IN", "datatype": "INT32", "shape": [1]}],
    "outputs": [{"name": "OUT", "datatype": "INT32", "shape": [1]}],
}


def test_config_toml_reads_decoupled():
    config = parse_config("m", {"backend": "python", "decoupled": True, **TENSORS})
    assert config.decoupled
    assert not parse_config("m", {"backend": "python", **TENSORS}).decoupled


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"decoupled": "yes"}, "decoupled must be true or false, got 'yes'"),
        (
            {"decoupled": True, "instance_kind": "process"},
            "a decoupled model runs on thread instances only",
        ),
    ],
)
def test_config_toml_refuses(raw: dict, words: str):
    with pytest.raises(RepositoryError, match=words):
        parse_config("m", {"backend": "python", **raw, **TENSORS})


def test_the_model_config_says_decoupled_as_triton_does():
    config = parse_config("m", {"backend": "python", "decoupled": True, **TENSORS})
    shown = model_config(config, "python", 1)
    assert shown["model_transaction_policy"] == {"decoupled": True}
