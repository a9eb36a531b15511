"""The client tests run against the gRPC tests' server and repository."""

from tests.server.grpc.conftest import grpc_address, repository, server

__all__ = ["grpc_address", "repository", "server"]
