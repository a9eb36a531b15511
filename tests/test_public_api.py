"""The public API is what ``conveyor/__init__.py`` exports: pin it."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import conveyor

EXPECTED = {
    "Cancelled",
    "ConveyorError",
    "DeadlineExceeded",
    "Engine",
    "ErrorKind",
    "InferFuture",
    "InferenceRequest",
    "InstanceKind",
    "InvalidInput",
    "ModelConfig",
    "ModelControl",
    "ModelError",
    "ModelInfo",
    "ModelNotFound",
    "ModelNotReady",
    "ModelState",
    "ModelStatistics",
    "ModelUnavailable",
    "QueueFull",
    "RepositoryEntry",
    "RepositoryError",
    "SequenceInfo",
    "ShuttingDown",
    "TensorSpec",
    "Unauthenticated",
    "Unavailable",
    "Unsupported",
    "__version__",
    "as_completed",
    "as_completed_async",
}


def test_exports_are_pinned_and_present_once():
    assert set(conveyor.__all__) >= EXPECTED
    assert len(conveyor.__all__) == len(set(conveyor.__all__))
    for name in conveyor.__all__:
        assert hasattr(conveyor, name), name


def test_every_error_shares_one_root():
    errors = [
        getattr(conveyor, n)
        for n in conveyor.__all__
        if isinstance(getattr(conveyor, n), type) and issubclass(getattr(conveyor, n), Exception)
    ]
    assert len(errors) >= 12
    assert all(issubclass(e, conveyor.ConveyorError) for e in errors)
    assert all(isinstance(e.kind, conveyor.ErrorKind) for e in errors)


def test_importing_does_not_load_servers_or_clients():
    code = (
        "import sys, conveyor; "
        "print([m for m in ('grpc', 'uvicorn', 'aiohttp') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_cli_models_runs_the_examples(tmp_path):
    # The five examples that need no download; minilm (when installed): tests/examples/minilm.
    env = {**os.environ, "CONVEYOR_MINILM_DIR": str(tmp_path / "no-minilm")}
    out = subprocess.run(
        [sys.executable, "-m", "conveyor", "models", "--run"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    for name in ("tiny", "mlp", "identity", "upper", "chargen"):
        assert f"{name}" in out.stdout
    assert out.stdout.count("READY") == 5
    assert "8 responses" in out.stdout  # chargen streamed "conveyor" one letter at a time
    assert "b'CONVEYOR'" in out.stdout


def test_the_clients_load_no_server_code_and_conveyor_no_ml_dtypes():
    code = (
        "import sys, conveyor, conveyor.client.grpc, conveyor.client.http; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith('conveyor.server') or m == 'ml_dtypes'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def _version_in_subprocess(pythonpath: str, cwd: Path) -> str:
    # ``cwd`` matters: ``python -c`` puts it first on sys.path, and a checkout that pip
    # installed from holds a conveyor.egg-info that metadata lookups would find there.
    code = "import conveyor; print(conveyor.__version__)"
    env = {**os.environ, "PYTHONPATH": pythonpath}
    command = [sys.executable, "-c", code]
    out = subprocess.run(
        command, capture_output=True, text=True, timeout=60, check=True, env=env, cwd=cwd
    )
    return out.stdout.strip()


def test_version_is_pyprojects_in_a_source_checkout():
    checkout = Path(conveyor.__file__).resolve().parent.parent
    with open(checkout / "pyproject.toml", "rb") as f:
        expected = tomllib.load(f)["project"]["version"]
    if list(importlib.metadata.distributions(name="conveyor")):
        pytest.skip("conveyor is installed here; the checkout fallback is not reached")
    assert conveyor.__version__ == expected
    assert _version_in_subprocess(str(checkout), cwd=checkout) == expected


def test_version_is_the_installed_metadatas(tmp_path: Path):
    # An installed distribution's metadata (as pip writes it) wins over the checkout's file.
    info = tmp_path / "conveyor-9.8.7.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: conveyor\nVersion: 9.8.7\n")
    checkout = Path(conveyor.__file__).resolve().parent.parent
    assert _version_in_subprocess(f"{tmp_path}{os.pathsep}{checkout}", cwd=tmp_path) == "9.8.7"
