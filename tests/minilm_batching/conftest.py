"""The MiniLM weights fixture of tests/minilm, shared here."""

from tests.minilm.conftest import minilm_weights

__all__ = ["minilm_weights"]
