"""The V2 gRPC front end (``inference.GRPCInferenceService``, wire-compatible with Triton).

Import :mod:`conveyor.server.grpc.server` to serve; this package itself imports nothing, so
the gRPC client can use the generated messages and method table without the server parts.
"""
