"""A request's inputs checked against its model version's config, on the caller's thread.

:class:`InputCheck` is built once per model version. Its fast path takes the common case —
every input a plain numpy array of the declared (non-BYTES) datatype and shape, batch sizes
in range and in agreement — with what the config says precomputed, and returns the arrays
as they are. Anything else goes the full way (``check_fully``), which converts what may be
converted and words every refusal; the fast path never refuses anything itself, so both
accept and refuse exactly the same requests with the same messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from conveyor.errors import InvalidInput
from conveyor.protocol import triton_words as triton
from conveyor.protocol.datatypes import BYTES, datatype_of, numpy_dtype
from conveyor.repository.config import TensorSpec

# What the fast path knows of one input: its numpy dtype, its dims past the batch dimension
# (exact; or None when one is -1, then its rank and (position, size) of each fixed dim),
# whether it is required.
_FastSpec = tuple[np.dtype, tuple[int, ...] | None, int, tuple[tuple[int, int], ...], bool]


class InputCheck:
    """Checks the inputs of requests to one model (``model``) with these ``specs``.

    ``max_batch_size``: 0 for a model without a batch dimension; otherwise every input's
    first dimension is the request's batch size, 1 to ``max_batch_size``.
    """

    def __init__(self, model: str, specs: Sequence[TensorSpec], max_batch_size: int) -> None:
        self._model = model
        self._specs = {spec.name: spec for spec in specs}
        self._required = frozenset(s.name for s in specs if not s.optional)
        self._max_batch = max_batch_size
        self._batch_dims = 1 if max_batch_size > 0 else 0
        # BYTES inputs are always converted (str -> bytes, elements checked): no fast path.
        self._fast: dict[str, _FastSpec] = {}
        for spec in specs:
            dtype = known_dtype(spec.datatype)
            if dtype is not None:
                exact = None if -1 in spec.shape else spec.shape
                fixed = tuple((i, size) for i, size in enumerate(spec.shape) if size != -1)
                rank = len(spec.shape)
                self._fast[spec.name] = (dtype, exact, rank, fixed, not spec.optional)
        self._fast_enabled = len(self._fast) == len(self._specs)

    def check(self, inputs: Mapping[str, object]) -> tuple[dict[str, np.ndarray], int]:
        """The request's arrays by name (converted where the config allows) and its batch
        size (1 without a batch dimension). InvalidInput names the first thing wrong."""
        if self._fast_enabled and type(inputs) is dict:
            checked = self._fast_path(inputs)
            if checked is not None:
                return checked
        return self.check_fully(inputs)

    def _fast_path(self, inputs: dict[str, object]) -> tuple[dict[str, np.ndarray], int] | None:
        """The inputs as they are when all is in order; None: let ``check_fully`` decide."""
        fast = self._fast
        batched = self._batch_dims
        ndarray = np.ndarray
        batch_size = 0 if batched else 1
        required = 0
        if not inputs:
            return None
        for name, value in inputs.items():
            spec = fast.get(name)
            if spec is None or type(value) is not ndarray:
                return None
            dtype, exact, rank, fixed, needed = spec
            if value.dtype is not dtype and value.dtype != dtype:
                return None
            shape = value.shape
            if batched:
                if not shape:
                    return None
                size = shape[0]
                if batch_size == 0:
                    if not 1 <= size <= self._max_batch:
                        return None
                    batch_size = size
                elif size != batch_size:
                    return None
                shape = shape[1:]
            if exact is not None:
                if shape != exact:
                    return None
            else:
                if len(shape) != rank:
                    return None
                for position, size in fixed:
                    if shape[position] != size:
                        return None
            required += needed
        if required != len(self._required):
            return None
        # Every value is an array already: the mapping is the checked dict (a copy, so the
        # engine may add sequence controls without touching the caller's dict).
        return dict(inputs), batch_size  # type: ignore[arg-type]

    def check_fully(self, inputs: Mapping[str, object]) -> tuple[dict[str, np.ndarray], int]:
        """``check`` without the fast path: every request could take this way alone."""
        # Unknown names first: a misspelt input is also a missing one, and the misspelling is
        # what the caller needs to see.
        unknown = [name for name in inputs if name not in self._specs]
        missing = self._required.difference(inputs)
        model = self._model
        if unknown:
            also = (
                f"missing input {sorted(missing)[0]!r}"
                if missing
                else f"the request sent {', '.join(map(str, inputs))}"
            )
            raise InvalidInput(
                triton.first(
                    triton.unexpected_input(model, str(unknown[0])),
                    f"model {model!r} has no input {unknown[0]!r}; its inputs are "
                    f"{', '.join(self._specs)} ({also})",
                )
            )
        if missing:
            declared = list(self._specs)
            raise InvalidInput(
                triton.first(
                    triton.input_count(
                        model,
                        len(declared),
                        [name for name in declared if name in self._required],
                        [str(name) for name in inputs],
                        [name for name in declared if name in missing],
                    ),
                    f"model {model!r}: missing input {sorted(missing)[0]!r}; "
                    f"it expects {', '.join(self._specs)}",
                )
            )
        arrays: dict[str, np.ndarray] = {}
        batch_size = 1
        for name, value in inputs.items():
            spec = self._specs[name]  # every name is known (checked above)
            array = self._conform(spec, value)
            if self._batch_dims:
                if array.ndim == 0:
                    raise InvalidInput(
                        triton.first(
                            triton.no_batch_dimension(model, name),
                            f"model {model!r}: input {name!r} needs a batch dimension first",
                        )
                    )
                size = array.shape[0]
                if not arrays:
                    batch_size = size
                elif size != batch_size:
                    raise InvalidInput(
                        triton.first(
                            triton.batch_disagrees(model, name),
                            f"model {model!r}: input {name!r} has batch size {size} but "
                            f"other inputs have {batch_size}; all inputs must agree",
                        )
                    )
                if not 1 <= size <= self._max_batch:
                    ours = (
                        f"model {model!r}: input {name!r} has batch size {size}; "
                        f"expected 1 to {self._max_batch} (max_batch_size)"
                    )
                    if size > self._max_batch:
                        ours = triton.first(triton.batch_too_large(model, self._max_batch), ours)
                    raise InvalidInput(ours)
            arrays[name] = array
        return arrays, batch_size

    def _conform(self, spec: TensorSpec, value: object) -> np.ndarray:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        if spec.datatype == BYTES:
            array = as_bytes_array(array, self._model, spec.name)
        else:
            expected = numpy_dtype(spec.datatype)
            if array.dtype != expected:
                if isinstance(value, np.ndarray):
                    got = v2_name(array.dtype)
                    raise InvalidInput(
                        triton.first(
                            triton.input_datatype(self._model, spec.name, got, spec.datatype),
                            f"model {self._model!r}: input {spec.name!r} has datatype "
                            f"{got}; expected {spec.datatype}",
                        )
                    )
                array = array.astype(expected)
        dims = array.shape[self._batch_dims :]
        if len(dims) != len(spec.shape) or any(
            want not in (-1, got) for want, got in zip(spec.shape, dims, strict=True)
        ):
            shown = [-1, *spec.shape] if self._batch_dims else list(spec.shape)
            raise InvalidInput(
                triton.first(
                    triton.input_shape(self._model, spec.name, shown, array.shape),
                    f"model {self._model!r}: input {spec.name!r} has shape "
                    f"{list(array.shape)}; expected {shown}",
                )
            )
        return array


def known_dtype(datatype: str) -> np.dtype | None:
    """The numpy dtype of V2 ``datatype``; None for BYTES (object arrays, elements checked),
    or for one numpy cannot hold here (BF16 without ml_dtypes: refused per request)."""
    if datatype == BYTES:
        return None
    try:
        return numpy_dtype(datatype)
    except (InvalidInput, ImportError):  # BF16 without ml_dtypes
        return None


def as_bytes_array(array: np.ndarray, model: str, name: str) -> np.ndarray:
    """BYTES tensors are object arrays of bytes; str elements are encoded as UTF-8."""
    if array.dtype == object:
        if all(isinstance(v, bytes) for v in array.flat):
            return array
    elif array.dtype.kind not in "US":
        raise InvalidInput(
            f"model {model!r}: {name!r} is BYTES, but got datatype "
            f"{v2_name(array.dtype)}; expected bytes or str elements"
        )
    out = np.empty(array.shape, dtype=object)
    for index, value in np.ndenumerate(array):
        if isinstance(value, bytes):
            out[index] = value
        elif isinstance(value, str):
            out[index] = value.encode("utf-8")
        else:
            raise InvalidInput(
                f"model {model!r}: {name!r} is BYTES, but an element is "
                f"{type(value).__name__}; expected bytes or str"
            )
    return out


def v2_name(dtype: np.dtype) -> str:
    """The V2 name users know (INT32), or numpy's when it has none (e.g. complex64)."""
    try:
        return datatype_of(dtype)
    except InvalidInput:
        return f"numpy {dtype} (no V2 datatype)"
