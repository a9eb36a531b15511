"""Size limits both ends of a connection agree on by default.

The server refuses a larger HTTP body or gRPC message before reading it; the gRPC client
sends and accepts messages up to the same size, so by default a tensor one of them accepts
the other accepts too. Both are settings (``--max-body-bytes``, ``--grpc-max-message-bytes``,
``GRPCClient(max_message_bytes=...)``); these are only the defaults.
"""

from __future__ import annotations

MiB = 1024 * 1024

# A 64 MiB message holds a 16M-element FP32 tensor (gRPC's own default is 4 MiB).
DEFAULT_MAX_MESSAGE_BYTES = 64 * MiB
