"""``Tensor`` (a named numpy array on the CPU), DLPack on the CPU, Triton's type numbering
and its BYTES serialization helpers, and ``PreferredMemory`` (CPU only)."""

from __future__ import annotations

import ctypes
import enum
import struct
from typing import Any

import numpy as np

from conveyor.errors import ConveyorError
from conveyor.protocol.datatypes import BYTES, datatype_of, numpy_dtype
from conveyor.triton.pb_utils._errors import TritonModelException, unsupported

# DLPack's device types (dlpack.h's DLDeviceType): only host memory is served here.
DL_CPU = 1
_CPU_ONLY = "CPU only: tensors are numpy arrays in host memory"


class Tensor:
    """A named CPU tensor over a numpy array (BYTES: an object array of bytes)."""

    def __init__(self, name: str, array: np.ndarray) -> None:
        # Triton's arguments are typed (pybind11): one of another type is a TypeError.
        if not isinstance(name, str):
            raise TypeError(f"Tensor name: expected a str, got {type(name).__name__}")
        if array is None:
            raise TypeError(f"Tensor {name!r}: expected a numpy.ndarray, got None")
        if not name:
            raise TritonModelException(f"Tensor name must be a non-empty string, got {name!r}")
        if not isinstance(array, np.ndarray):
            raise TritonModelException(
                f"Tensor {name!r}: expected a numpy.ndarray, got {type(array).__name__}"
            )
        self._name = name
        self._array = array

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def triton_dtype(self) -> int:
        return numpy_to_triton_type(self._array.dtype)

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> Any:
        """A DLPack capsule over this tensor's memory (no copy), for torch/jax/numpy."""
        return self.__dlpack__()

    def __dlpack__(self, stream: Any = None) -> Any:
        if self._array.dtype == np.object_:
            raise TritonModelException(
                f"Tensor {self._name!r}: a BYTES tensor has no DLPack form (DLPack holds "
                "numbers only); use as_numpy()"
            )
        return self._array.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DL_CPU, 0)

    @staticmethod
    def from_dlpack(name: str, tensor: Any) -> Tensor:
        """A Tensor over a DLPack capsule or an object with ``__dlpack__`` (torch, jax,
        numpy), sharing its memory. A tensor in GPU memory raises: Conveyor is CPU only."""
        device = _dlpack_device(tensor)
        if device != DL_CPU:
            raise unsupported(
                f"pb_utils.Tensor.from_dlpack with a GPU tensor (DLPack device type {device})",
                _CPU_ONLY,
            )
        source = _Capsule(tensor) if _is_capsule(tensor) else tensor
        return Tensor(name, np.from_dlpack(source))


class _Capsule:
    """A bare DLPack capsule dressed as the object ``numpy.from_dlpack`` takes."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, stream: Any = None) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DL_CPU, 0)


def _is_capsule(value: Any) -> bool:
    return type(value).__name__ == "PyCapsule"


def _dlpack_device(tensor: Any) -> int:
    if _is_capsule(tensor):
        # A capsule named "dltensor" points at a DLManagedTensor, which starts with a
        # DLTensor: a data pointer, then its DLDevice (device type, device id: int32 each).
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        try:
            address = get(tensor, b"dltensor")
        except ValueError:
            raise TritonModelException(
                "Tensor.from_dlpack: the capsule was used already or is not a DLPack tensor "
                "(a capsule can be consumed once)"
            ) from None
        return ctypes.c_int32.from_address(address + ctypes.sizeof(ctypes.c_void_p)).value
    device = getattr(tensor, "__dlpack_device__", None)
    if device is None or not hasattr(tensor, "__dlpack__"):
        raise TritonModelException(
            f"Tensor.from_dlpack: expected a DLPack capsule or an object with __dlpack__ "
            f"(a torch, jax or numpy array), got {type(tensor).__name__}"
        )
    return int(device()[0])


# -- Triton's data type numbers and strings -------------------------------------------------

# Triton's TRITONSERVER_DataType numbering, which numpy_to_triton_type and friends speak.
_TRITON_TYPES = (
    "INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
    "INT64", "FP16", "FP32", "FP64", BYTES, "BF16",
)  # fmt: skip

TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    **{f"TYPE_{name}": numpy_dtype(name).type for name in _TRITON_TYPES[2:13]},
    "TYPE_STRING": np.object_,
}


def triton_string_to_numpy(triton_type_string: str) -> type:
    """``"TYPE_FP32"`` -> numpy.float32; ``"TYPE_STRING"`` -> numpy.object_."""
    datatype = triton_type_string.removeprefix("TYPE_")
    if datatype == "STRING":
        return np.object_
    try:
        return numpy_dtype(datatype).type
    except ConveyorError:
        raise TritonModelException(
            f"triton_string_to_numpy: {triton_type_string!r} is not a Triton data type "
            "(TYPE_BOOL ... TYPE_FP64, TYPE_STRING)"
        ) from None


def triton_to_numpy_type(data_type: int) -> type:
    if not 0 < data_type < len(_TRITON_TYPES):
        raise TritonModelException(f"triton_to_numpy_type: no Triton data type {data_type}")
    datatype = _TRITON_TYPES[data_type]
    return np.object_ if datatype == BYTES else numpy_dtype(datatype).type


def numpy_to_triton_type(data_type: Any) -> int:
    dtype = np.dtype(data_type)
    if dtype == np.object_ or dtype.kind in "SU":
        return _TRITON_TYPES.index(BYTES)
    try:
        return _TRITON_TYPES.index(datatype_of(dtype))
    except ConveyorError:
        raise TritonModelException(f"numpy_to_triton_type: {dtype} has no Triton type") from None


# -- BYTES tensors in Triton's wire form: each element a little-endian uint32 length, then
# its bytes, in row-major order ---------------------------------------------------------------


def serialize_byte_tensor(input_tensor: np.ndarray) -> bytes | tuple[()] | None:
    """A BYTES tensor (object or ``numpy.bytes_`` array) as one length-prefixed buffer;
    ``()`` for an empty tensor and None for one of another type, as Triton's."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        return None
    parts = []
    for item in input_tensor.ravel(order="C"):
        data = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts += [struct.pack("<I", len(data)), data]
    return b"".join(parts)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    """The elements of a length-prefixed buffer, as a 1-D object array of bytes."""
    items: list[bytes] = []
    view, offset = memoryview(encoded_tensor), 0
    while offset < len(view):
        if offset + 4 > len(view):
            raise TritonModelException(
                f"deserialize_bytes_tensor: {len(view) - offset} bytes left at offset "
                f"{offset}, expected a 4-byte length"
            )
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > len(view):
            raise TritonModelException(
                f"deserialize_bytes_tensor: an element of {length} bytes at offset {offset} "
                f"runs past the end ({len(view)} bytes)"
            )
        items.append(bytes(view[offset : offset + length]))
        offset += length
    array = np.empty(len(items), dtype=np.object_)
    array[:] = items
    return array


# -- where outputs of a BLS request should be: the CPU, here ---------------------------------


class MemoryType(enum.IntEnum):
    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU


class PreferredMemory:
    """Where a BLS request's outputs should be (``InferenceRequest(preferred_memory=...)``):
    the CPU is the only memory here, and asking for the GPU raises."""

    def __init__(self, preferred_memory_type: int, preferred_device_id: int = 0) -> None:
        if preferred_memory_type == TRITONSERVER_MEMORY_GPU:
            raise unsupported("pb_utils.PreferredMemory(TRITONSERVER_MEMORY_GPU)", _CPU_ONLY)
        if preferred_memory_type != TRITONSERVER_MEMORY_CPU:
            raise TritonModelException(
                f"PreferredMemory: memory type {preferred_memory_type!r}; expected "
                "pb_utils.TRITONSERVER_MEMORY_CPU"
            )
        self.preferred_memory_type = MemoryType(preferred_memory_type)
        self.preferred_device_id = preferred_device_id
