"""OpenAI's embeddings API as a pure codec: its JSON request in, its JSON answer out.

``POST /v1/embeddings`` takes ``{"input", "model", "encoding_format", "dimensions",
"user"}`` and answers ``{"object": "list", "data": [{"object": "embedding", "index",
"embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}``. Errors are OpenAI's
``{"error": {"message", "type", "param", "code"}}`` with OpenAI's statuses. Nothing here
knows the engine: ``conveyor/server/openai.py`` submits what this decodes.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any, Protocol

import numpy as np

from conveyor.protocol import json_codec


class EmbeddingsSpec(Protocol):
    """What the codec reads of a model's ``[openai]`` declaration (the repository's
    ``OpenAIEmbeddings``): the protocol layer names the fields, not the repository's class."""

    @property
    def normalize(self) -> bool: ...
    @property
    def truncatable(self) -> bool: ...
    @property
    def max_inputs(self) -> int: ...
    @property
    def max_chars(self) -> int: ...
    @property
    def input(self) -> str | None: ...
    @property
    def token_ids(self) -> str | None: ...
    @property
    def token_ids_mask(self) -> str | None: ...


ENCODINGS = ("float", "base64")
_REQUEST_KEYS = {"input", "model", "encoding_format", "dimensions", "user"}


class OpenAIError(Exception):
    """A request OpenAI's API would refuse, in OpenAI's terms."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> bytes:
    """OpenAI's error object."""
    error = {"message": message, "type": type, "param": param, "code": code}
    return json.dumps({"error": error}).encode()


def model_not_found(model: str, load_failure: str | None = None) -> OpenAIError:
    """404 for a model that is not there, has no ``[openai]`` table, or failed to load
    (``load_failure``: the engine's reason)."""
    if load_failure is not None:
        message = f"The model {model!r} is not available: {load_failure}"
    else:
        message = (
            f"The model {model!r} does not exist or does not serve embeddings "
            "(its config has no [openai] table)"
        )
    return OpenAIError(
        message,
        status=404,
        param="model",
        code="model_not_found",
    )


@dataclasses.dataclass(frozen=True)
class EmbeddingsRequest:
    model: str
    texts: list[str]  # empty when the input is token ids
    encoding_format: str = "float"
    dimensions: int | None = None
    token_ids: list[list[int]] | None = None  # ``input`` as token ids, one list per input

    @property
    def count(self) -> int:
        """How many inputs (and so embeddings) the request holds."""
        return len(self.token_ids) if self.token_ids is not None else len(self.texts)


def decode_request(body: bytes) -> EmbeddingsRequest:
    """The request's fields, checked for shape; limits that depend on the model come in
    :func:`check_request`."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OpenAIError(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(request, dict):
        raise OpenAIError("the request body must be a JSON object")
    unknown = set(request) - _REQUEST_KEYS
    if unknown:
        name = sorted(unknown)[0]
        raise OpenAIError(f"Unrecognized request argument supplied: {name}", param=name)
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise OpenAIError("you must provide a model parameter (a string)", param="model")
    if "input" not in request:
        raise OpenAIError("you must provide an input parameter", param="input")
    value = request["input"]
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts:
        raise OpenAIError(
            "'input' must be a string, or a non-empty list of strings or of token ids",
            param="input",
        )
    token_ids = None
    if not all(isinstance(text, str) for text in texts):
        token_ids = _token_ids(texts)
        texts = []
    for index, text in enumerate(texts):
        if not text:
            where = "'input'" if isinstance(value, str) else f"'input[{index}]'"
            raise OpenAIError(f"{where} is an empty string; expected some text", param="input")
    encoding = request.get("encoding_format", "float")
    if encoding not in ENCODINGS:
        raise OpenAIError(
            f"'encoding_format' must be 'float' or 'base64', got {encoding!r}",
            param="encoding_format",
        )
    dimensions = request.get("dimensions")
    if dimensions is not None and (
        not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1
    ):
        raise OpenAIError(
            f"'dimensions' must be an integer >= 1, got {dimensions!r}", param="dimensions"
        )
    return EmbeddingsRequest(model, texts, encoding, dimensions, token_ids)


# Ids travel as INT64: a larger integer cannot be one.
_MAX_ID = 2**63 - 1


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_ID


def _token_ids(value: list[Any]) -> list[list[int]]:
    """OpenAI's token-id forms: one list of ids, or a list of such lists."""
    lists = [value] if all(_is_id(t) for t in value) else value
    for index, ids in enumerate(lists):
        if not isinstance(ids, list) or not all(_is_id(t) for t in ids):
            raise OpenAIError(
                "'input' must be a string, a list of strings, a list of token ids (integers "
                "from 0 to 2**63 - 1), or a list of such lists",
                param="input",
            )
        if not ids:
            raise OpenAIError(
                f"'input[{index}]' is an empty list; expected token ids", param="input"
            )
    return lists


def check_request(request: EmbeddingsRequest, spec: EmbeddingsSpec) -> None:
    """Refuse what this model's ``[openai]`` limits do not allow."""
    if request.token_ids is not None and spec.token_ids is None:
        raise OpenAIError(
            f"model {request.model!r} takes text: token-id inputs are not accepted "
            "(openai.token_ids is not set in its config); send strings",
            param="input",
        )
    if request.token_ids is None and spec.input is None:
        raise OpenAIError(
            f"model {request.model!r} takes token ids, not text (openai.input is not set in "
            "its config); send lists of token ids",
            param="input",
        )
    if request.count > spec.max_inputs:
        kind = "texts" if request.token_ids is None else "token-id lists"
        raise OpenAIError(
            f"'input' holds {request.count} {kind}; model {request.model!r} takes at most "
            f"{spec.max_inputs} per request (openai.max_inputs in its config)",
            param="input",
        )
    for index, text in enumerate(request.texts):
        if len(text) > spec.max_chars:
            raise OpenAIError(
                f"input {index} has {len(text)} characters; model {request.model!r} takes at "
                f"most {spec.max_chars} (openai.max_chars in its config)",
                param="input",
            )
    if request.dimensions is not None and not spec.truncatable:
        raise OpenAIError(
            f"model {request.model!r} does not support 'dimensions' "
            "(its config does not set openai.truncatable = true)",
            param="dimensions",
        )


def input_tensors(request: EmbeddingsRequest, spec: EmbeddingsSpec) -> dict[str, np.ndarray]:
    """The model's inputs: the texts as its BYTES input, one row per text; or the token ids
    as its INT64 input, padded with 0 to the longest, with the mask that marks them."""
    if request.token_ids is None:
        assert spec.input is not None  # check_request refused text for an ids-only model
        texts = [text.encode("utf-8") for text in request.texts]
        return {spec.input: np.array(texts, dtype=object)}
    assert spec.token_ids is not None  # check_request refused ids for a text-only model
    longest = max(len(ids) for ids in request.token_ids)
    ids = np.zeros((len(request.token_ids), longest), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, values in enumerate(request.token_ids):
        ids[row, : len(values)] = values
        mask[row, : len(values)] = 1
    tensors = {spec.token_ids: ids}
    if spec.token_ids_mask is not None:
        tensors[spec.token_ids_mask] = mask
    return tensors


def id_count(request: EmbeddingsRequest) -> int | None:
    """usage.prompt_tokens for token-id input: the ids sent; None for text."""
    if request.token_ids is None:
        return None
    return sum(len(ids) for ids in request.token_ids)


def embeddings(request: EmbeddingsRequest, spec: EmbeddingsSpec, output: np.ndarray) -> np.ndarray:
    """The model's output as one float32 row per text: cut to ``dimensions``, normalised
    where the config asks (cutting always re-normalises, as OpenAI's shortened ones are)."""
    rows = np.asarray(output, dtype=np.float32).reshape(request.count, -1)
    normalize = spec.normalize
    if request.dimensions is not None:
        if request.dimensions > rows.shape[1]:
            raise OpenAIError(
                f"'dimensions' is {request.dimensions}; model {request.model!r} makes "
                f"embeddings of {rows.shape[1]}",
                param="dimensions",
            )
        rows = rows[:, : request.dimensions]
        normalize = True
    if normalize:
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows = rows / np.maximum(norms, np.float32(1e-12))
    return np.ascontiguousarray(rows, dtype=np.float32)


def token_count(mask: np.ndarray | None) -> int:
    """usage.prompt_tokens: the non-zero entries of the tokenizer's attention mask."""
    return 0 if mask is None else int(np.count_nonzero(mask))


def encode_response(request: EmbeddingsRequest, rows: np.ndarray, tokens: int) -> bytes:
    """OpenAI's answer: base64 is each row's little-endian float32 bytes, as OpenAI sends.

    Floats are written from float64 copies of the rows, so each reads back as exactly the
    float32 the model made (as Python's ``float`` of it would print), by orjson straight
    from the array: a twentieth of building the lists and ``json.dumps``."""
    data: list[dict[str, Any]] = []
    base64_rows = request.encoding_format == "base64"
    wide = rows if base64_rows else np.ascontiguousarray(rows, dtype=np.float64)
    for index in range(len(rows)):
        vector: Any
        if base64_rows:
            vector = base64.b64encode(rows[index].astype("<f4").tobytes()).decode("ascii")
        else:
            vector = wide[index]
        data.append({"object": "embedding", "index": index, "embedding": vector})
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    answer = {"object": "list", "data": data, "model": request.model, "usage": usage}
    return json_codec.dumps(answer)


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "conveyor"}


def models_list(names: list[str]) -> bytes:
    """``GET /v1/models``: the models that serve embeddings."""
    return json_codec.dumps({"object": "list", "data": [_model(name) for name in names]})


def model_object(name: str) -> bytes:
    """``GET /v1/models/{name}``."""
    return json_codec.dumps(_model(name))
