"""The public API is what ``conveyor/__init__.py`` exports: pin it."""

from __future__ import annotations

import subprocess
import sys

import conveyor

EXPECTED = {
    "Cancelled",
    "ConveyorError",
    "DeadlineExceeded",
    "Engine",
    "ErrorKind",
    "InferFuture",
    "InvalidInput",
    "ModelConfig",
    "ModelError",
    "ModelInfo",
    "ModelNotFound",
    "ModelNotReady",
    "ModelStatistics",
    "QueueFull",
    "RepositoryEntry",
    "RepositoryError",
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


def test_cli_models_runs_the_examples():
    out = subprocess.run(
        [sys.executable, "-m", "conveyor", "models", "--run"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for name in ("tiny", "mlp", "identity", "upper"):
        assert f"{name}" in out.stdout
    assert out.stdout.count("READY") == 4
    assert "b'CONVEYOR'" in out.stdout
