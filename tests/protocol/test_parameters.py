import pytest

from conveyor.errors import InvalidInput
from conveyor.protocol.parameters import (
    RequestOptions,
    engine_priority,
    request_options,
    timeout_seconds,
    wire_priority,
    wire_timeout,
)


@pytest.mark.parametrize(("wire", "engine"), [(0, 0), (1, 0), (2, -1), (3, -2), (10, -9)])
def test_engine_priority(wire: int, engine: int) -> None:
    assert engine_priority(wire) == engine


@pytest.mark.parametrize("engine", [0, -1, -2, -9])
def test_wire_priority_inverts_engine_priority(engine: int) -> None:
    assert engine_priority(wire_priority(engine)) == engine


def test_wire_priority_refuses_above_default() -> None:
    with pytest.raises(InvalidInput, match="cannot be sent over V2"):
        wire_priority(1)


def test_timeouts() -> None:
    assert timeout_seconds(0) is None
    assert timeout_seconds(1_500_000) == 1.5
    assert wire_timeout(None) is None
    assert wire_timeout(1e-9) == 1
    assert wire_timeout(0.25) == 250_000
    with pytest.raises(InvalidInput):
        wire_timeout(0)


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        (None, RequestOptions()),
        ({}, RequestOptions()),
        ({"priority": 3, "timeout": 2000}, RequestOptions(-2, 0.002, False)),
        ({"binary_data_output": True, "unknown": [1]}, RequestOptions(0, None, True)),
        ({"sequence_id": 0}, RequestOptions()),
        (
            {"sequence_id": 7, "sequence_start": True},
            RequestOptions(sequence_id=7, sequence_start=True),
        ),
        (
            {"sequence_id": "s", "sequence_end": True},
            RequestOptions(sequence_id="s", sequence_end=True),
        ),
    ],
)
def test_request_options(parameters: object, expected: RequestOptions) -> None:
    assert request_options(parameters) == expected


@pytest.mark.parametrize(
    ("parameters", "error", "message"),
    [
        ([], InvalidInput, "must be an object"),
        ({"priority": -1}, InvalidInput, "'priority' must be an integer >= 0"),
        ({"priority": 1.5}, InvalidInput, "'priority'"),
        ({"timeout": "5"}, InvalidInput, "'timeout'"),
        ({"binary_data_output": 1}, InvalidInput, "true or false"),
        ({"sequence_id": -7}, InvalidInput, "'sequence_id' must be an unsigned 64-bit integer"),
        ({"sequence_id": 2**64}, InvalidInput, "'sequence_id'"),
        ({"sequence_id": 7, "sequence_end": 1}, InvalidInput, "'sequence_end' must be true"),
    ],
)
def test_request_options_errors(parameters: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        request_options(parameters)
