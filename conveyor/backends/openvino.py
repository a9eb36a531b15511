"""OpenVINO IR (model.xml + model.bin) and ONNX models, compiled once for the CPU.

One ``CompiledModel`` per model version holds the weights; an ``AsyncInferQueue`` of its
infer requests runs the executions. The engine hands a batch to ``start``, which calls
``start_async`` and returns: no thread of ours waits in ``wait()``, the queue's completion
callback (on OpenVINO's own thread) hands the outputs to the engine, and which infer request
runs a batch is the queue's business, so two batches can never share one. The engine keeps
at most ``max_in_flight`` batches started (the queue's size: the compiled model's
OPTIMAL_NUMBER_OF_INFER_REQUESTS unless ``[openvino] infer_requests`` says otherwise), so
``start_async`` always finds an idle request and the rest wait in the engine's queue, where
priorities, deadlines and dynamic batching apply.

Inputs are given to OpenVINO in place (``share_inputs``): the engine keeps the batch's
arrays alive until its callback. Outputs are copied out in the callback, because the infer
request's buffers are reused by the next batch it runs.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conveyor.backends.base import Backend, LoadedModel, ModelCaller
from conveyor.backends.openvino_telemetry import keep_telemetry_off
from conveyor.backends.specs import check_declared, file_tensor_spec
from conveyor.errors import InvalidInput, RepositoryError
from conveyor.repository.config import ModelConfig, TensorSpec
from conveyor.repository.openvino_options import OpenVinoOptions

keep_telemetry_off()  # before openvino is imported: it would send a usage event
try:
    import openvino as ov  # type: ignore[import-untyped]
except ImportError:  # an optional extra: the error says what to install when a model asks
    ov = None

log = logging.getLogger("conveyor.backends.openvino")

INSTALL_HINT = "pip install '.[openvino]' from a checkout of Conveyor (or pip install openvino)"

# OpenVINO element type names -> V2 datatypes. BYTES is OpenVINO's string type.
_DATATYPE_OF_OV = {
    "boolean": "BOOL",
    "u8": "UINT8",
    "u16": "UINT16",
    "u32": "UINT32",
    "u64": "UINT64",
    "i8": "INT8",
    "i16": "INT16",
    "i32": "INT32",
    "i64": "INT64",
    "f16": "FP16",
    "f32": "FP32",
    "f64": "FP64",
    "bf16": "BF16",
    "string": "BYTES",
}
# The CPU plugin computes i64 as i32: a value outside int32 would come back changed.
_INT32 = np.iinfo(np.int32)

Done = Callable[[dict[str, np.ndarray] | Exception], None]


@dataclasses.dataclass(slots=True)
class _Job:
    outputs: Sequence[str]
    done: Done
    inputs: dict[str, Any]  # kept alive while OpenVINO reads them in place


class OpenVinoModel(LoadedModel):
    thread_safe = True  # one compiled model; its infer requests are the concurrency

    def __init__(self, compiled: Any, infer_requests: int | None) -> None:
        self.compiled = compiled
        self.queue = ov.AsyncInferQueue(compiled, infer_requests or 0)
        self.queue.set_callback(self._completed)
        # len(queue) is the number of infer requests it made (the optimum when given 0).
        self.max_in_flight = len(self.queue)
        self._inputs = {port.get_any_name(): port for port in compiled.inputs}
        self._outputs = {port.get_any_name(): port for port in compiled.outputs}
        self._types = {
            name: port.get_element_type().get_type_name() for name, port in self._inputs.items()
        }
        # start_async picks the idle request; one caller at a time keeps that pick simple.
        self._starting = threading.Lock()

    def start(self, inputs: dict[str, np.ndarray], outputs: Sequence[str], done: Done) -> None:
        feed = {name: self._tensor(name, array) for name, array in inputs.items()}
        job = _Job(outputs, done, feed)
        with self._starting:
            self.queue.start_async(feed, job, share_inputs=True)

    def _tensor(self, name: str, array: np.ndarray) -> Any:
        port = self._inputs[name]
        if not port.get_partial_shape().compatible(ov.PartialShape(list(array.shape))):
            # OpenVINO would fail inside the infer request, where no callback reports it.
            raise InvalidInput(
                f"input {name!r} has shape {list(array.shape)}; the OpenVINO model takes "
                f"{port.get_partial_shape()}"
            )
        kind = self._types[name]
        if kind == "string":
            return _to_ov_strings(array, name)
        if kind == "bf16":
            # numpy has no bfloat16 OpenVINO knows: hand it the bits in a bf16 tensor.
            tensor = ov.Tensor(ov.Type.bf16, ov.Shape(list(array.shape)))
            tensor.data[...] = np.ascontiguousarray(array).view(np.float16)
            return tensor
        if kind == "i64" and array.size and (array.min() < _INT32.min or array.max() > _INT32.max):
            raise InvalidInput(
                f"input {name!r}: OpenVINO's CPU plugin computes INT64 as INT32, and a value "
                f"is outside [{_INT32.min}, {_INT32.max}]"
            )
        return array

    def _completed(self, request: Any, job: _Job) -> None:
        """The queue's callback, on OpenVINO's thread: copy the outputs out, finish the job."""
        try:
            produced = {
                name: _copied(request.get_tensor(self._outputs[name])) for name in job.outputs
            }
        except Exception as exc:
            job.done(exc)
            return
        job.done(produced)

    def run(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        """A synchronous execution on an infer request of its own (tools, not the engine)."""
        request = self.compiled.create_infer_request()
        request.infer({name: self._tensor(name, array) for name, array in inputs.items()})
        return {name: _copied(request.get_tensor(self._outputs[name])) for name in outputs}

    def close(self) -> None:
        # The engine has drained its requests; this only waits for OpenVINO's own threads.
        self.queue.wait_all()


def _copied(tensor: Any) -> np.ndarray:
    kind = tensor.get_element_type().get_type_name()
    if kind == "string":
        return np.array(tensor.bytes_data, dtype=object).reshape(tuple(tensor.get_shape()))
    if kind == "bf16":
        import ml_dtypes

        return np.array(tensor.data, copy=True).view(ml_dtypes.bfloat16)
    return np.array(tensor.data, copy=True)


def _to_ov_strings(array: np.ndarray, name: str) -> np.ndarray:
    """V2 BYTES elements as a numpy bytes array, which OpenVINO reads into a string tensor.

    numpy's fixed-width bytes drop trailing NUL bytes, so an element ending in one is
    refused rather than changed.
    """
    values = [bytes(v) if not isinstance(v, str) else v.encode("utf-8") for v in array.flat]
    for index, value in enumerate(values):
        if value.endswith(b"\0"):
            raise InvalidInput(
                f"input {name!r}: element {index} ends with a NUL byte, which OpenVINO string "
                "tensors cannot carry"
            )
    return np.array(values, dtype=bytes).reshape(array.shape)


class OpenVinoBackend(Backend):
    name = "openvino"

    def load(
        self, config: ModelConfig, version_dir: Path, *, caller: ModelCaller | None = None
    ) -> OpenVinoModel:
        options = OpenVinoOptions.from_config(config)
        if ov is None:
            raise RepositoryError(
                f"model {config.name!r} uses the openvino backend, but the openvino package "
                f"is not installed; install it with {INSTALL_HINT}"
            )
        if config.execution_timeout_s is not None:
            raise RepositoryError(
                f"model {config.name!r}: execution_timeout_s is not supported by the openvino "
                "backend (an infer request that has started cannot be abandoned)"
            )
        path = model_path(config, version_dir)
        core = ov.Core()
        try:
            compiled = core.compile_model(str(path), "CPU", options.properties())
        except Exception as exc:  # OpenVINO raises RuntimeError for every kind of failure
            raise RepositoryError(
                f"model {config.name!r}: OpenVINO could not load {path.name}: {exc}"
            ) from None
        _warn_if_fewer_streams(config.name, options.num_streams, compiled)
        return OpenVinoModel(compiled, options.infer_requests)

    def complete_config(self, config: ModelConfig, model: LoadedModel) -> ModelConfig:
        assert isinstance(model, OpenVinoModel)
        compiled = model.compiled
        inputs = config.inputs or _specs(config, compiled.inputs, "input")
        outputs = config.outputs or _specs(config, compiled.outputs, "output")
        declared = {p.get_any_name() for p in compiled.inputs}
        check_declared(config, inputs, declared, "input", "the OpenVINO model")
        declared = {p.get_any_name() for p in compiled.outputs}
        check_declared(config, outputs, declared, "output", "the OpenVINO model")
        return dataclasses.replace(config, inputs=inputs, outputs=outputs)


def _warn_if_fewer_streams(model: str, asked: int | str | None, compiled: Any) -> None:
    """Say so when OpenVINO compiled fewer streams than ``num_streams`` asked for.

    Its CPU plugin caps streams at the cores the process may use, silently; an operator
    who asked for more would otherwise expect parallelism that is not there.
    """
    if not isinstance(asked, int):
        return
    try:
        got = int(compiled.get_property("NUM_STREAMS"))
    except Exception:  # a property this OpenVINO release does not report: nothing to compare
        return
    if got < asked:
        log.warning(
            "model %r: num_streams = %d asked, OpenVINO compiled %d (at most one stream per "
            "core this process may use); infer requests beyond %d wait for a free stream",
            model,
            asked,
            got,
            got,
        )


def model_path(config: ModelConfig, version_dir: Path) -> Path:
    """model.xml (with model.bin beside it), else model.onnx, else the config's file name."""
    if config.model_filename:
        candidates = [version_dir / config.model_filename]
    else:
        candidates = [version_dir / "model.xml", version_dir / "model.onnx"]
    for path in candidates:
        if path.exists():
            if path.suffix == ".xml" and not path.with_suffix(".bin").exists():
                raise RepositoryError(
                    f"model {config.name!r}: {path} has no {path.with_suffix('.bin').name} "
                    "beside it (an OpenVINO IR model is the .xml and its .bin weights)"
                )
            return path
    names = " or ".join(p.name for p in candidates)
    raise RepositoryError(f"model {config.name!r}: {version_dir} holds no {names}")


def _specs(config: ModelConfig, ports: Sequence[Any], kind: str) -> tuple[TensorSpec, ...]:
    specs = []
    for port in ports:
        name = port.get_any_name()
        element = port.get_element_type().get_type_name()
        datatype = _DATATYPE_OF_OV.get(element)
        if datatype is None:
            raise RepositoryError(
                f"model {config.name!r}: {kind} {name!r} has OpenVINO type {element}, "
                "which has no V2 datatype"
            )
        partial = port.get_partial_shape()
        if partial.rank.is_dynamic:
            raise RepositoryError(
                f"model {config.name!r}: {kind} {name!r} has a dynamic rank; declare its "
                "shape in the config"
            )
        # Dynamic dimensions (and bounded ones) become -1 (any size).
        shape = [d.get_length() if d.is_static else -1 for d in partial]
        specs.append(file_tensor_spec(config, kind, name, datatype, shape, partial))
    return tuple(specs)
