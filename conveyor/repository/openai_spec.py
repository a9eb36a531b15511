"""A model's OpenAI embeddings door: which tensors carry texts and embeddings.

config.toml declares it in an ``[openai]`` table, config.pbtxt in ``openai.*`` parameters
(``parameters { key: "openai.input" value: { string_value: "TEXT" } }``); a model without
either is not served on ``/v1/embeddings``. Checked here, once, into
:class:`OpenAIEmbeddings`, against the model's own inputs and outputs, so a typo fails at
load and never on a request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.errors import RepositoryError
from conveyor.repository.tables import unknown_key

# OpenAI's own limit on inputs per request; characters per input is ours (OpenAI counts
# 8,192 tokens; a token is rarely more than 4 characters).
DEFAULT_MAX_INPUTS = 2048
DEFAULT_MAX_CHARS = 32768
# config.pbtxt's parameters that make the [openai] table: "openai.input" -> input.
PBTXT_PREFIX = "openai."


@dataclasses.dataclass(frozen=True)
class OpenAIEmbeddings:
    """The ``[openai]`` table: a model that answers OpenAI's embeddings API."""

    # The BYTES input that takes the texts, one per row; None: the model takes no text.
    input: str | None
    output: str  # the FP32 output with one embedding per text
    # L2-normalise each embedding before answering (false for a model that already does).
    normalize: bool = False
    # An output with one row per text whose non-zero entries count its tokens (a
    # tokenizer's attention mask): usage.prompt_tokens. None: usage counts 0.
    token_mask: str | None = None
    # The model's embeddings may be cut to their first ``dimensions`` values (Matryoshka
    # training); re-normalised after cutting.
    truncatable: bool = False
    max_inputs: int = DEFAULT_MAX_INPUTS
    max_chars: int = DEFAULT_MAX_CHARS
    # The INT64 input that takes token ids (one row per input, padded with 0 to the
    # longest), for clients that send ``input`` as lists of ids; None: ids are refused.
    token_ids: str | None = None
    # The INT64 input that marks each row's real ids with 1 and its padding with 0 (an
    # encoder's attention_mask); None: the model gets the ids alone.
    token_ids_mask: str | None = None


_KEYS = {
    "input",
    "output",
    "normalize",
    "token_mask",
    "truncatable",
    "max_inputs",
    "max_chars",
    "token_ids",
    "token_ids_mask",
}


def parse_openai(
    raw: Any,
    inputs: dict[str, str],
    outputs: dict[str, str],
    fail: Callable[[str], RepositoryError],
) -> OpenAIEmbeddings:
    """``raw``: the ``[openai]`` table; ``inputs``/``outputs``: the model's tensors, name ->
    datatype (an empty mapping when the config leaves them to the model file)."""
    if not isinstance(raw, dict):
        raise fail("[openai] must be a table")
    if problem := unknown_key(raw, _KEYS, "[openai]"):
        raise fail(problem)

    def tensor(key: str, tensors: dict[str, str], kind: str, datatype: str | None) -> str:
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise fail(f"openai.{key} must name one of the model's {kind}, got {value!r}")
        if tensors and value not in tensors:
            raise fail(
                f"openai.{key} = {value!r} is not one of the model's {kind}: {', '.join(tensors)}"
            )
        if tensors and datatype is not None and tensors[value] != datatype:
            raise fail(f"openai.{key} = {value!r} must be {datatype}, not {tensors[value]}")
        return value

    def flag(key: str) -> bool:
        value = raw.get(key, False)
        if not isinstance(value, bool):
            raise fail(f"openai.{key} must be true or false, got {value!r}")
        return value

    def limit(key: str, default: int) -> int:
        value = raw.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise fail(f"openai.{key} must be an integer >= 1, got {value!r}")
        return value

    if "input" not in raw and "token_ids" not in raw:
        raise fail(
            "[openai] needs input (the BYTES input that takes texts) or token_ids (the INT64 "
            "input that takes token ids), or both"
        )
    if "token_ids_mask" in raw and "token_ids" not in raw:
        raise fail("openai.token_ids_mask needs openai.token_ids (the input the ids go to)")

    def optional(key: str, tensors: dict[str, str], kind: str, datatype: str | None) -> str | None:
        return tensor(key, tensors, kind, datatype) if key in raw else None

    return OpenAIEmbeddings(
        input=optional("input", inputs, "inputs", "BYTES"),
        token_ids=optional("token_ids", inputs, "inputs", "INT64"),
        token_ids_mask=optional("token_ids_mask", inputs, "inputs", "INT64"),
        output=tensor("output", outputs, "outputs", "FP32"),
        normalize=flag("normalize"),
        token_mask=optional("token_mask", outputs, "outputs", None),
        truncatable=flag("truncatable"),
        max_inputs=limit("max_inputs", DEFAULT_MAX_INPUTS),
        max_chars=limit("max_chars", DEFAULT_MAX_CHARS),
    )


def pbtxt_openai_table(parameters: Mapping[str, str]) -> dict[str, Any]:
    """config.pbtxt's ``openai.*`` parameters as an ``[openai]`` table. Triton's parameters
    are all strings: ``true``/``false`` and whole numbers are read as such, anything else
    is left a string for :func:`parse_openai` to check (so a bad value is named there)."""
    table: dict[str, Any] = {}
    for key, text in parameters.items():
        if not key.startswith(PBTXT_PREFIX):
            continue
        value: Any = text
        if text in ("true", "false"):
            value = text == "true"
        elif text.isdigit():
            value = int(text)
        table[key[len(PBTXT_PREFIX) :]] = value
    return table
