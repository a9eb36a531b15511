"""The keys of a model's ``[onnxruntime]`` table, readable without importing onnxruntime.

The repository reads them to tell a config.pbtxt parameter the backend uses from one it
does not (Triton's ``parameters`` is a free-form map); the backend validates their values.
"""

from __future__ import annotations

OPTION_KEYS = frozenset({"intra_op_threads", "inter_op_threads", "graph_optimization_level"})
