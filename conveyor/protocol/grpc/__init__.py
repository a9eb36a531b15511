"""The V2 gRPC protocol as data: the generated messages, the method table, and the
conversions between ``ModelInferRequest``/``ModelInferResponse`` and numpy arrays.

Pure data, no I/O and no grpc server: the gRPC front end (``conveyor.server.grpc``) and the
gRPC client (``conveyor.client.grpc``) both build on it.
"""
