"""deploy/kserve/servingruntime.yaml against KServe's published types, and its container
against Conveyor's own command line.

No cluster runs here: the manifest is checked field by field against the ``kserve``
package's ServingRuntime classes and the ``kubernetes`` package's container types (see
``kserve_types.py``; the test command fetches their wheels before the tests run, with
``python scripts/fetch_test_assets.py``; without them the test skips, saying so).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conveyor.cli import build_parser
from tests.deploy import kserve_types

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kserve" / "servingruntime.yaml"


@pytest.fixture(scope="module")
def published_types() -> Iterator[None]:
    folder = kserve_types.FOLDER
    if not (folder / "site").is_dir():
        pytest.skip(
            f"KServe's types are not in {folder}: run `python scripts/fetch_test_assets.py` "
            "(the test command does)"
        )
    added = kserve_types.install_stand_ins(folder)
    try:
        yield
    finally:
        for name in list(sys.modules):
            if any(name == a or name.startswith(a + ".") for a in added):
                del sys.modules[name]


@pytest.fixture
def manifest() -> dict[str, Any]:
    return yaml.safe_load(MANIFEST.read_text())


def test_manifest_matches_kserves_serving_runtime(
    published_types: None, manifest: dict[str, Any]
) -> None:
    assert manifest["apiVersion"] == "serving.kserve.io/v1alpha1"
    assert manifest["kind"] == "ServingRuntime"
    kserve_types.check(manifest, "V1alpha1ServingRuntime", "ServingRuntime")


def test_the_check_catches_what_kserve_would_refuse(
    published_types: None, manifest: dict[str, Any]
) -> None:
    """The validator is not a rubber stamp: a misspelt field, at either level, fails."""
    manifest["spec"]["protocolVersion"] = ["v2"]  # KServe's field is protocolVersions
    with pytest.raises(kserve_types.ManifestError, match="protocolVersion"):
        kserve_types.check(manifest, "V1alpha1ServingRuntime", "ServingRuntime")
    del manifest["spec"]["protocolVersion"]
    manifest["spec"]["containers"][0]["argz"] = []  # a Kubernetes container field
    with pytest.raises(kserve_types.ManifestError, match="argz"):
        kserve_types.check(manifest, "V1alpha1ServingRuntime", "ServingRuntime")
    manifest["spec"]["containers"][0].pop("argz")
    manifest["spec"]["supportedModelFormats"][0]["priority"] = "high"
    with pytest.raises(kserve_types.ManifestError, match="priority"):
        kserve_types.check(manifest, "V1alpha1ServingRuntime", "ServingRuntime")


def test_runtime_serves_v2_for_onnx_openvino_and_python(manifest: dict[str, Any]) -> None:
    spec = manifest["spec"]
    assert spec["protocolVersions"] == ["v2", "grpc-v2"]
    formats = {f["name"] for f in spec["supportedModelFormats"]}
    assert formats == {"onnx", "openvino", "python"}


def test_container_args_are_conveyor_serves(manifest: dict[str, Any]) -> None:
    """The container keeps the image's entrypoint (``conveyor serve``) and passes
    arguments the CLI accepts: KServe's repository path and ports its probes use."""
    (container,) = manifest["spec"]["containers"]
    assert "command" not in container  # the image's ENTRYPOINT runs
    args = build_parser().parse_args(["serve", *container["args"]])
    assert args.command == "serve"
    assert args.repository == "/mnt/models"  # where KServe puts the storageUri's files
    assert args.host == "0.0.0.0"
    assert [p["containerPort"] for p in container["ports"]] == [args.http_port]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] == args.http_port
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert spec_annotation(manifest, "prometheus.kserve.io/port") == str(args.metrics_port)


def spec_annotation(manifest: dict[str, Any], key: str) -> str:
    return str(manifest["spec"]["annotations"][key])
