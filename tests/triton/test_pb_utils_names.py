"""Every public name Triton's python_backend gives a model exists in Conveyor's pb_utils.

The names are in pb_utils_names.txt, generated from python_backend's own source by
scripts/pb_utils_names.py (its header says from which commit). What cannot work here (GPU
memory, model control from a model, rescheduling) must exist and raise an error naming the
feature when used, never AttributeError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conveyor.triton import pb_utils
from conveyor.triton.pb_utils import _requests as pb_utils_requests

NAMES = Path(__file__).with_name("pb_utils_names.txt")


def _names() -> list[str]:
    lines = NAMES.read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_the_names_file_was_generated_from_python_backend() -> None:
    header = NAMES.read_text().splitlines()[:6]
    assert any("scripts/pb_utils_names.py" in line for line in header)
    assert any(len(line.strip().lstrip("# ")) == 40 for line in header), "no commit in header"
    # The classes, methods and constants a model uses most are in it: a parser that lost
    # its way in pb_stub.cc would drop them.
    names = set(_names())
    assert {
        "InferenceRequest.exec",
        "InferenceRequest.flags",
        "InferenceResponseSender.send",
        "Tensor.from_dlpack",
        "TritonError.CANCELLED",
        "using_decoupled_model_transaction_policy",
        "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    } <= names
    assert len(names) > 90


@pytest.mark.parametrize("name", _names())
def test_triton_name_exists(name: str) -> None:
    owner: Any = pb_utils
    for part in name.split("."):
        assert hasattr(owner, part), f"pb_utils has no {name}"
        owner = getattr(owner, part)


def test_triton_constants_have_tritons_values() -> None:
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START == 1
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END == 2
    assert pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE == 2
    codes = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED"]
    codes += ["ALREADY_EXISTS", "CANCELLED"]
    assert [getattr(pb_utils.TritonError, code) for code in codes] == list(range(8))
    assert [pb_utils.Logger.INFO, pb_utils.Logger.WARNING, pb_utils.Logger.ERROR] == [0, 1, 2]
    assert pb_utils.Logger.VERBOSE == 3
    assert pb_utils.TRITON_STRING_TO_NUMPY["TYPE_FP32"] is np.float32


class _GpuTensor:
    """What torch or cupy hands ``from_dlpack`` for a tensor in CUDA memory (device 2)."""

    def __dlpack__(self, stream: Any = None) -> Any:
        raise AssertionError("a GPU tensor must be refused before it is read")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


GPU_AND_OTHER_UNOFFERED: dict[str, Callable[[], object]] = {
    "pb_utils.Tensor.from_dlpack with a GPU tensor": lambda: pb_utils.Tensor.from_dlpack(
        "x", _GpuTensor()
    ),
    "pb_utils.PreferredMemory(TRITONSERVER_MEMORY_GPU)": lambda: pb_utils.PreferredMemory(
        pb_utils.TRITONSERVER_MEMORY_GPU
    ),
}

# Model control reaches the server that runs the model: outside one there is none.
MODEL_CONTROL: dict[str, Callable[[], object]] = {
    "pb_utils.load_model": lambda: pb_utils.load_model("m"),
    "pb_utils.unload_model": lambda: pb_utils.unload_model("m"),
    "pb_utils.is_model_ready": lambda: pb_utils.is_model_ready("m"),
}


@pytest.mark.parametrize("feature", list(MODEL_CONTROL))
def test_model_control_outside_a_served_model_says_no_server_is_reachable(
    feature: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No server: forget the one an in-process test's model ran under (threads a model
    # starts reach the last one, as in Triton's stub).
    monkeypatch.setattr(pb_utils_requests, "_last_caller", [])
    with pytest.raises(pb_utils.TritonModelException) as raised:
        MODEL_CONTROL[feature]()
    assert str(raised.value).startswith(f"{feature} works only inside initialize() or execute()")


@pytest.mark.parametrize("feature", list(GPU_AND_OTHER_UNOFFERED))
def test_what_cannot_work_here_raises_naming_it(feature: str) -> None:
    with pytest.raises(pb_utils.TritonModelException) as raised:
        GPU_AND_OTHER_UNOFFERED[feature]()
    assert feature in str(raised.value)
    assert "not supported by Conveyor" in str(raised.value)
    assert not isinstance(raised.value, AttributeError)


def test_dlpack_round_trips_on_the_cpu_without_a_copy() -> None:
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = pb_utils.Tensor("x", array)
    assert tensor.__dlpack_device__() == (1, 0)
    from_capsule = pb_utils.Tensor.from_dlpack("y", tensor.to_dlpack())
    from_object = pb_utils.Tensor.from_dlpack("z", tensor)
    for other in (from_capsule, from_object):
        assert other.as_numpy().tolist() == array.tolist()
        assert np.shares_memory(other.as_numpy(), array)
    assert np.from_dlpack(tensor).tolist() == array.tolist()
    assert pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU).preferred_device_id == 0


def test_bytes_serialization_round_trips() -> None:
    strings = np.array([b"a", b"", "\u00e9".encode()], dtype=np.object_)
    encoded = pb_utils.serialize_byte_tensor(strings)
    assert encoded == b"\x01\x00\x00\x00a\x00\x00\x00\x00\x02\x00\x00\x00\xc3\xa9"
    assert pb_utils.deserialize_bytes_tensor(encoded).tolist() == strings.tolist()


def test_request_accessors_and_a_bytes_model_name() -> None:
    request = pb_utils.InferenceRequest(
        model_name=b"add_sub",
        correlation_id="seq-1",
        flags=pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
        timeout=5,
        parameters={"k": "v"},
    )
    assert request.model_name() == "add_sub"
    assert request.correlation_id() == "seq-1"
    assert request.flags() == pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
    assert request.timeout() == 5
    assert request.parameters() == '{"k": "v"}'
    assert not request.is_cancelled()
    assert request.trace().get_context() is None
    request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL)
    assert pb_utils.using_decoupled_model_transaction_policy(
        {"model_transaction_policy": {"decoupled": True}}
    )
    assert not pb_utils.using_decoupled_model_transaction_policy({})
