"""Optional bearer-token authentication, the same rule for every front end.

With a token configured, every request must carry ``Authorization: Bearer <token>`` (HTTP
header or gRPC metadata), except the server health checks, which stay open so that load
balancers and kubelet probes need no secret. Model readiness is not open: it would tell an
anonymous caller which model names exist.

The comparison is constant-time (:func:`hmac.compare_digest`), so the time an answer takes
says nothing about how much of a guessed token was right.
"""

from __future__ import annotations

import hmac

from conveyor.errors import Unauthenticated

# HTTP paths and gRPC methods that never need the token.
OPEN_HTTP_PATHS = frozenset(("/v2/health/live", "/v2/health/ready"))
OPEN_GRPC_METHODS = frozenset(
    ("/inference.GRPCInferenceService/ServerLive", "/inference.GRPCInferenceService/ServerReady")
)
# RFC 6750: what a 401 answer tells the client to send.
CHALLENGE = b'Bearer realm="conveyor"'


class BearerAuth:
    """Checks ``Authorization`` values against one token."""

    __slots__ = ("_expected",)

    def __init__(self, token: str) -> None:
        self._expected = b"bearer " + token.encode("ascii")

    def check(self, authorization: bytes | str | None) -> None:
        """Return if ``authorization`` carries the token; raise Unauthenticated otherwise."""
        if authorization is None:
            raise Unauthenticated(
                "this server requires a bearer token: send 'Authorization: Bearer <token>'"
            )
        if isinstance(authorization, str):
            authorization = authorization.encode("latin-1", "replace")
        scheme, _, token = authorization.strip().partition(b" ")
        # The scheme is case-insensitive (RFC 9110); the token is not.
        given = scheme.lower() + b" " + token.strip()
        if not hmac.compare_digest(given, self._expected):
            raise Unauthenticated("the bearer token is missing or wrong")
