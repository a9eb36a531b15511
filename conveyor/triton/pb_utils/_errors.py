"""``TritonError`` (a model's error for one request), ``TritonModelException``, and how
each Triton error code becomes the Conveyor error kind a client is answered with."""

from __future__ import annotations

from conveyor.errors import ConveyorError, ErrorKind, error_for_kind

DOCS = "docs/triton-python-models.md"


class TritonModelException(Exception):
    """Raised by pb_utils for a misuse or a feature Conveyor does not offer."""


def unsupported(feature: str, why: str = "") -> TritonModelException:
    """The error for a Triton name that exists here but cannot work (GPU, model control)."""
    because = f" ({why})" if why else ""
    return TritonModelException(f"{feature} is not supported by Conveyor{because}; see {DOCS}")


class TritonError(Exception):
    """An error a model returns for one request (``InferenceResponse(error=...)``) or raises.

    The codes are Triton's TRITONSERVER_Error_Code numbers; each becomes the Conveyor error
    kind whose HTTP status and gRPC code are the ones Triton answers that code with.
    """

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        if message is None or code is None:
            raise TypeError("TritonError(message, code): neither may be None")
        super().__init__(message)
        self._message = message
        self._code = int(code)

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def to_conveyor(self) -> ConveyorError:
        """The Conveyor error a client is answered with (message as given, status by code)."""
        return error_for_kind(KIND_OF_CODE.get(self._code, ErrorKind.INTERNAL))(self._message)

    @classmethod
    def from_conveyor(cls, error: ConveyorError) -> TritonError:
        return cls(error.message, CODE_OF_KIND.get(error.kind, cls.INTERNAL))


# Triton's code -> the kind answered with the status Triton gives it: gRPC as Triton's
# GrpcStatusUtil::CodeToStatus (one to one), HTTP as its HttpCodeFromError (UNKNOWN,
# INVALID_ARG, ALREADY_EXISTS, CANCELLED 400; INTERNAL 500; NOT_FOUND 404; UNAVAILABLE 503;
# UNSUPPORTED 501). The statuses themselves are in conveyor/server/{http,grpc}/errors.py.
KIND_OF_CODE = {
    TritonError.UNKNOWN: ErrorKind.UNKNOWN,
    TritonError.INTERNAL: ErrorKind.INTERNAL,
    TritonError.NOT_FOUND: ErrorKind.NOT_FOUND,
    TritonError.INVALID_ARG: ErrorKind.INVALID_ARGUMENT,
    TritonError.UNAVAILABLE: ErrorKind.UNAVAILABLE,
    TritonError.UNSUPPORTED: ErrorKind.MODEL_UNSUPPORTED,
    TritonError.ALREADY_EXISTS: ErrorKind.ALREADY_EXISTS,
    TritonError.CANCELLED: ErrorKind.CANCELLED,
}
CODE_OF_KIND = {
    **{kind: code for code, kind in KIND_OF_CODE.items()},
    ErrorKind.FAILED_PRECONDITION: TritonError.INVALID_ARG,
    ErrorKind.DEADLINE_EXCEEDED: TritonError.UNAVAILABLE,
    ErrorKind.UNIMPLEMENTED: TritonError.UNSUPPORTED,
}
