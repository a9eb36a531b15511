"""The shipped OpenAPI description of the V2 routes, served at /v2/openapi.json, and
schemathesis driving the real server from it (bounded: a few examples per operation).

The checks: no 5xx for any generated request; every status, content type and response
body one the description allows. Not checked: schemathesis's opinions beyond the V2
protocol.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case, checks
from schemathesis.schemas import APIOperation

from conveyor.testing import RunningServer, run_server
from tests.reliability.rel_util import build_repository

SHIPPED = Path(__file__).resolve().parents[2] / "conveyor/server/http/openapi.json"


@pytest.fixture(scope="module")
def openapi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repository = build_repository(tmp_path_factory.mktemp("openapi"))
    with run_server(repository) as server:
        yield server
        assert server.process.poll() is None, server.output()


def test_the_description_is_shipped_and_served(openapi_server: RunningServer) -> None:
    import urllib.request

    with urllib.request.urlopen(openapi_server.http_url + "/v2/openapi.json") as response:
        served = json.loads(response.read())
    assert served == json.loads(SHIPPED.read_text())
    assert served["openapi"].startswith("3.")
    assert "/v2/models/{model}/infer" in served["paths"]


# Operations come from the shipped file, so collection needs no server. Each is driven with
# hypothesis directly rather than through schemathesis's pytest plugin, which reaches into
# pytest's private node attributes and breaks when pytest changes them.
SCHEMA = schemathesis.openapi.from_path(SHIPPED)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_schemathesis_finds_no_server_error(
    openapi_server: RunningServer, operation: APIOperation
) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=15,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def call_and_validate(case: Case) -> None:
        case.call_and_validate(base_url=openapi_server.http_url, timeout=10, checks=CHECKS)

    call_and_validate()


def test_every_operation_is_driven() -> None:
    """Every operation of the description reaches the parametrized test above."""
    assert len(OPERATIONS) == len(
        [method for path in json.loads(SHIPPED.read_text())["paths"].values() for method in path]
    )
