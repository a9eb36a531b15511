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


def model_not_found(model: str) -> OpenAIError:
    return OpenAIError(
        f"The model {model!r} does not exist or does not serve embeddings "
        "(its config has no [openai] table)",
        status=404,
        param="model",
        code="model_not_found",
    )


@dataclasses.dataclass(frozen=True)
class EmbeddingsRequest:
    model: str
    texts: list[str]
    encoding_format: str = "float"
    dimensions: int | None = None


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
        raise OpenAIError("'input' must be a string or a non-empty list of strings", param="input")
    if not all(isinstance(text, str) for text in texts):
        if all(isinstance(t, int) for t in texts) or all(isinstance(t, list) for t in texts):
            raise OpenAIError(
                f"model {model!r} takes text: token-id inputs are not accepted; send strings",
                param="input",
            )
        raise OpenAIError("'input' must be a string or a list of strings", param="input")
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
    return EmbeddingsRequest(model, texts, encoding, dimensions)


def check_request(request: EmbeddingsRequest, spec: EmbeddingsSpec) -> None:
    """Refuse what this model's ``[openai]`` limits do not allow."""
    if len(request.texts) > spec.max_inputs:
        raise OpenAIError(
            f"'input' holds {len(request.texts)} texts; model {request.model!r} takes at most "
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
            "(openai.truncatable is not set in its config)",
            param="dimensions",
        )


def text_tensor(request: EmbeddingsRequest) -> np.ndarray:
    """The texts as the model's BYTES input, one row per text."""
    return np.array([text.encode("utf-8") for text in request.texts], dtype=object)


def embeddings(request: EmbeddingsRequest, spec: EmbeddingsSpec, output: np.ndarray) -> np.ndarray:
    """The model's output as one float32 row per text: cut to ``dimensions``, normalised
    where the config asks (cutting always re-normalises, as OpenAI's shortened ones are)."""
    rows = np.asarray(output, dtype=np.float32).reshape(len(request.texts), -1)
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
    """OpenAI's answer: base64 is each row's little-endian float32 bytes, as OpenAI sends."""
    data: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        vector: Any
        if request.encoding_format == "base64":
            vector = base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
        else:
            vector = row.tolist()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    answer = {"object": "list", "data": data, "model": request.model, "usage": usage}
    return json.dumps(answer).encode()


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "conveyor"}


def models_list(names: list[str]) -> bytes:
    """``GET /v1/models``: the models that serve embeddings."""
    return json.dumps({"object": "list", "data": [_model(name) for name in names]}).encode()


def model_object(name: str) -> bytes:
    """``GET /v1/models/{name}``."""
    return json.dumps(_model(name)).encode()
