"""A load request's parameters (Triton's model-repository extension): what the wire says.

A load may carry the model's configuration and files instead of the repository's:

- ``config``: the model configuration as JSON (Triton's ``ModelConfig`` in its JSON form),
  used instead of the model folder's ``config.pbtxt`` / ``config.toml`` for this load.
- ``file:<path>``: a file of the model folder, ``<path>`` relative to it (e.g.
  ``file:1/model.onnx``). Over HTTP the content is base64 text, over gRPC raw bytes. With
  files, the model is loaded from them alone (its repository folder, if any, is not read),
  and a ``config`` is required, as Triton requires it.

Other parameters are ignored. Pure data, no I/O: the engine writes the files.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping

from conveyor.errors import InvalidInput

CONFIG = "config"
FILE_PREFIX = "file:"
# Linux's NAME_MAX and PATH_MAX, in bytes: a longer name could not be written.
_NAME_MAX = 255
_PATH_MAX = 4096


@dataclasses.dataclass(frozen=True)
class LoadOverride:
    """What a load request gives instead of the repository: a config, and maybe files."""

    config: str
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)  # relative path -> data


def parse_load_parameters(model: str, parameters: Mapping[str, object]) -> LoadOverride | None:
    """The request's config and files for loading ``model``, or None when it gives neither
    (load from the repository). InvalidInput names the parameter at fault."""
    config = parameters.get(CONFIG)
    files = {
        relative_path(model, key): file_content(key, value)
        for key, value in parameters.items()
        if key.startswith(FILE_PREFIX)
    }
    if config is None:
        if files:
            raise InvalidInput(
                f"the load request gives files ({', '.join(map(repr, sorted(files)))}) but no "
                f"'{CONFIG}' parameter; files need the model configuration beside them, as JSON "
                f"in '{CONFIG}'"
            )
        return None
    if not isinstance(config, str):
        raise InvalidInput(
            f"the load request's '{CONFIG}' parameter must be a string holding the model "
            f"configuration as JSON, got {type(config).__name__}"
        )
    return LoadOverride(config, files)


def relative_path(model: str, key: str) -> str:
    """The path of a ``file:`` parameter, checked to stay inside the model's folder."""
    path = key.removeprefix(FILE_PREFIX)

    def bad(why: str) -> InvalidInput:
        # Triton's wording first (its clients look for it), then which parameter and why.
        return InvalidInput(
            f"failed to load '{model}', failed to poll from model repository: Invalid file "
            f"path in the load request's parameter {key!r}: {why}"
        )

    if not path:
        raise bad("it names no file (expected e.g. 'file:1/model.onnx')")
    if "\0" in path or "\\" in path:
        raise bad("a path holds neither NUL nor backslash characters")
    # A leading '/' names the model's folder, as in Triton (its QA loads 'file:/1/model.py').
    path = path.removeprefix("/")
    if len(path.encode()) > _PATH_MAX:
        raise bad(f"the path is longer than {_PATH_MAX} bytes")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise bad("every part of the path must be a name ('', '.' and '..' are refused)")
        if len(part.encode()) > _NAME_MAX:
            raise bad(f"the name {part[:16]!r}... is longer than {_NAME_MAX} bytes")
    return path


def file_content(key: str, value: object) -> bytes:
    """A ``file:`` parameter's content: raw bytes (gRPC) or base64 text (HTTP)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput(
                f"the load request's parameter {key!r} is not valid base64 (over HTTP a file's "
                "content is sent base64-encoded)"
            ) from None
    raise InvalidInput(
        f"the load request's parameter {key!r} must hold the file's content (base64 text over "
        f"HTTP, bytes over gRPC), got {type(value).__name__}"
    )
