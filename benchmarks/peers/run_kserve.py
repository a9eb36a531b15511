"""KServe's Python ``ModelServer`` (kserve 0.21, its V2 REST and gRPC) started for a comparison.

KServe cannot share Conveyor's environment, nor MLServer's (they pin conflicting
dependencies). Either give the interpreter of an environment made by hand::

    python -m venv /tmp/peersvenv
    /tmp/peersvenv/bin/pip install kserve==0.21.0 onnxruntime
    python -m benchmarks.peers.run_all --kserve-python /tmp/peersvenv/bin/python

or let ``ensure_venv`` make one (benchmarks/peers/.venv-kserve, once, the same two
packages). ``kserve_server`` starts ``kserve_server.py`` (beside this file) on a repository of
the same ONNX files MLServer and Conveyor serve, pinned like them, and yields its HTTP and
gRPC URLs once ``/v2/health/ready`` answers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchmarks.common import free_port, pinned
from benchmarks.peers.run_mlserver import MODELS, serving

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-kserve"
PACKAGES = ["kserve==0.21.0", "onnxruntime"]


def ensure_venv(log: Path, venv: Path = VENV, packages: Sequence[str] = PACKAGES) -> Path:
    """KServe's environment (its interpreter); created and filled once, reused after that."""
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    wanted = " ".join(packages)
    if marker.exists() and marker.read_text() == wanted:
        return python
    print(f"creating {venv} and installing {wanted} (once; a few minutes)", file=sys.stderr)
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    with log.open("ab") as out:
        subprocess.run(
            [str(python), "-m", "pip", "install", *packages],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    marker.write_text(wanted)
    return python


def version(python: Path, package: str) -> str:
    """The installed version of ``package`` in the environment of ``python``."""
    shown = subprocess.run(
        [str(python), "-m", "pip", "show", package], capture_output=True, text=True
    ).stdout
    return shown.split("Version: ")[-1].split("\n")[0] if "Version: " in shown else "?"


@contextlib.contextmanager
def kserve_server(
    python: Path, cpus: set[int] | None, log: Path, models: Sequence[str] = tuple(MODELS)
) -> Iterator[tuple[str, str]]:
    """KServe's ModelServer on ``models`` (ONNX, onnxruntime, one intra-op thread), started
    pinned to ``cpus``; yields (HTTP URL, gRPC URL) once ready, stops it after."""
    http_port, grpc_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            build = MODELS[name][0]
            build(Path(tmp) / name / "model.onnx")
        # Not PYTHONPATH: Conveyor's checkout must not shadow KServe's environment.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        command = [str(python), str(HERE / "kserve_server.py"), tmp,
                   "--http_port", str(http_port), "--grpc_port", str(grpc_port)]  # fmt: skip
        with log.open("ab") as out, pinned(cpus):
            process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        with serving(process, "KServe's ModelServer", http_port, grpc_port, log) as urls:
            yield urls
