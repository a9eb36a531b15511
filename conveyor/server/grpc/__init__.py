"""The V2 gRPC front end (``inference.GRPCInferenceService``, wire-compatible with Triton).

Import :mod:`conveyor.server.grpc.server` to serve. The messages, the method table and the
tensor conversions it serves with are in :mod:`conveyor.protocol.grpc`, shared with the client.
Two transports carry it: Conveyor's own HTTP/2 (:mod:`conveyor.server.grpc.h2`, the default)
and grpcio's server.
"""
