"""The .proto is Conveyor's own, but must mean on the wire exactly what Triton's does.

tritonclient ships Triton's generated modules; every message, field and enum value Conveyor
declares is compared with them by name, number and type, so a typo in a field number (which
would silently corrupt data on the wire) fails here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor, EnumDescriptor
from tritonclient.grpc import model_config_pb2 as triton_config
from tritonclient.grpc import service_pb2 as triton_service

from conveyor.protocol.grpc._generated import grpc_service_pb2, model_config_pb2

ROOT = Path(__file__).resolve().parents[3]


def _messages(descriptor: Descriptor) -> list[Descriptor]:
    found = [descriptor]
    for nested in descriptor.nested_types:
        found.extend(_messages(nested))
    return found


def _ours() -> list[Descriptor]:
    found = []
    for module in (grpc_service_pb2, model_config_pb2):
        for message in module.DESCRIPTOR.message_types_by_name.values():
            found.extend(_messages(message))
    return found


def _triton(full_name: str) -> Descriptor:
    for module in (triton_service, triton_config):
        pool = module.DESCRIPTOR.pool
        try:
            return pool.FindMessageTypeByName(full_name)
        except KeyError:
            continue
    raise AssertionError(f"{full_name} is not a Triton message")


@pytest.mark.parametrize("ours", _ours(), ids=lambda d: d.full_name)
def test_every_field_matches_triton(ours: Descriptor) -> None:
    theirs = _triton(ours.full_name)
    for field in ours.fields:
        assert field.name in theirs.fields_by_name, f"{ours.full_name}.{field.name} not in Triton"
        other = theirs.fields_by_name[field.name]
        where = f"{ours.full_name}.{field.name}"
        assert field.number == other.number, where
        assert field.type == other.type, where
        assert field.is_repeated == other.is_repeated, where
        if field.message_type is not None:
            assert field.message_type.full_name == other.message_type.full_name, where
        if field.enum_type is not None:
            _same_enum(field.enum_type, other.enum_type)
        if field.containing_oneof is not None:
            assert other.containing_oneof is not None, where
            assert field.containing_oneof.name == other.containing_oneof.name, where


def _same_enum(ours: EnumDescriptor, theirs: EnumDescriptor) -> None:
    assert ours.full_name == theirs.full_name
    for value in ours.values:
        assert theirs.values_by_name[value.name].number == value.number, value.name


def test_infer_parameter_has_all_five_kinds() -> None:
    # tritonclient sends priority as uint64_param and floats as double_param (KServe's own
    # proto lacks both); a parameter we cannot parse would be dropped without an error.
    fields = grpc_service_pb2.InferParameter.DESCRIPTOR.fields_by_name
    assert {name: f.number for name, f in fields.items()} == {
        "bool_param": 1,
        "int64_param": 2,
        "string_param": 3,
        "double_param": 4,
        "uint64_param": 5,
    }


def test_service_has_every_triton_rpc_we_promise() -> None:
    ours = grpc_service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    theirs = triton_service.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert ours.full_name == theirs.full_name == "inference.GRPCInferenceService"
    for method in ours.methods:
        other = theirs.methods_by_name[method.name]
        assert method.input_type.full_name == other.input_type.full_name
        assert method.output_type.full_name == other.output_type.full_name
        assert method.client_streaming == other.client_streaming
        assert method.server_streaming == other.server_streaming
    assert {
        "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
        "ModelConfig", "ModelInfer", "ModelStreamInfer", "ModelStatistics", "RepositoryIndex",
        "RepositoryModelLoad", "RepositoryModelUnload", "SystemSharedMemoryStatus",
        "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus",
        "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister", "TraceSetting", "LogSettings",
    } == set(ours.methods_by_name)  # fmt: skip


def test_bytes_round_trip_with_tritonclient_messages() -> None:
    ours = grpc_service_pb2.ModelInferRequest(model_name="m", id="7")
    ours.parameters["priority"].uint64_param = 3
    ours.parameters["timeout"].int64_param = 1500
    tensor = ours.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 2])
    tensor.contents.fp32_contents.extend([1.5, 2.5])
    ours.raw_input_contents.append(b"\x00\x01")
    theirs = triton_service.ModelInferRequest.FromString(ours.SerializeToString())
    assert theirs.parameters["priority"].uint64_param == 3
    assert theirs.parameters["timeout"].int64_param == 1500
    assert list(theirs.inputs[0].contents.fp32_contents) == [1.5, 2.5]
    assert theirs.SerializeToString(deterministic=True) == ours.SerializeToString(
        deterministic=True
    )


def test_generated_code_is_current() -> None:
    # Regenerates from proto/ into a temporary directory and compares with what is committed.
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    gen_proto = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_proto)
    diffs = gen_proto.differences()
    assert not diffs, "run python scripts/gen_proto.py:\n" + "\n".join(diffs)[:3000]
