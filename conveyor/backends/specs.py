"""Tensor specs read from a model file, shared by the backends that fill in a config from one.

Each backend reads names, datatypes and shapes its own way (onnxruntime's NodeArg, OpenVINO's
ports); what follows is the same for all: the batch dimension comes off when the model
batches, and every tensor the config declares must exist in the file.
"""

from __future__ import annotations

from collections.abc import Sequence

from conveyor.errors import RepositoryError
from conveyor.repository.config import ModelConfig, TensorSpec


def file_tensor_spec(
    config: ModelConfig, kind: str, name: str, datatype: str, shape: Sequence[int], shown: object
) -> TensorSpec:
    """The spec of one of the file's tensors (-1 for any size); without its batch dimension
    when ``config`` batches, which must then be dynamic. ``shown`` is the shape as the file
    states it, for the error."""
    dims = list(shape)
    if config.batching:
        if not dims or dims[0] != -1:
            raise RepositoryError(
                f"model {config.name!r}: max_batch_size > 0 needs a dynamic first "
                f"dimension, but {kind} {name!r} has shape {shown}"
            )
        dims = dims[1:]
    return TensorSpec(name, datatype, tuple(dims))


def check_declared(
    config: ModelConfig, specs: tuple[TensorSpec, ...], actual: set[str], kind: str, source: str
) -> None:
    """Every ``kind`` the config declares exists in the model file (``source`` names it)."""
    for spec in specs:
        if spec.name not in actual:
            raise RepositoryError(
                f"model {config.name!r}: config declares {kind} {spec.name!r}, but {source}'s "
                f"{kind}s are {', '.join(sorted(actual))}"
            )
