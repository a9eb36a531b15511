"""The built-in example repository: ``tiny``, ``mlp``, ``identity`` (ONNX), ``upper`` (Python)
and ``chargen`` (a decoupled Python model that streams); with its weights installed,
``minilm`` (sentence embeddings; see :mod:`conveyor.examples.minilm`).

The ONNX files are not shipped: they are built with ``onnx.helper`` the first time they are
needed, into a per-user cache folder, and reused after that.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from conveyor.examples import onnx_models
from conveyor.examples.cache import cache_root
from conveyor.examples.minilm import INSTALL_COMMAND, installed, weights_dir
from conveyor.examples.minilm.paths import MINILM_SOURCE
from conveyor.examples.minilm.repository import missing_packages, openvino_available, write_models

log = logging.getLogger(__name__)

_SOURCE = Path(__file__).parent / "repository"
_BUILDERS: dict[str, Callable[[Path], Path]] = {
    "tiny": onnx_models.tiny,
    "mlp": onnx_models.mlp,
    "identity": onnx_models.identity,
}


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(_SOURCE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_SOURCE)).encode())
            digest.update(path.read_bytes())
    digest.update(Path(onnx_models.__file__).read_bytes())
    # Installing (or moving) the MiniLM weights changes which models the repository holds.
    minilm = weights_dir()
    digest.update(
        f"minilm:{minilm.resolve()}:{installed(minilm)}:{openvino_available()}:{missing_packages()}".encode()
    )
    for path in sorted(MINILM_SOURCE.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def example_repository(root: Path | None = None) -> Path:
    """The example repository's folder, built on first use (safe to call concurrently)."""
    target = (root or cache_root()) / f"examples-{_fingerprint()}"
    for name in sorted(p.name for p in _SOURCE.iterdir() if p.is_dir()):
        shutil.copytree(
            _SOURCE / name,
            target / name,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    for name, build in _BUILDERS.items():
        model_file = target / name / "1" / "model.onnx"
        if not model_file.exists():
            build(model_file)
    minilm = weights_dir()
    missing = missing_packages()
    if installed(minilm) and not missing:
        write_models(minilm, target)
    elif missing:
        log.info(
            "the example model 'minilm' is not served: it needs %s "
            "(pip install '.[minilm]' from a checkout of Conveyor)",
            ", ".join(missing),
        )
    else:
        log.info(
            "the example model 'minilm' is not served: its weights are not in %s; "
            "install them with: %s",
            minilm,
            INSTALL_COMMAND,
        )
    return target
