"""config.toml's [openai] table: checked against the model's own tensors when read."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor.errors import RepositoryError
from conveyor.repository.config import parse_config
from conveyor.repository.openai_spec import OpenAIEmbeddings


def raw(**openai: Any) -> dict[str, Any]:
    return {
        "backend": "python",
        "inputs": [
            {"name": "TEXT", "datatype": "BYTES", "shape": [-1]},
            {"name": "IDS", "datatype": "INT64", "shape": [-1, -1]},
            {"name": "IDS_MASK", "datatype": "INT64", "shape": [-1, -1]},
        ],
        "outputs": [
            {"name": "EMBEDDING", "datatype": "FP32", "shape": [-1, 4]},
            {"name": "MASK", "datatype": "INT64", "shape": [-1, -1]},
        ],
        "openai": openai,
    }


def test_a_declared_model_reads_every_key() -> None:
    config = parse_config(
        "m", raw(input="TEXT", output="EMBEDDING", token_mask="MASK", normalize=True, max_inputs=8)
    )
    assert config.openai == OpenAIEmbeddings(
        input="TEXT", output="EMBEDDING", normalize=True, token_mask="MASK", max_inputs=8
    )
    assert parse_config("m", {"backend": "python"}).openai is None


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"input": "TXT", "output": "EMBEDDING"}, "openai.input = 'TXT' is not one of"),
        ({"input": "TEXT", "output": "MASK"}, "openai.output = 'MASK' must be FP32, not INT64"),
        ({"input": "TEXT"}, "openai.output must name one of the model's outputs"),
        ({"input": "TEXT", "output": "EMBEDDING", "normalise": True}, "unknown key 'normalise'"),
        ({"input": "TEXT", "output": "EMBEDDING", "max_inputs": 0}, "openai.max_inputs must be"),
        ({"input": "TEXT", "output": "EMBEDDING", "normalize": "yes"}, "true or false"),
        ({"output": "EMBEDDING"}, "[openai] needs input"),
        ({"token_ids": "TEXT", "output": "EMBEDDING"}, "openai.token_ids = 'TEXT' must be INT64"),
        ({"input": "TEXT", "output": "EMBEDDING", "token_ids_mask": "IDS_MASK"}, "needs openai."),
    ],
)
def test_a_wrong_table_is_refused_by_name(table: dict[str, Any], words: str) -> None:
    with pytest.raises(RepositoryError, match="model 'm'") as caught:
        parse_config("m", raw(**table))
    assert words in str(caught.value)


def test_a_token_id_model_needs_no_text_input() -> None:
    config = parse_config("m", raw(token_ids="IDS", token_ids_mask="IDS_MASK", output="EMBEDDING"))
    assert config.openai == OpenAIEmbeddings(
        input=None, output="EMBEDDING", token_ids="IDS", token_ids_mask="IDS_MASK"
    )
