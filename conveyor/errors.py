"""Every error Conveyor raises on purpose, under one root.

    ConveyorError
    ├── InvalidInput            a request that does not fit the model or the protocol
    ├── RequestTimeout          an HTTP client sent part of a request, then too little for
    │                           too long (408)
    ├── MethodNotAllowed        an HTTP route asked with a method it does not take (405)
    ├── NotFoundRoute           no such HTTP route (a 404 that is not about a model)
    ├── ModelNotFound           no such model or version in the repository
    ├── ModelNotReady           the model exists but is not loaded (yet, or any more), or
    │   │                       every instance is stuck past its execution_timeout_s
    │   └── ModelUnavailable    it failed to load: retrying will not help until it is fixed
    │       │                   and loaded again (not found, as Triton answers it)
    │       └── ModelLoadFailed a request to load it failed (a client error, as Triton's)
    ├── Unavailable             the server cannot take the request now; retrying later may work
    │   ├── QueueFull           the model's bounded queue is full
    │   └── ShuttingDown        the engine is draining and takes no new work
    ├── DeadlineExceeded        the request's timeout passed before it could run (or finish)
    ├── Cancelled               the caller cancelled the request while it was queued
    ├── ModelError              the model itself failed (raised, returned something wrong,
    │                           or ran past its execution_timeout_s)
    ├── RepositoryError         a model repository entry or config is bad
    ├── AlreadyExists           what the caller would create exists already (a model's own
    │                           answer, e.g. a Triton Python model's ALREADY_EXISTS error)
    ├── UnknownError            a model's own answer of no known kind (a Triton Python
    │                           model's UNKNOWN error)
    ├── Unauthenticated         a missing or wrong credential
    ├── ClusterRefused          a Ray cluster refused this process's token (or its lack)
    └── Unsupported             a feature this server does not offer
        ├── UnaryToDecoupled    a one-answer call to a decoupled model (stream it instead)
        └── ModelUnsupported    a model's own answer that it does not support what the
                                request asks (a Triton Python model's UNSUPPORTED error)

Each class carries a :class:`ErrorKind`; the HTTP and gRPC front ends map the kind to a
status code at the edge, so nothing below them knows about either protocol. The clients go
the other way with :func:`error_for_kind`: the kind a server reports -> the class to raise.
"""

from __future__ import annotations

import enum


class ErrorKind(enum.Enum):
    """What kind of failure an error is, independent of any transport."""

    INVALID_ARGUMENT = "invalid_argument"
    NOT_FOUND = "not_found"
    UNAVAILABLE = "unavailable"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    CANCELLED = "cancelled"
    INTERNAL = "internal"
    UNAUTHENTICATED = "unauthenticated"
    UNIMPLEMENTED = "unimplemented"
    FAILED_PRECONDITION = "failed_precondition"
    ALREADY_EXISTS = "already_exists"
    UNKNOWN = "unknown"
    # A model said it does not support what the request asks. Triton answers its model's
    # UNSUPPORTED with HTTP 501 (gRPC UNIMPLEMENTED), where the server's own refusals of a
    # feature it does not offer are 400: two kinds, so each edge keeps one table.
    MODEL_UNSUPPORTED = "model_unsupported"


class ConveyorError(Exception):
    """The root of every error Conveyor raises on purpose."""

    kind: ErrorKind = ErrorKind.INTERNAL
    # The formatted traceback of the model code behind this error (a model that raised while
    # loading or running), for the server log only: it is never sent to a client.
    model_traceback: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[type, tuple[str], dict[str, str | None]]:
        # Errors cross process boundaries (worker processes); keep them picklable.
        return (type(self), (self.message,), {"model_traceback": self.model_traceback})


class InvalidInput(ConveyorError):
    kind = ErrorKind.INVALID_ARGUMENT


class ModelNotFound(ConveyorError):
    kind = ErrorKind.NOT_FOUND


class ModelNotReady(ConveyorError):
    kind = ErrorKind.UNAVAILABLE


class ModelUnavailable(ModelNotReady):
    """The model failed to load; the message says why. Not transient, so not UNAVAILABLE:
    like Triton, which has no version of it to serve, the server answers NOT_FOUND (404)."""

    kind = ErrorKind.NOT_FOUND


class ModelLoadFailed(ModelUnavailable):
    """A request to load the model failed; the message says why. Triton answers it 400 /
    INVALID_ARGUMENT."""

    kind = ErrorKind.INVALID_ARGUMENT


class Unavailable(ConveyorError):
    kind = ErrorKind.UNAVAILABLE


class QueueFull(Unavailable):
    """The model's queue already holds ``max_queue_size`` requests."""


class ShuttingDown(Unavailable):
    """The engine is closing: it finishes what it holds and takes nothing new."""


class DeadlineExceeded(ConveyorError):
    kind = ErrorKind.DEADLINE_EXCEEDED


class Cancelled(ConveyorError):
    kind = ErrorKind.CANCELLED


class ModelError(ConveyorError):
    """The model raised, hung past its execution timeout, or returned bad outputs."""

    kind = ErrorKind.INTERNAL


class RepositoryError(ConveyorError):
    kind = ErrorKind.INVALID_ARGUMENT


class AlreadyExists(ConveyorError):
    kind = ErrorKind.ALREADY_EXISTS


class UnknownError(ConveyorError):
    kind = ErrorKind.UNKNOWN


class Unauthenticated(ConveyorError):
    kind = ErrorKind.UNAUTHENTICATED


class Unsupported(ConveyorError):
    kind = ErrorKind.UNIMPLEMENTED


class ModelUnsupported(Unsupported):
    kind = ErrorKind.MODEL_UNSUPPORTED


class UnaryToDecoupled(Unsupported):
    """A one-answer call (``submit``, gRPC ModelInfer, HTTP infer) to a decoupled model.

    The message is Triton's words without their subject; each front end names itself
    (:meth:`said_by`), as Triton's do ("ModelInfer RPC ...", "HTTP end point ...")."""

    def said_by(self, endpoint: str) -> Unsupported:
        return Unsupported(f"{endpoint} {self.message}")


class RequestTimeout(ConveyorError):
    """The client sent part of a request and then too little for too long (HTTP 408)."""

    kind = ErrorKind.INVALID_ARGUMENT


class NotFoundRoute(ConveyorError):
    """No such route (a 404 that is not about a model)."""

    kind = ErrorKind.NOT_FOUND


class MethodNotAllowed(ConveyorError):
    """A route that exists, asked with a method it does not take: the HTTP front end answers
    405 with ``Allow: <allow>``. Raised and answered in one front end (it never crosses a
    process, so ``allow`` is not pickled)."""

    kind = ErrorKind.INVALID_ARGUMENT

    def __init__(self, message: str, allow: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.allow = allow


class ClusterRefused(ConveyorError):
    """The Ray cluster refused this process: its token is missing or not the cluster's."""


# What a client raises for a failure a server reported as ``kind``: the most general class
# of that kind, since the wire carries only the kind (and the message says the rest).
_RAISED_FOR_KIND: dict[ErrorKind, type[ConveyorError]] = {
    ErrorKind.INVALID_ARGUMENT: InvalidInput,
    ErrorKind.FAILED_PRECONDITION: InvalidInput,
    ErrorKind.NOT_FOUND: ModelNotFound,
    ErrorKind.UNAVAILABLE: Unavailable,
    ErrorKind.DEADLINE_EXCEEDED: DeadlineExceeded,
    ErrorKind.CANCELLED: Cancelled,
    ErrorKind.INTERNAL: ModelError,
    ErrorKind.UNAUTHENTICATED: Unauthenticated,
    ErrorKind.UNIMPLEMENTED: Unsupported,
    ErrorKind.ALREADY_EXISTS: AlreadyExists,
    ErrorKind.UNKNOWN: UnknownError,
    ErrorKind.MODEL_UNSUPPORTED: ModelUnsupported,
}


def error_for_kind(kind: ErrorKind) -> type[ConveyorError]:
    """The error class a client raises for a failure of ``kind`` (one for every kind)."""
    return _RAISED_FOR_KIND[kind]
