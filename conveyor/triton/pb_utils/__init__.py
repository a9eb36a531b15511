"""Conveyor's ``triton_python_backend_utils``: the names a Triton Python model uses.

A ``model.py`` that does ``import triton_python_backend_utils as pb_utils`` gets this module
(the Python backend makes the name an alias of it when such a model loads). It has every
public name Triton's python_backend stub gives a model (tests/triton/pb_utils_names.txt,
generated from python_backend's source, is the list a test checks), with Triton's
behaviour: tensors are numpy arrays on the CPU, a response carries its request's outputs or
a ``TritonError``, and ``InferenceRequest(...).exec()`` runs another model of the same server
(Business Logic Scripting).

A decoupled model (``model_transaction_policy { decoupled: true }``) gets a response sender
from ``request.get_response_sender()`` and ends each request with
``TRITONSERVER_RESPONSE_COMPLETE_FINAL``, as in Triton. Custom metrics (``MetricFamily``,
``Metric``) appear on the metrics port's ``/metrics``.

What cannot mean anything here (GPU memory, model control from a model, rescheduling a
request) exists all the same and raises ``TritonModelException`` naming the feature when
used, never an AttributeError and never a silent no-op.

One module per job: ``_errors`` (TritonError and its codes), ``_tensors`` (Tensor, DLPack,
data types), ``_requests`` (requests, responses, senders, BLS), ``_config``, ``_metrics``,
``_logger``, ``_model_control``.
"""

from __future__ import annotations

from conveyor.triton.pb_utils._config import ModelConfig as ModelConfig
from conveyor.triton.pb_utils._config import get_input_config_by_name as get_input_config_by_name
from conveyor.triton.pb_utils._config import (
    get_output_config_by_name as get_output_config_by_name,
)
from conveyor.triton.pb_utils._config import (
    using_decoupled_model_transaction_policy as using_decoupled_model_transaction_policy,
)
from conveyor.triton.pb_utils._errors import TritonError as TritonError
from conveyor.triton.pb_utils._errors import TritonModelException as TritonModelException
from conveyor.triton.pb_utils._logger import Logger as Logger
from conveyor.triton.pb_utils._metrics import Metric as Metric
from conveyor.triton.pb_utils._metrics import MetricFamily as MetricFamily
from conveyor.triton.pb_utils._model_control import is_model_ready as is_model_ready
from conveyor.triton.pb_utils._model_control import load_model as load_model
from conveyor.triton.pb_utils._model_control import unload_model as unload_model
from conveyor.triton.pb_utils._requests import (
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_END as TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
)
from conveyor.triton.pb_utils._requests import (
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_START as TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
)
from conveyor.triton.pb_utils._requests import (
    TRITONSERVER_REQUEST_RELEASE_ALL as TRITONSERVER_REQUEST_RELEASE_ALL,
)
from conveyor.triton.pb_utils._requests import (
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE as TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
)
from conveyor.triton.pb_utils._requests import (
    TRITONSERVER_RESPONSE_COMPLETE_FINAL as TRITONSERVER_RESPONSE_COMPLETE_FINAL,
)
from conveyor.triton.pb_utils._requests import InferenceRequest as InferenceRequest
from conveyor.triton.pb_utils._requests import InferenceResponse as InferenceResponse
from conveyor.triton.pb_utils._requests import InferenceResponseSender as InferenceResponseSender
from conveyor.triton.pb_utils._requests import InferenceTrace as InferenceTrace
from conveyor.triton.pb_utils._requests import ResponseIterator as ResponseIterator
from conveyor.triton.pb_utils._requests import calling_through as calling_through
from conveyor.triton.pb_utils._requests import get_input_tensor_by_name as get_input_tensor_by_name
from conveyor.triton.pb_utils._requests import (
    get_output_tensor_by_name as get_output_tensor_by_name,
)
from conveyor.triton.pb_utils._tensors import TRITON_STRING_TO_NUMPY as TRITON_STRING_TO_NUMPY
from conveyor.triton.pb_utils._tensors import TRITONSERVER_MEMORY_CPU as TRITONSERVER_MEMORY_CPU
from conveyor.triton.pb_utils._tensors import TRITONSERVER_MEMORY_GPU as TRITONSERVER_MEMORY_GPU
from conveyor.triton.pb_utils._tensors import PreferredMemory as PreferredMemory
from conveyor.triton.pb_utils._tensors import Tensor as Tensor
from conveyor.triton.pb_utils._tensors import deserialize_bytes_tensor as deserialize_bytes_tensor
from conveyor.triton.pb_utils._tensors import numpy_to_triton_type as numpy_to_triton_type
from conveyor.triton.pb_utils._tensors import serialize_byte_tensor as serialize_byte_tensor
from conveyor.triton.pb_utils._tensors import triton_string_to_numpy as triton_string_to_numpy
from conveyor.triton.pb_utils._tensors import triton_to_numpy_type as triton_to_numpy_type

__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "InferenceTrace",
    "Logger",
    "Metric",
    "MetricFamily",
    "ModelConfig",
    "PreferredMemory",
    "ResponseIterator",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
]
