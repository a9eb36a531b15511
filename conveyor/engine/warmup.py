"""config.pbtxt's model_warmup: the tensors of each sample, made before the model is ready.

Triton runs every warmup sample through a model version before it reports ready, so the
first real request does not pay for lazy initialisation. The engine does the same by
submitting these tensors through the version's own queue (ModelVersion.warm_up).
"""

from __future__ import annotations

import numpy as np

from conveyor.errors import ConveyorError, RepositoryError
from conveyor.protocol import bytes_codec
from conveyor.protocol.datatypes import BYTES, element_count, numpy_dtype
from conveyor.repository.config import WarmupInput, WarmupSample


def sample_inputs(model: str, sample: WarmupSample, batching: bool) -> dict[str, np.ndarray]:
    """The arrays of one warmup request; ``batching`` puts batch_size in front."""
    rng = np.random.default_rng(0)
    arrays = {}
    for spec in sample.inputs:
        array = _tensor(model, sample, spec, rng)
        if batching:
            array = np.repeat(array[np.newaxis], sample.batch_size, axis=0)
        arrays[spec.name] = array
    return arrays


def _tensor(
    model: str, sample: WarmupSample, spec: WarmupInput, rng: np.random.Generator
) -> np.ndarray:
    shape = spec.shape
    if spec.datatype == BYTES:
        if spec.data == "file":
            assert spec.file is not None
            return _from_file(model, sample, spec, spec.file.read_bytes()).reshape(shape)
        return np.full(shape, b"", dtype=object)
    dtype = numpy_dtype(spec.datatype)
    if spec.data == "zero":
        return np.zeros(shape, dtype)
    if spec.data == "random":
        if dtype.kind == "b":
            return rng.integers(0, 2, shape).astype(dtype)
        if dtype.kind in "iu":
            return rng.integers(0, 100, shape).astype(dtype)
        return rng.random(shape).astype(dtype)
    assert spec.file is not None
    data = spec.file.read_bytes()
    expected = element_count(shape) * dtype.itemsize
    if len(data) != expected:
        raise RepositoryError(
            f"model {model!r}: model_warmup {sample.name!r} input {spec.name!r}: "
            f"{spec.file.name} holds {len(data)} bytes; {list(shape)} {spec.datatype} needs "
            f"{expected}"
        )
    return np.frombuffer(data, dtype).reshape(shape)


def _from_file(model: str, sample: WarmupSample, spec: WarmupInput, data: bytes) -> np.ndarray:
    try:
        return bytes_codec.decode(data, element_count(spec.shape))
    except ConveyorError as exc:
        raise RepositoryError(
            f"model {model!r}: model_warmup {sample.name!r} input {spec.name!r}: "
            f"{spec.file}: {exc.message}"
        ) from None
