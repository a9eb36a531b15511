"""ONNX models through onnxruntime: one InferenceSession shared by every instance thread.

``InferenceSession.run`` is thread-safe and releases the GIL while it computes, so N
instance threads over one session run N executions at once with one copy of the weights.

Tensors go in and out through plain ``run``: a C-contiguous, aligned numpy input is used
where it lies, and the output array is onnxruntime's own buffer. IOBinding (bind the input,
bind the output to CPU, read it back) was measured slower at every size on onnxruntime
1.32, one core: a 4 MiB identity 128 µs with ``run``, 144 µs reading the bound OrtValue
with ``numpy()``, 325 µs with ``copy_outputs_to_cpu``; ``tiny`` 8.8 µs against 12.8 µs.

The exception is an output the caller already has room for (``run_into``: a client's
shared-memory region): bound there, onnxruntime writes it in place, which saves the copy
from onnxruntime's array into the region (see ``onnxruntime_binding.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from conveyor.backends import onnxruntime_binding as binding
from conveyor.backends.base import Backend, Destinations, LoadedModel, ModelCaller
from conveyor.backends.specs import check_declared, file_tensor_spec
from conveyor.errors import InvalidInput, RepositoryError
from conveyor.repository.config import ModelConfig, TensorSpec
from conveyor.repository.onnxruntime_options import OPTION_KEYS
from conveyor.repository.tables import unknown_key

_DATATYPE_OF_ORT = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(bfloat16)": "BF16",
    "tensor(string)": "BYTES",
}

# The numpy type of each fixed-size onnxruntime type (bfloat16 and strings are left out).
_NUMPY_OF_ORT = {
    "tensor(bool)": np.bool_,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(float16)": np.float16,
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
}

_OPTIMIZATION_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


class OnnxRuntimeModel(LoadedModel):
    thread_safe = True

    def __init__(self, session: ort.InferenceSession) -> None:
        self.session = session
        self._string_outputs = {o.name for o in session.get_outputs() if o.type == "tensor(string)"}
        # Outputs onnxruntime can write into a caller's buffer: the fixed-size types.
        self._bindable_dtypes = {
            o.name: np.dtype(_NUMPY_OF_ORT[o.type])
            for o in session.get_outputs()
            if o.type in _NUMPY_OF_ORT
        }
        self._output_shapes = binding.OutputShapes()
        # A bound run that fails is run again unbound, which reports any real error: the
        # failed bound run logs nothing of its own.
        self._bound_run_options = ort.RunOptions()
        self._bound_run_options.log_severity_level = 4
        # No GPU graph capture (onnxruntime's own "skip" id). Set, it also spares every run
        # the exception onnxruntime's Python layer raises and catches looking it up.
        self._bound_run_options.add_run_config_entry("gpu_graph_id", "-1")

    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        results = self.session.run(list(outputs), self._feed(inputs))
        produced = dict(zip(outputs, results, strict=True))
        for name in self._string_outputs.intersection(produced):
            produced[name] = np.vectorize(_utf8, otypes=[object])(produced[name])
        return produced

    def run_into(
        self, inputs: dict[str, np.ndarray], outputs: Sequence[str], destinations: Destinations
    ) -> dict[str, np.ndarray]:
        """``run`` with the outputs whose shape is known from a previous run of the same
        input shapes written straight into their destinations."""
        wanted = {
            name: destination
            for name, destination in destinations.items()
            if name in self._bindable_dtypes and name in outputs
        }
        if not wanted:
            return self.run(inputs, outputs)
        key = binding.signature(inputs)
        shapes = self._output_shapes.get(key)
        plan = {}
        if shapes is not None:
            plan = binding.bindable(wanted, shapes, self._bindable_dtypes, inputs)
        if plan:
            try:
                return binding.run_bound(
                    self.session,
                    self._feed(inputs),
                    outputs,
                    plan,
                    self._bindable_dtypes,
                    self._bound_run_options,
                )
            except InvalidInput:
                raise
            except Exception:
                # Most likely an output shape that changed for the same input shapes: run
                # again unbound below (the model is a pure function of its inputs), which
                # also reports any real error as ``run`` does.
                pass
        produced = self.run(inputs, outputs)
        self._output_shapes.remember(key, produced)
        return produced

    def _feed(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {
            name: _to_onnx_strings(array, name) if array.dtype == object else array
            for name, array in inputs.items()
        }


def _to_onnx_strings(array: np.ndarray, name: str) -> np.ndarray:
    """V2 BYTES elements as the str elements onnxruntime wants for tensor(string).

    onnxruntime keeps strings as UTF-8: an element that is not UTF-8 is the client's error
    (InvalidInput naming the input and the element), not a failure of the model.
    """
    flat = array.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    for index, value in enumerate(flat):
        if isinstance(value, bytes | bytearray | memoryview):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInput(
                    f"input {name!r}: element {index} is not valid UTF-8 ({exc.reason} at "
                    f"byte {exc.start}); onnxruntime string tensors hold UTF-8 text"
                ) from None
        out[index] = value
    return out.reshape(array.shape)


def _utf8(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


@dataclasses.dataclass(frozen=True)
class SessionOptions:
    intra_op_threads: int = 1
    inter_op_threads: int = 1
    graph_optimization_level: str = "all"

    @classmethod
    def from_config(cls, config: ModelConfig) -> SessionOptions:
        options = dict(config.backend_options)
        if problem := unknown_key(options, OPTION_KEYS, "[onnxruntime]"):
            raise RepositoryError(f"model {config.name!r}: {problem}")
        level = options.get("graph_optimization_level", "all")
        if level not in _OPTIMIZATION_LEVELS:
            raise RepositoryError(
                f"model {config.name!r}: onnxruntime.graph_optimization_level must be one of "
                f"{', '.join(_OPTIMIZATION_LEVELS)}, got {level!r}"
            )
        for key in ("intra_op_threads", "inter_op_threads"):
            value = options.get(key, 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise RepositoryError(
                    f"model {config.name!r}: onnxruntime.{key} must be an integer >= 0 "
                    f"(0 lets onnxruntime choose), got {value!r}"
                )
        return cls(
            intra_op_threads=options.get("intra_op_threads", 1),
            inter_op_threads=options.get("inter_op_threads", 1),
            graph_optimization_level=level,
        )


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"

    def load(
        self, config: ModelConfig, version_dir: Path, *, caller: ModelCaller | None = None
    ) -> OnnxRuntimeModel:
        options = SessionOptions.from_config(config)
        path = version_dir / (config.model_filename or "model.onnx")
        if not path.exists():
            raise RepositoryError(f"model {config.name!r}: {path} does not exist")
        session_options = ort.SessionOptions()
        # onnxruntime's own arena never shrinks: a burst of concurrent runs (or answers a
        # client leaves unread) would keep its high-water mark for good. Without it, tensors
        # come from malloc, which the server tunes and trims (server/malloc_tuning.py); no
        # slower, measured on tiny and the MiniLM encoder.
        session_options.enable_cpu_mem_arena = False
        session_options.intra_op_num_threads = options.intra_op_threads
        session_options.inter_op_num_threads = options.inter_op_threads
        session_options.graph_optimization_level = _OPTIMIZATION_LEVELS[
            options.graph_optimization_level
        ]
        # Threads that spin after a run burn the core another instance needs.
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session_options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(
                str(path), sess_options=session_options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own exception types
            raise RepositoryError(
                f"model {config.name!r}: onnxruntime could not load {path.name}: {exc}"
            ) from None
        return OnnxRuntimeModel(session)

    def complete_config(self, config: ModelConfig, model: LoadedModel) -> ModelConfig:
        assert isinstance(model, OnnxRuntimeModel)
        session = model.session
        inputs = config.inputs or _specs(config, session.get_inputs(), "input")
        outputs = config.outputs or _specs(config, session.get_outputs(), "output")
        declared = {i.name for i in session.get_inputs()}
        check_declared(config, inputs, declared, "input", "the ONNX file")
        declared = {o.name for o in session.get_outputs()}
        check_declared(config, outputs, declared, "output", "the ONNX file")
        return dataclasses.replace(config, inputs=inputs, outputs=outputs)


def _specs(config: ModelConfig, args: list[Any], kind: str) -> tuple[TensorSpec, ...]:
    specs = []
    for arg in args:
        datatype = _DATATYPE_OF_ORT.get(arg.type)
        if datatype is None:
            raise RepositoryError(
                f"model {config.name!r}: {kind} {arg.name!r} has type {arg.type}, "
                "which has no V2 datatype"
            )
        # Symbolic or unknown dimensions become -1 (any size).
        shape = [d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape]
        specs.append(file_tensor_spec(config, kind, arg.name, datatype, shape, arg.shape))
    return tuple(specs)
