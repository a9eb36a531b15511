"""pb_utils.ModelConfig edits behave as Triton's: what contradicts the config is a ValueError."""

from __future__ import annotations

import json

import pytest

from conveyor.triton import pb_utils


def _config(**fields: object) -> pb_utils.ModelConfig:
    return pb_utils.ModelConfig(json.dumps({"name": "m", "max_batch_size": 0, **fields}))


def test_edits_fill_in_what_the_config_leaves_open() -> None:
    config = _config(input=[{"name": "X", "data_type": "TYPE_INVALID", "dims": []}])
    config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [4], "optional": True})
    config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [4]})
    config.set_max_batch_size(8)
    config.set_dynamic_batching()
    config.set_model_transaction_policy({"decoupled": True})
    edited = config.as_dict()
    assert edited["input"] == [
        {"name": "X", "data_type": "TYPE_FP32", "dims": [4], "optional": True}
    ]
    assert edited["output"] == [{"name": "Y", "data_type": "TYPE_FP32", "dims": [4]}]
    assert edited["max_batch_size"] == 8
    assert edited["dynamic_batching"] == {}
    assert pb_utils.using_decoupled_model_transaction_policy(edited)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda c: c.set_max_batch_size(2), "configuration specified max_batch_size 4"),
        (lambda c: c.set_dynamic_batching(), "sequence_batching"),
        (lambda c: c.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [], "x": 1}), "'x'"),
        (lambda c: c.add_output({"name": "Y", "data_type": "TYPE_FP32"}), "'dims'"),
        (lambda c: c.add_input({"name": "X", "data_type": "TYPE_INT8", "dims": [4]}), "TYPE_INT8"),
        (lambda c: c.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [5]}), "[5]"),
        (lambda c: c.set_model_transaction_policy({"decoupled": True}), "already set"),
        (lambda c: c.set_model_transaction_policy({"stream": True}), "'stream'"),
    ],
)
def test_edits_that_contradict_the_config_raise_value_error(edit, words: str) -> None:
    config = _config(
        max_batch_size=4,
        sequence_batching={},
        input=[{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
        model_transaction_policy={"decoupled": False},
    )
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        edit(config)
