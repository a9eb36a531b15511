"""The ``[openvino]`` table of config.toml (and Triton's OpenVINO ``parameters``), checked.

Kept apart from the backend so a config is validated with clear errors whether or not the
``openvino`` package is installed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from conveyor.errors import RepositoryError
from conveyor.repository.config import ModelConfig
from conveyor.repository.tables import unknown_key

PERFORMANCE_HINTS = ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT")
PRECISION_HINTS = ("f32", "bf16", "f16")
STREAM_WORDS = ("AUTO", "NUMA")
OPTION_KEYS = {
    "performance_hint",
    "num_streams",
    "inference_num_threads",
    "compilation_num_threads",
    "precision_hint",
    "infer_requests",
}


@dataclasses.dataclass(frozen=True)
class OpenVinoOptions:
    performance_hint: str | None = None  # None: OpenVINO's default (LATENCY on CPU)
    num_streams: int | str | None = None
    inference_num_threads: int | None = None
    compilation_num_threads: int | None = None
    # f32 unless asked: on a CPU with bf16 units OpenVINO's own default is bf16, which
    # changes a float model's answers in the third digit.
    precision_hint: str = "f32"
    # Infer requests in flight at once; None: the compiled model's
    # OPTIMAL_NUMBER_OF_INFER_REQUESTS.
    infer_requests: int | None = None

    @classmethod
    def from_config(cls, config: ModelConfig) -> OpenVinoOptions:
        options: dict[str, Any] = dict(config.backend_options)

        def fail(key: str, expected: str) -> RepositoryError:
            return RepositoryError(
                f"model {config.name!r}: openvino.{key} must be {expected}, got {options[key]!r}"
            )

        if problem := unknown_key(options, OPTION_KEYS, "[openvino]"):
            raise RepositoryError(f"model {config.name!r}: {problem}")
        hint = options.get("performance_hint")
        if hint is not None and hint not in PERFORMANCE_HINTS:
            raise fail("performance_hint", f"one of {', '.join(PERFORMANCE_HINTS)}")
        precision = options.get("precision_hint")
        if precision is not None and precision not in PRECISION_HINTS:
            raise fail("precision_hint", f"one of {', '.join(PRECISION_HINTS)}")
        streams = options.get("num_streams")
        if streams is not None and streams not in STREAM_WORDS and not _positive(streams):
            raise fail("num_streams", 'an integer >= 1, "AUTO" or "NUMA"')
        for key in ("inference_num_threads", "compilation_num_threads"):
            value = options.get(key)
            if value is not None and not (_positive(value) or value == 0):
                raise fail(key, "an integer >= 0 (0 lets OpenVINO choose)")
        requests = options.get("infer_requests")
        if requests is not None and not _positive(requests):
            raise fail("infer_requests", "an integer >= 1 (leave it out for OpenVINO's optimum)")
        return cls(
            performance_hint=hint,
            num_streams=streams,
            inference_num_threads=options.get("inference_num_threads"),
            compilation_num_threads=options.get("compilation_num_threads"),
            precision_hint=precision or "f32",
            infer_requests=requests,
        )

    def properties(self) -> dict[str, str]:
        """What ``Core.compile_model`` is given, under OpenVINO's property names."""
        chosen = {
            "PERFORMANCE_HINT": self.performance_hint,
            "NUM_STREAMS": self.num_streams,
            "INFERENCE_NUM_THREADS": self.inference_num_threads,
            "COMPILATION_NUM_THREADS": self.compilation_num_threads,
            "INFERENCE_PRECISION_HINT": self.precision_hint,
        }
        return {key: str(value) for key, value in chosen.items() if value is not None}


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# Triton's OpenVINO-backend parameters (config.pbtxt, all strings) -> [openvino] keys.
TRITON_PARAMETERS = {
    "PERFORMANCE_HINT": "performance_hint",
    "NUM_STREAMS": "num_streams",
    "CPU_THROUGHPUT_STREAMS": "num_streams",  # its older name
    "INFERENCE_NUM_THREADS": "inference_num_threads",
    "CPU_THREADS_NUM": "inference_num_threads",  # its older name
    "COMPILATION_NUM_THREADS": "compilation_num_threads",
}
# Triton parameters whose behaviour Conveyor does not have, and why they are refused.
TRITON_REFUSED = {
    "CPU_EXTENSION_PATH": "Conveyor loads no custom CPU extensions",
    "SKIP_OV_DYNAMIC_BATCHSIZE": "Conveyor runs the model's own (dynamic) batch dimension",
    "ENABLE_BATCH_PADDING": "Conveyor does not pad batches",
    "RESHAPE_IO_LAYERS": "Conveyor keeps the model's own input shapes",
}


def triton_parameters(parameters: dict[str, str]) -> dict[str, Any]:
    """Triton's OpenVINO parameters as an [openvino] table; ValueError(key, reason) if refused."""
    options: dict[str, Any] = {}
    for key, value in parameters.items():
        if key in TRITON_REFUSED:
            if value.upper() in ("", "NO"):
                continue
            raise ValueError(key, f"not supported: {TRITON_REFUSED[key]}")
        if key == "TARGET_DEVICE":
            if value.upper() != "CPU":
                raise ValueError(key, f"{value!r}: Conveyor runs OpenVINO models on the CPU only")
            continue
        if key == "HINT_BF16":
            if value.upper() == "YES":
                options["precision_hint"] = "bf16"
            continue
        name = TRITON_PARAMETERS.get(key, key)
        if value.isdigit():
            options[name] = int(value)
        elif name == "num_streams":
            options[name] = value.upper()
        else:
            options[name] = value
    return options
