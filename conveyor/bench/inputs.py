"""What a model takes (from the server's metadata) and the request tensors the bench sends.

Shapes follow V2 metadata: the full shape, -1 for a dimension of any size, the batch
dimension included (as -1) when the model batches. ``--batch-size`` fills the first
dimension when it is dynamic; ``--shape NAME:d1,d2`` gives an input's shape without the
batch dimension when the model is known to batch (``max_batch_size`` > 0, as
perf_analyzer reads it), and the full shape otherwise; any other -1 becomes 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from conveyor.protocol.datatypes import BYTES, numpy_dtype

INPUT_DATA = ("random", "zeros")


@dataclasses.dataclass(frozen=True)
class InputSpec:
    name: str
    datatype: str
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model as a V2 server describes it. ``max_batch_size`` None: the server did not say."""

    name: str
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    max_batch_size: int | None = None

    @classmethod
    def from_metadata(cls, metadata: Mapping, max_batch_size: int | None = None) -> ModelSpec:
        """From a V2 model-metadata JSON object (``GET /v2/models/{m}``)."""
        return cls(
            name=str(metadata["name"]),
            inputs=tuple(
                InputSpec(str(t["name"]), str(t["datatype"]), tuple(int(d) for d in t["shape"]))
                for t in metadata.get("inputs", ())
            ),
            outputs=tuple(str(t["name"]) for t in metadata.get("outputs", ())),
            max_batch_size=max_batch_size,
        )


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``["INPUT0:1,16", ...]`` -> ``{"INPUT0": (1, 16)}``."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.rpartition(":")
        if not sep or not name:
            raise ValueError(f"--shape wants NAME:d1,d2,... got {item!r}")
        try:
            shape = tuple(int(d) for d in dims.split(",") if d.strip())
        except ValueError:
            raise ValueError(f"--shape {item!r}: dimensions must be integers") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"--shape {item!r}: dimensions must be >= 0")
        shapes[name] = shape
    return shapes


def resolve_shape(
    spec: InputSpec,
    max_batch_size: int | None,
    batch_size: int,
    overrides: Mapping[str, tuple[int, ...]],
) -> tuple[int, ...]:
    if spec.name in overrides:
        shape = overrides[spec.name]
        return (batch_size, *shape) if max_batch_size else shape
    dims = list(spec.shape)
    if dims and dims[0] == -1:
        dims[0] = batch_size
    elif batch_size != 1 and max_batch_size == 0:
        raise ValueError(
            f"input {spec.name!r} has a fixed first dimension {dims[:1]} and the model does not "
            f"batch: --batch-size {batch_size} cannot apply (give --shape)"
        )
    return tuple(1 if d == -1 else d for d in dims)


def make_inputs(
    model: ModelSpec,
    *,
    batch_size: int = 1,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    data: str = "random",
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """One request's tensors: ``data`` is "random", "zeros" or the path of an ``.npz``."""
    if batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
    unknown = set(shapes or ()) - {spec.name for spec in model.inputs}
    if unknown:
        raise ValueError(f"--shape names no input of {model.name!r}: {sorted(unknown)}")
    if data not in INPUT_DATA:
        return _from_npz(model, Path(data))
    rng = np.random.default_rng(seed)
    inputs = {}
    for spec in model.inputs:
        shape = resolve_shape(spec, model.max_batch_size, batch_size, shapes or {})
        inputs[spec.name] = _tensor(spec.datatype, shape, data, rng)
    return inputs


def _tensor(datatype: str, shape: tuple[int, ...], data: str, rng: np.random.Generator):
    dtype = numpy_dtype(datatype)
    if datatype == BYTES:
        if data == "zeros":
            return np.full(shape, b"", dtype=object)
        letters = rng.integers(97, 123, size=(*shape, 8), dtype=np.uint8)
        flat = [row.tobytes() for row in letters.reshape(-1, 8)]
        return np.array(flat, dtype=object).reshape(shape)
    if data == "zeros":
        return np.zeros(shape, dtype=dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def _from_npz(model: ModelSpec, path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise ValueError(f"--input-data must be random, zeros or an .npz file; {path} is none")
    with np.load(path, allow_pickle=False) as archive:
        missing = [spec.name for spec in model.inputs if spec.name not in archive.files]
        if missing:
            raise ValueError(f"{path} has no array for input(s) {missing}")
        inputs = {}
        for spec in model.inputs:
            array = archive[spec.name]
            if spec.datatype == BYTES:
                inputs[spec.name] = np.array(
                    [v if isinstance(v, bytes) else str(v).encode() for v in array.ravel()],
                    dtype=object,
                ).reshape(array.shape)
            else:
                inputs[spec.name] = np.ascontiguousarray(array, dtype=numpy_dtype(spec.datatype))
        return inputs
