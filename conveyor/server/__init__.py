"""Front ends over the engine: HTTP/REST, metrics (and gRPC), run by :class:`Server`."""
