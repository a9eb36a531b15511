"""OpenVINO test models: the ONNX builders of conveyor.examples, saved as IR or kept as ONNX."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import openvino as ov


def write_ir(folder: Path, build: Callable[[Path], Path]) -> Path:
    """``folder``/model.xml + model.bin, converted from the ONNX model ``build`` writes."""
    folder.mkdir(parents=True, exist_ok=True)
    onnx_path = build(folder / "source.onnx")
    # Read by the runtime's own ONNX frontend, not ov.convert_model: that is the model
    # conversion tool, which sends usage telemetry over the network (a forked process).
    # Full-precision weights: save_model would store them as FP16 by default.
    model = ov.Core().read_model(str(onnx_path))
    ov.save_model(model, str(folder / "model.xml"), compress_to_fp16=False)
    onnx_path.unlink()
    return folder / "model.xml"


def openvino_model(
    root: Path, name: str, build: Callable[[Path], Path], config: str = "", *, ir: bool = True
) -> Path:
    """A model folder served by the openvino backend, from IR or (``ir=False``) ONNX."""
    folder = root / name / "1"
    if ir:
        write_ir(folder, build)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        build(folder / "model.onnx")
    text = 'backend = "openvino"\n' + textwrap.dedent(config)
    (root / name / "config.toml").write_text(text)
    return root / name
