"""The committed generated code works across the whole protobuf range pyproject declares.

The generated modules check the protobuf runtime when imported and refuse one older than the
protoc that wrote them. If that protoc is newer than the declared floor, pip happily installs
Conveyor beside a protobuf it cannot import with (tritonclient pins protobuf below 7, so this
is what a user who installs both gets). Each end of the declared range is installed into a
scratch directory and the generated modules are imported under it, warnings as errors.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]

VERSION_CHECK = re.compile(r"ValidateProtobufRuntimeVersion\(\s*\S+,\s*(\d+),\s*(\d+),\s*(\d+),")
IMPORT_AND_ROUND_TRIP = """
import google.protobuf
from conveyor.protocol.grpc._generated import grpc_service_pb2, model_config_pb2
request = grpc_service_pb2.ModelInferRequest(model_name="tiny")
request.raw_input_contents.append(b"\\x00\\x01")
assert grpc_service_pb2.ModelInferRequest.FromString(request.SerializeToString()) == request
assert model_config_pb2.ModelConfig(name="tiny").name == "tiny"
print(google.protobuf.__version__)
"""


def _declared_protobuf() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"]:
        requirement = Requirement(line)
        if requirement.name == "protobuf":
            return requirement
    raise AssertionError("pyproject.toml declares no protobuf dependency")


def _floor(requirement: Requirement) -> str:
    floors = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    assert len(floors) == 1, f"expected one >= bound on protobuf, got {requirement.specifier}"
    return floors[0]


def test_generated_code_asks_for_no_newer_protobuf_than_the_floor() -> None:
    floor = tuple(int(part) for part in _floor(_declared_protobuf()).split("."))
    for module in (ROOT / "conveyor/protocol/grpc/_generated").glob("*_pb2.py"):
        found = VERSION_CHECK.search(module.read_text())
        assert found, f"{module.name}: no runtime version check found"
        gencode = tuple(int(part) for part in found.groups())
        assert gencode <= floor, (
            f"{module.name} was generated for protobuf {gencode}, newer than the declared floor "
            f"{floor}: regenerate with the grpcio-tools pinned in pyproject's test extra"
        )


@pytest.mark.slow
@pytest.mark.parametrize("end", ["floor", "newest"])
def test_generated_code_imports_at_each_end_of_the_declared_range(end: str, tmp_path: Path) -> None:
    requirement = _declared_protobuf()
    wanted = (
        f"protobuf=={_floor(requirement)}" if end == "floor" else f"protobuf{requirement.specifier}"
    )
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path),
         "--only-binary=:all:", wanted],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-2000:]
    imported = subprocess.run(
        [sys.executable, "-W", "error", "-c", IMPORT_AND_ROUND_TRIP],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    version = imported.stdout.strip()
    if end == "floor":
        assert version == _floor(requirement)
    assert version in requirement.specifier
